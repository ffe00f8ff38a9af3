"""Zhou et al.'s (2021) bias metrics from plain arrays: dataset bias (Table 1) and classifier bias (Tables 2, 4).

* **Dataset bias**: Pearson's R between the gold label (1 = toxic) and each category's presence (NOI, OI, ONI,
  TOXTRIG: 0/1), and between the label and p(AAE) itself (the continuous value, as upstream's
  ``tools/get_stats.py`` does with its ``aav`` column); per category n and % toxic.
* **Classifier bias**: accuracy and F1 of the toxic class overall; per category F1 and the false-positive rate on
  the category's benign examples, FPR = FP / (FP + TN) (upstream's ``1 - recall`` of the benign class); the same
  per target group. A prediction is toxic when its score is > ``threshold`` (0.5, as upstream's
  ``1 if i > 0.5``: :func:`~toxiforge.records.is_toxic`, the rule of every stage).
* **AAE membership** (n, % toxic, F1, FPR_AAE): the texts whose most probable dialect is AAE (upstream's
  ``dialect_argmax == 'aav'``), or with ``aae_threshold=t`` those with p(AAE) > t. Texts the dialect model could
  not score (too few in-vocabulary tokens) are left out of R_AAE and are never AAE.

Empty cells instead of NaN: a metric that is undefined (a category with no examples or no benign examples, a
single-class label column, a constant column, F1 with no toxic gold or predicted example) is None, and the
report says why in ``notes``. Departure: sklearn's ``f1_score`` returns 0.0 (with a warning) where toxiforge
leaves the cell empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from toxiforge.errors import InputError
from toxiforge.records import TOXIC_THRESHOLD, is_toxic

LEXICAL: tuple[str, ...] = ("noi", "oi", "oni", "toxtrig")
SLICES: tuple[str, ...] = ("noi", "oi", "oni", "aae")   # categories with F1 / FPR (Tables 2 and 4)
R_KEYS: tuple[str, ...] = ("noi", "oi", "oni", "toxtrig", "aae")


def pearson_r(x: np.ndarray, y: np.ndarray) -> float | None:
    """Pearson's R, or None when either column is constant (or has < 2 values)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    xc, yc = x - x.mean(), y - y.mean()
    return float(np.clip((xc @ yc) / np.sqrt((xc @ xc) * (yc @ yc)), -1.0, 1.0))


def f1_toxic(labels: np.ndarray, preds: np.ndarray) -> float | None:
    """F1 of the toxic class, None when there is no toxic gold label and no toxic prediction."""
    tp = int(np.sum((labels == 1) & (preds == 1)))
    fp = int(np.sum((labels == 0) & (preds == 1)))
    fn = int(np.sum((labels == 1) & (preds == 0)))
    return None if tp + fp + fn == 0 else 2 * tp / (2 * tp + fp + fn)


def false_positive_rate(labels: np.ndarray, preds: np.ndarray) -> float | None:
    """FP / (FP + TN) over the benign examples, None when there is none."""
    benign = labels == 0
    return None if not benign.any() else float(np.mean(preds[benign] == 1))


@dataclass
class SliceStats:
    """One category or group: size, toxic share, and (with predictions) F1 and FPR on its benign examples."""

    n: int
    toxic: int
    f1: float | None = None
    fpr: float | None = None

    @property
    def benign(self) -> int:
        return self.n - self.toxic

    @property
    def pct_toxic(self) -> float | None:
        return None if self.n == 0 else 100.0 * self.toxic / self.n

    def as_dict(self) -> dict[str, Any]:
        return {"n": self.n, "n_benign": self.benign, "pct_toxic": self.pct_toxic, "f1": self.f1, "fpr": self.fpr}


@dataclass
class BiasReport:
    """Every number ``toxiforge bias measure`` reports; :meth:`to_json` has the documented keys."""

    n: int
    toxic: int
    pearson: dict[str, float | None]
    slices: dict[str, SliceStats]
    groups: dict[str, SliceStats]
    accuracy: float | None = None
    f1: float | None = None
    has_predictions: bool = False
    available: dict[str, bool] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    # the rows of each slice (noi, oi, oni, aae: bool per row), for callers that resample them (the audit's
    # intervals); not part of the JSON
    masks: dict[str, np.ndarray] = field(default_factory=dict, repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """JSON-ready: ``pearson_r.{noi,oi,oni,toxtrig,aae}``, ``fpr.{noi,oi,oni,aae}``,
        ``f1.{overall,noi,oi,oni,aae}``, ``accuracy``, ``n.{all,noi,oi,oni,toxtrig,aae}``, ``pct_toxic.{...}``,
        ``n_benign.{...}``, ``groups.{name: {n, n_benign, pct_toxic, f1, fpr}}``, ``available``, ``notes``
        and ``meta``; None (JSON null) marks an empty cell."""
        keys = (*LEXICAL, "aae")

        def count(k: str, value: Any) -> Any:  # an unavailable category has no count, not a zero one
            return value if self.available.get(k, True) else None

        return {
            "pearson_r": {k: self.pearson.get(k) for k in R_KEYS},
            "fpr": {k: self.slices[k].fpr for k in SLICES},
            "f1": {"overall": self.f1, **{k: self.slices[k].f1 for k in SLICES}},
            "accuracy": self.accuracy,
            "n": {"all": self.n, **{k: count(k, self.slices[k].n) for k in keys}},
            "pct_toxic": {"all": None if self.n == 0 else 100.0 * self.toxic / self.n,
                          **{k: count(k, self.slices[k].pct_toxic) for k in keys}},
            "n_benign": {"all": self.n - self.toxic, **{k: count(k, self.slices[k].benign) for k in keys}},
            "groups": {g: s.as_dict() for g, s in self.groups.items()},
            "available": dict(self.available),
            "notes": list(self.notes),
            "meta": dict(self.meta),
        }


def aae_members(p_dialect: np.ndarray, aae_threshold: float | None = None) -> np.ndarray:
    """Bool per row: AAE is the most probable dialect (column 0 of ``[n, 4]`` probabilities), or p(AAE) >
    ``aae_threshold``; rows with NaN (not scored) are False."""
    p = np.asarray(p_dialect, dtype=np.float64)
    scored = ~np.isnan(p).any(axis=1)
    if aae_threshold is None:
        return scored & (np.nan_to_num(p, nan=-1.0).argmax(axis=1) == 0)
    return scored & (np.nan_to_num(p[:, 0], nan=-1.0) > aae_threshold)


def _slice(labels: np.ndarray, mask: np.ndarray, preds: np.ndarray | None) -> SliceStats:
    y = labels[mask]
    stats = SliceStats(n=int(mask.sum()), toxic=int(y.sum()))
    if preds is not None and stats.n:
        stats.f1 = f1_toxic(y, preds[mask])
        stats.fpr = false_positive_rate(y, preds[mask])
    return stats


def measure_bias(labels: Sequence[int], flags: Mapping[str, np.ndarray], *,
                 scores: npt.ArrayLike | None = None, threshold: float = TOXIC_THRESHOLD,
                 p_dialect: np.ndarray | None = None, aae_threshold: float | None = None,
                 groups: Sequence[str | None] | None = None,
                 available: Mapping[str, bool] | None = None) -> BiasReport:
    """The metrics of the module docstring.

    ``flags``: bool arrays ``noi``, ``oi``, ``oni``, ``toxtrig`` (from :func:`toxiforge.bias.tag_texts`);
    ``scores``: P(toxic) or 0/1 predictions (None: dataset bias only); ``p_dialect``: ``[n, 4]`` from
    :func:`toxiforge.bias.predict_dialects` (None: AAE unavailable); ``groups``: target group per row;
    ``available``: categories whose source is missing (their cells stay empty even though their flags exist).
    """
    y = np.asarray(labels)
    if y.ndim != 1 or len(y) == 0:
        raise InputError("no labelled rows to measure", hint="give data with a text and a label per row")
    if not np.isin(y, (0, 1)).all():
        raise InputError("labels must be 0 (benign) or 1 (toxic)", hint="check the label column")
    y = y.astype(np.int64)
    n = len(y)
    avail = {k: True for k in (*LEXICAL, "aae")}
    avail.update(available or {})
    avail["aae"] = avail["aae"] and p_dialect is not None
    notes: list[str] = []
    preds = None
    if scores is not None:
        s = np.asarray(scores, dtype=np.float64)
        if s.shape != y.shape or np.isnan(s).any():
            raise InputError(f"{len(s)} predictions for {n} rows, or some missing",
                             hint="give one score per row (no empty cells)")
        preds = is_toxic(s, threshold).astype(np.int64)
    masks: dict[str, np.ndarray] = {}
    for key in LEXICAL:
        column = flags.get(key)
        if column is None or not avail[key]:
            avail[key] = False
            masks[key] = np.zeros(n, dtype=bool)
            continue
        masks[key] = np.asarray(column, dtype=bool)
        if masks[key].shape != y.shape:
            raise InputError(f"{key} flags have {len(masks[key])} rows, labels {n}", hint="tag the same texts")
    p_aae = None
    if p_dialect is not None:
        p = np.asarray(p_dialect, dtype=np.float64)
        if p.shape != (n, 4):
            raise InputError(f"dialect probabilities have shape {p.shape}, expected ({n}, 4)",
                             hint="pass predict_dialects(texts) for the same texts")
        masks["aae"], p_aae = aae_members(p, aae_threshold), p[:, 0]
    else:
        masks["aae"] = np.zeros(n, dtype=bool)
    single_class = len(np.unique(y)) < 2
    if single_class:
        notes.append(f"the labels have a single class ({'toxic' if y[0] else 'benign'}): Pearson R is undefined")
    pearson: dict[str, float | None] = {}
    for key in LEXICAL:
        pearson[key] = pearson_r(masks[key], y) if avail[key] and not single_class else None
    if p_aae is not None and not single_class:
        scored = ~np.isnan(p_aae)
        pearson["aae"] = pearson_r(p_aae[scored], y[scored])
        if (~scored).any():
            notes.append(f"{int((~scored).sum())} texts had too few in-vocabulary words for the dialect model; "
                         "left out of R_AAE and never AAE")
    else:
        pearson["aae"] = None
    slices = {key: _slice(y, masks[key], preds) for key in (*LEXICAL, "aae")}
    for key in (*LEXICAL, "aae"):
        if not avail[key]:
            notes.append(f"{key.upper()} unavailable: its cells are empty")
        elif slices[key].n == 0:
            notes.append(f"no {key.upper()} example: n = 0, its cells are empty")
    group_stats: dict[str, SliceStats] = {}
    if groups is not None:
        g = np.asarray([x if x is not None else "" for x in groups], dtype=object)
        for name in sorted({x for x in g if x}):
            group_stats[name] = _slice(y, g == name, preds)
    report = BiasReport(n=n, toxic=int(y.sum()), pearson=pearson, slices=slices, groups=group_stats,
                        has_predictions=preds is not None, available=avail, notes=notes, masks=masks,
                        meta={"threshold": threshold,
                              "aae_rule": "argmax" if aae_threshold is None else f"p(AAE) > {aae_threshold}",
                              "r_aae": "Pearson R of the label with p(AAE) itself"})
    if preds is not None:
        report.accuracy = float(np.mean(preds == y))
        report.f1 = f1_toxic(y, preds)
    return report
