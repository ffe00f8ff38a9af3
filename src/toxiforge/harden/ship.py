"""How ``toxiforge harden`` ends (issue 48, item 7): the classifier to ship, and ``OUT/audit/``, ``toxiforge
audit``'s report (HTML, Markdown, JSON) of C_0, the round-0 classifier retrained on ``--data`` less the guard slice
(when there is one), each arm's last round and the recommended classifier, on every eval set and the guard slice,
paired against C_0. Harden calls the audit's code (:func:`~toxiforge.audit.run.run_audit`,
:func:`~toxiforge.audit.report.write_report`); the audit imports nothing from harden.

**The classifier to ship** (:func:`recommend`): among the rounds and arms that the paired check (guardset.py, the one
rule for worse) did not find worse than round 0 on any set, the one with the best ROC AUC on the guard
slice (without a slice: the mean ROC AUC over the eval sets), if it is above round 0's on the same rows (the slice's
reference, or C_0); C_0 itself otherwise: a round that no check found worse but that scores below round 0 is not
worth shipping.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toxiforge.data.examples import LabeledData
from toxiforge.harden.guardset import AUDIT_DIR, GUARD_SET, REFERENCE, START, GuardCheck


def guard_auc(check: Mapping[str, Any], name: str) -> tuple[float | None, str]:
    """A classifier's AUC in a round's check: on the guard slice, else the mean over the eval sets; and which."""
    sets = check.get("sets", {})
    if GUARD_SET in sets:
        return sets[GUARD_SET]["auc"].get(name), "guard-slice ROC AUC"
    values = [s["auc"].get(name) for s in sets.values() if s["auc"].get(name) is not None]
    return (sum(values) / len(values) if values else None), "mean ROC AUC over the eval sets"


def _round0_auc(guard: GuardCheck) -> tuple[float | None, str]:
    """Round 0's AUC in the first round's check, measured as :func:`guard_auc` measures a round's: the slice's
    reference on the guard slice, else C_0's mean over the eval sets."""
    check = guard.results.get(min(guard.results)) if guard.results else None
    if check is None:
        return None, ""
    sets = check.get("sets", {})
    name = sets[GUARD_SET]["reference"] if GUARD_SET in sets else START
    auc, what = guard_auc(check, name)
    return auc, f"{name}'s {what}"


def found_worse(check: Mapping[str, Any], name: str) -> bool:
    """Whether a round's paired check found classifier ``name`` worse than round 0 on any set and metric."""
    return any(row["worse"] for entry in check.get("sets", {}).values()
               for row in entry["arms"].get(name, {}).values())


def recommend(guard: GuardCheck, rounds: int, arms: Sequence[str], out: Path, start: str) -> dict[str, Any]:
    """The classifier to ship (module docstring): ``{"round", "arm", "name", "folder", "why", "candidates"}``."""
    candidates: list[dict[str, Any]] = []
    rejected: list[str] = []
    for r in range(1, rounds + 1):
        check = guard.results.get(r)
        if check is None:
            continue
        for arm in arms:
            name = f"round-{r}-{arm}"
            auc, what = guard_auc(check, name)
            if found_worse(check, name):
                rejected.append(name)
            elif auc is not None:
                candidates.append({"round": r, "arm": arm, "name": name, "auc": auc, "measure": what,
                                   "folder": str(out / f"round-{r}" / arm / "model")})
    if not candidates:
        why = ("every round a check found worse than round 0 (" + ", ".join(rejected) + ")" if rejected
               else "no round was measured")
        return {"round": 0, "arm": None, "name": START, "folder": start, "why": f"C_0 itself: {why}",
                "candidates": []}
    ranked = sorted(candidates, key=lambda c: (-c["auc"], c["round"]))
    best = ranked[0]
    base, base_what = _round0_auc(guard)
    if base is not None and best["auc"] <= base:
        return {"round": 0, "arm": None, "name": START, "folder": start, "candidates": candidates,
                "why": f"C_0 itself: no round scores above round 0 on the same rows (best: {best['name']}, "
                       f"{best['measure']} {best['auc']:.3f}; {base_what} {base:.3f})"
                       + (f"; found worse: {', '.join(rejected)}" if rejected else "")}
    why = (f"the best {best['measure']} ({best['auc']:.3f}) among the {len(candidates)} round(s) and arm(s) that no "
           "check found worse than round 0")
    why += f" (next: {ranked[1]['name']}, {ranked[1]['auc']:.3f})" if len(ranked) > 1 else ""
    why += f"; found worse: {', '.join(rejected)}" if rejected else ""
    return {**{k: best[k] for k in ("round", "arm", "name", "folder")}, "why": why, "candidates": candidates}


def final_audit(guard: GuardCheck, ship: Mapping[str, Any], last: int, arms: Sequence[str],
                eval_sets: Sequence[LabeledData], slice_: LabeledData | None) -> dict[str, str]:
    """``OUT/audit/``'s report (module docstring); the paths written."""
    from toxiforge.audit.report import write_report
    from toxiforge.audit.run import ClassifierSpec, run_audit

    columns = {START: guard.start}
    if guard.reference != guard.start:
        columns[REFERENCE] = guard.reference
    for arm in arms:
        columns[f"round-{last}-{arm}"] = str(guard.out / f"round-{last}" / arm / "model")
    if ship["name"] not in columns:
        columns[ship["name"]] = ship["folder"]
    sets = [*eval_sets, *([slice_] if slice_ is not None else [])]
    result = run_audit([ClassifierSpec(k, str(v)) for k, v in columns.items()], sets, guard.out / AUDIT_DIR,
                       guard.settings, loader=guard.loader, log=guard.log)
    return {k: str(v) for k, v in write_report(result, guard.out / AUDIT_DIR).items()}


def closing(guard: GuardCheck, last: int, arms: Sequence[str],
            eval_sets: Sequence[LabeledData], slice_: LabeledData | None, note: str | None,
            say: Callable[[str], None]) -> dict[str, Any]:
    """report.json's ``guard`` (the checks, the slice), ``ship`` (:func:`recommend`) and ``audit`` (the paths of
    :func:`final_audit`'s report, after round 1 or later)."""
    out: dict[str, Any] = {"guard": {**guard.to_dict(), "slice": None if slice_ is None else {
        "rows": len(slice_), "toxic": sum(slice_.labels), "note": note}}}
    out["ship"] = recommend(guard, last, arms, guard.out, guard.start)
    if last >= 1:
        say("closing audit: C_0, each arm's last round and the classifier to ship, paired against C_0")
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
    if report.get("audit"):
        lines += ["", f"The closing audit (C_0, each arm's last round and the classifier to ship, paired against "
                      f"C_0): `{report['audit']['markdown']}` (and `report.html`, `report.json` there)."]
    return lines


def _delta(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return "-"
    d = row["difference"]
    if d.get("low") is None:
        return f"{d['value']:+.3f}"
    return f"{d['value']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]"
