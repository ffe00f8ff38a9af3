"""The toxicity-classifier protocol every backend implements.

``predict_proba(texts)`` returns P(toxic) per text; ``class_log_probs(texts)`` returns log-probabilities of every
class, which ALICE needs for the class it steers toward (the benign class to find false negatives, the toxic
class to find false positives). ``toxic_index`` and ``benign_index`` say which columns those are.
"""

from __future__ import annotations

from typing import Protocol, Sequence, runtime_checkable

import numpy as np
import torch


@runtime_checkable
class ToxicityClassifier(Protocol):
    name: str
    num_classes: int   # columns of class_log_probs
    toxic_index: int   # column of the toxic class
    benign_index: int  # column of the benign (non-toxic) class

    def class_log_probs(self, texts: Sequence[str]) -> torch.Tensor:
        """float32 CPU tensor ``[len(texts), num_classes]`` of log-probabilities (batched internally)."""

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(toxic) per text, float64 ``[len(texts)]``."""
