"""Per-row loss weights (issue 55, item 3): a row of weight ``k`` counts as ``k`` copies of itself in its batch.

Every :class:`~toxiforge.data.examples.Example` carries a ``weight`` (1 unless set). When a training set holds a
row whose weight is not 1, :func:`~toxiforge.training.trainer.train_classifier` trains with
:class:`WeightedTrainer`: the loss of a batch is the weighted mean of its rows' cross-entropies,

    loss = sum_i w_i * CE_i / sum_i w_i

which is the plain mean loss of the batch with row ``i`` repeated ``w_i`` times (for whole weights; fractional
ones interpolate). Steps per epoch do not change: weights move the gradient's mix, not the number of updates.
Evaluation ignores the weights (``Trainer``'s own loss on the held-out rows). ``training_log.json``'s
``objective`` then says ``"weights"``: how many rows weigh other than 1, and the smallest, largest and total
weight, so a run says it used them; the model card repeats it.

``toxiforge train --weight-column NAME`` reads the weights from a column of the training tables
(:func:`column_weights`); ``toxiforge harden --added-weight K`` gives each added statement weight K
(:mod:`toxiforge.harden.mix`). Weights apply to the cross-entropy objective only: LEARNED-MIXIN
(:mod:`toxiforge.training.debias`) has a loss of its own, and weights with it are refused.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F

from toxiforge.errors import InputError
from toxiforge.training.indexed import IndexedTrainer

if TYPE_CHECKING:
    from toxiforge.data.examples import Example, LabeledData


def check_weight(value: Any, where: str) -> float:
    """``value`` as a loss weight: a finite number above 0; else an InputError naming ``where``."""
    try:
        weight = float(value)
    except (TypeError, ValueError):
        weight = math.nan
    if not math.isfinite(weight) or weight <= 0:
        raise InputError(f"loss weight {value!r} of {where} is not a number above 0",
                         hint="give every row a weight above 0 (1: as unweighted), or leave the cell empty (1)")
    return weight


def is_weighted(rows: Sequence[Example]) -> bool:
    """Whether a row of ``rows`` weighs other than 1."""
    return any(e.weight != 1 for e in rows)


class WeightedTrainer(IndexedTrainer):
    """``Trainer`` whose training loss is the weighted mean cross-entropy of each batch (module docstring).

    ``weights``: one per example, in the order of the list given to
    :func:`~toxiforge.training.trainer.train_classifier` (batches carry those positions)."""

    def __init__(self, *args: Any, weights: Sequence[float], **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.weights = torch.tensor([float(w) for w in weights], dtype=torch.float32)
        self.loss_is_scaled_for_ga = False  # a batch mean, like the default loss: Trainer divides by GA steps

    def training_loss(self, model: Any, inputs: dict[str, Any], index: torch.Tensor,
                      num_items_in_batch: Any = None) -> tuple[torch.Tensor, Any]:
        labels = inputs.pop("labels")
        outputs = model(**inputs)
        weights = self.weights[index.cpu()].to(outputs.logits.device)
        losses = F.cross_entropy(outputs.logits.float(), labels, reduction="none")
        return (weights * losses).sum() / weights.sum(), outputs

    def describe_loss(self) -> dict[str, Any]:
        weights = self.weights
        return {"loss": "cross-entropy", "weights": {
            "rows_weighted": int((weights != 1).sum()), "rows": len(weights), "min": float(weights.min()),
            "max": float(weights.max()), "total": float(weights.sum())}}


def trainer_for(rows: Sequence[Example], trainer_class: type | None, trainer_kwargs: dict[str, Any] | None
                ) -> tuple[type | None, dict[str, Any] | None]:
    """``(trainer_class, trainer_kwargs)`` for training on ``rows``: :class:`WeightedTrainer` with their weights when
    one weighs other than 1 (refused with another loss, ``trainer_class``), else those given unchanged."""
    if not is_weighted(rows):
        return trainer_class, trainer_kwargs
    if trainer_class is not None:
        raise InputError(f"{sum(e.weight != 1 for e in rows)} training rows have a loss weight other than 1, and "
                         f"weights apply to the cross-entropy loss only, not to {trainer_class.__name__}'s",
                         hint="train without --debias, or without weights (drop --weight-column / --added-weight)")
    return WeightedTrainer, {**(trainer_kwargs or {}), "weights": [e.weight for e in rows]}


def column_weights(datasets: Sequence[LabeledData], column: str) -> list[LabeledData]:
    """``datasets`` with each row's weight read from column ``column`` of its table (``train --weight-column``),
    lined up by the row each example came from. Tables without the column weigh 1 (an empty cell too); an
    InputError when none has it, or when a set has it but its loader does not say which row each example is."""
    from pathlib import Path

    from toxiforge.data.examples import read_any_table

    out, found = [], []
    for data in datasets:
        local = Path(data.source).expanduser().exists()  # a hub set has no table here to read a column of
        table = read_any_table(data.source) if local else None
        if table is None or column not in table.column_names:
            out.append(data)
            continue
        found.append(data.source)
        values = table.column(column).to_pylist()
        rows = []
        for e in data.examples:
            if e.row is None:
                raise InputError(f"the {data.layout} loader does not say which table row each example is, so its "
                                 f"--weight-column {column} cannot be lined up with them", path=data.source,
                                 hint="read the file as a plain table (table:PATH)")
            value = values[e.row]
            weight = 1.0 if value is None or value == "" else check_weight(value, f"row {e.row}")
            rows.append(replace(e, weight=weight))
        out.append(replace(data, examples=rows))
    if not found:
        raise InputError(f"--weight-column {column}: no training table has that column",
                         path=", ".join(d.source for d in datasets),
                         hint="name the column that holds the rows' loss weights, or drop --weight-column")
    return out
