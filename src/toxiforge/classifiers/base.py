"""The toxicity-classifier protocol every backend implements.

``predict_proba(texts)`` returns P(toxic) per text; ``class_log_probs(texts)`` returns log-probabilities of every
class, which ALICE needs for the class it steers toward (the benign class to find false negatives, the toxic
class to find false positives). ``toxic_index`` and ``benign_index`` say which columns those are.
``describe()`` returns what identifies the classifier in evaluation reports and manifests.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch


@runtime_checkable
class ToxicityClassifier(Protocol):
    """A toxicity classifier: class log-probabilities for ALICE, P(toxic) for scoring, provenance for reports."""

    name: str
    num_classes: int   # columns of class_log_probs
    toxic_index: int   # column of the toxic class
    benign_index: int  # column of the benign (non-toxic) class

    def class_log_probs(self, texts: Sequence[str]) -> torch.Tensor:
        """float32 CPU tensor ``[len(texts), num_classes]`` of log-probabilities (batched internally)."""

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(toxic) per text, float64 ``[len(texts)]``."""

    def describe(self) -> dict[str, Any]:
        """Provenance for reports and manifests: ``name`` and ``backend``, plus what identifies the model."""


def scoring_settings(classifier: ToxicityClassifier) -> dict[str, Any]:
    """The options besides its name that change a classifier's scores, from :meth:`describe`: a judge's template
    name and policy (as a SHA-256 prefix: policies are long), a head's toxic label. A resumed run compares them
    (``--judge-template``, ``--judge-policy``, ``--toxic-label``, ``--classifier-runtime`` other than torch); empty
    for classifiers without such options."""
    import hashlib

    info = classifier.describe()
    out: dict[str, Any] = {}
    if isinstance(info.get("template"), dict):
        out["template"] = info["template"].get("name")
    if "policy" in info:
        policy = info["policy"]
        out["policy"] = None if policy is None else "sha256:" + hashlib.sha256(policy.encode()).hexdigest()[:12]
    if "toxic_label" in info:
        out["toxic_label"] = info["toxic_label"]
    if info.get("runtime", "torch") != "torch":  # int8 moves scores (--classifier-runtime); torch runs recorded none
        out["runtime"] = info["runtime"]
    return out
