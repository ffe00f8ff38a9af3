"""Per-row loss weights (training/weighted.py, issue 55 item 3): a row of weight k trains as k copies of itself in its
batch, the log and card say a run used weights, ``train --weight-column`` reads them from a table column, and bad
weights are refused. A tiny random BERT without dropout (so that the same rows give the same loss), built in-process;
nothing is downloaded."""

from __future__ import annotations

import csv
import json

import pytest
import torch
from typer.testing import CliRunner

from toxiforge.cli import app
from toxiforge.data import Example
from toxiforge.errors import InputError
from toxiforge.training.trainer import LOG_FILE, TrainConfig, train_classifier
from toxiforge.training.training_log import text_digest
from toxiforge.training.weighted import trainer_for

runner = CliRunner()
ROWS = [Example("placeholder sentence alpha one", 1), Example("placeholder sentence beta two", 0),
        Example("placeholder sentence alpha three", 1), Example("placeholder sentence beta four", 0)]


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    from transformers import BertModel

    from conftest import build_word_tokenizer, tiny_bert_config

    tokenizer = build_word_tokenizer([e.text for e in ROWS])
    torch.manual_seed(0)
    config = tiny_bert_config(tokenizer, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    folder = tmp_path_factory.mktemp("tiny-bert-no-dropout")
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def one_batch(base_dir, **kwargs) -> TrainConfig:
    """Every row in one batch, no warm-up and no held-out rows: each step sees the same rows in any order."""
    return TrainConfig(**{**dict(base_model=str(base_dir), max_steps=3, batch_size=8, learning_rate=1e-2,
                                 max_length=16, eval_fraction=0.0, warmup=0.0, logging_steps=1, device="cpu"),
                          **kwargs})


def step_losses(log) -> list[float]:
    return [e["train_loss"] for e in log["epochs"]]


def test_a_row_of_weight_k_trains_as_k_copies_of_it(base_dir, tmp_path):
    """Three steps on one batch: row 0 at weight 3 gives the losses (and so the updates) of row 0 written three times,
    within float noise; unweighted rows give others. The log and card say the run used weights."""
    weighted = [Example(ROWS[0].text, 1, weight=3.0), *ROWS[1:]]
    copies = [ROWS[0], ROWS[0], *ROWS]
    with pytest.warns(Warning):  # too few rows: the learning check warns
        a = train_classifier(weighted, tmp_path / "weighted", one_batch(base_dir), progress=False)
        b = train_classifier(copies, tmp_path / "copies", one_batch(base_dir), progress=False)
        c = train_classifier(ROWS, tmp_path / "plain", one_batch(base_dir), progress=False)
    assert len(step_losses(a.log)) == 3
    assert step_losses(a.log) == pytest.approx(step_losses(b.log), rel=1e-5, abs=1e-6)
    assert step_losses(a.log)[1:] != pytest.approx(step_losses(c.log)[1:], rel=1e-3)
    assert a.log["objective"] == {"loss": "cross-entropy", "weights": {"rows_weighted": 1, "rows": 4, "min": 1.0,
                                                                       "max": 3.0, "total": 6.0}}
    assert c.log["objective"] == {"loss": "cross-entropy"}  # all weights 1: the plain trainer, as before
    card = (a.output_dir / "README.md").read_text()
    assert "weighted per row (1 of 4 rows weigh other than 1; weights 1 to 3)" in card


def test_held_out_rows_are_named_by_digest_less_texts_also_trained_on(base_dir, tmp_path):
    """training_log.json names the texts held out and never trained on (harden --init continue compares on them)."""
    rows = [*ROWS, Example(ROWS[0].text, 1), Example(ROWS[1].text, 0)]  # a repeated text may sit on both sides
    with pytest.warns(Warning):
        log = train_classifier(rows, tmp_path / "m", one_batch(base_dir, max_steps=1, eval_fraction=0.5),
                               progress=False).log
    from toxiforge.training.trainer import split_heldout

    train, held = split_heldout(rows, 0.5, 0)
    unseen = {text_digest(e.text) for e in held} - {text_digest(e.text) for e in train}
    assert log["held_out"]["share"] == 0.5 and log["held_out"]["rows"] == len(held)
    assert set(log["held_out"]["digests"]) == unseen and len(unseen) < len(held)
    assert text_digest("Placeholder  SENTENCE alpha one") == text_digest(ROWS[0].text)  # folded


def test_weights_with_another_loss_are_refused():
    class LearnedMixinTrainer:
        pass

    assert trainer_for(ROWS, LearnedMixinTrainer, {"x": 1}) == (LearnedMixinTrainer, {"x": 1})  # no weights: as given
    with pytest.raises(InputError, match="weights apply to the cross-entropy loss only, not to LearnedMixinTrainer"):
        trainer_for([Example("a", 1, weight=2.0)], LearnedMixinTrainer, None)


def write_weighted(path, weights):
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label", "loss_weight"])
        for i, w in enumerate(weights):
            writer.writerow([f"placeholder sentence {'alpha' if i % 2 else 'beta'} {i}", i % 2, w])
    return path


def test_cli_train_reads_the_weight_column(base_dir, tmp_path):
    data = write_weighted(tmp_path / "w.csv", ["2", "", "1", "0.5", "1", "1"])
    plain = tmp_path / "plain.csv"
    plain.write_text("text,label\nplaceholder sentence alpha x,1\nplaceholder sentence beta y,0\n")
    out = tmp_path / "m"
    result = runner.invoke(app, ["train", "--data", str(data), "--data", f"table:{plain}", "--weight-column",
                                 "loss_weight", "--base-model", str(base_dir), "-o", str(out), "--max-steps", "1",
                                 "--eval-fraction", "0", "--device", "cpu", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "2 with a loss weight other than 1, --weight-column loss_weight" in result.output
    weights = json.loads((out / LOG_FILE).read_text())["objective"]["weights"]
    assert weights == {"rows_weighted": 2, "rows": 8, "min": 0.5, "max": 2.0, "total": 8.5}


@pytest.mark.parametrize(("args", "message"), [
    (["--weight-column", "nope"], "--weight-column nope: no training table has that column"),
    (["--weight-column", "loss_weight", "--debias", "learned-mixin", "--bias-only", "noi"],
     "--weight-column weighs the cross-entropy loss, and --debias trains with LEARNED-MIXIN's"),
])
def test_cli_weight_column_errors(base_dir, tmp_path, args, message):
    data = write_weighted(tmp_path / "w.csv", ["1", "1"])
    result = runner.invoke(app, ["train", "--data", str(data), "--base-model", str(base_dir), "-o",
                                 str(tmp_path / "m"), *args])
    assert isinstance(result.exception, InputError) and message in str(result.exception)


@pytest.mark.parametrize("bad", ["-1", "0", "heavy", "inf"])
def test_a_weight_that_is_not_above_0_is_refused(base_dir, tmp_path, bad):
    data = write_weighted(tmp_path / "w.csv", ["1", bad])
    result = runner.invoke(app, ["train", "--data", str(data), "--weight-column", "loss_weight", "--base-model",
                                 str(base_dir), "-o", str(tmp_path / "m")])
    assert isinstance(result.exception, InputError)
    assert "of row 1 is not a number above 0" in str(result.exception) and bad in str(result.exception)
