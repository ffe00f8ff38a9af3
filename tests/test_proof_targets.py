"""benchmarks/_proof_report.py's reading of issue 55 item 5's targets: each is met only when the t 95% interval of
the seeds' mean lies wholly on the target's side, and a target missed says by how much. Numbers only, no model."""

from __future__ import annotations

import math

import pytest

from conftest import load_benchmark

T2 = 4.30265273  # Student t, 97.5th percentile, 2 degrees of freedom (3 seeds)


@pytest.fixture(scope="module")
def report():
    return load_benchmark("_proof_report")


def tables(accuracy, shipped_confirmed, c0_confirmed, over_blocking, arms):
    """The report's (table, values) for three seeds: per seed the shipped classifier's HateCheck accuracy and
    over-blocking minus C_0's, both classifiers' fresh confirmed flip rates, and ALICE minus control's."""
    table = {"fresh confirmed": {"shipped": [(v, None, None, None) for v in shipped_confirmed],
                                 "C_0": [(v, 0.0, 0.0, 0.0) for v in c0_confirmed]}}
    values = {"HateCheck accuracy": {"shipped": accuracy}, "over-blocking": {"shipped": over_blocking},
              "fresh confirmed": {"alice - control": arms}}
    return table, values


def test_targets_met_only_beyond_three_seed_noise(report):
    table, values = tables(accuracy=[0.050, 0.060, 0.055], shipped_confirmed=[0.20, 0.20, 0.20],
                           c0_confirmed=[0.50, 0.50, 0.50], over_blocking=[0.0, 0.0, 0.0], arms=[-0.10, -0.10, 0.05])
    got = {v["target"].split(" ")[1]: v for v in report.targets(table, values)}
    gain = got["beats"]
    half = T2 * 0.005 / math.sqrt(3)  # s.d. of (0.050, 0.060, 0.055) is 0.005
    assert gain["over_runs"]["low"] == pytest.approx(0.055 - half) and gain["met"] == "yes"  # 0.0426 >= 0.03
    assert got["halves"]["met"] == "yes"  # 0.20 - 0.25 = -0.05 on every seed: a zero-width interval below 0
    assert got["over-blocking"]["met"] == "yes"  # shipped = C_0 on every seed: not higher
    arms = next(v for v in got.values() if v["target"].startswith("ALICE"))
    high = arms["over_runs"]["high"]
    assert high > 0 and arms["met"] == f"no: over by {high:.3f}"  # one seed of three goes the other way


def test_a_gain_inside_the_noise_is_short_by_its_lower_end(report):
    table, values = tables(accuracy=[0.011, 0.0, 0.0], shipped_confirmed=[0.225, 0.48, 0.50],
                           c0_confirmed=[0.51, 0.48, 0.50], over_blocking=[-0.104, 0.0, 0.0], arms=[-0.1] * 3)
    got = report.targets(table, values)
    low = got[0]["over_runs"]["low"]
    assert low < 0 and got[0]["met"] == f"no: short by {0.03 - low:.3f}"
    assert got[1]["met"].startswith("no: over by")  # halved on one seed of three
    assert got[2]["met"].startswith("no: over by")  # lower on one seed, equal on two: not shown not higher
    assert got[3]["met"] == "yes" and got[3]["needs"] == "< +0.000 (upper end)"


def test_one_seed_has_no_interval_and_meets_nothing(report):
    table, values = tables([0.2], [0.0], [0.5], [-0.1], [-0.3])
    assert {v["met"] for v in report.targets(table, values)} == {"no interval (fewer than 2 seeds)"}
