"""``harden-seeds`` for the attack families (``--attacks``/``--eval-attacks``) and HateCheck's ``spell_*`` accuracy.

Every round and arm of a harden run measures each family's flip rate on the same held-out set (families.py) and,
with a HateCheck ``--eval`` set, its ``spell_*`` accuracy (report.spell_accuracy). Read over runs that differ
only in ``--seed`` (:mod:`toxiforge.harden.seeds`):

* per round and arm, each family's flip rate (and confirmed flip rate, with a validator) **pooled** over the runs'
  attacked statements, with a 95% Wilson interval, and each run's own value;
* per later round, each family's change from round 0 of the ALICE arm and its gap to the control: the difference of
  the pooled shares with Newcombe's 95% hybrid score interval (:func:`~toxiforge.intervals.share_difference`: the
  two shares taken as independent; the rounds attack the same held-out statements, so this interval is, if
  anything, wider than a paired one), and each run's change;
* each eval set's ``spell_*`` accuracy per round and arm: the mean of the runs and their range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from toxiforge.harden.data import ALICE_ARM, ARMS, CONTROL_ARM
from toxiforge.intervals import Share, points_cell, pooled_counts, pooled_share, share_difference


def _rates(measure: dict[str, Any], family: str, kind: str) -> dict[str, Any] | None:
    rates = (measure.get("attacks") or {}).get(family, {}).get("flip_rate")
    if rates is None:
        return None
    part = rates if kind == "all" else rates.get(kind)
    return None if part is None else part.get("all")


def combine_families(reports: Sequence[dict[str, Any]], rounds: int) -> dict[str, Any]:
    """The families and spell_* accuracy of harden runs read together (module docstring); {} when none measured."""
    first = reports[0]["rounds"][0][ALICE_ARM]
    families = list(first.get("attacks") or {})
    spell_sets = [n for n, e in first.get("eval", {}).items() if e.get("spell_accuracy") is not None]
    if not families and not spell_sets:
        return {}
    kinds = ["all"] + (["confirmed"] if any("confirmed" in first["attacks"][f]["flip_rate"] for f in families)
                       else [])
    arms = [("start", 0, ALICE_ARM)] + [(arm, r, arm) for r in range(1, rounds) for arm in ARMS]
    table = []
    for label, r, arm in arms:
        ms = [rep["rounds"][r][arm] for rep in reports]
        row: dict[str, Any] = {"round": r, "arm": label, "families": {}, "spell_accuracy": {}}
        for f in families:
            row["families"][f] = {kind: {"pooled": pooled_share([_rates(m, f, kind) for m in ms]),
                                         "per_run": [(_rates(m, f, kind) or {}).get("value") for m in ms]}
                                  for kind in kinds}
        for name in spell_sets:
            values = [(m["eval"].get(name, {}).get("spell_accuracy") or {}).get("value") for m in ms]
            known = [v for v in values if v is not None]
            row["spell_accuracy"][name] = {"per_run": values, "mean": float(np.mean(known)) if known else None,
                                           "min": min(known) if known else None, "max": max(known) if known else None}
        table.append(row)
    changes = []
    for r in range(1, rounds):
        for f in families:
            for kind in kinds:
                start = [_rates(rep["rounds"][0][ALICE_ARM], f, kind) for rep in reports]
                alice = [_rates(rep["rounds"][r][ALICE_ARM], f, kind) for rep in reports]
                control = [_rates(rep["rounds"][r][CONTROL_ARM], f, kind) for rep in reports]

                def per_run(a: list, b: list) -> list[float | None]:
                    return [None if x is None or y is None else x["value"] - y["value"] for x, y in zip(a, b)]

                changes.append({"round": r, "family": f, "kind": kind,
                                "held_out": bool(first["attacks"][f]["held_out"]),
                                "alice_minus_round0": share_difference(pooled_counts(alice), pooled_counts(start)),
                                "alice_minus_round0_per_run": per_run(alice, start),
                                "alice_minus_control": share_difference(pooled_counts(alice), pooled_counts(control)),
                                "alice_minus_control_per_run": per_run(alice, control)})
    return {"families": families, "kinds": kinds, "spell_sets": spell_sets, "table": table, "changes": changes}


def _runs(values: Sequence[float | None]) -> str:
    return ", ".join("-" if v is None else f"{100 * v:+.1f}" for v in values)


def families_markdown(combined: dict[str, Any]) -> list[str]:
    """Two tables (pooled flip rates and spell_* accuracy per round and arm; the changes in points)."""
    if not combined:
        return []
    fams, kinds, sets = combined["families"], combined["kinds"], combined["spell_sets"]
    header = ["round", "arm", *(f"{f} {k} flip % pooled [CI]; runs" for f in fams for k in kinds),
              *(f"spell_* accuracy {n} mean (range)" for n in sets)]
    lines = ["", "## Attack families and HateCheck spell_* accuracy", "",
             "Families attack the same held-out toxic --eval statements every round (held out: never trained on). "
             "Flip %: pooled over every run's attacked statements [95% Wilson interval]; then each run's value.",
             "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in combined["table"]:
        cells = [str(row["round"]), row["arm"]]
        for f in fams:
            for k in kinds:
                entry = row["families"][f][k]
                pooled_cell = "-" if entry["pooled"] is None else Share(**entry["pooled"]).cell()
                cells.append(pooled_cell + "; " + ", ".join("-" if v is None else f"{100 * v:.1f}"
                                                            for v in entry["per_run"]))
        for n in sets:
            s = row["spell_accuracy"][n]
            cells.append("-" if s["mean"] is None else f"{s['mean']:.3f} ({s['min']:.3f}-{s['max']:.3f})")
        lines.append("| " + " | ".join(cells) + " |")
    if combined["changes"]:
        lines += ["", "Change of each family's flip rate, in points: pooled difference [95% Newcombe interval]; each "
                      "run's change.", "",
                  "| round | family | flip rate | ALICE arm minus round 0 | runs | ALICE arm minus control | runs |",
                  "|---|---|---|---|---|---|---|"]
        for c in combined["changes"]:
            family = f"{c['family']} ({'held out' if c['held_out'] else 'trained'})"
            lines.append(f"| {c['round']} | {family} | {c['kind']} | {points_cell(c['alice_minus_round0'])} | "
                         f"{_runs(c['alice_minus_round0_per_run'])} | {points_cell(c['alice_minus_control'])} | "
                         f"{_runs(c['alice_minus_control_per_run'])} |")
    return lines
