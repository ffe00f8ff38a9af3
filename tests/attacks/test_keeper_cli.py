"""ALICE's keeper (issue 50) at the commands: generate and attack take --keep-label-with, and every --validate-with
refuses the keeper or a copy of its weights (no self-confirmation), a keeper that is the attacked classifier, a
non-auto --alice-mode and a method without a keeper term, all before any model loads."""

from __future__ import annotations

import shutil

import pytest
import torch
from typer.testing import CliRunner

from toxiforge.cli import app
from toxiforge.errors import InputError
from toxiforge.records import read_table

runner = CliRunner()


@pytest.fixture(scope="module")
def dirs(tmp_path_factory):
    """Three classifier directories: C (attacked), K (the keeper, other weights) and a copy of K; and a table of
    placeholder statements."""
    from transformers import BertForSequenceClassification

    from conftest import build_word_tokenizer, tiny_bert_config

    root = tmp_path_factory.mktemp("keeper")
    words = ["placeholder", "statement", "about", "weekend", "plans", "music", "food", "sports", "notes"]
    tokenizer = build_word_tokenizer([" ".join(words)])
    for name, seed in (("clf", 0), ("keeper", 1)):
        torch.manual_seed(seed)
        model = BertForSequenceClassification(tiny_bert_config(tokenizer, num_labels=2)).eval()
        model.save_pretrained(root / name)
        tokenizer.save_pretrained(root / name)
    shutil.copytree(root / "keeper", root / "keeper-copy")
    (root / "statements.csv").write_text("text,label\n" + "".join(
        f"placeholder statement about {w} {i},{i % 2}\n" for i, w in enumerate(words[2:])))
    return root


def _error(result) -> str:
    assert isinstance(result.exception, InputError), result.output
    return str(result.exception)


def _attack(dirs, out, *extra):
    return runner.invoke(app, ["attack", "--on", str(dirs / "statements.csv"), "--family", "alice", "-c",
                               str(dirs / "clf"), "-o", str(out), "--no-progress", "--device", "cpu", *extra])


@pytest.mark.parametrize("validator", ["keeper", "keeper-copy"])
def test_attack_refuses_the_keeper_or_a_copy_as_validator(dirs, tmp_path, validator):
    result = _attack(dirs, tmp_path / "run", "--keep-label-with", str(dirs / "keeper"), "--validate-with",
                     str(dirs / validator))
    message = _error(result)
    assert "is the keeper" in message and "never saw, or from people" in message
    assert not (tmp_path / "run").exists()


def test_a_keeper_that_is_the_attacked_classifier_is_refused(dirs, tmp_path):
    assert "is the attacked classifier" in _error(_attack(dirs, tmp_path / "run", "--keep-label-with",
                                                          str(dirs / "clf")))
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "gen"), "--method", "alice", "-c",
                                 str(dirs / "clf"), "--keep-label-with", str(dirs / "clf")])
    assert "is the attacked classifier" in _error(result)


@pytest.mark.parametrize("extra, message", [
    (["--method", "alice", "--alice-mode", "false-negatives"], "only auto mode"),
    (["--method", "alice", "--alice-mode", "false-positives"], "only auto mode"),
    (["--method", "top-k"], "--keep-label-with does not apply to the top-k"),
])
def test_generate_refuses_a_keeper_without_auto_alice(dirs, tmp_path, extra, message):
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "gen"), "-c", str(dirs / "clf"),
                                 "--keep-label-with", str(dirs / "keeper"), *extra])
    assert message in _error(result)
    assert not (tmp_path / "gen").exists()


def test_lambda_keep_without_a_keeper_is_refused(dirs, tmp_path):
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "gen"), "--method", "alice", "-c",
                                 str(dirs / "clf"), "--lambda-keep", "2"])
    assert "without a keeper" in _error(result)


def test_attack_alice_with_a_keeper_fills_keeper_score(dirs, tmp_path, tiny_lm):
    """The function `attack --family alice --keep-label-with K` calls (with a short token budget, for speed)."""
    import json

    from toxiforge.attacks.registry import Resources
    from toxiforge.attacks.runner import attack
    from toxiforge.classifiers import load_classifier
    from toxiforge.records import flipped_label

    out = tmp_path / "run"
    attack([str(dirs / "statements.csv")], "alice", str(dirs / "clf"), out, labels=["toxic"],
           settings={"num_beams": 2, "candidates": 4, "max_new_tokens": 4, "keep_label_with": str(dirs / "keeper"),
                     "lambda_keep": 0.8}, resources=Resources(device="cpu", lm=tiny_lm))
    table = read_table(out).to_pylist()
    assert all(r["keeper_score"] is None for r in table if flipped_label(r["source_score"], r["prompt_label"]))
    rows = [r for r in table if r["generation"] and not flipped_label(r["source_score"], r["prompt_label"])]
    assert rows  # the statements ALICE wrote (a source the classifier already got wrong is left as it is)
    keeper = load_classifier(dirs / "keeper", device="cpu")
    expected = keeper.predict_proba([r["generation"] for r in rows])
    assert [r["keeper_score"] for r in rows] == pytest.approx(list(expected), abs=1e-5)
    settings = json.loads(rows[0]["decoding"])
    assert settings["keep_label_with"] == str(dirs / "keeper") and settings["lambda_keep"] == 0.8
    assert settings["keeper_weights"] is not None


def test_generate_with_a_keeper_prints_how_many_statements_it_keeps(dirs, tmp_path, tiny_llama_dir):
    from conftest import write_upstream_layout
    from toxiforge.records import read_rows

    demos = write_upstream_layout(tmp_path / "up", prompts=False) / "demonstrations"
    out = tmp_path / "gen"
    result = runner.invoke(app, ["generate", "-o", str(out), "--method", "alice", "-c", str(dirs / "clf"),
                                 "--keep-label-with", str(dirs / "keeper"), "-d", str(demos), "--groups", "asian",
                                 "-n", "2", "--model", str(tiny_llama_dir), "--beams", "2", "--candidates", "4",
                                 "--max-new-tokens", "3", "--device", "cpu", "--no-progress", "--no-summary"])
    assert result.exit_code == 0, result.output
    rows = [r for r in read_rows(out) if r.keeper_score is not None]
    kept = sum((r.keeper_score > 0.5) == (r.prompt_label == 1) for r in rows)
    assert rows and f"gives the prompt's label to {kept}/{len(rows)} statements" in " ".join(result.output.split())
