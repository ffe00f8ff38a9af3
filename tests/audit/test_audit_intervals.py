"""The audit's intervals of proportions: Wilson's (no [0, 0] at 0 of n, no [1, 1] at n of n) with the replicates
kept for paired differences, and a small n marked in report.md/html and report.json."""

from __future__ import annotations

import json

import numpy as np

from audit.test_audit_cli import _audit, fakes  # noqa: F401 (fixtures)
from conftest import write_csv
from toxiforge.audit.attacks import summarise
from toxiforge.audit.metrics import accuracy_section
from toxiforge.intervals import SMALL_N_MARK, SMALL_N_NOTE, Resampler, proportion_interval


def test_an_fpr_of_0_on_22_benign_rows_has_an_upper_bound_above_0():
    y = np.array([0] * 22 + [1] * 18)
    s = np.where(y == 1, 0.9, 0.1)          # flags every toxic row and no benign one
    section = accuracy_section(y, s, Resampler(len(y), 200, 0))
    fpr = section["fpr"]
    assert fpr.value == 0.0 and fpr.n == 22 and fpr.low == 0.0 and fpr.high > 0.1   # the bootstrap gave [0, 0]
    assert (fpr.low, fpr.high) == proportion_interval(0, 22) and np.all(fpr.reps == 0)
    assert section["accuracy"].value == 1.0 and section["accuracy"].low < 1.0
    assert section["roc_auc"].n is None     # not a proportion: the bootstrap interval


def test_an_attack_that_succeeds_on_every_row_has_a_lower_bound_below_1():
    outcomes = {"obfuscate": {"success": [True] * 100, "queries": [3] * 100, "edits": [1] * 100}}
    rate = summarise(outcomes, candidates=120, n_boot=200, seed=0)["obfuscate"]["success_rate"]
    assert rate.value == 1.0 and rate.high == 1.0 and rate.low < 0.97 and rate.n == 100 and not rate.small_n


def test_small_n_cells_are_marked_in_markdown_html_and_json(tmp_path, fakes):  # noqa: F811 (the fixture)
    # 3 benign and 3 toxic rows name a group (Zhou et al.'s NOI slice); 34 plain rows name none
    rows = [(f"placeholder statement about muslim neighbours {i}", i % 2) for i in range(6)]
    rows += [(f"neutral placeholder sentence {i}", i % 2) for i in range(34)]
    table = write_csv(tmp_path / "plain.csv", ["text", "label"], rows)
    out = tmp_path / "audit"
    result = _audit("-c", "fake-good", "--on", f"T=table:{table}", "-o", str(out))
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    lexical = report["results"]["fake-good"]["T"]["lexical"]
    assert lexical["n_benign"]["noi"] == 3
    noi = lexical["fpr"]["noi"]
    assert noi["n"] == 3 and noi["small_n"] is True and noi["high"] > noi["value"]
    accuracy = report["results"]["fake-good"]["T"]["accuracy"]
    assert accuracy["accuracy"]["n"] == 40 and accuracy["accuracy"]["small_n"] is False
    assert accuracy["fpr"]["n"] == 20 and accuracy["fpr"]["small_n"] is True
    assert "n" not in accuracy["roc_auc"]
    markdown = (out / "report.md").read_text()
    noi_row = next(line for line in markdown.splitlines() if line.startswith("| ") and "3 / 3" in line)
    assert noi_row.count(SMALL_N_MARK) >= 1 and SMALL_N_NOTE in markdown
    assert SMALL_N_MARK in (out / "report.html").read_text()
