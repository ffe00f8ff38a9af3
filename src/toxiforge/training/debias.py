"""LEARNED-MIXIN and LEARNED-MIXIN+H (Clark et al., 2019), as Zhou et al. (2021, §3.1 and Appendix A.1) use them.

During training the classifier's log-probabilities are combined with those of a fixed bias-only model ``b``
(:mod:`toxiforge.bias.bias_only`):

    p_hat = softmax(log p + g(x) log b),   g(x) = softplus(w . h(x))

where ``h(x)`` is the last hidden layer at the first token (RoBERTa's ``<s>``, BERT's ``[CLS]``) and ``w`` a
learned vector (a ``Linear(hidden, 1)``, trained with the model, with no weight decay). The loss is the
cross-entropy of ``p_hat``; LEARNED-MIXIN+H adds ``entropy_weight * H(softmax(g(x) log b))`` so the model cannot
learn to ignore the bias by driving ``g`` to 0. Because the ensemble explains what the bias already predicts,
the classifier's own gradient on those examples shrinks and it learns the rest.

At test time the bias term is dropped: :class:`LearnedMixinTrainer` trains inside ``Trainer.compute_loss`` and
saves only the classifier, a plain sequence-classification model directory (``w`` is discarded, as Clark et al.).

The default entropy weight of LEARNED-MIXIN+H, 0.01, is the penalty in Zhou et al.'s released code
(``modeling_roberta_debias.py``); Clark et al. tune it per task. Plain LEARNED-MIXIN uses 0.

Limit: under multi-GPU data parallelism ``w`` is not wrapped by DDP, so its gradients are not averaged across
processes; train debiased models on one device.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from transformers import PreTrainedModel

from toxiforge.errors import InputError
from toxiforge.training.indexed import IndexedTrainer

METHODS: tuple[str, ...] = ("learned-mixin", "learned-mixin+h")
DEFAULT_ENTROPY_WEIGHT = 0.01  # Zhou et al.'s code (penalty=0.01)
PROB_FLOOR = 1e-6  # bias-only probabilities are clipped to [floor, 1 - floor] before the log


def normalize_method(method: str) -> str:
    key = method.strip().lower().replace("_", "-").replace(" ", "")
    key = {"lmixin": "learned-mixin", "lmixin+h": "learned-mixin+h", "learned-mixin-h": "learned-mixin+h"}.get(key,
                                                                                                                key)
    if key not in METHODS:
        raise InputError(f"unknown debiasing method {method!r}", hint=f"use one of {', '.join(METHODS)}")
    return key


def entropy_weight_for(method: str, entropy_weight: float | None) -> float:
    """The entropy penalty of ``method``: 0 for learned-mixin; the given weight (default 0.01) for +h."""
    method = normalize_method(method)
    if method == "learned-mixin":
        if entropy_weight:
            raise InputError("--entropy-weight applies to learned-mixin+h only",
                             hint="use --debias learned-mixin+h, or leave out --entropy-weight")
        return 0.0
    weight = DEFAULT_ENTROPY_WEIGHT if entropy_weight is None else float(entropy_weight)
    if weight < 0:
        raise InputError(f"the entropy weight must not be negative, got {weight}", hint="use e.g. 0.01")
    return weight


def log_bias_probs(p_toxic: npt.ArrayLike) -> torch.Tensor:
    """``[n, 2]`` log-probabilities (benign, toxic) of a bias-only model, clipped away from 0 and 1."""
    p = np.clip(np.asarray(p_toxic, dtype=np.float64), PROB_FLOOR, 1 - PROB_FLOOR)
    return torch.tensor(np.log(np.stack([1 - p, p], axis=1)), dtype=torch.float32)


def learned_mixin_loss(logits: torch.Tensor, hidden: torch.Tensor, log_bias: torch.Tensor, labels: torch.Tensor,
                       gate: torch.nn.Module, entropy_weight: float = 0.0) -> torch.Tensor:
    """Cross-entropy of ``softmax(log_softmax(logits) + softplus(gate(hidden)) * log_bias)``, plus
    ``entropy_weight`` times the mean entropy of ``softmax(softplus(gate(hidden)) * log_bias)``."""
    log_p = F.log_softmax(logits.float(), dim=-1)
    scale = F.softplus(gate(hidden.float()))  # g(x) >= 0, [batch, 1]
    scaled_bias = scale * log_bias
    loss = F.cross_entropy(log_p + scaled_bias, labels)
    if entropy_weight:
        log_q = F.log_softmax(scaled_bias, dim=-1)
        loss = loss + entropy_weight * -(log_q.exp() * log_q).sum(dim=-1).mean()
    return loss


class LearnedMixinTrainer(IndexedTrainer):
    """``Trainer`` whose training loss is LEARNED-MIXIN(+H) against fixed bias-only probabilities.

    ``bias_probs``: p(toxic) of the bias-only model for each example, in the order of the list given to
    :func:`~toxiforge.training.trainer.train_classifier` (batches carry those positions).
    """

    def __init__(self, *args: Any, bias_probs: Sequence[float] | np.ndarray, entropy_weight: float = 0.0,
                 bias_only: str = "given", **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.log_bias = log_bias_probs(bias_probs)
        self.entropy_weight = float(entropy_weight)
        self.bias_only = bias_only
        if not isinstance(self.model, PreTrainedModel):
            raise TypeError("LEARNED-MIXIN needs a transformers model (its config gives the gate's input size)")
        self.gate = torch.nn.Linear(self.model.config.hidden_size, 1).to(self.args.device)
        self.loss_is_scaled_for_ga = False  # a batch mean, like the default loss: Trainer divides by GA steps

    def create_optimizer(self, model: Any = None):
        optimizer = super().create_optimizer(model)
        gate_params = list(self.gate.parameters())
        if not any(p is q for group in optimizer.param_groups for p in group["params"] for q in gate_params):
            optimizer.add_param_group({"params": gate_params, "weight_decay": 0.0})
        return optimizer

    def training_loss(self, model: Any, inputs: dict[str, Any], index: torch.Tensor,
                      num_items_in_batch: Any = None) -> tuple[torch.Tensor, Any]:
        if int(index.max()) >= len(self.log_bias):
            raise InputError(f"example position {int(index.max())} has no bias-only probability "
                             f"({len(self.log_bias)} given)", hint="give one bias-only probability per example")
        labels = inputs.pop("labels")
        outputs = model(**inputs, output_hidden_states=True)
        log_bias = self.log_bias[index.cpu()].to(outputs.logits.device)
        loss = learned_mixin_loss(outputs.logits, outputs.hidden_states[-1][:, 0], log_bias, labels, self.gate,
                                  self.entropy_weight)
        return loss, outputs

    def describe_loss(self) -> dict[str, Any]:
        method = "learned-mixin+h" if self.entropy_weight else "learned-mixin"
        return {"loss": method, "entropy_weight": self.entropy_weight, "bias_only": self.bias_only,
                "bias_only_mean_p_toxic": float(self.log_bias[:, 1].exp().mean())}


def train_debiased(train: Sequence[Any], output_dir: Any, config: Any, *, bias_probs: Sequence[float] | np.ndarray,
                   method: str = "learned-mixin+h", entropy_weight: float | None = None, bias_only: str = "given",
                   **kwargs: Any):
    """:func:`~toxiforge.training.trainer.train_classifier` with the LEARNED-MIXIN(+H) loss."""
    from toxiforge.training.trainer import train_classifier

    if len(bias_probs) != len(train):
        raise InputError(f"{len(bias_probs)} bias-only probabilities for {len(train)} training examples",
                         hint="give one bias-only probability per training example")
    return train_classifier(train, output_dir, config, trainer_class=LearnedMixinTrainer,
                            trainer_kwargs={"bias_probs": list(bias_probs), "bias_only": bias_only,
                                            "entropy_weight": entropy_weight_for(method, entropy_weight)},
                            **kwargs)
