"""`toxiforge attack` end to end on a tiny random BERT classifier: rows, manifest, summary, bad input refused
before any model loads, --overwrite, and a run killed with SIGKILL that --resume finishes with the rows of an
uninterrupted run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from toxiforge.cli import app
from toxiforge.errors import InputError, ToxiforgeWarning
from toxiforge.records import is_toxic, read_table

runner = CliRunner()
WORDS = ["placeholder", "statement", "about", "weekend", "plans", "music", "food", "sports", "group", "alpha",
         "beta", "gamma", "history", "people", "enjoy", "quiet", "river", "morning", "garden", "notes"]
TEXTS = [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(6 + i % 4)) for i in range(12)]
ROW_COLUMNS = ["row_id", "prompt", "generation", "generation_method", "prompt_label", "seed", "classifier_score",
               "fooled", "source_text", "source_score", "family", "edits", "queries", "similarity", "flipped"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """A tiny BERT classifier directory and a table of placeholder statements labelled as the classifier labels
    them (so every one is attacked), half toxic half benign by the classifier's own threshold."""
    from transformers import BertForSequenceClassification

    from conftest import build_word_tokenizer, tiny_bert_config
    from toxiforge.classifiers import load_classifier
    from toxiforge.classifiers.hf import HFClassifier

    root = tmp_path_factory.mktemp("attack")
    tokenizer = build_word_tokenizer([" ".join(WORDS)])
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_bert_config(tokenizer, num_labels=2, initializer_range=0.3)).eval()
    margins = np.diff(HFClassifier(model, tokenizer, device="cpu").class_log_probs(TEXTS).numpy(), axis=1)
    with torch.no_grad():  # centred: about half the statements on each side, where edits move them across
        model.classifier.bias[1] -= float(np.median(margins))
    model.save_pretrained(root / "clf")
    tokenizer.save_pretrained(root / "clf")
    scores = load_classifier(root / "clf", device="cpu").predict_proba(TEXTS)
    table = root / "statements.csv"
    table.write_text("text,label\n" + "".join(f"{t},{int(is_toxic(s))}\n" for t, s in zip(TEXTS, scores)))
    (root / "unlabelled.csv").write_text("text,notes\n" + "".join(f"{t},x\n" for t in TEXTS))
    return root


def attack_args(setup: Path, out: Path, *extra: str) -> list[str]:
    return ["attack", "--on", str(setup / "statements.csv"), "--family", "obfuscate", "-c", str(setup / "clf"),
            "-o", str(out), "--no-progress", "--shard-size", "4", "--device", "cpu", *extra]


def rows_of(out: Path) -> list[dict]:
    return [{c: r[c] for c in ROW_COLUMNS} for r in read_table(out).to_pylist()]


def test_attack_writes_rows_a_manifest_and_a_summary(setup, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, attack_args(setup, out, "--max-edits", "3"))
    assert result.exit_code == 0, result.output
    rows = read_table(out).to_pylist()
    assert len(rows) == len(TEXTS) and len(list((out / "data").iterdir())) == 3
    for r in rows:
        edits = json.loads(r["edits"])
        assert r["family"] == r["generation_method"] == "obfuscate" and len(edits) <= 3
        assert r["source_text"] == r["prompt"] and r["queries"] >= 1 + len(r["source_text"].split())
        assert r["flipped"] == (is_toxic(r["classifier_score"]) != (r["prompt_label"] == 1))  # all were right
        assert r["validator_agrees"] is None and r["similarity"] is None
        if not edits:
            assert r["generation"] == r["source_text"]
    manifest = json.loads((out / "manifest.json").read_text())
    counts = manifest["counts"]
    assert manifest["status"] == "complete" and manifest["config"]["family"] == "obfuscate"
    assert counts["flipped"] == sum(r["flipped"] for r in rows) > 0 and counts["skipped"] == 0
    assert counts["queries"] == sum(r["queries"] for r in rows)
    assert f"{counts['flipped']}/{len(TEXTS)} attacked statements flipped" in result.output
    summary = runner.invoke(app, ["summary", str(out)])
    assert summary.exit_code == 0, summary.output
    assert f"attack obfuscate: {counts['flipped']}/{len(TEXTS)} attacked statements flipped" in summary.output
    assert f"{counts['queries_per_success']:.1f} queries per success" in summary.output


def test_a_validator_checks_every_attacked_statement(setup, tmp_path):
    out = tmp_path / "run"
    result = runner.invoke(app, attack_args(setup, out, "--validate-with", "profanity-check"))
    assert result.exit_code == 0, result.output
    rows = read_table(out).to_pylist()
    assert all(r["validator"] == "profanity-check" and r["validator_agrees"] == (
        is_toxic(r["validator_score"]) == (r["prompt_label"] == 1)) for r in rows)


@pytest.mark.parametrize(("extra", "on", "message"), [
    (["--family", "obfuscte"], "statements.csv", "unknown attack family 'obfuscte'.*did you mean 'obfuscate'"),
    (["--max-edits", "0"], "statements.csv", "max_edits=0 allows no edit.*--max-edits 1 or more"),
    (["--family", "substitute", "--min-similarity", "0"], "statements.csv", r"outside \(0, 1\]"),
    (["--family", "substitute", "--min-similarity", "1.2"], "statements.csv", r"outside \(0, 1\]"),
    (["--min-similarity", "0.9"], "statements.csv", "--min-similarity does not apply to the obfuscate family"),
    ([], "unlabelled.csv", "no label column.*--label-column"),
    (["--batch-size", "0"], "statements.csv", "--batch-size 0 must be at least 1"),
    (["--labels", "benign"], "statements.csv", None),
    (["-c", "profanity-check"], "statements.csv", "-c given 2 times .*it takes one value.*once per classifier"),
    (["--family", "substitute", "--family", "obfuscate"], "statements.csv", "--family given 2 times .*once per "
                                                                           "family"),
    (["--resume", "--overwrite"], "statements.csv", "--resume and --overwrite contradict each other"),
    ([], "hatechek:x.csv", "unknown dataset kind 'hatechek'.*did you mean 'hatecheck'"),
])
def test_bad_input_is_refused_before_any_model_loads(setup, tmp_path, extra, on, message):
    args = attack_args(setup, tmp_path / "run", *extra)
    if "--family" in extra:  # the case's own families instead of attack_args' obfuscate
        del args[args.index("--family"):args.index("--family") + 2]
    args[args.index("--on") + 1] = on if ":" in on else str(setup / on)
    args[args.index("-c") + 1] = str(tmp_path / "no-such-classifier")  # loading it would fail: nothing loaded
    result = runner.invoke(app, args)
    assert isinstance(result.exception, InputError), result.output
    assert message is None or __import__("re").search(message, str(result.exception))
    if message is None:  # a good input gets as far as loading the classifier
        assert "no-such-classifier" in str(result.exception)
    assert not (tmp_path / "run").exists()


def test_a_used_folder_needs_resume_or_overwrite(setup, tmp_path):
    out = tmp_path / "run"
    assert runner.invoke(app, attack_args(setup, out, "--max-edits", "1")).exit_code == 0
    refused = runner.invoke(app, attack_args(setup, out, "--max-edits", "1"))
    assert isinstance(refused.exception, InputError) and "--resume" in str(refused.exception)
    other = runner.invoke(app, attack_args(setup, out, "--max-edits", "2", "--resume"))
    assert isinstance(other.exception, InputError) and "other options: --max-edits 1 (the run) vs 2 (now)" in str(
        other.exception)
    again = runner.invoke(app, attack_args(setup, out, "--max-edits", "2", "--overwrite"))
    assert again.exit_code == 0, again.output
    assert json.loads((out / "manifest.json").read_text())["config"]["settings"]["max_edits"] == 2


KILLED_AFTER_SECOND_SHARD = """
import os, signal, sys
import toxiforge.attacks.runner as runner
real = runner.run_attack
def killed(*args, **kwargs):
    kwargs["on_shard"] = lambda index, path: os.kill(os.getpid(), signal.SIGKILL) if index == 1 else None
    return real(*args, **kwargs)
runner.run_attack = killed
from toxiforge.cli import main
sys.argv = ["toxiforge", *sys.argv[1:]]
main()
"""


def test_a_run_killed_with_sigkill_resumes_to_the_rows_of_an_uninterrupted_run(setup, tmp_path):
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2] / "src"),
                                                         os.environ.get("PYTHONPATH", "")])}
    process = subprocess.run([sys.executable, "-c", KILLED_AFTER_SECOND_SHARD, *attack_args(setup, killed)],
                             capture_output=True, text=True, timeout=300, env=env)
    assert process.returncode == -9, process.stderr
    assert json.loads((killed / "manifest.json").read_text())["status"] == "running"
    with pytest.warns(ToxiforgeWarning, match=r"8 of 12 planned rows .* `toxiforge attack -o .*` command"):
        assert len(read_table(killed)) == 8  # a killed run reads as it is, with the one warning of partial runs
    assert sorted(p.name for p in (killed / "data").iterdir()) == ["shard-00000.parquet", "shard-00001.parquet"]
    resumed = runner.invoke(app, attack_args(setup, killed, "--resume"))
    assert resumed.exit_code == 0, resumed.output
    assert "wrote 4 rows" in resumed.output  # only the missing shard
    assert runner.invoke(app, attack_args(setup, whole)).exit_code == 0
    assert rows_of(killed) == rows_of(whole)
    manifest = json.loads((killed / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["resumed_at"]) == 1


def test_sources_of_a_generation_run_keep_their_prompts_ids_and_seeds(tmp_path):
    from toxiforge.attacks.runner import load_sources
    from toxiforge.records import Row, write_rows

    rows = [Row(prompt=f"- placeholder {i}\n-", generation=f"placeholder statement {i}", generation_method="top-k",
                group="asian", prompt_label=i % 2, row_id=f"asian/x/{i}") for i in range(4)]
    write_rows(rows, tmp_path / "run" / "data" / "shard-00000.parquet")
    toxic = load_sources([str(tmp_path / "run")], labels=["toxic"], seed=3)
    every = load_sources([str(tmp_path / "run")], seed=3)
    assert [s.prompt for s in toxic] == ["- placeholder 1\n-", "- placeholder 3\n-"]  # what ALICE continues
    assert toxic == [s for s in every if s.label == 1]  # the same ids and seeds, whatever else is attacked
    assert len({s.seed for s in every}) == 4
    assert load_sources([str(tmp_path / "run")], seed=4)[0].seed != every[0].seed


def test_an_attack_run_is_a_dataset_with_the_sources_labels(setup, tmp_path):
    """`--on RUN` (audit, evaluate, bias measure) reads an attack run as labelled data: the attacked texts with
    their sources' labels, and the note says the label is the source's own (an attack keeps it), not a proxy."""
    from toxiforge.data import load_specs

    out = tmp_path / "run"
    assert runner.invoke(app, attack_args(setup, out)).exit_code == 0
    data = load_specs([str(out)])[0]
    rows = read_table(out).to_pylist()
    assert [(e.text, e.label) for e in data.examples] == [(r["generation"], r["prompt_label"]) for r in rows
                                                           if r["generation"]]
    assert any("the attacked statement's own label" in note for note in data.notes)


class CallSizes:
    """The keyword classifier, recording how many texts each ``predict_proba`` call scores."""

    def __init__(self):
        from attack_fakes import KeywordClassifier

        self.inner = KeywordClassifier({w: 0.1 for w in WORDS[:6]}, base=0.2)
        self.name, self.num_classes, self.toxic_index, self.benign_index = "keywords", 2, 1, 0
        self.sizes: list[int] = []

    def predict_proba(self, texts):
        self.sizes.append(len(texts))
        return self.inner.predict_proba(texts)

    def describe(self):
        return self.inner.describe()


@pytest.mark.parametrize(("family", "first_call", "batch"), [("obfuscate", 4, 4), ("substitute", 1, 2)])
def test_a_family_that_attacks_together_gets_a_whole_shard_per_call(setup, tmp_path, family, first_call, batch):
    """obfuscate (``together``) scores a shard's 4 source statements in one call and its run records batch 4 (the
    shard); substitute attacks one statement at a time, so the job's batch of 2 stands."""
    from attack_fakes import BagOfWordsEncoder

    from toxiforge.attacks import attack
    from toxiforge.attacks.registry import Resources
    from toxiforge.pipeline.manifest import JobConfig

    clf = CallSizes()
    resources = Resources(embedder=BagOfWordsEncoder(WORDS), vocabulary=WORDS, device="cpu")
    attack([str(setup / "statements.csv")], family, "keywords", tmp_path / "run", loaded_classifier=clf,
           resources=resources, job=JobConfig(batch_size=2, shard_size=4))
    assert clf.sizes[0] == first_call and max(clf.sizes) >= first_call
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["config"]["batch_size"] == batch and manifest["status"] == "complete"
