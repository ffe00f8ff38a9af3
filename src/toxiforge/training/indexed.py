"""The ``Trainer`` subclass every ``toxiforge train`` run uses: batches that know which examples they hold.

Each training row carries its position in the list given to :func:`~toxiforge.training.trainer.train_classifier`
(:data:`~toxiforge.training.trainer.INDEX_FIELD`). :class:`IndexedTrainer` takes that field out of the batch
before the forward pass, computes the training loss with :meth:`IndexedTrainer.training_loss` (plain
cross-entropy here; LEARNED-MIXIN overrides it, :mod:`toxiforge.training.debias`) and hands the batch's logits,
labels and positions to every :class:`BatchCallback` -- what DataMaps needs to record training dynamics from the
forward passes training does anyway (:mod:`toxiforge.bias.datamaps`). Evaluation batches use ``Trainer``'s own
loss and reach no callback.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import Trainer, TrainerCallback

from toxiforge.training.trainer import INDEX_FIELD


class BatchCallback(TrainerCallback):
    """A ``TrainerCallback`` that also sees every training batch's output (after its forward pass)."""

    def on_batch(self, index: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> None:
        """``index``: positions of the batch's examples; ``logits``: [batch, 2], detached; ``labels``: gold."""
        raise NotImplementedError


class IndexedTrainer(Trainer):
    """``Trainer`` whose training batches carry example positions (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.batch_callbacks = [c for c in self.callback_handler.callbacks if isinstance(c, BatchCallback)]

    def training_loss(self, model: Any, inputs: dict[str, Any], index: torch.Tensor,
                      num_items_in_batch: Any = None) -> tuple[torch.Tensor, Any]:
        """``(loss, outputs)`` of one training batch; ``index`` holds the examples' positions."""
        loss, outputs = super().compute_loss(model, inputs, return_outputs=True, num_items_in_batch=num_items_in_batch)
        return loss, outputs

    def describe_loss(self) -> dict[str, Any]:
        """The training objective, for ``training_log.json``."""
        return {"loss": "cross-entropy"}

    def compute_loss(self, model: Any, inputs: dict[str, Any], return_outputs: bool = False,
                     num_items_in_batch: Any = None):
        index = inputs.pop(INDEX_FIELD, None)
        if index is None or not model.training:
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        labels = inputs["labels"]
        loss, outputs = self.training_loss(model, inputs, index, num_items_in_batch)
        if self.batch_callbacks:
            logits = outputs["logits"].detach()
            for callback in self.batch_callbacks:
                callback.on_batch(index, logits, labels)
        return (loss, outputs) if return_outputs else loss
