"""`toxiforge audit --gate` as a release pipeline runs it: a candidate worse on one metric only fails that one check
(exit 1, one line, one failed JUnit testcase), a candidate no worse passes (exit 0), a difference whose interval
reaches into the tolerance passes, and every misuse is refused before scoring. What fails closed (a gate that
measured nothing) and where the verdict is written: test_audit_gate_closed.py."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from audit.test_audit_cli import _audit, _error, fakes, hatecheck, runner  # noqa: F401 (fixtures)
from audit.test_audit_report import silent  # noqa: F401 (fixtures)
from toxiforge.audit.gate import METRICS, MIN_BOOT, Check, GateRule, parse_rules
from toxiforge.cli import app
from toxiforge.intervals import Estimate

ONLY_ECE_WORSE = ["--gate-metric", "roc_auc", "--gate-metric", "f1:0.02", "--gate-metric", "final_score",
                  "--gate-metric", "ece:0.02", "--gate-metric", "hatecheck"]


def gate_audit(*args):
    """``toxiforge audit ... --gate`` with the fewest resamples the gate takes (``_audit``'s 50 are refused)."""
    return runner.invoke(app, ["audit", *args, "--gate", "--bootstrap", str(MIN_BOOT)])


def _gate(tmp_path, hatecheck, *args, candidate="fake-squash"):  # noqa: F811 (the fixture)
    out = tmp_path / "audit"
    return out, gate_audit("-c", "prod=fake-good", "-c", f"candidate={candidate}", "--on", f"hatecheck:{hatecheck}",
                           "-o", str(out), *args)


def test_a_candidate_worse_on_one_metric_fails_that_check_only(tmp_path, hatecheck, silent):  # noqa: F811
    junit = tmp_path / "ci" / "gate.xml"
    out, result = _gate(tmp_path, hatecheck, *ONLY_ECE_WORSE, "--junit", str(junit))
    assert result.exit_code == 1, result.output
    failed = [line for line in result.output.splitlines() if line.startswith("gate failed")]
    assert len(failed) == 1
    assert failed[0].startswith("gate failed: candidate vs prod on HateCheck: ECE (calibration.ece) +0.")
    assert "beyond the tolerance 0.02" in failed[0] and "gate: 1 of 7 checks failed" in result.output
    assert (out / "report.html").exists()   # the report is written before the verdict
    suite = ET.parse(junit).getroot().find("testsuite")
    cases = suite.findall("testcase")
    # roc_auc, f1, final_score, ece and the 3 HateCheck metrics measured
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped"), suite.get("errors")) == ("7", "1", "0",
                                                                                                        "0")
    assert [c.get("name") for c in cases if c.find("failure") is not None] == ["calibration.ece (tolerance 0.02)"]
    assert {c.get("classname") for c in cases} == {"candidate.HateCheck"}


def test_the_default_gate_checks_every_metric_and_a_candidate_no_worse_passes(tmp_path, hatecheck, silent):  # noqa: F811
    _, default = _gate(tmp_path / "a", hatecheck)
    assert default.exit_code == 1   # squeezed scores: calibration worse (ECE and Brier), the rest identical
    assert sorted(line.split(": ")[2].split(" (")[0] for line in default.output.splitlines()
                  if line.startswith("gate failed")) == ["Brier score", "ECE"]
    _, passing = _gate(tmp_path / "b", hatecheck, "--gate-metric", "accuracy", "--gate-metric", "hatecheck")
    assert passing.exit_code == 0, passing.output
    # accuracy's 7 (FPR and FNR at the threshold among them) and HateCheck's 3
    assert "gate passed: 10 checks" in passing.output and "gate failed" not in passing.output


def test_a_check_fails_only_when_the_interval_is_wholly_beyond_the_tolerance():
    def check(metric, low, high, tolerance=0.01):
        return Check("c", "b", "d", GateRule(metric, tolerance), Estimate((low + high) / 2, low, high)).failed

    assert check("accuracy.roc_auc", -0.08, -0.02) and not check("accuracy.roc_auc", -0.08, -0.005)
    assert not check("accuracy.roc_auc", -0.08, -0.02, tolerance=0.03)
    assert check("calibration.ece", 0.02, 0.05) and not check("calibration.ece", 0.005, 0.05)
    assert not check("lexical.fpr.noi", -0.3, -0.1)   # lower is better: a drop is no failure
    assert [r.metric for r in parse_rules(["lexical:0.05"])] == [k for k in METRICS if k.startswith("lexical.")]
    assert parse_rules(["fpr.aae"]) == [GateRule("lexical.fpr.aae", 0.01, asked="fpr.aae")]


def test_gate_misuse_is_refused_before_scoring(tmp_path, hatecheck, fakes):  # noqa: F811
    on = ["--on", f"hatecheck:{hatecheck}", "-o", str(tmp_path / "x")]
    assert "-c prod=SPEC -c candidate=SPEC" in _error(_audit("-c", "fake-good", *on, "--gate"))
    assert "add --gate" in _error(_audit("-c", "fake-good", "-c", "fake-weak", *on, "--junit", "j.xml"))
    assert "did you mean roc_auc" in _error(_audit("-c", "fake-good", "-c", "fake-weak", *on, "--gate",
                                                   "--gate-metric", "roc_acu"))
    assert "ambiguous" in _error(_audit("-c", "fake-good", "-c", "fake-weak", *on, "--gate", "--gate-metric", "noi"))
    assert "not a number" in _error(_audit("-c", "fake-good", "-c", "fake-weak", *on, "--gate", "--gate-metric",
                                           "ece:high"))
    with pytest.raises(Exception, match="--bootstrap 0"):
        from toxiforge.audit.gate import check_gate

        check_gate(2, 0)
    assert "at least 400" in _error(_audit("-c", "fake-good", "-c", "fake-weak", *on, "--gate"))   # 50 resamples
    assert fakes == {}
