"""Any Python function as a toxicity classifier.

``CallableClassifier(fn)`` wraps ``fn(list[str])`` returning either P(toxic) per text (1-D, length N: two
classes) or class probabilities ``[N, num_classes]``. Outputs are checked on every call: a wrong length or
shape, NaN, values outside [0, 1], or rows that do not sum to 1 raise an
:class:`~toxiforge.errors.InputError` naming the problem, so a buggy scorer fails loudly instead of steering
ALICE with garbage. Example: ``CallableClassifier(lambda texts: my_api.score(texts), name="my-api")``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from toxiforge.classifiers._common import EPS, as_texts
from toxiforge.errors import InputError

ROW_SUM_ATOL = 1e-3


class CallableClassifier:
    """A function ``fn(list[str]) -> P(toxic) [N]`` or ``-> probabilities [N, C]`` behind the protocol.

    ``num_classes``: None means 2 (either output form). For a 1-D output the two columns are ``p`` at
    ``toxic_index`` and ``1 - p`` at the other one. ``benign_index`` defaults to the other column for 2 classes
    and must be given for more. ``batch_size`` (None: all at once) cuts long inputs into several calls.
    Log-probabilities are clamped at ``log(1e-7)`` so no entry is ``-inf``.
    """

    def __init__(self, fn: Callable[[list[str]], Any], *, name: str = "callable", toxic_index: int = 1,
                 num_classes: int | None = None, benign_index: int | None = None, batch_size: int | None = None):
        if not callable(fn):
            raise InputError(f"fn is a {type(fn).__name__}, not a function", hint="pass fn(list[str]) -> scores")
        n = 2 if num_classes is None else int(num_classes)
        if n < 2:
            raise InputError(f"num_classes={num_classes} must be at least 2", hint="use 2 for toxic vs benign")
        for what, index in (("toxic_index", toxic_index), ("benign_index", benign_index)):
            if index is not None and not 0 <= index < n:
                raise InputError(f"{what}={index} is out of range for num_classes={n}",
                                 hint=f"pass {what} between 0 and {n - 1}")
        if benign_index is None:
            if n != 2:
                raise InputError(f"benign_index is needed for num_classes={n}",
                                 hint="pass benign_index=<column of the non-toxic class>")
            benign_index = 1 - toxic_index
        if benign_index == toxic_index:
            raise InputError(f"toxic_index and benign_index are both {toxic_index}", hint="pass two different columns")
        if batch_size is not None and batch_size < 1:
            raise InputError(f"batch_size={batch_size} must be at least 1", hint="use None for one call")
        self.fn = fn
        self.name = name
        self.num_classes = n
        self.toxic_index = int(toxic_index)
        self.benign_index = int(benign_index)
        self.batch_size = batch_size

    def probabilities(self, texts: Sequence[str]) -> np.ndarray:
        """Validated float64 class probabilities ``[len(texts), num_classes]``."""
        texts = as_texts(texts)
        if not texts:
            return np.zeros((0, self.num_classes))
        step = self.batch_size or len(texts)
        return np.concatenate([self._call(texts[i:i + step]) for i in range(0, len(texts), step)])

    def _call(self, texts: list[str]) -> np.ndarray:
        raw = self.fn(list(texts))
        if isinstance(raw, torch.Tensor):
            raw = raw.detach().float().cpu().numpy()
        try:
            out = np.asarray(raw, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InputError(f"classifier {self.name!r} returned {type(raw).__name__}, not numbers ({exc})",
                             hint="return a sequence of P(toxic) or an [N, num_classes] array") from exc
        where = f"classifier {self.name!r} returned"
        if out.ndim == 0 or out.ndim > 2:
            raise InputError(f"{where} an array of shape {out.shape} for {len(texts)} texts",
                             hint="return P(toxic) of shape [N] or probabilities of shape [N, num_classes]")
        if out.shape[0] != len(texts):
            raise InputError(f"{where} {out.shape[0]} scores for {len(texts)} texts",
                             hint="return exactly one score (or row) per text, in order")
        if out.ndim == 1 and self.num_classes != 2:
            raise InputError(f"{where} one score per text, but num_classes={self.num_classes}",
                             hint=f"return an [N, {self.num_classes}] array, or use num_classes=2")
        if out.ndim == 2 and out.shape[1] != self.num_classes:
            raise InputError(f"{where} {out.shape[1]} columns, expected num_classes={self.num_classes}",
                             hint="pass num_classes=<columns> when wrapping it")
        if np.isnan(out).any():
            raise InputError(f"{where} NaN for text {int(np.argwhere(np.isnan(out))[0][0])}",
                             hint="return probabilities in [0, 1]")
        if (out < 0).any() or (out > 1).any():
            bad = out[(out < 0) | (out > 1)]
            raise InputError(f"{where} values outside [0, 1] (e.g. {float(bad[0]):.4g}); these are not probabilities",
                             hint="apply a sigmoid/softmax to logits before returning them")
        if out.ndim == 1:
            probs = np.empty((len(texts), 2))
            probs[:, self.toxic_index] = out
            probs[:, self.benign_index] = 1.0 - out
            return probs
        sums = out.sum(axis=1)
        if not np.allclose(sums, 1.0, atol=ROW_SUM_ATOL):
            row = int(np.argmax(np.abs(sums - 1.0)))
            raise InputError(f"{where} a row summing to {sums[row]:.4g} (text {row}); class probabilities must sum "
                             "to 1", hint="apply a softmax, or return P(toxic) per text (1-D) instead")
        return out

    def class_log_probs(self, texts: Sequence[str]) -> torch.Tensor:
        """float32 CPU ``[len(texts), num_classes]`` log-probabilities (clamped at log(1e-7))."""
        return torch.from_numpy(np.log(np.clip(self.probabilities(texts), EPS, 1.0))).float()

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(toxic) per text, float64 ``[len(texts)]``."""
        return self.probabilities(texts)[:, self.toxic_index]

    def describe(self) -> dict[str, Any]:
        """Name, backend ("callable"), the wrapped function's qualified name and the class columns."""
        return {"name": self.name, "backend": "callable",
                "function": getattr(self.fn, "__qualname__", type(self.fn).__name__),
                "num_classes": self.num_classes, "toxic_index": self.toxic_index, "benign_index": self.benign_index}
