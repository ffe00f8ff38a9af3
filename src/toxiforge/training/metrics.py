"""ROC AUC that says why it is undefined instead of returning NaN or raising.

scikit-learn's ``roc_auc_score`` raises on a single-class set and NaN scores propagate silently. Here
:func:`auc_or_reason` returns ``AUC(value, None)`` or ``AUC(None, "undefined: all 40 examples are benign ...")``,
and reports print the reason.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class AUC:
    value: float | None
    reason: str | None = None
    n: int = 0
    toxic: int = 0

    @property
    def defined(self) -> bool:
        return self.value is not None

    def cell(self, digits: int = 2) -> str:
        """``0.87`` or ``n/a`` for a table cell."""
        return f"{self.value:.{digits}f}" if self.value is not None else "n/a"

    def to_dict(self) -> dict:
        return {"auc": self.value, "auc_note": self.reason, "n": self.n, "toxic": self.toxic,
                "benign": self.n - self.toxic}


def auc_or_reason(labels: npt.ArrayLike, scores: npt.ArrayLike) -> AUC:
    """ROC AUC of ``scores`` (P(toxic)) against 0/1 ``labels``; undefined (with a reason) when the set is empty,
    has one class only, or has non-finite scores."""
    y = np.asarray(labels, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    n, toxic = int(y.size), int(y.sum())
    if n == 0:
        return AUC(None, "undefined: no examples", 0, 0)
    if toxic in (0, n):
        which = "toxic" if toxic else "benign"
        return AUC(None, f"undefined: all {n} examples are {which}; ROC AUC needs both classes", n, toxic)
    bad = int((~np.isfinite(s)).sum())
    if bad:
        return AUC(None, f"undefined: {bad} of {n} scores are NaN or infinite", n, toxic)
    from sklearn.metrics import roc_auc_score

    return AUC(float(roc_auc_score(y, s)), None, n, toxic)
