"""The two arms on the same prompts (harden/arms.py): each round >= 1 records the ALICE arm's flip rate minus the
control arm's on the prompts both attacks share, paired by prompt, and the report shows it. Tiny models, placeholder
text (the ``finished`` run of tests/harden/conftest.py)."""

from __future__ import annotations

import json

import numpy as np

from toxiforge.attacks.validation import run_rows
from toxiforge.data.examples import column, read_any_table
from toxiforge.harden.arms import VERSUS, paired_arms
from toxiforge.harden.config import METRICS_FILE
from toxiforge.harden.data import Statements


def _table(run_dir):
    table = read_any_table(run_dir)
    return column(table, "prompt"), column(table, "fooled")


def test_each_round_records_the_arms_difference_on_their_shared_prompts(finished):
    _, out = finished
    rounds = sorted(int(p.parent.name.split("-")[1]) for p in out.glob(f"round-*/{METRICS_FILE}"))
    assert rounds[0] == 0 and len(rounds) >= 2
    for r in rounds[1:]:
        metrics = json.loads((out / f"round-{r}" / METRICS_FILE).read_text())
        assert VERSUS not in metrics["control"]
        versus = metrics["alice"][VERSUS]
        alice, control = (_table(out / f"round-{r}" / arm / "attack") for arm in ("alice", "control"))
        shared = set(alice[0]) & set(control[0])
        assert 2 <= versus["prompts"] <= len(shared)  # statements left out as repeats take their prompt out
        flip = versus["flip"]
        assert flip["low"] <= flip["value"] <= flip["high"] and "confirmed" not in versus  # no validator here
    report = (out / "report.md").read_text()
    assert "The ALICE arm minus the control arm on the same prompts" in report
    assert "| round | shared prompts | flip rate |" in report


def test_the_difference_is_the_alice_arms_rate_minus_the_controls_on_the_same_prompts(finished):
    _, out = finished
    runs = [out / "round-1" / arm / "attack" for arm in ("alice", "control")]
    rows = [run_rows(d, "ALICE") for d in runs]  # what Statements reads: (Example, fooled) per usable statement
    prompts = [_table(d)[0] for d in runs]
    # every statement kept but the control arm's first: its prompt is no longer shared
    keeps = [[True] * len(rows[0]), [False] + [True] * (len(rows[1]) - 1)]
    by_prompt = [{prompt[e.row]: bool(f) for (e, f), k in zip(r, keep) if k and f is not None}
                 for r, prompt, keep in zip(rows, prompts, keeps, strict=True)]
    shared = [p for p in by_prompt[0] if p in by_prompt[1]]
    versus = paired_arms(*(Statements(d, None, k) for d, k in zip(runs, keeps, strict=True)), seed=3)
    assert prompts[1][rows[1][0][0].row] not in shared and versus["prompts"] == len(shared) >= 2
    expected = np.mean([by_prompt[0][p] for p in shared]) - np.mean([by_prompt[1][p] for p in shared])
    assert versus["flip"]["value"] == expected

    # with a validator: a confirmed flip also has the validator give the prompt's label (P(toxic) >= 0.5 for a
    # toxic prompt); here it agrees with every control statement and with no ALICE statement
    agree = [[1.0 - e.label for e, _ in rows[0]], [float(e.label) for e, _ in rows[1]]]
    versus = paired_arms(*(Statements(d, v, k) for d, v, k in zip(runs, agree, keeps, strict=True)), seed=3)
    assert versus["confirmed"]["value"] == -np.mean([by_prompt[1][p] for p in shared])
    # a statement the validator gave no label (people: NaN) takes its prompt out of the confirmed comparison only
    nan_prompt = prompts[0][rows[0][0][0].row]
    no_label = [[float("nan")] + agree[0][1:], agree[1]]
    versus = paired_arms(*(Statements(d, v, k) for d, v, k in zip(runs, no_label, keeps, strict=True)), seed=3)
    assert versus["prompts"] == len(shared)
    labelled = [p for p in shared if p != nan_prompt]
    assert versus["confirmed"]["value"] == -np.mean([by_prompt[1][p] for p in labelled])


def test_fewer_than_two_shared_prompts_record_nothing(finished):
    _, out = finished
    runs = [out / "round-1" / arm / "attack" for arm in ("alice", "control")]
    none_kept = [False] * len(_table(runs[1])[0])
    assert paired_arms(Statements(runs[0]), Statements(runs[1], None, none_kept)) is None
