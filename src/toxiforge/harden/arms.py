"""The two arms on the same prompts (issue 55): does the ALICE arm resist a new attack better than the control arm?

A round's attacks on the ALICE arm's classifier and on the control arm's share their prompts (:mod:`sets`: an attack
that only measures takes the first ``--measure-n`` of the round's prompts per group x label), and neither was trained
on. So the arms are compared prompt by prompt: the ALICE arm's flip rate minus the control arm's, and with a
validator the confirmed flip rate's (flipped, and the validator gives the prompt's label), each with a paired 95%
bootstrap interval over the shared prompts. A difference below 0 is the ALICE arm flipped less. Both rates are those
of the report's table, read on the prompts both attacks kept (a statement of the training data or of an earlier set
is left out, :class:`~toxiforge.harden.sets.StatementLedger`), so they can differ a little from the table's.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from toxiforge.attacks.validation import agrees, labelled
from toxiforge.data.examples import column, read_any_table
from toxiforge.harden.data import ALICE_ARM, Statements
from toxiforge.intervals import Proportion, Resampler, paired_difference, points_cell

VERSUS = "versus_control"  # the ALICE arm's record of a round >= 1: this comparison


def _by_prompt(statements: Statements) -> dict[str, tuple[bool, bool, bool]]:
    """Each kept, scored statement's (flipped, the validator labelled it, the validator gives its prompt's label) by
    its prompt (without a validator: labelled, not agreeing); the first where a prompt has several."""
    prompts = column(read_any_table(statements.run_dir), "prompt")
    out: dict[str, tuple[bool, bool, bool]] = {}
    for example, fooled, score in statements.rows():
        if fooled is not None and example.row is not None:
            seen = score is None or labelled(score)
            out.setdefault(prompts[example.row], (bool(fooled), seen, score is not None and agrees(example, score)))
    return out


def paired_arms(alice: Statements, control: Statements, seed: int = 0) -> dict[str, Any] | None:
    """``{"prompts": n, "flip": {value, low, high}, "confirmed": ...}``: the ALICE arm's rate minus the control arm's
    on their ``n`` shared prompts (``confirmed`` with a validator, on the prompts it labelled in both arms); None
    when fewer than 2 prompts are shared."""
    arms = {"alice": _by_prompt(alice), "control": _by_prompt(control)}
    shared = [p for p in arms["alice"] if p in arms["control"]]
    if len(shared) < 2:
        return None
    rows = {arm: np.array([by[p] for p in shared], dtype=bool) for arm, by in arms.items()}  # [n, 3]
    kinds = ("flip", "confirmed") if alice.validated is not None and control.validated is not None else ("flip",)
    metrics = {f"flip:{arm}": Proportion(r[:, 0], np.ones(len(shared), dtype=bool)) for arm, r in rows.items()}
    if "confirmed" in kinds:  # on the prompts the validator labelled in both arms
        both_labelled = rows["alice"][:, 1] & rows["control"][:, 1]
        metrics |= {f"confirmed:{arm}": Proportion(r[:, 0] & r[:, 2], both_labelled) for arm, r in rows.items()}
    est = Resampler(len(shared), seed=seed).estimates(metrics)
    out: dict[str, Any] = {"prompts": len(shared)}
    for kind in kinds:
        out[kind] = paired_difference(est[f"{kind}:control"], est[f"{kind}:alice"]).to_dict()
    return out


def versus_markdown(rounds: list[dict[str, Any]]) -> list[str]:
    """The report's table of :func:`paired_arms` per round (rounds measured before it have none)."""
    rows = [(r, entry[ALICE_ARM][VERSUS]) for r, entry in enumerate(rounds) if r and VERSUS in entry[ALICE_ARM]]
    if not rows:
        return []
    confirmed = any("confirmed" in v for _, v in rows)
    lines = ["", "The ALICE arm minus the control arm on the same prompts: each round's attacks on the two arms' "
                 "classifiers, paired by prompt (95% bootstrap interval; in points; below 0: the ALICE arm's "
                 "classifier was flipped less):", "",
             "| round | shared prompts | flip rate |" + (" confirmed flip rate |" if confirmed else ""),
             "|---|---:|---|" + ("---|" if confirmed else "")]
    for r, v in rows:
        lines.append(f"| {r} | {v['prompts']} | {points_cell(v.get('flip'))} |"
                     + (f" {points_cell(v.get('confirmed'))} |" if confirmed else ""))
    return lines
