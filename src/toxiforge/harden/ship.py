"""How ``toxiforge harden`` ends (issue 48, item 7): the classifier to ship, and ``OUT/audit/``, ``toxiforge
audit``'s report (HTML, Markdown, JSON) of C_0, the round-0 classifier retrained on ``--data`` less the guard slice
(when there is one), each arm's last round and the recommended classifier, on every eval set and the guard slice,
paired against round 0's reference (round-0-retrained where trained, else C_0). Harden calls the audit's code
(:func:`~toxiforge.audit.run.run_audit`, :func:`~toxiforge.audit.report.write_report`); the audit imports nothing
from harden.

**The classifier to ship** (:func:`recommend`): decide.py's ship rule (issue 55): a round ships only when its
paired ROC AUC gain over round 0's reference on the guard slice clears ``--ship-margin`` with the lower end of an
interval simultaneous over all 2 × rounds candidates, and its error rates (the benign ones and FNR) are shown not
to rise beyond ``--fpr-tolerance``; C_0 otherwise, saying which figure fell short and by how much.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from toxiforge.data.examples import LabeledData
from toxiforge.harden.decide import candidates, detectable, detectable_rates, rates_line, reference_of, ship_rate_names
from toxiforge.harden.guardset import AUDIT_DIR, REFERENCE, START, GuardCheck
from toxiforge.intervals import interval_cell


def recommend(guard: GuardCheck, rounds: int, arms: Sequence[str], eval_sets: Sequence[LabeledData],
              slice_: LabeledData | None) -> dict[str, Any]:
    """The classifier to ship (decide.py's rule): ``{"round", "arm", "name", "folder", "why", "reference",
    "margin", "detectable", "candidates"}``."""
    judged = candidates(guard, rounds, arms, eval_sets, slice_)
    reference = reference_of(guard, slice_)[0]
    where = "the guard slice" if slice_ is not None else "the eval sets (mean ROC AUC)"
    out: dict[str, Any] = {"reference": reference, "margin": guard.tolerance.margin,
                           "candidates": [c.to_dict() for c in judged]}
    if slice_ is not None or eval_sets:
        h, what = detectable(guard, slice_, eval_sets)
        out["detectable"] = {"roc_auc": None if math.isinf(h) else h, "what": what,
                             "rates": detectable_rates(guard, slice_, eval_sets),
                             "fpr_tolerance": guard.tolerance.rate}
    if guard.reference_note and slice_ is not None and reference == START:
        out["reference_note"] = guard.reference_note
    ships = sorted((c for c in judged if not c.short), key=lambda c: (-(c.auc or 0.0), c.round))
    if ships:
        best = ships[0]
        why = (f"ROC AUC {best.gain.value:+.3f} over {reference} on {where}, simultaneous lower end "
               f"{best.gain.low:+.3f} > +{guard.tolerance.margin:g} over all {len(judged)} candidates, and no "
               f"error rate ({ship_rate_names()}) up beyond +{guard.tolerance.rate:g}")
        why += f" ({len(ships)} of {len(judged)} clear the rule; the best ROC AUC ships)" if len(ships) > 1 else ""
        return {"round": best.round, "arm": best.arm, "name": best.name, "folder": best.folder, "why": why, **out}
    if not judged:
        why = "C_0 itself: no round was measured"
    else:
        ranked = sorted(judged, key=lambda c: (-(c.gain.value if c.gain.value is not None else -math.inf), c.round))
        why = (f"C_0 itself: no round clears the ship rule against {reference} on {where}; best ranked: "
               + "; ".join(ranked[0].short))
        why += f" (also short: {', '.join(c.name for c in ranked[1:])})" if len(ranked) > 1 else ""
    return {"round": 0, "arm": None, "name": START, "folder": guard.start, "why": why, **out}


def final_audit(guard: GuardCheck, ship: Mapping[str, Any], last: int, arms: Sequence[str],
                eval_sets: Sequence[LabeledData], slice_: LabeledData | None) -> dict[str, str]:
    """``OUT/audit/``'s report (module docstring); the paths written."""
    from toxiforge.audit.report import write_report
    from toxiforge.audit.run import ClassifierSpec, run_audit

    # the first column is what every other is paired against: round 0's reference, never a C_0 that trained on the
    # slice (issue 55; C_0's own column then shows what retraining without the slice moved)
    columns = {START: guard.start}
    if guard.reference != guard.start:
        columns = {REFERENCE: guard.reference, **columns}
    for arm in arms:
        columns[f"round-{last}-{arm}"] = str(guard.out / f"round-{last}" / arm / "model")
    if ship["name"] not in columns:
        columns[ship["name"]] = ship["folder"]
    sets = [*eval_sets, *([slice_] if slice_ is not None else [])]
    result = run_audit([ClassifierSpec(k, str(v)) for k, v in columns.items()], sets, guard.out / AUDIT_DIR,
                       guard.settings, loader=guard.loader, log=guard.log, progress=guard.console)
    return {k: str(v) for k, v in write_report(result, guard.out / AUDIT_DIR).items()}


def closing(guard: GuardCheck, last: int, arms: Sequence[str],
            eval_sets: Sequence[LabeledData], slice_: LabeledData | None, note: str | None,
            say: Callable[[str], None]) -> dict[str, Any]:
    """report.json's ``guard`` (the checks, the slice), ``ship`` (:func:`recommend`) and ``audit`` (the paths of
    :func:`final_audit`'s report, after round 1 or later)."""
    out: dict[str, Any] = {"guard": {**guard.to_dict(), "slice": None if slice_ is None else {
        "rows": len(slice_), "toxic": sum(slice_.labels), "note": note}}}
    out["ship"] = ship = recommend(guard, last, arms, eval_sets, slice_)
    say(f"the classifier to ship: {ship['name']}: {ship['why']}")
    if last >= 1:
        say(f"closing audit: C_0, each arm's last round and the classifier to ship, paired against "
            f"{REFERENCE if guard.reference != guard.start else START}")
        out["audit"] = final_audit(guard, out["ship"], last, arms, eval_sets, slice_)
    return out


def ship_markdown(report: Mapping[str, Any]) -> list[str]:
    """report.md's lines on the guard set, each round's paired check and the classifier to ship."""
    guard, ship = report.get("guard"), report.get("ship")
    lines: list[str] = []
    if guard:
        tol = guard["tolerance"]
        lines += ["", f"Paired check against round 0 (same rows, the audit's paired bootstrap; worse when a 95% "
                      f"interval lies wholly beyond ROC AUC -{tol['auc']:g} or a rate +{tol['rate']:g}). On the "
                      f"eval sets the rounds are compared with C_0; on the guard slice with "
                      f"{'C_0 itself' if guard['reference'] == guard['start'] else REFERENCE}"
                      + (f" ({guard['reference_note']})" if guard.get("reference_note") else "") + ".", "",
                  "| round | arm | set | vs | ROC AUC | Δ ROC AUC [95% CI] | Δ FPR | Δ FNR | Δ FPR_NOI | "
                  "Δ over-blocking | worse |", "|---|---|---|---|---:|---|---|---|---|---|---|"]
        for r, check in guard["rounds"].items():
            for name, entry in check["sets"].items():
                for arm, rows in entry["arms"].items():
                    cells = [_delta(rows.get(m)) for m in ("roc_auc", "fpr", "fnr", "fpr.noi", "over_blocking")]
                    worse = "**yes**" if any(v["worse"] for v in rows.values()) else "no"
                    auc = entry["auc"].get(arm)
                    lines.append(f"| {r} | {arm.rsplit('-', 1)[-1]} | {name} | {entry['reference']} | "
                                 f"{'n/a' if auc is None else f'{auc:.3f}'} | " + " | ".join(cells) + f" | {worse} |")
    if ship:
        where = f"round {ship['round']}, {ship['arm']} arm" if ship["arm"] else "round 0"
        lines += ["", f"**The classifier to ship: {ship['name']}** ({where}), in `{ship['folder']}`: {ship['why']}."]
        lines += _ship_table(ship) + (_rate_widths(guard) if guard else [])
    if report.get("audit"):
        first = (ship or {}).get("reference") or START
        lines += ["", f"The closing audit (C_0, each arm's last round and the classifier to ship, paired against "
                      f"{first}): `{report['audit']['markdown']}` (and `report.html`, `report.json` there)."]
    return lines


def _delta(row: Mapping[str, Any] | None) -> str:
    return "-" if row is None else interval_cell(row["difference"])


def _ship_table(ship: Mapping[str, Any]) -> list[str]:
    """report.md's table of the candidates under the ship rule (decide.py)."""
    if not ship.get("candidates"):
        return []
    seen = ship.get("detectable") or {}
    lines = ["", f"The ship rule (docs/harden.md): ROC AUC gain over {ship['reference']} with intervals simultaneous "
                 f"over the {len(ship['candidates'])} candidates, lower end > +{ship['margin']:g}; no error rate's "
                 f"({ship_rate_names()}) upper end above the rate tolerance."
             + (f" The decision sets detect ROC AUC changes of ±{seen['roc_auc']:.3f} ({seen['what']})."
                if seen.get("roc_auc") is not None else "")
             + (f" Of the error rates, {rates}." if (rates := rates_line(seen.get("rates") or {},
                                                                          seen.get("fpr_tolerance", 0.0))) else "")
             + (f" Its reference is C_0: {ship['reference_note']}." if ship.get("reference_note") else ""), "",
             "| candidate | ROC AUC | gain [simultaneous 95%] | ships | short |", "|---|---:|---|---|---|"]
    for c in ship["candidates"]:
        auc = "n/a" if c["auc"] is None else f"{c['auc']:.3f}"
        gain = "n/a" if c["gain"]["value"] is None else _delta({"difference": c["gain"]})
        lines.append(f"| {c['name']} | {auc} | {gain} | "
                     f"{'**yes**' if c['ships'] else 'no'} | {'; '.join(c['short']) or '-'} |")
    return lines + _detected(ship["candidates"], seen.get("roc_auc"))


def _detected(candidates: Sequence[Mapping[str, Any]], predicted: float | None) -> list[str]:
    """The change the decision set detected, read off the candidates' simultaneous intervals (paired, widened for
    the best of many): their half-widths, beside what the reference's own interval predicted before round 0."""
    import statistics

    widths = sorted(w for c in candidates if (g := c["gain"])["low"] is not None and g["high"] is not None
                    and (w := (g["high"] - g["low"]) / 2) > 0)  # 0: a candidate that ranks as the reference does
    if not widths:
        return []
    spread = f"±{widths[0]:.3f} to ±{widths[-1]:.3f}, median ±{statistics.median(widths):.3f}"
    before = f", against ±{predicted:.3f} predicted before round 0" if predicted is not None else ""
    return ["", f"Detected: the candidates' simultaneous ROC AUC intervals have half-widths {spread} over "
                f"{len(widths)} candidate(s){before}; a gain needs its lower end above the margin."]


def _rate_widths(guard: Mapping[str, Any]) -> list[str]:
    """A line per decision set where the paired intervals of an error rate the ship rule checks are wider than the
    rate tolerance: there even a candidate whose errors equal round 0's (``--calibrate`` matches the benign ones'
    count) has an upper end above it, so the set is too small for that tolerance; the rows it would take
    (half-widths shrink as 1/sqrt(rows))."""
    from toxiforge.audit.glossary import name as term
    from toxiforge.audit.headlines import section_of
    from toxiforge.harden.guardset import SHIP_RATE_CHECKS

    tol, lines = guard["tolerance"]["rate"], []
    widths: dict[tuple[str, str], list[float]] = {}
    for check in guard["rounds"].values():
        for set_name, entry in check["sets"].items():
            for rows in entry["arms"].values():
                for key in SHIP_RATE_CHECKS:
                    d = (rows.get(section_of(key)[1]) or {}).get("difference") or {}
                    if d.get("low") is not None and d.get("high") is not None:
                        widths.setdefault((set_name, key), []).append((d["high"] - d["low"]) / 2)
    for (set_name, key), found in widths.items():
        smallest = min(found)
        if tol > 0 and smallest > tol:
            lines.append(f"{term(key)} on {set_name}: paired intervals ±{smallest:.3f} or wider, against the tolerance "
                         f"+{tol:g}: a candidate whose {term(key)} equals round 0's cannot pass at this size (about "
                         f"{(smallest / tol) ** 2:.0f}× the rows could; or a larger --fpr-tolerance)")
    return ["", "Too few rows for the error-rate check: " + "; ".join(lines) + "."] if lines else []
