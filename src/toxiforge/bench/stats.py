"""Shares with a 95% bootstrap interval, the one interval both benchmark modes report.

A percentile bootstrap of the mean of 0/1 outcomes: ``n_boot`` resamples with replacement (seeded, so reruns
print the same interval), the 2.5th and 97.5th percentiles of the resampled means. With a few hundred items per
group the interval is a few points wide either side; it is there so a reader does not over-read a 2-point gap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import numpy.typing as npt

N_BOOT = 1000


@dataclass(frozen=True)
class Share:
    """``value`` (a share in [0, 1]) of ``n`` outcomes with its bootstrap interval ``[low, high]``."""

    value: float | None
    low: float | None
    high: float | None
    n: int

    def cell(self, digits: int = 1) -> str:
        """``"42.0 [35.1, 48.9]"`` (percentages) or ``"-"`` when there is no outcome."""
        if self.value is None:
            return "-"
        value, low, high = self.bounds()
        return f"{100 * value:.{digits}f} [{100 * low:.{digits}f}, {100 * high:.{digits}f}]"

    def bounds(self) -> tuple[float, float, float]:
        """``(value, low, high)``; a share of no outcome has none (ValueError)."""
        if self.value is None or self.low is None or self.high is None:
            raise ValueError("a share of no outcome has no value or interval")
        return self.value, self.low, self.high

    def to_dict(self) -> dict:
        return asdict(self)


def bootstrap_share(outcomes: npt.ArrayLike, *, n_boot: int = N_BOOT, seed: int = 0,
                    level: float = 0.95) -> Share:
    """The mean of ``outcomes`` (0/1, or scores in [0, 1]) with a percentile bootstrap interval."""
    x = np.asarray(outcomes, dtype=np.float64)
    if x.size == 0:
        return Share(None, None, None, 0)
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(n_boot, x.size))].mean(axis=1)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return Share(float(x.mean()), float(low), float(high), int(x.size))
