"""Fine-tune and evaluate toxicity classifiers (paper §5: Table 4 and Table 7).

* :func:`train_classifier` / :class:`TrainConfig` -- fine-tune any transformers encoder (default: the embedded
  all-MiniLM-L6-v2) with transformers' ``Trainer``; saves a standard model directory plus ``training_log.json``;
* :func:`select_subset` -- the paper's data variants (ALICE, top-k downsampled to the ALICE size, both);
* :func:`evaluate` / :func:`write_report` -- ROC AUC per dataset, group and generation method; JSON, Markdown,
  ROC PNG;
* :func:`run_table4` -- zero-shot plus the three fine-tuned variants on every eval set, as one table.

Submodules import torch/transformers lazily where they can; import them directly for the full API.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "TrainConfig": "trainer", "TrainResult": "trainer", "train_classifier": "trainer",
    "resolve_base_model": "trainer", "embedded_encoder_dir": "trainer",
    "select_subset": "subsets", "SUBSETS": "subsets",
    "evaluate": "evaluate", "write_report": "evaluate", "EvalReport": "evaluate",
    "auc_or_reason": "metrics", "AUC": "metrics",
    "run_table4": "experiment", "Table4": "experiment",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        module = importlib.import_module(f"toxiforge.training.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AUC", "SUBSETS", "EvalReport", "Table4", "TrainConfig", "TrainResult", "auc_or_reason",
           "embedded_encoder_dir", "evaluate", "resolve_base_model", "run_table4", "select_subset",
           "train_classifier", "write_report"]
assert sorted(__all__) == sorted(_EXPORTS)
