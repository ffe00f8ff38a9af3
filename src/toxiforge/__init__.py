"""toxiforge: build and use machine-generated datasets of implicit hate speech, ToxiGen-style.

Heavy modules (torch, transformers) are imported lazily by the submodules that need them, so
``import toxiforge`` and ``toxiforge --help`` stay fast.
"""

__version__ = "0.1.0"
