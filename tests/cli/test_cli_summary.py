"""`toxiforge summary` uses the classifier scores that exist and says whose they are (issue 27 #1)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from toxiforge.cli import app
from toxiforge.records import Row, write_rows

runner = CliRunner()


@pytest.fixture(autouse=True)
def keyword_classifier(monkeypatch):
    """`-c keyword`: a stand-in classifier, P(toxic) 0.9 for texts with the placeholder word 'alpha', else 0.1."""
    import toxiforge.classifiers.registry as registry
    from toxiforge.classifiers.wrap import CallableClassifier

    real = registry.load_classifier

    def load(name, **kwargs):
        if name != "keyword":
            return real(name, **kwargs)
        return CallableClassifier(lambda texts: [0.9 if "alpha" in t else 0.1 for t in texts], name="keyword")

    monkeypatch.setattr(registry, "load_classifier", load)
    import toxiforge.classifiers as package

    monkeypatch.setattr(package, "load_classifier", load, raising=False)  # the lazy export, once resolved


def _run(tmp_path, *, fooled: bool = False):
    """A finished top-k run folder: 4 benign-prompt rows, two of them with the placeholder word 'alpha'."""
    run = tmp_path / "run"
    texts = ["a calm placeholder about weekend plans", "placeholder alpha sentence", "a quiet placeholder line",
             "placeholder alpha words"]
    rows = [Row(prompt="p", generation=t, generation_method="top-k", group="women", prompt_label=0,
                row_id=f"women/benign/{i}", classifier="keyword" if fooled else None,
                classifier_score=0.9 if fooled else None, fooled=(i == 1) if fooled else None)
            for i, t in enumerate(texts)]
    write_rows(rows, run / "data" / "shard-00000.parquet")
    (run / "manifest.json").write_text(json.dumps({"status": "complete", "total_rows": 4}))
    return run


def test_summary_uses_scores_added_by_classify(tmp_path):
    run = _run(tmp_path)
    before = runner.invoke(app, ["summary", str(run)])
    assert before.exit_code == 0 and "no classifier scores: add some with `toxiforge classify" in before.output
    assert runner.invoke(app, ["classify", str(run), "-c", "keyword"]).exit_code == 0
    result = runner.invoke(app, ["summary", str(run)])
    assert result.exit_code == 0, result.output
    assert f"reading {run / 'scored.parquet'}" in result.output
    assert "label flips from column keyword_score (P(toxic) > 0.5 is toxic)" in result.output
    assert "2/4 (50%)" in result.output and "top-k 2/4 (50.0%)" in result.output


def test_summary_score_column_and_generation_scores(tmp_path):
    run = _run(tmp_path, fooled=True)
    result = runner.invoke(app, ["summary", str(run)])
    assert "label flips from keyword (scored during generation)" in result.output
    assert "1/4 (25%)" in result.output
    runner.invoke(app, ["classify", str(run), "-c", "keyword", "--column", "other_score"])
    result = runner.invoke(app, ["summary", str(run)])
    assert "other scores: other_score (show them with --score-column NAME)" in result.output
    result = runner.invoke(app, ["summary", str(run), "--score-column", "other_score"])
    assert "label flips from column other_score" in result.output and "2/4 (50%)" in result.output
    result = runner.invoke(app, ["summary", str(run), "--score-column", "nope"])
    assert "no column 'nope'; the score columns are ['other_score']" in str(result.exception)


def test_summary_ignores_a_scored_file_older_than_the_run(tmp_path):
    import os

    run = _run(tmp_path)
    runner.invoke(app, ["classify", str(run), "-c", "keyword"])
    shard = run / "data" / "shard-00000.parquet"
    os.utime(shard, (shard.stat().st_mtime + 60, shard.stat().st_mtime + 60))
    result = runner.invoke(app, ["summary", str(run)])
    assert "is older than the run's shards, so it is not used" in result.output
    assert f"toxiforge classify {run} -c CLASSIFIER --overwrite" in result.output


def test_summary_of_an_attack_run_counts_attacked_statements_only(tmp_path):
    """Issue 49 item 6: a skipped statement (the classifier already gave its source the other label) is not an
    attack that flipped, so it is in neither the flips nor the denominator of the main table."""
    import pyarrow as pa

    from toxiforge.records import attack_schema, write_table

    def row(i: int, source_score: float, score: float, flipped: bool) -> dict:
        return {"prompt": f"placeholder statement {i}", "generation": f"placeholder statement {i} edited",
                "generation_method": "substitute", "group": "women", "prompt_label": 1, "classifier": "keyword",
                "source_score": source_score, "classifier_score": score, "fooled": score <= 0.5, "flipped": flipped,
                "family": "substitute", "queries": 3, "row_id": f"d/{i}", "edits": "[]", "source_text": "x",
                "hypothesis_rank": 0, "machine_generated": True}

    rows = [row(0, 0.2, 0.2, False),                      # skipped: already scored benign
            row(1, 0.9, 0.3, True), row(2, 0.8, 0.4, True), row(3, 0.9, 0.7, False)]
    run = tmp_path / "attack"
    write_table(pa.Table.from_pylist(rows, schema=attack_schema()), run / "data" / "shard-00000.parquet")
    (run / "manifest.json").write_text(json.dumps({"status": "complete", "total_rows": 4}))
    result = runner.invoke(app, ["summary", str(run)])
    assert result.exit_code == 0, result.output
    assert "2/3 (67%)" in result.output and "substitute 2/3 (66.7%)" in result.output
    assert "3/4" not in result.output and "scored during generation" not in result.output
    assert "source_score" not in result.output   # the source's score is no score of the attacked statements
    assert "attack substitute: 2/3 attacked statements flipped" in result.output
    assert "1 skipped statements (already given the other label before the attack) are not counted" in " ".join(
        result.output.split())
