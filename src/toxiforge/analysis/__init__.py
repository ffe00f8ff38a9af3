"""Dataset analyses (ToxiGen §3.4, §4.2, Appendices C–D).

* :mod:`.summary` — quick per-group summary printed after generation (``toxiforge summary``).
* :mod:`.stats` — Table 1/2 statistics, % implicit, duplicates (``toxiforge stats``).
* :mod:`.implicit` — the profanity lexicon behind "% implicit".
* :mod:`.split` and :mod:`.embeddings` — similarity-controlled train/test split (``toxiforge split``).
* :mod:`.perplexity` — per-statement perplexity under a reference LM (``toxiforge perplexity``).
* :mod:`.mentions` — do statements name their target group (``toxiforge mentions``).
* :mod:`.report` — one self-contained HTML page with tables and plots (``toxiforge report``).
* :mod:`.dataset` — reading any toxiforge or ToxiGen dataset for these analyses.

Submodules are imported on use, so ``import toxiforge.analysis`` stays light.
"""
