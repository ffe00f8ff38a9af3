"""``profanity-check``: the offline classifier that ships as a PyPI package (``alt-profanity-check``).

It is a scikit-learn linear SVM (``CalibratedClassifierCV(LinearSVC)``) over TF-IDF word features, trained on
profanity/offensive-language data. It catches profanity and explicit insults by their words; it does **not**
detect implicit hate (stereotypes, coded language without slurs), which is what ToxiGen is about. Use it to run
the pipeline offline, or as a weak, fast baseline (~10^5 short sentences/s on one CPU core), not as a stand-in
for ToxiGen-RoBERTa.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from toxiforge.classifiers._common import EPS, as_texts
from toxiforge.errors import InputError


def _load_predict_prob() -> Callable[[list[str]], Any]:
    try:
        from profanity_check import predict_prob
    except ImportError as exc:
        raise InputError(f"the profanity-check classifier needs the 'alt-profanity-check' package ({exc})",
                         hint="run `pip install alt-profanity-check`") from exc
    return predict_prob


class ProfanityCheckClassifier:
    """``alt-profanity-check`` behind the classifier protocol: 2 classes, column 0 benign, column 1 toxic.

    ``class_log_probs`` is ``log([1 - p, p])`` with ``p`` clamped to ``[1e-7, 1 - 1e-7]``, so no entry is
    ``-inf``. ``batch_size`` bounds how many texts are vectorized at once (memory only; scores do not depend on it).
    """

    name: str = "profanity-check"
    num_classes, toxic_index, benign_index = 2, 1, 0

    def __init__(self, *, batch_size: int = 10_000, name: str = "profanity-check"):
        if batch_size < 1:
            raise InputError(f"batch_size={batch_size} must be at least 1", hint="use e.g. 10000")
        self._predict_prob = _load_predict_prob()
        self.batch_size = int(batch_size)
        self.name = name

    def _probs(self, texts: list[str]) -> np.ndarray:
        out = np.empty(len(texts), dtype=np.float64)
        for start in range(0, len(texts), self.batch_size):
            chunk = texts[start:start + self.batch_size]
            out[start:start + len(chunk)] = np.asarray(self._predict_prob(chunk), dtype=np.float64).reshape(-1)
        return out

    def class_log_probs(self, texts: Sequence[str]) -> torch.Tensor:
        """float32 CPU ``[len(texts), 2]``: ``log(1 - p)``, ``log(p)`` with ``p`` clamped away from 0 and 1."""
        p = np.clip(self._probs(as_texts(texts)), EPS, 1.0 - EPS)
        return torch.from_numpy(np.log(np.stack([1.0 - p, p], axis=1))).float()

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(toxic) per text, float64 ``[len(texts)]`` (unclamped)."""
        return self._probs(as_texts(texts))

    def describe(self) -> dict[str, Any]:
        """Name, backend and the package version (for manifests)."""
        from importlib.metadata import PackageNotFoundError, version

        try:
            pkg = version("alt-profanity-check")
        except PackageNotFoundError:  # pragma: no cover - installed under another distribution name
            pkg = "unknown"
        return {"name": self.name, "backend": "alt-profanity-check", "version": pkg, "num_classes": 2,
                "toxic_index": 1, "benign_index": 0}


def load_profanity_check(*, batch_size: int | None = None, name: str = "profanity-check", device: Any = None,
                         dtype: Any = None, **kwargs: Any) -> ProfanityCheckClassifier:
    """The registry's ``profanity-check`` factory. It runs on the CPU; ``device`` and ``dtype`` are accepted (for a
    uniform CLI) and ignored; any other option is an InputError."""
    unknown = sorted(kwargs)
    if unknown:
        raise InputError(f"profanity-check takes no {', '.join(unknown)} option",
                         hint="those options apply to transformers classifiers only")
    return ProfanityCheckClassifier(name=name, **({} if batch_size is None else {"batch_size": batch_size}))
