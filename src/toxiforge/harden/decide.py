"""The ship rule of ``toxiforge harden`` (issue 55, item 2): which of the 2 × rounds candidates (each arm of each
round), if any, is shown better than round 0 beyond noise, and whether the guard slice can show it.

* **The reference** (:func:`reference_of`): on the guard slice, the slice's reference (guardset.py: C_0's recipe
  retrained on --data less the slice, or C_0 where none could be trained: a judge, or C_0 trained here on --data less
  the slice; C_0 of an unknown recipe may have trained on the slice, which flatters it and makes the rule stricter,
  and the report says so). Without a slice (``--no-guard-slice`` with ``--eval``), C_0 on the eval sets (the mean
  ROC AUC over them).
* **Better beyond noise, corrected for the best of many** (:func:`candidates`): every candidate's paired ROC AUC
  difference to the reference on the same resamples of the same rows (the audit's :class:`~toxiforge.intervals.
  Resampler`, so all candidates share them), with intervals that hold for all candidates at once
  (:func:`~toxiforge.intervals.simultaneous_differences`, a max-statistic bootstrap). A candidate clears when the
  simultaneous lower end is above ``+margin`` (``--ship-margin``, default :data:`DEFAULT_SHIP_MARGIN`).
* **No rise in errors**: FPR, FPR_NOI and (on a HateCheck set) over-blocking, the benign errors, and FNR, on every
  set the paired check measured, must be *shown* not to rise beyond ``--fpr-tolerance``: the upper end of the paired
  check's 95% interval (guard.json's rows, the one rule's numbers) at most ``+tolerance``. The paired check stops
  the loop when a rise is shown (the interval wholly beyond); shipping needs the opposite shown. FNR since the
  proof's seed 1 (docs/harden.md): its best-ranked round, held by ``--calibrate`` to C_0's benign calls on the
  cases naming a group, ranked better (ROC AUC +0.096) and missed 9.5 points more hateful cases there (FNR +0.095
  [+0.059, +0.132]), a trade a team would not call better.
* **The decision sets sized for the decision** (:func:`check_decision_sets`, before any attack; the guard slice,
  or the eval sets with ``--no-guard-slice``): the smallest ROC AUC change they detect is the half-width of the
  reference's 95% bootstrap AUC interval on them, at least the Wilson one's (:func:`detectable`; one classifier's
  interval: a paired difference of two similar classifiers is usually narrower, a simultaneous one over many
  wider). When it is above a margin the user asked for (``--ship-margin`` > 0), the run is refused, naming the
  ``--guard-slice-size`` (or the eval rows) that would do (half-widths shrink as one over the square root of the
  rows); at the default margin 0 the run goes on and says what the sets can detect (refused only when they give no
  interval at all). The error rates likewise (:func:`detectable_rates`), per set: FPR on its benign rows and FNR on
  its toxic rows, each the half-width of the reference's Wilson interval, and how many of those rows a round may
  classify otherwise than the reference (flips both ways, at no net change) and still show its FPR not up beyond
  ``--fpr-tolerance``: a paired difference's half-width is about z·√(rows that differ) / rows (McNemar), so at most
  (tolerance · rows / z)². A retrained classifier differs from C_0 on far more rows than that on a set of a few
  hundred benign rows (the proof in docs/harden.md: ±0.05 on 533 against 0.02), so the run says so before any
  attack; the report says it again from the rounds' intervals (ship.py).

A round found worse by the paired check is a candidate too (it counts among those chosen from) but never ships.
Among the candidates that clear every part, the one with the best ROC AUC ships; C_0 otherwise, and ``why`` says
which figure of the best-ranked candidate fell short and by how much.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from toxiforge.data.examples import LabeledData
from toxiforge.errors import InputError
from toxiforge.harden.guardset import REFERENCE, SHIP_RATE_CHECKS, START, GuardCheck, Tolerance
from toxiforge.intervals import Estimate, proportion_interval, simultaneous_differences

# ROC AUC. 0: better beyond noise (the simultaneous lower end above 0) is enough. A positive margin is asked for
# explicitly: a 300-row slice detects about ±0.045 at AUC 0.7, so a margin of 0.01 needs several thousand rows, and a
# default that refused most runs at the start would teach users to turn the rule off.
DEFAULT_SHIP_MARGIN = 0.0
AUC_KEY = "accuracy.roc_auc"


@dataclass(frozen=True)
class Candidate:
    """One arm of one round: its ROC AUC on the decision sets, its simultaneous difference to the reference
    (``gain``) and why it cannot ship (``short``: empty when it can)."""

    round: int
    arm: str
    name: str
    folder: str
    auc: float | None
    gain: Estimate
    short: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"round": self.round, "arm": self.arm, "name": self.name, "folder": self.folder, "auc": self.auc,
                "gain": self.gain.to_dict(), "ships": not self.short, "short": list(self.short)}


def reference_of(guard: GuardCheck, slice_: LabeledData | None) -> tuple[str, str]:
    """The decision's reference, ``(name, spec)`` (module docstring)."""
    if slice_ is None or guard.reference == guard.start:
        return START, guard.start
    return REFERENCE, guard.reference


def decision_auc(guard: GuardCheck, name: str, spec: str, sets: Sequence[LabeledData]) -> Estimate:
    """ROC AUC with its replicates on ``sets`` (the slice, or the eval sets: their mean, replicate by replicate)."""
    from toxiforge.audit.compare import headline
    from toxiforge.audit.headlines import section_of

    found = [headline(s, *section_of(AUC_KEY)) for s in guard.sections(name, spec, sets).values()]
    defined = [e for e in found if e is not None and e.value is not None]
    if len(defined) <= 1:
        return defined[0] if defined else Estimate(None)
    stacked = [e.reps for e in defined if e.reps is not None]
    reps = np.mean(stacked, axis=0) if len(stacked) == len(defined) else None
    return Estimate.of(float(np.mean([e.value for e in defined])), reps)


def found_worse(check: Mapping[str, Any], name: str) -> bool:
    """Whether a round's paired check found classifier ``name`` worse than round 0 on any set and metric."""
    return any(row["worse"] for entry in check.get("sets", {}).values()
               for row in entry["arms"].get(name, {}).values())


def gain_short(name: str, gain: Estimate, margin: float) -> list[str]:
    """Why ``gain`` (a simultaneous difference) does not clear ``+margin``; nothing when it does."""
    if gain.value is None or gain.low is None:
        return [f"{name}: ROC AUC has no interval against round 0 (one label only, or no resamples)"]
    if gain.low > margin:
        return []
    return [f"{name}: ROC AUC {gain.value:+.3f}, simultaneous lower end {gain.low:+.3f}, needs > {margin:+.3f} "
            f"margin: short by {margin - gain.low:.3f}"]


def rates_short(check: Mapping[str, Any], name: str, rate: float) -> list[str]:
    """Each error rate the ship rule checks (:data:`~toxiforge.harden.guardset.SHIP_RATE_CHECKS`) whose paired
    interval's upper end is above ``+rate``."""
    from toxiforge.audit.glossary import name as term
    from toxiforge.audit.headlines import section_of

    out = []
    for set_name, entry in check.get("sets", {}).items():
        rows = entry["arms"].get(name, {})
        for key in SHIP_RATE_CHECKS:
            row = rows.get(section_of(key)[1])
            if row is None:
                continue
            d = row["difference"]
            high = d["value"] if d.get("high") is None else d["high"]
            if high > rate:
                out.append(f"{name}: {term(key)} on {set_name} {d['value']:+.3f}, upper end {high:+.3f}, needs "
                           f"<= +{rate:g}: over by {high - rate:.3f}")
    return out


def candidates(guard: GuardCheck, rounds: int, arms: Sequence[str], eval_sets: Sequence[LabeledData],
               slice_: LabeledData | None) -> list[Candidate]:
    """Every measured round's arms, judged by the ship rule (module docstring)."""
    sets = decision_sets(slice_, eval_sets)
    found = {(r, arm): guard.results[r].get("specs", {}).get(f"round-{r}-{arm}",
                                                             str(guard.out / f"round-{r}" / arm / "model"))
             for r in range(1, rounds + 1) if r in guard.results for arm in arms}
    if not found or not sets:
        return []
    base = decision_auc(guard, *reference_of(guard, slice_), sets)
    aucs = {(r, arm): decision_auc(guard, f"round-{r}-{arm}", spec, sets) for (r, arm), spec in found.items()}
    gains = simultaneous_differences(base, {f"round-{r}-{arm}": e for (r, arm), e in aucs.items()})
    tol: Tolerance = guard.tolerance
    out = []
    for (r, arm), spec in found.items():
        name, check = f"round-{r}-{arm}", guard.results[r]
        short = ([f"{name}: found worse than round 0 by the paired check"] if found_worse(check, name) else [])
        short += gain_short(name, gains[name], tol.margin) + rates_short(check, name, tol.rate)
        out.append(Candidate(r, arm, name, spec, aucs[(r, arm)].value, gains[name], tuple(short)))
    return out


def half_width(estimate: Estimate) -> float:
    """Half the width of ``estimate``'s interval (infinite without one)."""
    if estimate.low is None or estimate.high is None:
        return math.inf
    return (estimate.high - estimate.low) / 2


def decision_sets(slice_: LabeledData | None, eval_sets: Sequence[LabeledData]) -> list[LabeledData]:
    """The sets the ship rule decides on: the guard slice, or without one the eval sets."""
    return [slice_] if slice_ is not None else list(eval_sets)


def detectable(guard: GuardCheck, slice_: LabeledData | None,
               eval_sets: Sequence[LabeledData] = ()) -> tuple[float, str]:
    """The smallest ROC AUC change the decision sets detect (module docstring), and what it is. The bootstrap
    interval collapses where the reference ranks a set perfectly (AUC 1 on every resample of a few rows), so the
    half-width is at least that of the Wilson interval of the AUC read as a share of the sets' rows, which does
    not collapse at 1 (intervals.py: why proportions get Wilson's)."""
    name, spec = reference_of(guard, slice_)
    sets = decision_sets(slice_, eval_sets)
    rows = sum(len(d) for d in sets)
    where = (f"the {rows}-row guard slice" if slice_ is not None else
             f"the eval set(s) {', '.join(d.name for d in sets)} ({rows} rows, their mean)")
    auc = decision_auc(guard, name, spec, sets)
    if auc.value is None or not rows:
        return math.inf, f"{name} has no ROC AUC on {where}"
    low, high = proportion_interval(round(auc.value * rows), rows)
    h = max(half_width(auc), (high - low) / 2)
    return h, (f"the half-width of {name}'s 95% ROC AUC interval on {where}: its bootstrap interval's, at least "
               "Wilson's on as many rows")


# each error rate the ship rule checks on rows of its own, and those rows (its estimate's n); over-blocking is FPR on
# a HateCheck set
RATE_ROWS = {"accuracy.fpr": "benign rows", "lexical.fpr.noi": "benign rows naming a group",
             "accuracy.fnr": "toxic rows"}
Z95 = 1.959964


def ship_rate_names() -> str:
    """The error rates the ship rule checks, as the report names them: "FPR, FPR NOI, over-blocking, FNR"."""
    from toxiforge.audit.glossary import name as term

    return ", ".join(term(key) for key in SHIP_RATE_CHECKS)


def detectable_rates(guard: GuardCheck, slice_: LabeledData | None,
                     eval_sets: Sequence[LabeledData] = ()) -> dict[str, dict[str, dict[str, Any]]]:
    """Per decision set (by name), per error rate (FPR, FPR_NOI, FNR): the reference's rate, the rows it is a share
    of, the smallest change the set detects (the half-width of the Wilson interval) and ``may_differ``, the most of
    those rows a round may classify otherwise than the reference and still show the rate not up beyond
    ``--fpr-tolerance`` (module docstring)."""
    from toxiforge.audit.compare import headline
    from toxiforge.audit.headlines import section_of

    name, spec = reference_of(guard, slice_)
    sets = decision_sets(slice_, eval_sets)
    found = guard.sections(name, spec, sets)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for data in sets:
        for key in RATE_ROWS:
            rate = headline(found[data.name], *section_of(key))
            if rate is None or rate.value is None or not rate.n:
                continue
            rows = rate.n
            low, high = proportion_interval(round(rate.value * rows), rows)
            out.setdefault(data.name, {})[key] = {
                "value": rate.value, "rows": rows, "detectable": (high - low) / 2,
                "may_differ": math.floor((guard.tolerance.rate * rows / Z95) ** 2)}
    return out


def rates_line(rates: Mapping[str, Mapping[str, Mapping[str, Any]]], tolerance: float) -> str:
    """One sentence: what each decision set detects of each error rate, and how few rows a round may change
    (above)."""
    from toxiforge.audit.glossary import name as term

    lines = []
    for set_name, found in rates.items():
        parts = [f"{term(key)} changes of ±{r['detectable']:.3f} on its {r['rows']} {RATE_ROWS[key]}"
                 for key, r in found.items()]
        if not parts:
            continue
        line = f"{set_name} detects " + " and ".join(parts)
        # the rates whose rows are too few for any round to differ freely (a count of at least the rows binds nothing)
        bound = [(key, r) for key, r in found.items() if r["may_differ"] < r["rows"]]
        if bound:
            line += (f"; a round shows its {' and '.join(term(k) for k, _ in bound)} there not up beyond "
                     f"+{tolerance:g} only when it classifies at most "
                     + " and ".join(f"{r['may_differ']} of the {r['rows']} {RATE_ROWS[k]}" for k, r in bound)
                     + " otherwise than the reference (at no net change; more rows or a larger --fpr-tolerance "
                     "allow more)")
        lines.append(line)
    return "; ".join(lines)


def check_decision_sets(guard: GuardCheck, slice_: LabeledData | None,
                        eval_sets: Sequence[LabeledData] = ()) -> GuardCheck:
    """``guard``, once the decision sets (the guard slice, or the eval sets without one) are found able to detect
    ``--ship-margin`` (module docstring); else InputError. Without decision sets, or with ``--ship-margin 1`` (no
    round ships), there is nothing to check."""
    margin = guard.tolerance.margin
    sets = decision_sets(slice_, eval_sets)
    if not sets or margin >= 1:
        return guard
    what_sets, verb = ("guard slice", "detects") if slice_ is not None else ("decision sets", "detect")
    rates = rates_line(detectable_rates(guard, slice_, eval_sets), guard.tolerance.rate)
    if rates:
        guard.log(f"{what_sets}: {rates}")
    h, what = detectable(guard, slice_, eval_sets)
    if slice_ is None and margin <= 0 and math.isinf(h):  # eval sets the user chose: measured on, never refused
        guard.log(f"decision sets: no ROC AUC interval ({what}): no round can be shown better, so C_0 will ship")
        return guard
    if h <= margin or (margin <= 0 and not math.isinf(h)):  # margin 0: any gain shown beyond noise ships; say what
        if margin <= 0:
            guard.log(f"{what_sets}: {verb} ROC AUC changes of ±{h:.3f} ({what}); a round ships when its gain is "
                      "shown above 0 (--ship-margin to ask for more)")
            return guard
        guard.log(f"{what_sets}: {verb} ROC AUC changes of ±{h:.3f} ({what}), within --ship-margin {margin:g}")
        return guard
    shown = "no interval" if math.isinf(h) else f"±{h:.3f}"
    rows = sum(len(d) for d in sets)
    grown = math.inf if math.isinf(h) else math.ceil(rows * (h / margin) ** 2)
    if slice_ is None:
        need = ("eval sets with more rows of both labels" if math.isinf(h) else
                f"eval sets of about {grown} rows in all (half-widths shrink as 1/√rows: {rows} × ({h:.3f} / "
                f"{margin:g})²), or a guard slice (no --no-guard-slice) of --guard-slice-size {grown}")
    else:
        need = "more rows of both labels" if math.isinf(h) else (
            f"--guard-slice-size {grown} (half-widths shrink as 1/√rows: "
            f"{rows} × ({h:.3f} / {margin:g})²; --data needs twice that many distinct texts)")
    raise InputError(f"the {what_sets} {verb} ROC AUC changes of {shown} ({what}), more than --ship-margin "
                     f"{margin:g}: no round could be shown better than round 0 by the margin",
                     hint=f"pass {need} in a new -o, or --ship-margin {min(1.0, h):.3f} to ship only gains that "
                          "large (--ship-margin 1: never ship a round)")
