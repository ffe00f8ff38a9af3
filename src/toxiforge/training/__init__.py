"""Fine-tune and evaluate toxicity classifiers (paper §5: Table 4 and Table 7).

* :func:`train_classifier` / :class:`TrainConfig` -- fine-tune any transformers encoder (default: the embedded
  all-MiniLM-L6-v2) with transformers' ``Trainer``; saves a standard model directory plus ``training_log.json``;
* :func:`select_subset` -- the paper's data variants (ALICE, top-k downsampled to the ALICE size, both);
* :func:`evaluate` / :func:`write_report` -- ROC AUC per dataset, group and generation method; JSON, Markdown,
  ROC PNG;
* :func:`run_table4` -- zero-shot plus the three fine-tuned variants on every eval set, as one table.

Names are imported on first use; import the submodules directly for the full API.
"""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "TrainConfig": "trainer:TrainConfig", "TrainResult": "trainer:TrainResult",
    "train_classifier": "trainer:train_classifier", "resolve_base_model": "trainer:resolve_base_model",
    "embedded_encoder_dir": "toxiforge.models.embedded:embedded_encoder_dir",
    "select_subset": "subsets:select_subset", "SUBSETS": "subsets:SUBSETS",
    "evaluate": "evaluate:evaluate", "write_report": "evaluate:write_report", "EvalReport": "evaluate:EvalReport",
    "auc_or_reason": "metrics:auc_or_reason", "AUC": "metrics:AUC",
    "run_table4": "experiment:run_table4", "Table4": "experiment:Table4",
})
