"""``training_log.json``, written beside every fine-tuned model: the configuration, data counts, loss and eval AUC per
epoch, throughput and versions of the run (:func:`build_training_log`)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toxiforge._io import atomic_write_text
from toxiforge.data.examples import Example

if TYPE_CHECKING:
    from toxiforge.training.trainer import TrainConfig

LOG_FILE = "training_log.json"


def write_training_log(output_dir: Path, log: dict[str, Any]) -> None:
    """Write ``log`` to ``output_dir``/:data:`LOG_FILE` atomically."""
    atomic_write_text(output_dir / LOG_FILE, json.dumps(log, indent=2, default=str) + "\n")


def data_counts(examples: Sequence[Example]) -> dict[str, Any]:
    toxic = sum(e.label for e in examples)
    methods = Counter(e.method or "none" for e in examples)
    return {"n": len(examples), "toxic": toxic, "benign": len(examples) - toxic, "methods": dict(methods)}


def epoch_summary(history: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per epoch: mean training loss of the step logs in it, and the eval loss/AUC logged at its end."""
    evals = [h for h in history if "eval_loss" in h]
    steps = [h for h in history if "loss" in h and "eval_loss" not in h]
    out: list[dict[str, Any]] = []
    if evals:
        previous = 0.0
        for h in evals:
            losses = [s["loss"] for s in steps if previous < s.get("epoch", 0) <= h["epoch"] + 1e-9]
            out.append({"epoch": round(h["epoch"], 4), "step": h.get("step"),
                        "train_loss": sum(losses) / len(losses) if losses else None,
                        "eval_loss": h.get("eval_loss"), "eval_auc": h.get("eval_auc"),
                        "eval_auc_note": h.get("eval_auc_note")})
            previous = h["epoch"]
        return out
    by_epoch: dict[int, list[float]] = {}
    for s in steps:
        by_epoch.setdefault(max(1, math.ceil(s.get("epoch", 0) - 1e-9)), []).append(s["loss"])
    return [{"epoch": e, "train_loss": sum(v) / len(v), "eval_loss": None, "eval_auc": None}
            for e, v in sorted(by_epoch.items())]


def build_training_log(config: TrainConfig, source: str, data_sources: Sequence[str], train: Sequence[Example],
                       eval_examples: Sequence[Example], epochs: list[dict[str, Any]], metrics: dict[str, Any],
                       seconds: float, trainer: Any) -> dict[str, Any]:
    """The contents of :data:`LOG_FILE`."""
    import torch
    import transformers

    from toxiforge import __version__
    from toxiforge.training.trainer import ID2LABEL

    state = trainer.state
    return {
        "toxiforge": __version__, "transformers": transformers.__version__, "torch": torch.__version__,
        "base_model": config.base_model, "base_model_source": source, "config": asdict(config),
        "data": list(data_sources), "train": data_counts(train), "eval": data_counts(eval_examples),
        "labels": {str(k): v for k, v in ID2LABEL.items()}, "epochs": epochs,
        "best_checkpoint_metric": state.best_metric, "global_steps": state.global_step,
        "train_seconds": round(seconds, 3), "train_runtime": metrics.get("train_runtime"),
        "train_examples_per_second": metrics.get("train_samples_per_second"),
        "train_loss": metrics.get("train_loss"), "objective": trainer.describe_loss(),
        "devices": trainer.args.world_size,
        "device": str(trainer.args.device),
    }
