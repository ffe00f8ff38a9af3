"""``training_log.json``, written beside every fine-tuned model: the configuration, data counts, loss and eval AUC per
epoch, throughput and versions of the run (:func:`build_training_log`), and :func:`learning_check`, which says
when the run probably learned nothing (too few rows, or a final training loss still at chance)."""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toxiforge._io import atomic_write_text
from toxiforge.data.examples import Example, fold_text

if TYPE_CHECKING:
    from toxiforge.training.trainer import TrainConfig

LOG_FILE = "training_log.json"

# Fewer training rows than this get a warning. The README's quick path trained the embedded MiniLM on 65 rows (72
# less the 10% hold-out) for 2 epochs at the defaults, 6 optimizer steps: the loss stayed at ln 2 (0.698 -> 0.689)
# and `evaluate` gave AUC 0.471. docs/bias.md's judge learned from 146 rows (AUC 0.96 on its 17 held out), with 10
# epochs at five times the default learning rate. 100 lies between the two, and under it the default 10% hold-out
# is under 10 rows, too few for its AUC to say much (`evaluate` marks slices under 30).
MIN_TRAIN_ROWS = 100
# A final training loss within this fraction of chance (the loss of always predicting the training set's toxic share,
# ln 2 = 0.693 for balanced classes) means the model learned (almost) nothing beyond the class balance: 0.659 or
# more for balanced classes. The quick path above ended at 0.689, 0.6% from chance.
NEAR_CHANCE = 0.05


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


def text_digest(text: str) -> str:
    """A short digest of ``text``'s folded form (:func:`~toxiforge.data.examples.fold_text`): how ``held_out`` names
    its rows without their text (64 bits of SHA-256: no two of a dataset's texts share one in practice)."""
    import hashlib

    return hashlib.sha256(fold_text(text).encode("utf-8")).hexdigest()[:16]


def held_out_record(share: float, source: str, rows: Sequence[Example], trained: Sequence[Example]
                    ) -> dict[str, Any]:
    """The log's ``held_out``: the ``share`` of the training rows held out for validation, where the eval ``rows``
    came ``from``, how many, and, when they were held out of the training rows, ``digests`` (:func:`text_digest`)
    of their texts that no ``trained`` row has (a repeated text may sit on both sides): the texts the model never
    trained on, which ``harden --init continue`` compares rounds on (:mod:`toxiforge.harden.mix`)."""
    record: dict[str, Any] = {"share": share, "from": source, "rows": len(rows)}
    if share:
        seen = {text_digest(e.text) for e in trained}
        record["digests"] = sorted({text_digest(e.text) for e in rows} - seen)
    return record


def chance_loss(toxic_share: float) -> float:
    """Cross-entropy of always predicting ``toxic_share`` as P(toxic): the label entropy, ln 2 for balanced
    classes, 0 for one class."""
    p = toxic_share
    return 0.0 if p <= 0.0 or p >= 1.0 else -(p * math.log(p) + (1 - p) * math.log(1 - p))


def learning_check(log: dict[str, Any]) -> dict[str, Any]:
    """Whether a finished run (its :func:`build_training_log`) probably learned nothing: it trained on fewer than
    :data:`MIN_TRAIN_ROWS` rows, and/or its last epoch's mean training loss is within :data:`NEAR_CHANCE` of
    :func:`chance_loss` (cross-entropy runs only: a debiasing loss has another scale). ``warnings`` holds one
    message, with the numbers and a fix, per finding; the trainer records the whole dict and warns each."""
    n, toxic = log["train"]["n"], log["train"]["toxic"]
    losses = [e["train_loss"] for e in log["epochs"] if e.get("train_loss") is not None]
    final = losses[-1] if losses else None
    chance = chance_loss(toxic / n) if n else None
    cross_entropy = (log.get("objective") or {}).get("loss") == "cross-entropy"
    few_rows = n < MIN_TRAIN_ROWS
    near_chance = bool(cross_entropy and final is not None and chance and final >= (1 - NEAR_CHANCE) * chance)
    messages = []
    if few_rows:
        messages.append(f"trained on only {n} rows ({log['global_steps']} optimizer steps); with fewer than "
                        f"{MIN_TRAIN_ROWS} a fine-tuned classifier often learns nothing and its held-out AUC says "
                        "little. Fix: train on more rows (e.g. generate more statements with a larger -n)")
    if near_chance:
        assert final is not None and chance is not None
        messages.append(f"the final training loss {final:.3f} is within {NEAR_CHANCE:.0%} of chance ({chance:.3f}, "
                        "the loss of predicting the toxic share of the training rows for every row): the model has "
                        "learned (almost) nothing and will score near AUC 0.5. Fix: more training rows, or more "
                        "updates (e.g. --epochs 10 --lr 1e-4)")
    return {"train_rows": n, "min_train_rows": MIN_TRAIN_ROWS, "few_rows": few_rows,
            "final_train_loss": final, "chance_loss": chance, "near_chance_fraction": NEAR_CHANCE,
            "near_chance": near_chance, "warnings": messages}
