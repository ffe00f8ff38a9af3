"""The rows of ``experiment debias``: the held-out split and the training subsample (both label-stratified and
seeded), and which rows each AAE selection rule takes (argmax, p(AAE) > 0.5, > 0.8) with the FPR per rule."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from toxiforge.data.examples import Example
from toxiforge.errors import InputError


def stratified_split(examples: Sequence[Example], fraction: float, seed: int
                     ) -> tuple[list[Example], list[Example], dict[str, Any]]:
    """``(train, test, record)``: a seeded label-stratified split holding out ``fraction`` of each label
    (:func:`~toxiforge.training.trainer.split_heldout_indices`, the split ``train`` uses), and what to record
    of it: the fraction, seed, sizes and the test rows' positions in ``examples``."""
    from toxiforge.training.trainer import split_heldout_indices

    if not 0 < fraction < 1:
        raise InputError(f"--test-fraction must be in (0, 1), got {fraction}", hint="e.g. --test-fraction 0.2")
    train_idx, test_idx = split_heldout_indices([e.label for e in examples], fraction, seed)
    if len(train_idx) < 2 or len(test_idx) < 2:
        raise InputError(f"a {fraction:g} split of {len(examples)} rows leaves {len(train_idx)} to train on and "
                         f"{len(test_idx)} to test", hint="give more rows or another --test-fraction")
    record = {"fraction": fraction, "seed": seed, "stratified_by": "label", "n_train": len(train_idx),
              "n_test": len(test_idx), "test_toxic": sum(examples[i].label for i in test_idx),
              "test_positions": sorted(test_idx)}
    return [examples[i] for i in train_idx], [examples[i] for i in test_idx], record


def stratified_subsample(examples: Sequence[Example], n: int, seed: int) -> list[Example]:
    """About ``n`` of ``examples`` (each label's share kept, seeded): the training size of a run that must fit a
    time budget, taken after :func:`stratified_split` so the evaluation rows stay the same."""
    from toxiforge.training.trainer import split_heldout_indices

    if not 2 <= n:
        raise InputError(f"--train-rows must be at least 2, got {n}", hint="e.g. --train-rows 2000")
    if n >= len(examples):
        return list(examples)
    _, kept = split_heldout_indices([e.label for e in examples], n / len(examples), seed)
    return [examples[i] for i in sorted(kept)]


def aae_rule_counts(splits: dict[str, tuple[Sequence[Example], np.ndarray]]) -> dict[str, Any]:
    """Rows each AAE selection rule takes (argmax, p(AAE) > 0.5, > 0.8) in each split, and its benign rows."""
    from toxiforge.bias.experiment_report import RULES
    from toxiforge.bias.metrics import aae_members

    out: dict[str, Any] = {}
    for name, (rows, p_dialect) in splits.items():
        labels = np.array([e.label for e in rows])
        out[name] = {}
        for rule, threshold in RULES:
            member = aae_members(p_dialect, threshold)
            out[name][rule] = {"n": int(member.sum()), "of": len(rows), "n_benign": int((member & (labels == 0)).sum())}
    return out


def rule_fprs(labels: np.ndarray, scores: np.ndarray, p_dialect: np.ndarray, threshold: float) -> dict:
    from toxiforge.bias.experiment_report import RULES
    from toxiforge.bias.metrics import aae_members, false_positive_rate
    from toxiforge.records import is_toxic

    preds = is_toxic(scores, threshold).astype(np.int64)
    out = {}
    for rule, cut in RULES:
        member = aae_members(p_dialect, cut)
        out[rule] = false_positive_rate(labels[member], preds[member]) if member.any() else None
    return out
