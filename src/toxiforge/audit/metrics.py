"""The audit's numbers for one classifier on one dataset, each a vectorised metric over bootstrap resamples
(:mod:`toxiforge.intervals`): accuracy, per-group and Borkan et al.'s bias AUCs, calibration.

* **Accuracy**: ROC AUC, PR AUC (average precision), F1 of the toxic class, accuracy, FPR and FNR at the decision
  rule P(toxic) > 0.5 (:func:`~toxiforge.records.is_toxic`, every stage's rule), FPR at 95% TPR (the ROC point with
  the largest threshold whose TPR is at least 0.95, i.e. the smallest FPR there). A set of one label (an attack
  run of toxic statements) has no ROC AUC, PR AUC or FPR at 95% TPR (None), nor F1 when every row is benign;
  its FNR (all toxic) or FPR (all benign), accuracy and calibration remain.
* **Groups** (Borkan et al. 2019, "Nuanced metrics for measuring unintended bias", the Jigsaw competition's): per
  group g, subgroup AUC = AUC on g's rows; BPSN AUC = AUC on the background's toxic rows and g's benign rows;
  BNSP AUC = AUC on the background's benign rows and g's toxic rows (background = every row not in g, rows without
  a group included). Also n, FPR and FNR at the decision rule. The Jigsaw final score is
  ``0.25 * overall AUC + sum over the three bias AUCs of 0.25 * M_p`` with ``M_p = (mean_g m_g^p)^(1/p)``,
  ``p = -5``, over the groups whose three bias AUCs are defined.
* **Calibration**: expected calibration error of P(toxic) against the label over 15 equal-width bins
  (``sum_b n_b / n * |mean label - mean P| in b``; the last bin includes 1.0), Brier score ``mean (P - y)^2``.

Intervals: a proportion (accuracy, FPR, FNR at the decision rule, per group too; HateCheck's accuracies and
over-blocking; the lexical FPRs and FNRs) is a :class:`~toxiforge.intervals.Proportion`: it is resampled like every
metric and keeps its replicates (``Estimate.reps``) for the paired differences between classifiers, but the
interval it shows is the Wilson score interval of its own counts (it does not collapse to [0, 0] at 0 of 22), with
its ``n`` (fewer than :data:`~toxiforge.intervals.SMALL_N` is marked in the report). Every other number (AUCs, PR
AUC, F1, FPR at 95% TPR, the final score, ECE, Brier) shows the bootstrap percentile interval of its replicates.

Departure from calling scikit-learn per resample: every metric is computed on a whole block of resamples at once
from row weights (:mod:`toxiforge.intervals`), ROC AUC, average precision and the ROC point from the toxic
and benign weight at each distinct score (:class:`ByValue`), so 1,000 resamples of the 22 AUCs of a HateCheck
audit take a fraction of a second instead of tens of seconds. The tests check each against scikit-learn's
``roc_auc_score``, ``average_precision_score``, ``roc_curve``, ``f1_score`` and ``brier_score_loss`` on
resampled rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from toxiforge.intervals import Estimate, Metric, Proportion, Resampler
from toxiforge.records import TOXIC_THRESHOLD

ECE_BINS = 15            # equal-width bins of P(toxic) (Guo et al. 2017's choice; the issue's)
TARGET_TPR = 0.95        # FPR at 95% TPR
POWER = -5               # Borkan et al.'s generalized-mean exponent
WEIGHT = 0.25            # weight of the overall AUC and of each bias AUC in the Jigsaw final score
BIAS_AUCS: tuple[str, ...] = ("subgroup_auc", "bpsn_auc", "bnsp_auc")
RATE_METRICS: tuple[str, ...] = ("fpr", "fnr")   # at the decision rule
ACCURACY_METRICS: tuple[str, ...] = ("roc_auc", "pr_auc", "f1", "accuracy", "fpr_at_95_tpr", *RATE_METRICS)


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1), np.nan)


def _mask(n: int, include: np.ndarray | None) -> np.ndarray:
    return np.ones(n, dtype=bool) if include is None else np.asarray(include, dtype=bool)


class ByValue:
    """Per resample, the weight of toxic (``pos``) and benign (``neg``) rows at each distinct score, scores
    ascending (``[K, b]``: one column per resample, so the sums along scores run over contiguous memory): what
    ROC AUC, average precision and the ROC curve are made of, with ties kept together as scikit-learn keeps
    them."""

    def __init__(self, labels: np.ndarray, scores: np.ndarray, include: np.ndarray | None = None):
        from scipy.sparse import csr_matrix  # type: ignore[import-untyped]

        y = np.asarray(labels) == 1
        keep = _mask(len(y), include)
        values, inv = np.unique(np.asarray(scores, dtype=np.float64), return_inverse=True)
        rows = np.arange(len(y))
        # [K, n] sparse sums: row k adds up the weights of the toxic (benign) rows whose score is values[k]
        self.pos, self.neg = (csr_matrix(((keep & side).astype(np.float64), (inv, rows)), shape=(len(values), len(y)))
                              for side in (y, ~y))

    def split(self, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        wt = np.ascontiguousarray(w.T)
        return np.asarray(self.pos @ wt), np.asarray(self.neg @ wt)


def auc_metric(labels: np.ndarray, scores: np.ndarray, include: np.ndarray | None = None) -> Metric:
    """ROC AUC per resample over the rows where ``include`` is true (all rows when None); NaN without both
    classes. Mann-Whitney: each toxic row counts the benign rows scored below it, and half those tied with it."""
    by_value = ByValue(labels, scores, include)

    def metric(w: np.ndarray) -> np.ndarray:
        pos, neg = by_value.split(w)
        below = np.cumsum(neg, axis=0) - neg
        n1, n0 = pos.sum(axis=0), neg.sum(axis=0)
        return _ratio((pos * (below + 0.5 * neg)).sum(axis=0), n1 * n0)

    return metric


def pr_auc_metric(labels: np.ndarray, scores: np.ndarray) -> Metric:
    """Average precision (scikit-learn's definition: precision at each distinct threshold, weighted by the recall
    it adds); NaN without a toxic row."""
    by_value = ByValue(labels, scores)

    def metric(w: np.ndarray) -> np.ndarray:
        pos, neg = (a[::-1] for a in by_value.split(w))   # thresholds from the highest score down
        tp, fp = np.cumsum(pos, axis=0), np.cumsum(neg, axis=0)
        precision = _ratio(tp, tp + fp)
        return _ratio((pos * np.nan_to_num(precision)).sum(axis=0), pos.sum(axis=0))

    return metric


def fpr_at_tpr_metric(labels: np.ndarray, scores: np.ndarray, target: float = TARGET_TPR) -> Metric:
    """FPR at the largest threshold whose TPR is at least ``target`` (the smallest FPR on the ROC curve there)."""
    by_value = ByValue(labels, scores)

    def metric(w: np.ndarray) -> np.ndarray:
        pos, neg = (a[::-1] for a in by_value.split(w))
        n1, n0 = pos.sum(axis=0), neg.sum(axis=0)
        tpr = _ratio(np.cumsum(pos, axis=0), n1[None, :])
        first = np.argmax(tpr >= target - 1e-12, axis=0)   # TPR reaches 1 at the lowest threshold, so one exists
        fp = np.take_along_axis(np.cumsum(neg, axis=0), first[None, :], axis=0)[0]
        return np.where(n1 > 0, _ratio(fp, n0), np.nan)

    return metric


def rate_metric(labels: np.ndarray, preds: np.ndarray, *, gold: int, predicted: int,
                include: np.ndarray | None = None) -> Metric:
    """Share of rows with label ``gold`` (within ``include``) predicted ``predicted``: FPR is (0, 1), FNR (1, 0);
    NaN when there is no such row. A proportion: Wilson interval, replicates kept for pairing."""
    base = (np.asarray(labels) == gold) & _mask(len(labels), include)
    return Proportion(base & (np.asarray(preds) == predicted), base)


def accuracy_metric(labels: np.ndarray, preds: np.ndarray, include: np.ndarray | None = None) -> Metric:
    """Share of rows (within ``include``) predicted their label; a proportion, as :func:`rate_metric`."""
    keep = _mask(len(labels), include)
    return Proportion((np.asarray(labels) == np.asarray(preds)) & keep, keep)


def f1_metric(labels: np.ndarray, preds: np.ndarray) -> Metric:
    """F1 of the toxic class; NaN with no toxic gold row and no toxic prediction."""
    y, p = np.asarray(labels) == 1, np.asarray(preds) == 1
    tp, wrong = y & p, y ^ p   # F1 = 2 TP / (2 TP + FP + FN)
    return lambda w: _ratio(2 * (w @ tp), 2 * (w @ tp) + w @ wrong)


def bin_index(scores: npt.ArrayLike, bins: int = ECE_BINS) -> np.ndarray:
    """The equal-width bin of each score in [0, 1]; 1.0 falls in the last bin."""
    return np.clip((np.asarray(scores, dtype=np.float64) * bins).astype(np.int64), 0, bins - 1)


def ece_metric(labels: np.ndarray, scores: np.ndarray, bins: int = ECE_BINS) -> Metric:
    """``sum_b |sum over b's rows of (y - P)| / n``, which is ``sum_b n_b / n * |mean y - mean P|`` in bin b."""
    y, s = np.asarray(labels, dtype=np.float64), np.asarray(scores, dtype=np.float64)
    gaps = np.zeros((len(y), bins))
    gaps[np.arange(len(y)), bin_index(s, bins)] = y - s
    return lambda w: np.abs(w @ gaps).sum(axis=1) / w.sum(axis=1)


def brier_metric(labels: np.ndarray, scores: np.ndarray) -> Metric:
    sq = (np.asarray(scores, dtype=np.float64) - np.asarray(labels, dtype=np.float64)) ** 2
    return lambda w: (w @ sq) / w.sum(axis=1)


def reliability(labels: npt.ArrayLike, scores: npt.ArrayLike, bins: int = ECE_BINS) -> list[dict[str, Any]]:
    """Per bin: its range, n, mean P(toxic) and share toxic (None for an empty bin): the reliability diagram."""
    y, s = np.asarray(labels, dtype=np.float64), np.asarray(scores, dtype=np.float64)
    b = bin_index(s, bins)
    out = []
    for i in range(bins):
        inside = b == i
        n = int(inside.sum())
        out.append({"low": i / bins, "high": (i + 1) / bins, "n": n,
                    "mean_score": float(s[inside].mean()) if n else None,
                    "share_toxic": float(y[inside].mean()) if n else None})
    return out


def power_mean(values: np.ndarray, p: float = POWER, axis: int = -1) -> np.ndarray:
    """``(mean v^p)^(1/p)`` over ``axis``, ignoring NaN (NaN when all are)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.nanmean(np.power(values, p), axis=axis) ** (1.0 / p)


@dataclass
class GroupStats:
    """One target group: n, toxic, and the estimates ``auc`` (= subgroup AUC), ``fpr``, ``fnr``,
    ``subgroup_auc``, ``bpsn_auc``, ``bnsp_auc``."""

    n: int
    toxic: int
    metrics: dict[str, Estimate] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"n": self.n, "toxic": self.toxic, **{k: v.to_dict() for k, v in self.metrics.items()}}


def accuracy_section(labels: np.ndarray, scores: np.ndarray, resampler: Resampler,
                     threshold: float = TOXIC_THRESHOLD) -> dict[str, Estimate]:
    """:data:`ACCURACY_METRICS`; those a set of one label does not have are ``Estimate(None)`` (module docstring:
    average precision would be 1 on an all-toxic set and F1 0 on an all-benign one, whatever the classifier)."""
    preds = (np.asarray(scores) > threshold).astype(np.int64)
    toxic = int((np.asarray(labels) == 1).sum())
    metrics: dict[str, Metric] = {"accuracy": accuracy_metric(labels, preds),
                                  "fpr": rate_metric(labels, preds, gold=0, predicted=1),
                                  "fnr": rate_metric(labels, preds, gold=1, predicted=0)}
    if toxic:
        metrics["f1"] = f1_metric(labels, preds)
    if 0 < toxic < len(labels):
        metrics |= {"roc_auc": auc_metric(labels, scores), "pr_auc": pr_auc_metric(labels, scores),
                    "fpr_at_95_tpr": fpr_at_tpr_metric(labels, scores)}
    est = resampler.estimates(metrics)
    return {k: est.get(k, Estimate(None)) for k in ACCURACY_METRICS}


def calibration_section(labels: np.ndarray, scores: np.ndarray, resampler: Resampler) -> dict[str, Estimate]:
    return resampler.estimates({"ece": ece_metric(labels, scores), "brier": brier_metric(labels, scores)})


def group_section(labels: np.ndarray, scores: np.ndarray, groups: Sequence[str | None], resampler: Resampler,
                  threshold: float = TOXIC_THRESHOLD) -> tuple[dict[str, GroupStats], Estimate | None]:
    """Per-group stats and the Jigsaw final score (None when no group has its three bias AUCs)."""
    y = np.asarray(labels, dtype=np.int64)
    s = np.asarray(scores, dtype=np.float64)
    preds = (s > threshold).astype(np.int64)
    g = np.asarray([x or "" for x in groups], dtype=object)
    names = sorted({x for x in g if x})
    metrics: dict[str, Metric] = {"overall": auc_metric(y, s)}
    for name in names:
        sub = g == name
        metrics |= {f"{name}\0subgroup_auc": auc_metric(y, s, sub),
                    f"{name}\0bpsn_auc": auc_metric(y, s, (~sub & (y == 1)) | (sub & (y == 0))),
                    f"{name}\0bnsp_auc": auc_metric(y, s, (~sub & (y == 0)) | (sub & (y == 1))),
                    f"{name}\0fpr": rate_metric(y, preds, gold=0, predicted=1, include=sub),
                    f"{name}\0fnr": rate_metric(y, preds, gold=1, predicted=0, include=sub)}
    est = resampler.estimates(metrics)
    stats: dict[str, GroupStats] = {}
    for name in names:
        sub = g == name
        mine = {k.split("\0")[1]: v for k, v in est.items() if k.startswith(name + "\0")}
        stats[name] = GroupStats(int(sub.sum()), int(y[sub].sum()), {"auc": mine["subgroup_auc"], **mine})
    scored = [n for n in names if all(stats[n].metrics[k].defined for k in BIAS_AUCS)]
    if not scored:
        return stats, None
    return stats, final_score(est["overall"], [stats[n] for n in scored])


def final_score(overall: Estimate, groups: Sequence[GroupStats]) -> Estimate:
    """Borkan et al.'s combination of the overall AUC and the power means of the three bias AUCs (point value
    and, when the estimates have replicates, per resample)."""
    def combine(overall_value: np.ndarray, bias: np.ndarray) -> np.ndarray:   # bias: [..., groups, 3]
        return WEIGHT * overall_value + WEIGHT * power_mean(bias, axis=-2).sum(axis=-1)

    point = np.array([[gs.metrics[k].value for k in BIAS_AUCS] for gs in groups], dtype=np.float64)
    value = float(combine(np.asarray(overall.value), point))
    reps = None
    if overall.reps is not None and all(gs.metrics[k].reps is not None for gs in groups for k in BIAS_AUCS):
        stacked = np.stack([np.stack([np.asarray(gs.metrics[k].reps) for k in BIAS_AUCS], axis=-1)
                            for gs in groups], axis=1)
        reps = combine(overall.reps, stacked)
    return Estimate.of(value, reps)
