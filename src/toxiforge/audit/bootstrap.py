"""Bootstrap intervals, plain and paired: every number of an audit that comes from a sample carries one.

A :class:`Resampler` draws ``n_boot`` resamples of a dataset's rows (with replacement) from a seed, in blocks so
that a 250k-row set never holds more than :data:`BLOCK_CELLS` cells at once. A resample is given as weights: how
many times each row was drawn (a float array ``[b, n]``, one resample per row), which is the same data as the
duplicated rows and lets every metric be a matrix product or a bincount instead of a sort per resample. Metric
functions compute one value per resample, so a metric is written once, vectorised, and its point value is the
same function on weights of 1 (:meth:`Resampler.point`).
Because the resamples depend only on ``(n, n_boot, seed)``, two classifiers scored on the same rows see the same
resamples: :func:`paired_difference` subtracts their replicate arrays row by row (the paired bootstrap). The
interval is the percentile interval (2.5th and 97.5th percentiles) of the replicates that are defined (a resample
with one class only has no AUC: NaN, left out and counted).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

BLOCK_CELLS = 4_000_000   # indices per block (32 MB as int64): bounds memory on large sets
LEVEL = 0.95
Metric = Callable[[np.ndarray], np.ndarray]   # weights [b, n] -> one value per resample (NaN: undefined)


@dataclass(frozen=True)
class Estimate:
    """A number with its bootstrap interval; ``reps`` the replicate values (NaN where undefined), kept for paired
    differences and left out of JSON."""

    value: float | None
    low: float | None = None
    high: float | None = None
    reps: np.ndarray | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, value: float, reps: np.ndarray | None) -> Estimate:
        """``value`` (NaN -> None) with the percentile interval of ``reps``."""
        point = None if value is None or not np.isfinite(value) else float(value)
        if reps is None or point is None:
            return cls(point, None, None, reps)
        finite = reps[np.isfinite(reps)]
        if finite.size == 0:
            return cls(point, None, None, reps)
        tail = 100 * (1 - LEVEL) / 2
        low, high = np.percentile(finite, [tail, 100 - tail])
        return cls(point, float(low), float(high), reps)

    @property
    def defined(self) -> bool:
        return self.value is not None

    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly on one side of 0 (a difference is shown)."""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high}

    def cell(self, digits: int = 3) -> str:
        """``0.871 [0.85, 0.89]``, ``0.871`` without an interval, ``n/a`` when undefined."""
        if self.value is None:
            return "n/a"
        if self.low is None or self.high is None:
            return f"{self.value:.{digits}f}"
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


class Resampler:
    """``n_boot`` bootstrap resamples of ``n`` rows, reproducible from ``seed`` (``n_boot`` 0: no intervals)."""

    def __init__(self, n: int, n_boot: int = 1000, seed: int = 0):
        self.n, self.n_boot, self.seed = int(n), int(n_boot), int(seed)

    def blocks(self) -> Iterator[np.ndarray]:
        """The resamples as weights ``[b, n]`` (times each row was drawn), the same ones on every call."""
        rng = np.random.default_rng(self.seed)
        per_block = max(1, BLOCK_CELLS // max(self.n, 1))
        for start in range(0, self.n_boot, per_block):
            b = min(per_block, self.n_boot - start)
            drawn = rng.integers(0, self.n, size=(b, self.n)) + self.n * np.arange(b)[:, None]
            yield np.bincount(drawn.ravel(), minlength=b * self.n).reshape(b, self.n).astype(np.float64)

    def point(self, metric: Metric) -> float:
        """``metric`` on the rows themselves (the identity resample)."""
        return float(metric(np.ones((1, self.n)))[0])

    def estimates(self, metrics: Mapping[str, Metric]) -> dict[str, Estimate]:
        """Each metric's point value and interval, all from one pass over the resamples."""
        reps: dict[str, list[np.ndarray]] = {k: [] for k in metrics}
        for block in (self.blocks() if self.n_boot > 0 else ()):
            for key, metric in metrics.items():
                reps[key].append(np.asarray(metric(block), dtype=np.float64))
        return {k: Estimate.of(self.point(m), np.concatenate(reps[k]) if reps[k] else None)
                for k, m in metrics.items()}


def paired_difference(base: Estimate, other: Estimate) -> Estimate:
    """``other - base`` with the interval of the row-by-row differences of their replicates (both must come from
    the same :class:`Resampler`: same rows, ``n_boot`` and seed)."""
    if base.value is None or other.value is None:
        return Estimate(None)
    reps = None
    if base.reps is not None and other.reps is not None:
        if base.reps.shape != other.reps.shape:
            raise ValueError("paired differences need replicates from the same resamples")
        reps = other.reps - base.reps
    return Estimate.of(other.value - base.value, reps)
