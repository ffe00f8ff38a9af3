"""Intervals, one home for every stage: shares of 0/1 outcomes with a Wilson score interval, and bootstrap
resamples (plain and paired) for everything else. ``bench``, ``audit`` and ``harden`` all take theirs from here.

**Proportions** (a share of ``n`` 0/1 outcomes: FPR, FNR, accuracy, attack success, flip rates, over-blocking, %
toxic) get the 95% Wilson score interval (:func:`proportion_interval`, statsmodels' ``proportion_confint``). Unlike
a percentile bootstrap, it does not collapse at 0 and 1: 0 of 22 is ``[0, 0.149]``, not ``[0, 0]``, and 100 of 100
is ``[0.963, 1]``. A proportion of fewer than :data:`SMALL_N` outcomes is *small*: reports mark it. The
difference of two shares of *independent* samples (``harden-seeds``' pooled flip rates of two rounds or arms) gets
Newcombe's hybrid score interval, built from their two Wilson intervals (:func:`share_difference`), for the same
reason: 0 of 40 minus 0 of 40 is ``[-0.088, 0.088]``, not ``[0, 0]``.

**Everything else** (AUCs, F1, calibration errors, differences) gets a percentile bootstrap. A :class:`Resampler`
draws ``n_boot`` resamples of a dataset's rows (with replacement) from a seed, in blocks so that a 250k-row set
never holds more than :data:`BLOCK_CELLS` cells at once. A resample is given as weights: how many times each row
was drawn (a float array ``[b, n]``, one resample per row), which is the same data as the duplicated rows and lets
every metric be a matrix product or a bincount instead of a sort per resample. Metric functions compute one value
per resample, so a metric is written once, vectorised, and its point value is the same function on weights of 1
(:meth:`Resampler.point`). Because the resamples depend only on ``(n, n_boot, seed)``, two classifiers scored on
the same rows see the same resamples: :func:`paired_difference` subtracts their replicate arrays row by row (the
paired bootstrap). Its interval is the percentile interval (2.5th and 97.5th percentiles) of the replicates that
are defined (a resample with one class only has no AUC: NaN, left out).

**The rule where both meet**: a :class:`Proportion` metric (hits over a base of rows) is resampled like any other,
and its :class:`Estimate` keeps the replicates (``reps``) for paired differences, but the interval it shows is
Wilson's on its point counts, with its ``n``. So a difference between two classifiers' FPRs is a paired bootstrap
interval, and each FPR on its own is a Wilson interval.

**Over runs** (the same experiment at several seeds: ``harden-seeds``, the harden proof): the runs are the sample,
and :func:`mean_over_runs` gives their mean with a Student t interval, the seed noise a claim must clear.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

LEVEL = 0.95
N_BOOT = 1000              # resamples of a bootstrap interval, unless a caller asks for other
SMALL_N = 30               # a proportion of fewer outcomes is marked "small n" in reports
SMALL_N_MARK = "†"
SMALL_N_NOTE = f"{SMALL_N_MARK} n < {SMALL_N}: fewer than {SMALL_N} rows behind this proportion; read its interval."
PROPORTION_METHOD = "wilson"   # statsmodels' proportion_confint method
DIFFERENCE_METHOD = "newcomb"  # statsmodels' confint_proportions_2indep method: Newcombe's hybrid score (method 10)
BLOCK_CELLS = 4_000_000    # indices per block (32 MB as int64): bounds memory on large sets
Metric = Callable[[np.ndarray], np.ndarray]   # weights [b, n] -> one value per resample (NaN: undefined)


def proportion_interval(hits: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """The Wilson score interval of ``hits`` of ``n`` (``n`` > 0): inside [0, 1], never a single point."""
    from statsmodels.stats.proportion import proportion_confint

    low, high = proportion_confint(int(hits), int(n), alpha=1 - level, method=PROPORTION_METHOD)
    share = hits / n  # the interval holds the share itself (rounding left 0 of n a low of 1e-17)
    return max(0.0, min(float(low), share)), min(1.0, max(float(high), share))


def is_small(n: int | None) -> bool:
    """Whether a proportion of ``n`` outcomes is small (fewer than :data:`SMALL_N`)."""
    return n is not None and n < SMALL_N


# --- shares: a proportion of 0/1 outcomes, stored as {value, low, high, n} -------------------------------------


@dataclass(frozen=True)
class Share:
    """``value`` (a share in [0, 1]) of ``n`` 0/1 outcomes with its Wilson interval ``[low, high]``."""

    value: float | None
    low: float | None
    high: float | None
    n: int

    @classmethod
    def of_counts(cls, hits: int, n: int, level: float = LEVEL) -> Share:
        if n <= 0:
            return cls(None, None, None, 0)
        low, high = proportion_interval(hits, n, level)
        return cls(hits / n, low, high, int(n))

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


def proportion(outcomes: npt.ArrayLike, level: float = LEVEL) -> Share:
    """The share of true ``outcomes`` (0/1 or bools) with its Wilson interval."""
    x = np.asarray(outcomes, dtype=np.float64)
    if np.any((x != 0) & (x != 1)):
        raise ValueError("a proportion counts 0/1 outcomes; use a Resampler for the mean of other values")
    return Share.of_counts(int(x.sum()), int(x.size), level)


def share_counts(share: Mapping[str, Any] | None) -> tuple[int, int] | None:
    """``(hits, n)`` of a stored share (``Share.to_dict()``); None when it has no outcome."""
    if share is None or share.get("value") is None or not share.get("n"):
        return None
    return round(share["value"] * share["n"]), int(share["n"])


def pooled_counts(shares: Sequence[Mapping[str, Any] | None]) -> tuple[int, int] | None:
    """``(hits, n)`` over every stored share; None when one of them has no outcome."""
    counts = [share_counts(s) for s in shares]
    if any(c is None for c in counts):
        return None
    return sum(c[0] for c in counts if c), sum(c[1] for c in counts if c)


def pooled_share(shares: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """One share of every outcome of ``shares`` (stored shares of 0/1 outcomes), as a dict; None when one of them
    has no outcome."""
    counts = pooled_counts(shares)
    return None if counts is None else Share.of_counts(*counts).to_dict()


def share_difference(a: tuple[int, int] | None, b: tuple[int, int] | None, level: float = LEVEL
                     ) -> dict[str, Any] | None:
    """Share ``a`` minus share ``b`` (each ``(hits, n)``, two independent samples) with Newcombe's hybrid score
    interval (Newcombe 1998, method 10: built from the two shares' Wilson intervals; statsmodels'
    ``confint_proportions_2indep(method="newcomb")``). Like Wilson's, it does not collapse at 0 and 1: 0/40 minus
    0/40 is [-0.088, +0.088] and 0/40 minus 3/40 is [-0.199, +0.025], where a binomial bootstrap of each share gave
    [0, 0] and [-0.175, 0]. None when either share is missing."""
    if a is None or b is None:
        return None
    from statsmodels.stats.proportion import confint_proportions_2indep

    low, high = confint_proportions_2indep(int(a[0]), int(a[1]), int(b[0]), int(b[1]), method=DIFFERENCE_METHOD,
                                           compare="diff", alpha=1 - level)
    value = a[0] / a[1] - b[0] / b[1]  # the interval holds the difference itself, inside [-1, 1] (float rounding)
    return {"value": value, "low": max(-1.0, min(float(low), value)), "high": min(1.0, max(float(high), value))}


def points_cell(difference: Mapping[str, Any] | None) -> str:
    """A difference of shares ``{value, low, high}`` (:func:`share_difference`, :meth:`Estimate.to_dict`) in
    percentage points: ``"+4.0 [-1.2, +9.3]"``, the value alone without an interval, ``"-"`` without a value."""
    return _cell(difference, 100, 1)


def interval_cell(difference: Mapping[str, Any] | None) -> str:
    """A difference ``{value, low, high}`` as it is (AUC, a rate, :func:`mean_over_runs`) to 3 decimals:
    ``"+0.032 [-0.084, +0.148]"``, the value alone without an interval, ``"-"`` without a value."""
    return _cell(difference, 1, 3)


def _cell(difference: Mapping[str, Any] | None, scale: float, digits: int) -> str:
    if not difference or difference.get("value") is None:
        return "-"
    cell = f"{scale * difference['value']:+.{digits}f}"
    if difference.get("low") is None or difference.get("high") is None:
        return cell
    return f"{cell} [{scale * difference['low']:+.{digits}f}, {scale * difference['high']:+.{digits}f}]"


def mean_over_runs(values: Sequence[float | None], level: float = LEVEL) -> dict[str, Any] | None:
    """The mean of several runs' values (one per seed: the runs are the sample) with a Student t interval over them,
    ``{value, low, high, runs}``: mean +- t(level, runs - 1) * s.d. / sqrt(runs) (statsmodels' ``tconfint_mean``).
    Runs without a value are left out; with one run there is no interval (low and high None), and runs that all
    agree give a zero-width one. None when no run has a value. This is "beyond seed noise" for harden-seeds and
    the harden proof: with 3 runs the interval is 4.3 standard errors wide on each side, so only an effect that
    every seed shows alike clears it."""
    known = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if known.size == 0:
        return None
    mean = float(known.mean())
    if known.size < 2:
        return {"value": mean, "low": None, "high": None, "runs": 1}
    if np.ptp(known) == 0:
        return {"value": mean, "low": mean, "high": mean, "runs": int(known.size)}
    from statsmodels.stats.weightstats import DescrStatsW

    low, high = DescrStatsW(known).tconfint_mean(alpha=1 - level)
    return {"value": mean, "low": float(low), "high": float(high), "runs": int(known.size)}


# --- estimates: a number of a sample, with replicates for paired differences -----------------------------------


@dataclass(frozen=True)
class Estimate:
    """A number with its interval; ``reps`` the bootstrap replicate values (NaN where undefined), kept for paired
    differences and left out of JSON; ``n`` the outcomes behind a proportion (None for other numbers), whose
    interval is Wilson's."""

    value: float | None
    low: float | None = None
    high: float | None = None
    reps: np.ndarray | None = field(default=None, compare=False, repr=False)
    n: int | None = None

    @classmethod
    def of(cls, value: float | None, reps: np.ndarray | None) -> Estimate:
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

    @classmethod
    def proportion(cls, hits: int, n: int, reps: np.ndarray | None = None, interval: bool = True) -> Estimate:
        """``hits / n`` (None when ``n`` is 0) with its Wilson interval (none when ``interval`` is False), ``n``
        and the replicates ``reps`` for paired differences."""
        if n <= 0:
            return cls(None, None, None, reps, 0)
        low, high = proportion_interval(hits, n) if interval else (None, None)
        return cls(hits / n, low, high, reps, int(n))

    @property
    def defined(self) -> bool:
        return self.value is not None

    @property
    def small_n(self) -> bool:
        """Whether this is a proportion of fewer than :data:`SMALL_N` outcomes."""
        return is_small(self.n)

    def excludes_zero(self) -> bool:
        """Whether the interval lies wholly on one side of 0 (a difference is shown)."""
        return self.low is not None and self.high is not None and (self.low > 0 or self.high < 0)

    def worse_beyond(self, tolerance: float, higher_is_better: bool) -> bool:
        """Whether this difference's interval lies wholly beyond ``tolerance`` on the worse side (higher is better:
        ``high < -tolerance``; lower is better: ``low > +tolerance``): the one rule of the audit's gate and harden's
        round check. No interval: not worse."""
        if self.low is None or self.high is None:
            return False
        return self.high < -tolerance if higher_is_better else self.low > tolerance

    def to_dict(self) -> dict[str, Any]:
        """``{value, low, high}``, and for a proportion its ``n`` and ``small_n``."""
        out: dict[str, Any] = {"value": self.value, "low": self.low, "high": self.high}
        return out if self.n is None else {**out, "n": self.n, "small_n": self.small_n}

    def cell(self, digits: int = 3) -> str:
        """``0.871 [0.85, 0.89]``, ``0.871`` without an interval, ``n/a`` when undefined; a proportion of small n
        ends with :data:`SMALL_N_MARK`."""
        if self.value is None:
            return "n/a"
        mark = SMALL_N_MARK if self.small_n else ""
        if self.low is None or self.high is None:
            return f"{self.value:.{digits}f}{mark}"
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]{mark}"


class Proportion:
    """A vectorised metric: the share of the ``base`` rows that are ``hit`` rows, per resample (NaN without a base
    row). :meth:`Resampler.estimates` gives it a Wilson interval from :meth:`counts`."""

    def __init__(self, hit: npt.ArrayLike, base: npt.ArrayLike):
        self.base = np.asarray(base, dtype=bool)
        self.hit = np.asarray(hit, dtype=bool) & self.base

    def __call__(self, w: np.ndarray) -> np.ndarray:
        num, den = w @ self.hit, w @ self.base
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)

    def counts(self) -> tuple[int, int]:
        """``(hits, n)`` on the rows themselves."""
        return int(self.hit.sum()), int(self.base.sum())


class Resampler:
    """``n_boot`` bootstrap resamples of ``n`` rows, reproducible from ``seed`` (``n_boot`` 0: no intervals)."""

    def __init__(self, n: int, n_boot: int = N_BOOT, seed: int = 0):
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
        """Each metric's point value and interval, all from one pass over the resamples: a :class:`Proportion`'s
        interval is Wilson's (its replicates kept for pairing), any other metric's the bootstrap percentile one."""
        reps: dict[str, list[np.ndarray]] = {k: [] for k in metrics}
        for block in (self.blocks() if self.n_boot > 0 else ()):
            for key, metric in metrics.items():
                reps[key].append(np.asarray(metric(block), dtype=np.float64))
        out = {}
        for key, metric in metrics.items():
            replicates = np.concatenate(reps[key]) if reps[key] else None
            if isinstance(metric, Proportion):
                out[key] = Estimate.proportion(*metric.counts(), reps=replicates, interval=self.n_boot > 0)
            else:
                out[key] = Estimate.of(self.point(metric), replicates)
        return out


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


def simultaneous_differences(base: Estimate, others: Mapping[str, Estimate], level: float = LEVEL
                             ) -> dict[str, Estimate]:
    """Each ``other - base`` with intervals that hold for all ``others`` at once (a max-statistic bootstrap): all
    replicates come from one :class:`Resampler` (same rows, ``n_boot`` and seed), so each resample gives every
    candidate's difference on the same rows. The lower ends are ``d_c - q s_c`` with ``s_c`` the standard deviation
    of candidate c's replicates ``D_c`` and ``q`` the ``(1 + level) / 2`` quantile over the resamples of
    ``max_c (d_c - D_c) / s_c`` (how far the worst candidate's replicate falls below its point value, in its own
    standard deviations: the max-t statistic); the upper ends likewise with ``max_c (D_c - d_c) / s_c``. With one
    candidate they are :func:`paired_difference`'s percentile interval; with many, wider by the best-of-many effect.
    Resamples where a difference is undefined (NaN) are left out; a candidate without replicates gets no interval."""
    out = {k: Estimate(None) if base.value is None or e.value is None else Estimate(e.value - base.value)
           for k, e in others.items()}
    names = [k for k, e in others.items() if out[k].value is not None and e.reps is not None]
    if not names or base.reps is None:
        return out
    values = np.asarray([out[k].value for k in names], dtype=np.float64)
    reps = np.stack([np.asarray(others[k].reps) - base.reps for k in names])      # [candidates, resamples]
    deviations = reps[:, np.all(np.isfinite(reps), axis=0)] - values[:, None]
    if deviations.shape[1] == 0:
        return out
    # studentized (max-t): each candidate's deviations in its own standard deviations, so one noisy candidate does
    # not widen the others' intervals (a candidate equal to the base, sd 0, gets none)
    sd = deviations.std(axis=1)
    z = deviations / np.where(sd > 0, sd, 1.0)[:, None]
    tail = 100 * (1 + level) / 2
    below, above = (float(np.percentile(np.max(d, axis=0), tail)) for d in (-z, z))
    for i, k in enumerate(names):
        v = float(values[i])
        out[k] = Estimate(v, v - below * float(sd[i]), v + above * float(sd[i]), reps[i])
    return out
