"""The gate fails closed and says so where its reader looks (issue 56, items 1, 2 and 8): a gated metric measured
on no dataset is no pass (exit 3, a JUnit error, one line with the reason), a bootstrap too small for a 95%
interval is refused, FPR and FNR at the threshold are gated (so a gate on accuracy sees a candidate that trades
missed toxic rows for flagged benign ones), the verdict tops report.md, report.html and report.json, and a --junit
path that cannot be written is refused before scoring, an old one removed when scoring starts."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from audit.test_audit_cli import _error, fakes, hatecheck, runner, table  # noqa: F401 (fixtures)
from audit.test_audit_gate import gate_audit
from audit.test_audit_report import silent  # noqa: F401 (fixtures)
from toxiforge.audit.gate import EXIT_UNMEASURED, check_gate, parse_rules
from toxiforge.classifiers.wrap import CallableClassifier
from toxiforge.cli import app


def _suite(path):
    return ET.parse(path).getroot().find("testsuite")


def test_a_gated_metric_measured_on_no_dataset_fails_with_its_own_exit_code(tmp_path, table, fakes):  # noqa: F811
    """The issue's Davidson case: over-blocking is a HateCheck number; gated on a plain table it measured nothing,
    which used to print "gate passed: 0 checks" and exit 0."""
    junit = tmp_path / "gate.xml"
    result = gate_audit("-c", "prod=fake-good", "-c", "candidate=fake-weak", "--on", f"T=table:{table}",
                        "-o", str(tmp_path / "out"), "--gate-metric", "hatecheck.over_blocking", "--junit", str(junit))
    assert result.exit_code == EXIT_UNMEASURED == 3, result.output
    lines = [line for line in result.output.splitlines() if line.startswith("gate measured nothing")]
    assert lines == ["gate measured nothing: --gate-metric hatecheck.over_blocking (over-blocking) was measured on "
                     "no dataset for candidate (T: not a HateCheck set, no functional tests)"]
    assert "gate passed" not in result.output
    suite = _suite(junit)
    assert (suite.get("tests"), suite.get("errors"), suite.get("skipped"), suite.get("failures")) == ("1", "1", "0",
                                                                                                        "0")
    assert "not measured on T: not a HateCheck set" in suite.find("testcase/error").get("message")
    gate = json.loads((tmp_path / "out" / "report.json").read_text())["gate"]
    assert gate["status"] == "measured nothing" and not gate["passed"] and gate["exit_status"] == 3


def test_a_candidate_that_flags_nothing_passes_neither_lexical_nor_the_default_gate(tmp_path, hatecheck,  # noqa: F811
                                                                                     silent, monkeypatch):  # noqa: F811
    """The issue's second case: on HateCheck-shaped placeholders (no NOI/OI/ONI/AAE rows) --gate-metric lexical
    measured nothing (8 skipped, exit 0); the default gate now checks FNR at the threshold too.

    With a cache of its own: an OI word list that an earlier test of the session left in the cache (``--oi-list``
    keeps a copy) turns the OI slice on, and the reason below changes (it failed so under pytest-xdist)."""
    monkeypatch.setenv("TOXIFORGE_CACHE", str(tmp_path / "cache"))
    on = ["-c", "prod=fake-good", "-c", "candidate=fake-none", "--on", f"hatecheck:{hatecheck}"]
    junit = tmp_path / "lexical.xml"
    lexical = gate_audit(*on, "-o", str(tmp_path / "a"), "--gate-metric", "lexical", "--junit", str(junit))
    assert lexical.exit_code == 3, lexical.output
    assert "gate measured nothing: --gate-metric lexical (its 8 metrics) was measured on no dataset for candidate " \
           "(HateCheck: no benign rows in the NOI slice, no OI word list was given (--oi-list), " in lexical.output
    suite = _suite(junit)
    assert (suite.get("tests"), suite.get("errors"), suite.get("skipped")) == ("8", "8", "0")
    default = gate_audit(*on, "-o", str(tmp_path / "b"))
    assert default.exit_code == 1, default.output
    assert any(line.startswith("gate failed: candidate vs prod on HateCheck: FNR (accuracy.fnr) +")
               for line in default.output.splitlines())


def test_gate_refuses_a_bootstrap_too_small_for_its_interval(tmp_path, table, fakes):  # noqa: F811
    for n_boot in (0, 1, 50, 399):
        with pytest.raises(Exception, match=f"--bootstrap {n_boot}"):
            check_gate(2, n_boot)
    check_gate(2, 400)
    refused = runner.invoke(app, ["audit", "-c", "fake-good", "-c", "fake-weak", "--on", f"table:{table}", "-o",
                                  str(tmp_path / "x"), "--gate", "--bootstrap", "1"])
    assert "--bootstrap 1 is too few resamples" in _error(refused) and "pass at least 400" in _error(refused)
    assert fakes == {}   # before scoring


def test_fpr_and_fnr_at_the_threshold_are_gateable_metrics():
    assert [r.metric for r in parse_rules(["fnr"])] == ["accuracy.fnr"]
    assert [r.metric for r in parse_rules(["accuracy.fnr:0.05"])] == ["accuracy.fnr"]
    assert [r.metric for r in parse_rules(["accuracy.fpr"])] == ["accuracy.fpr"]
    assert {"accuracy.fpr", "accuracy.fnr"} <= {r.metric for r in parse_rules(["accuracy"])}


@pytest.fixture
def trading(monkeypatch):
    """-c prod / trader on the ``table`` fixture's rows (``... sentence i``, toxic when i is odd): the same ranking,
    a lower threshold for trader. prod flags 10 of the 20 toxic rows and no benign one; trader all 20 toxic rows
    and 10 benign ones: the same accuracy (30 of 40), F1 better, FPR 0 -> 0.5."""

    def prod(text: str) -> float:
        i = int(text.rsplit(" ", 1)[1])
        if i % 2:
            return (0.8 if i % 4 == 1 else 0.45) + i / 1000
        return (0.42 if i % 4 == 0 else 0.1) + i / 1000

    def load(spec, **kwargs):
        shift = 0.1 if spec == "trader" else 0.0
        return CallableClassifier(lambda texts: [min(prod(t) + shift, 1.0) for t in texts], name=spec)

    monkeypatch.setattr("toxiforge.classifiers.load_classifier", load)


def test_a_gate_on_accuracy_fails_when_the_candidate_flags_many_more_benign_rows(tmp_path, table,  # noqa: F811
                                                                                   trading):
    """The issue's case: --gate-metric accuracy passed while the candidate's FPR went 0.459 -> 0.792."""
    out = tmp_path / "out"
    result = gate_audit("-c", "prod", "-c", "trader", "--on", f"T=table:{table}", "-o", str(out),
                        "--gate-metric", "accuracy:0.05")
    assert result.exit_code == 1, result.output
    failed = [line for line in result.output.splitlines() if line.startswith("gate failed")]
    assert len(failed) == 1 and failed[0].startswith("gate failed: trader vs prod on T: FPR (accuracy.fpr) +0.500")
    report = json.loads((out / "report.json").read_text())
    accuracy = report["comparison"]["T"]["trader"]["accuracy"]
    assert accuracy["metrics"]["accuracy"]["value"] == 0 and accuracy["verdict"] == "mixed"   # FPR worse, FNR better
    assert accuracy["metrics"]["fnr"]["better"] and accuracy["metrics"]["fpr"]["better"] is False
    markdown = (out / "report.md").read_text()
    differences = markdown.split("### Differences from prod")[1]
    assert "| trader | FPR | +0.500" in differences and "| trader | FNR | -0.500" in differences


def test_the_verdict_tops_every_report_file(tmp_path, table, trading):  # noqa: F811
    out = tmp_path / "out"
    gate_audit("-c", "prod", "-c", "trader", "--on", f"T=table:{table}", "-o", str(out), "--gate-metric", "fpr")
    markdown = (out / "report.md").read_text()
    head = markdown.split("## Summary")[0]
    assert "## Gate: failed" in head and "**gate: 1 of 1 checks failed**" in head
    assert "* gate failed: trader vs prod on T: FPR (accuracy.fpr) +0.500" in head
    page = (out / "report.html").read_text()
    assert page.index('<h2 id="gate-failed">') < page.index('<h2 id="summary')
    assert '<section class="card"><h2 id="gate-failed">' in page
    report = json.loads((out / "report.json").read_text())
    assert list(report)[:2] == ["schema", "gate"]
    assert report["gate"]["status"] == "failed" and report["gate"]["failed"][0]["metric"] == "accuracy.fpr"


def test_junit_that_cannot_be_written_is_refused_before_scoring(tmp_path, table, fakes):  # noqa: F811
    on = ["-c", "fake-good", "-c", "fake-weak", "--on", f"table:{table}", "--gate"]
    folder = tmp_path / "reports"
    folder.mkdir()
    assert "--junit is a folder" in _error(gate_audit(*on, "-o", str(tmp_path / "a"), "--junit", str(folder)))
    afile = tmp_path / "notes.txt"
    afile.write_text("a file")
    under = _error(gate_audit(*on, "-o", str(tmp_path / "b"), "--junit", str(afile / "gate.xml")))
    assert f"{afile} is a file" in under
    assert fakes == {} and not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_ctrl_c_removes_an_old_junit_file_with_the_old_report(tmp_path, table, fakes):  # noqa: F811
    junit = tmp_path / "ci" / "gate.xml"
    junit.parent.mkdir()
    junit.write_text("<testsuites/>\n")   # the verdict of an earlier audit
    out = tmp_path / "out"
    stopped = gate_audit("-c", "fake-good", "-c", "fake-interrupt", "--on", f"table:{table}", "-o", str(out),
                         "--junit", str(junit))
    assert stopped.exit_code == 130
    assert not junit.exists()
