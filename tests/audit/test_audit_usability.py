"""`toxiforge audit` as a first user meets it (issue 49): own CSVs with --label-column/--text-column and
comma-separated --on, a set of one label (an attack run of toxic statements) audited with the metrics it has,
options that contradict or were mistyped refused, Ctrl-C anywhere saying how to resume, --overwrite and --resume
never leaving an old report or old figures looking current, and a resumed audit keeping each classifier's
describe()."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import write_csv
from toxiforge.classifiers.wrap import CallableClassifier
from toxiforge.cli import app, interrupted_line

runner = CliRunner()


def _score(text: str) -> float:
    """Toxic-looking for placeholders ending in an odd digit, with some deterministic noise."""
    noise = (zlib.crc32(text.encode()) % 1000) / 1000
    return float(np.clip(0.6 * text.endswith(("1", "3", "5", "7", "9")) + 0.4 * noise, 0, 1))


@pytest.fixture
def loads(monkeypatch):
    """-c fake (any spec; fake-interrupt-load stops while loading), recording the specs loaded."""
    loaded: list[str] = []

    def load(spec, **kwargs):
        if spec == "fake-interrupt-load":
            raise KeyboardInterrupt
        loaded.append(spec)
        return CallableClassifier(lambda texts: [_score(t) for t in texts], name=spec)

    monkeypatch.setattr("toxiforge.classifiers.load_classifier", load)
    return loaded


def _audit(*args):
    return runner.invoke(app, ["audit", *args, "--bootstrap", "20"])


def _error(result) -> str:
    assert result.exit_code != 0, result.output
    return " ".join(str(result.exception).split())


def _report(out):
    return json.loads((out / "report.json").read_text())


def test_own_csv_columns_and_comma_separated_on(tmp_path, loads):
    own = write_csv(tmp_path / "my.csv", ["sentence", "label_gold"],
                    [(f"placeholder statement {i}", i % 2) for i in range(20)])
    other = write_csv(tmp_path / "other.csv", ["sentence", "label_gold"],   # the options apply to every table
                      [(f"placeholder line {i}", i % 2) for i in range(10)])
    refused = _audit("-c", "fake", "--on", str(own), "-o", str(tmp_path / "a"))
    assert "--label-column" in _error(refused)   # the hint names an option audit has
    out = tmp_path / "b"
    result = _audit("-c", "fake", "--on", f"Mine=table:{own},Other=table:{other}", "--text-column", "sentence",
                    "--label-column", "label_gold", "-o", str(out))
    assert result.exit_code == 0, result.output
    datasets = {d["name"]: d for d in _report(out)["datasets"]}
    assert set(datasets) == {"Mine", "Other"} and datasets["Mine"]["n"] == 20 and datasets["Mine"]["toxic"] == 10


def test_a_set_of_one_label_is_audited_with_the_metrics_it_has(tmp_path, loads):
    toxic = write_csv(tmp_path / "toxic.csv", ["text", "label", "group"],
                      [(f"placeholder statement {i}", 1, "women" if i % 2 else "asian") for i in range(30)])
    benign = write_csv(tmp_path / "benign.csv", ["text", "label"], [(f"placeholder note {i}", 0) for i in range(30)])
    out = tmp_path / "a"
    result = _audit("-c", "fake", "-c", "B=fake-b", "--on", f"T=table:{toxic}", "--on", f"N=table:{benign}",
                    "-o", str(out))
    assert result.exit_code == 0, result.output
    report = _report(out)
    t, n = report["results"]["fake"]["T"], report["results"]["fake"]["N"]
    flagged_toxic = np.mean([_score(f"placeholder statement {i}") > 0.5 for i in range(30)])
    flagged_benign = np.mean([_score(f"placeholder note {i}") > 0.5 for i in range(30)])
    assert t["accuracy"]["fnr"]["value"] == pytest.approx(1 - flagged_toxic)
    assert t["accuracy"]["accuracy"]["value"] == pytest.approx(flagged_toxic)
    assert n["accuracy"]["fpr"]["value"] == pytest.approx(flagged_benign)
    for metric in ("roc_auc", "pr_auc", "fpr_at_95_tpr", "fpr"):
        assert t["accuracy"][metric]["value"] is None
    assert n["accuracy"]["f1"]["value"] is None and n["accuracy"]["fnr"]["value"] is None
    assert t["groups"]["final_score"] is None and t["groups"]["by_group"]["women"]["fnr"]["value"] is not None
    assert t["calibration"]["brier"]["value"] is not None
    assert "every row of T is toxic" in t["notes"][0] and "need benign rows too" in t["notes"][0]
    assert report["comparison"]["T"]["B"]["accuracy"]["verdict"] == "no difference shown"   # same scores
    markdown = (out / "report.md").read_text()
    assert "* every row of N is benign" in markdown and "n/a" in markdown
    figures = {p.name for p in (out / "figures").iterdir()}
    assert figures == {"reliability-t.png", "reliability-n.png"}   # no empty ROC or bias-AUC figure


@pytest.mark.parametrize(("extra", "message"), [
    (["--resume", "--overwrite"], "--resume and --overwrite contradict each other"),
    (["--labels", "toxic"], "No such option: --labels"),   # renamed --prompt-labels: not attack's --labels
    (["--attack", "obfuscate"], "No such option: --attack"),   # attack's own name, --family
])
def test_contradicting_or_renamed_options_are_refused(tmp_path, loads, extra, message):
    table = write_csv(tmp_path / "t.csv", ["text", "label"], [("placeholder statement 1", 1), ("placeholder 2", 0)])
    result = _audit("-c", "fake", "--on", str(table), "-o", str(tmp_path / "a"), *extra)
    assert result.exit_code != 0 and message in (result.output + str(result.exception)) and not loads


def test_a_mistyped_kind_says_did_you_mean(tmp_path, loads):
    result = _audit("-c", "fake", "--on", "hatechek:x.csv", "-o", str(tmp_path / "a"))
    assert "unknown dataset kind 'hatechek'" in _error(result) and "did you mean 'hatecheck'" in _error(result)


def test_ctrl_c_while_a_classifier_loads_prints_the_resume_hint(tmp_path, loads):
    table = write_csv(tmp_path / "t.csv", ["text", "label"], [(f"placeholder {i}", i % 2) for i in range(10)])
    out = tmp_path / "a"
    stopped = _audit("-c", "fake", "-c", "fake-interrupt-load", "--on", str(table), "-o", str(out))
    assert stopped.exit_code == 130
    line = interrupted_line(stopped.exception)
    assert line.startswith("interrupted: 1 finished (classifier, dataset) pairs kept in") and "--resume" in line


def test_overwrite_and_resume_leave_no_old_report_or_figures(tmp_path, loads):
    one = write_csv(tmp_path / "one.csv", ["text", "label"], [(f"placeholder {i}", i % 2) for i in range(10)])
    two = write_csv(tmp_path / "two.csv", ["text", "label"], [(f"placeholder line {i}", i % 2) for i in range(10)])
    out = tmp_path / "a"
    assert _audit("-c", "fake", "--on", f"One=table:{one}", "--on", f"Two=table:{two}", "-o", str(out)).exit_code == 0
    assert (out / "figures" / "roc-two.png").exists()
    stopped = _audit("-c", "fake-interrupt-load", "--on", f"One=table:{one}", "-o", str(out), "--overwrite")
    assert stopped.exit_code == 130
    assert not any((out / name).exists() for name in ("report.json", "report.md", "report.html", "figures"))
    again = _audit("-c", "fake", "--on", f"One=table:{one}", "-o", str(out), "--overwrite")
    assert again.exit_code == 0, again.output
    assert {p.name for p in (out / "figures").iterdir()} == {"roc-one.png", "reliability-one.png"}
    assert [d["name"] for d in _report(out)["datasets"]] == ["One"]


def test_a_resumed_audit_keeps_each_classifiers_describe(tmp_path, loads):
    table = write_csv(tmp_path / "t.csv", ["text", "label"], [(f"placeholder {i}", i % 2) for i in range(10)])
    out = tmp_path / "a"
    assert _audit("-c", "fake", "--on", str(table), "-o", str(out)).exit_code == 0
    described = _report(out)["classifiers"][0]["describe"]
    assert described and described["name"] == "fake"
    loads.clear()
    assert _audit("-c", "fake", "--on", str(table), "-o", str(out), "--resume").exit_code == 0
    assert loads == [] and _report(out)["classifiers"][0]["describe"] == described


def test_a_set_a_classifier_was_trained_on_is_marked(tmp_path, loads):
    """profanity-check's package description says its training data includes Davidson et al.'s tweets: a
    davidson: set is marked for it (report.json, a caveat beside its numbers), not for another classifier."""
    rows = [(i, 3, 0, 3 if i % 2 else 0, 0 if i % 2 else 3, 2 if i % 2 else 1, f"placeholder tweet {i}")
            for i in range(12)]
    davidson = write_csv(tmp_path / "labeled_data.csv",
                         ["", "count", "hate_speech", "offensive_language", "neither", "class", "tweet"], rows)
    table = write_csv(tmp_path / "t.csv", ["text", "label"], [(f"placeholder {i}", i % 2) for i in range(10)])
    out = tmp_path / "a"
    result = _audit("-c", "profanity-check", "-c", "other", "--on", f"davidson:{davidson}", "--on", str(table),
                    "-o", str(out))
    assert result.exit_code == 0, result.output
    report = _report(out)
    found = report["results"]["profanity-check"]["Davidson (toxic)"]["contaminated"]
    assert len(found) == 1 and "Davidson et al. 2017" in found[0] and "package description" in found[0]
    assert "contaminated" not in report["results"]["other"]["Davidson (toxic)"]
    assert "contaminated" not in report["results"]["profanity-check"]["t"]
    assert any("Davidson" in t for t in report["classifiers"][0]["trained_on"])
    assert report["classifiers"][1]["trained_on"] == []
    markdown = (out / "report.md").read_text()
    assert "**Caveat: profanity-check was trained on this data**" in markdown
    assert "| profanity-check (trained on this data) |" in markdown and "| other (trained on this data)" not in markdown
    card = markdown.split("## Contents")[0]   # the summary card a reader sees first says it too
    assert "**Caveat:** profanity-check was trained on Davidson (toxic)" in card
    assert "other was trained on" not in card and "trained on t " not in card


def test_classifiers_lists_known_training_data():
    result = runner.invoke(app, ["classifiers"], terminal_width=400)
    assert result.exit_code == 0
    line = next(line for line in result.output.splitlines() if line.strip("│ ").startswith("profanity-check"))
    assert "known training data" in result.output and "Davidson et al. 2017" in " ".join(result.output.split())
    assert "alt-profanity-check" in line


def test_a_judges_concurrency_does_not_invalidate_its_cached_scores():
    """--judge-concurrency changes how fast a server judge scores, not what: an audit resumed with another value
    reuses the scores; a template changes the digest."""
    from toxiforge.audit.scores import classifier_digest

    spec = "judge:openai:http://127.0.0.1:8000/v1#guard"
    assert classifier_digest(spec, {"concurrency": 1}) == classifier_digest(spec, {"concurrency": 16})
    assert classifier_digest(spec, {"concurrency": 1}) == classifier_digest(spec, {})
    assert classifier_digest(spec, {"template": "llama-guard"}) != classifier_digest(spec, {})
