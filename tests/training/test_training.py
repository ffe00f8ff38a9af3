"""Fine-tuning and evaluation: a tiny random BERT (built in-process) learns a separable placeholder task; the saved
directory loads in ``transformers.pipeline`` and ``load_classifier``; subsets, reports, the CLI commands and every
bad-input error. One test fine-tunes the embedded MiniLM offline (marked ``embedded``). Nothing is downloaded."""

from __future__ import annotations

import csv
import json
import os
import warnings

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from toxiforge.classifiers import load_classifier
from toxiforge.cli import app
from toxiforge.data import Example, LabeledData
from toxiforge.errors import InputError, ToxiforgeWarning
from toxiforge.records import Row, write_rows
from toxiforge.training.evaluate import evaluate, write_report
from toxiforge.training.metrics import auc_or_reason
from toxiforge.training.subsets import select_subset
from toxiforge.training.trainer import LOG_FILE, TrainConfig, split_heldout, train_classifier

runner = CliRunner()
GROUPS = ["asian", "women", "jewish"]


def synthetic(n: int, offset: int = 0, *, methods: bool = False) -> list[Example]:
    """Separable placeholder task: 'alpha' sentences are label 1, 'beta' sentences label 0."""
    out = []
    for i in range(offset, offset + n):
        method = ("ALICE" if i % 3 == 0 else "top-k") if methods else None
        out.append(Example(f"placeholder sentence alpha {i % 20}", 1, GROUPS[i % 3], method))
        out.append(Example(f"placeholder sentence beta {i % 20}", 0, GROUPS[(i + 1) % 3], method))
    return out


def build_tokenizer():
    from conftest import build_word_tokenizer

    return build_word_tokenizer([e.text for e in synthetic(20)] + ["people enjoy music food and sports"])


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """A tiny random BertModel (no classification head) with its tokenizer, saved like a hub checkpoint."""
    from transformers import BertModel

    from conftest import tiny_bert_config

    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    config = tiny_bert_config(tokenizer)
    folder = tmp_path_factory.mktemp("tiny-bert-base")
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_config(base_dir, **kwargs) -> TrainConfig:
    settings = dict(base_model=str(base_dir), epochs=4, batch_size=4, learning_rate=5e-3, max_length=16,
                    eval_fraction=0.25, logging_steps=2, device="cpu")
    settings.update(kwargs)
    return TrainConfig(**settings)


@pytest.fixture(scope="module")
def trained(base_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("trained") / "model"
    return train_classifier(synthetic(40, methods=True), out, tiny_config(base_dir), progress=False)


def heldout_set() -> LabeledData:
    return LabeledData("held-out", synthetic(15, offset=100, methods=True), layout="table", source="memory")


# --- training --------------------------------------------------------------------------------------------------


def test_tiny_bert_learns_a_separable_task(trained):
    out = trained.output_dir
    report = evaluate(load_classifier(out, device="cpu"), [heldout_set()])
    assert report.results[0].auc.value > 0.9
    log = json.loads((out / LOG_FILE).read_text())
    assert log["train"]["n"] + log["eval"]["n"] == 80 and log["eval"]["toxic"] == 10
    assert [e["epoch"] for e in log["epochs"]] == [1.0, 2.0, 3.0, 4.0]
    assert all(e["eval_auc"] is not None and e["train_loss"] is not None for e in log["epochs"])
    assert log["labels"] == {"0": "benign", "1": "toxic"} and log["train_examples_per_second"] > 0
    assert not (out / "checkpoints").exists()


def test_a_run_that_learned_nothing_warns_and_says_so_in_the_log(base_dir, tmp_path):
    config = tiny_config(base_dir, epochs=2, learning_rate=1e-9, eval_fraction=0.0)  # the loss cannot move
    with pytest.warns(ToxiforgeWarning) as caught:
        result = train_classifier(synthetic(10), tmp_path / "m", config, progress=False)
    messages = [str(w.message) for w in caught if issubclass(w.category, ToxiforgeWarning)]
    assert len(messages) == 2
    assert messages[0].startswith("trained on only 20 rows (10 optimizer steps); with fewer than 100")
    assert "Fix: train on more rows" in messages[0]
    check = json.loads((tmp_path / "m" / LOG_FILE).read_text())["learning_check"]
    assert check == result.log["learning_check"]
    assert check["few_rows"] and check["near_chance"] and check["train_rows"] == 20
    assert check["chance_loss"] == pytest.approx(np.log(2))  # 10 toxic, 10 benign
    assert check["final_train_loss"] == pytest.approx(np.log(2), rel=0.05)
    assert f"the final training loss {check['final_train_loss']:.3f} is within 5% of chance (0.693" in messages[1]
    assert "Fix: more training rows, or more updates (e.g. --epochs 10 --lr 1e-4)" in messages[1]
    assert check["warnings"] == messages


def test_a_run_that_learned_on_enough_rows_does_not_warn(base_dir, tmp_path, trained):
    assert trained.log["learning_check"]["few_rows"] and not trained.log["learning_check"]["near_chance"]
    config = tiny_config(base_dir, epochs=2, batch_size=8, eval_fraction=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ToxiforgeWarning)
        result = train_classifier(synthetic(60), tmp_path / "m", config, progress=False)
    check = result.log["learning_check"]
    assert check["train_rows"] == 120 and not check["few_rows"] and not check["near_chance"]
    assert check["final_train_loss"] < 0.95 * np.log(2) and check["warnings"] == []


def test_chance_loss_is_the_entropy_of_the_toxic_share():
    from toxiforge.training.training_log import chance_loss

    assert chance_loss(0.5) == pytest.approx(np.log(2))
    assert chance_loss(0.25) == pytest.approx(-(0.25 * np.log(0.25) + 0.75 * np.log(0.75)))  # 0.562
    assert chance_loss(0.0) == chance_loss(1.0) == 0.0


def test_saved_directory_loads_in_pipeline_and_load_classifier(trained):
    from transformers import pipeline

    out = str(trained.output_dir)
    config = json.loads((trained.output_dir / "config.json").read_text())
    assert config["id2label"] == {"0": "benign", "1": "toxic"}
    pipe = pipeline("text-classification", model=out, device="cpu")
    predictions = pipe(["placeholder sentence alpha 3", "placeholder sentence beta 3"])
    assert [p["label"] for p in predictions] == ["toxic", "benign"]
    clf = load_classifier(out, device="cpu")
    assert (clf.toxic_index, clf.benign_index) == (1, 0)
    p = clf.predict_proba(["placeholder sentence alpha 3", "placeholder sentence beta 3"])
    assert p[0] > 0.5 > p[1]
    assert np.isclose(p[0], next(x["score"] for x in pipe(["placeholder sentence alpha 3"], top_k=None)[0]
                                 if x["label"] == "toxic"), atol=1e-5)


def test_training_is_seeded(base_dir, tmp_path):
    config = tiny_config(base_dir, max_steps=3, eval_fraction=0.0)
    texts = ["placeholder sentence alpha 1", "placeholder sentence beta 2"]
    scores = []
    for name in ("a", "b"):
        train_classifier(synthetic(10), tmp_path / name, config, progress=False)
        scores.append(load_classifier(tmp_path / name, device="cpu").predict_proba(texts))
    assert np.allclose(scores[0], scores[1], atol=1e-6)
    assert json.loads((tmp_path / "a" / LOG_FILE).read_text())["epochs"][0]["eval_auc"] is None


def test_bf16_trains_with_device_auto_on_a_machine_without_cuda(base_dir, tmp_path, monkeypatch):
    """--bf16 with the default --device auto where there is no GPU trains on the CPU (transformers alone refuses
    bf16 unless told the CPU is meant: `experiment debias --bf16` on this project's CPU machines)."""
    from toxiforge.training import trainer

    monkeypatch.setattr(trainer, "_cuda_available", lambda: False)
    result = train_classifier(synthetic(10), tmp_path / "m", tiny_config(base_dir, max_steps=2, eval_fraction=0.0,
                                                                        device="auto", bf16=True), progress=False)
    scores = load_classifier(result.output_dir, device="cpu").predict_proba(["placeholder sentence alpha 1"])
    assert scores.shape == (1,) and 0.0 <= scores[0] <= 1.0


def test_early_stopping_stops_and_keeps_the_best_epoch(base_dir, tmp_path):
    config = tiny_config(base_dir, epochs=8, early_stopping=1, learning_rate=1e-2)
    result = train_classifier(synthetic(20), tmp_path / "m", config, progress=False)
    epochs = result.log["epochs"]
    assert 2 <= len(epochs) < 8 and result.log["best_checkpoint_metric"] == max(e["eval_auc"] for e in epochs)
    assert not (tmp_path / "m" / "checkpoints").exists() and (tmp_path / "m" / "model.safetensors").is_file()


def test_heldout_split_is_stratified_and_seeded():
    rows = synthetic(20)
    train, held = split_heldout(rows, 0.2, seed=1)
    assert len(held) == 8 and sum(e.label for e in held) == 4 and len(train) == 32
    assert split_heldout(rows, 0.2, seed=1) == (train, held)


def test_subsets_downsample_top_k_to_the_alice_size():
    rows = synthetic(30, methods=True)  # 10 ALICE pairs, 20 top-k pairs
    alice, topk, both = (select_subset(rows, s, seed=0) for s in ("alice", "top-k", "both"))
    assert len(alice) == 20 and all(e.method == "ALICE" for e in alice)
    assert len(topk) == 20 and all(e.method == "top-k" for e in topk) and sum(e.label for e in topk) == 10
    assert sorted(both, key=id) == sorted(alice + topk, key=id) and len(both) == 40
    assert select_subset(rows, "top-k", seed=0) == topk and select_subset(rows, "top-k", seed=5) != topk
    assert len(select_subset(rows, "all")) == 60
    with pytest.raises(InputError, match=r"empty after --subset alice: there are no ALICE rows .*holds 40 top-k"):
        select_subset([e for e in rows if e.method == "top-k"], "alice")
    with pytest.raises(InputError, match="top-k is downsampled to the size of the ALICE part"):
        select_subset([e for e in rows if e.method == "top-k"], "top-k")
    with pytest.raises(InputError, match="unknown subset"):
        select_subset(rows, "beam")


# --- evaluation ------------------------------------------------------------------------------------------------


def test_evaluate_writes_json_markdown_and_png(trained, tmp_path):
    report = evaluate(load_classifier(trained.output_dir, device="cpu"), [heldout_set()])
    paths = write_report(report, tmp_path / "report")
    data = json.loads(paths["json"].read_text())
    entry = data["datasets"][0]
    assert entry["auc"] > 0.9 and set(entry["by_method"]) == {"ALICE", "top-k"}
    assert set(entry["by_group"]) == set(GROUPS)
    markdown = paths["markdown"].read_text()
    assert "| held-out | 30 | 15 | 15 |" in markdown and "by generation method (Table 7)" in markdown
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_single_class_evaluation_set_reports_undefined_auc(trained, tmp_path):
    only_toxic = LabeledData("only-toxic", [e for e in synthetic(5) if e.label == 1], layout="table", source="memory")
    report = evaluate(load_classifier(trained.output_dir, device="cpu"), [only_toxic, heldout_set()])
    auc = report.results[0].auc
    assert auc.value is None and "all 5 examples are toxic" in auc.reason
    paths = write_report(report, tmp_path)
    entry = json.loads(paths["json"].read_text())["datasets"][0]
    assert entry["auc"] is None and "ROC AUC needs both classes" in entry["auc_note"]
    assert "NaN" not in paths["json"].read_text() and "nan" not in paths["markdown"].read_text()
    assert "| only-toxic | 5 | 5 | 0 | n/a |" in paths["markdown"].read_text()
    assert auc_or_reason([0, 1], [0.2, float("nan")]).reason.startswith("undefined: 1 of 2 scores")


# --- bad input -------------------------------------------------------------------------------------------------


def test_bad_training_input(base_dir, tmp_path):
    config = tiny_config(base_dir)
    with pytest.raises(InputError, match="every one of the 5 training examples is toxic"):
        train_classifier([e for e in synthetic(5) if e.label], tmp_path / "a", config, progress=False)
    with pytest.raises(InputError, match="training set is empty"):
        train_classifier([], tmp_path / "b", config, progress=False)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x.txt").write_text("x")
    with pytest.raises(InputError, match="not empty"):
        train_classifier(synthetic(5), tmp_path / "full", config, progress=False)
    with pytest.raises(InputError, match="early stopping needs an evaluation set"):
        train_classifier(synthetic(5), tmp_path / "c", tiny_config(base_dir, eval_fraction=0, early_stopping=1),
                         progress=False)


def test_model_directory_without_a_classification_head(base_dir, tmp_path):
    with pytest.raises(InputError, match="without a sequence-classification head"):
        load_classifier(base_dir, device="cpu")
    result = runner.invoke(app, ["evaluate", "-c", str(base_dir), "--on", str(write_eval_jsonl(tmp_path)),
                                 "-o", str(tmp_path / "r")])
    assert isinstance(result.exception, InputError), result.output


# --- command line ----------------------------------------------------------------------------------------------


def write_eval_jsonl(tmp_path):
    path = tmp_path / "eval.jsonl"
    path.write_text("".join(json.dumps({"text": e.text, "label": e.label}) + "\n" for e in synthetic(8, offset=50)))
    return path


def write_generated(tmp_path, *, with_alice: bool = True):
    rows = [Row(prompt="p", generation=e.text, generation_method=e.method or "top-k", group=e.group or "asian",
                prompt_label=e.label, row_id=f"r/{i}")
            for i, e in enumerate(synthetic(24, methods=True)) if with_alice or e.method == "top-k"]
    write_rows(rows, tmp_path / "gen" / "data" / "shard-00000.parquet")
    return tmp_path / "gen"


def write_annotated_csv(tmp_path):
    from toxiforge.data.toxigen import ANNOTATED_COLUMNS

    path = tmp_path / "humanval.csv"
    with open(path, "w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(ANNOTATED_COLUMNS)
        for e in synthetic(6, offset=70, methods=True):
            score = 4.5 if e.label else 1.5
            values = {"text": e.text, "target_group": e.group, "toxicity_ai": score, "toxicity_human": score,
                      "actual_method": "CBS" if e.method == "ALICE" else "topk"}
            writer.writerow([values.get(c, "") for c in ANNOTATED_COLUMNS])
    return path


TINY = ["--epochs", "2", "--batch-size", "8", "--lr", "3e-3", "--max-length", "16", "--device", "cpu",
        "--no-progress"]


def test_cli_train_and_evaluate(base_dir, tmp_path):
    data = write_generated(tmp_path)
    out = tmp_path / "model"
    result = runner.invoke(app, ["train", "--data", str(data), "--base-model", str(base_dir), "-o", str(out),
                                 "--subset", "both"] + TINY)
    assert result.exit_code == 0, result.output
    assert "training" in result.output and "(16 toxic, 16 benign; subset both)" in result.output
    # issue 27 #18: say what is held out, and the option that sets it
    assert "of which 4 (10% of each label, --eval-fraction) are held out for validation" in result.output
    assert "trains on 28" in result.output
    assert (out / "config.json").is_file() and (out / LOG_FILE).is_file()
    report = tmp_path / "report"
    result = runner.invoke(app, ["evaluate", "-c", str(out), "--on",
                                 f"{write_eval_jsonl(tmp_path)},{write_annotated_csv(tmp_path)}", "-o", str(report),
                                 "--device", "cpu"])
    assert result.exit_code == 0, result.output
    assert {p.name for p in report.iterdir()} == {"evaluation.json", "evaluation.md", "roc.png"}
    names = [d["name"] for d in json.loads((report / "evaluation.json").read_text())["datasets"]]
    assert names == ["eval", "ToxiGen-HumanVal"] and "method: ALICE" in result.output
    assert "* fewer than 30 examples" in result.output  # the small per-group slices are marked


def test_cli_errors(base_dir, tmp_path):
    data = write_generated(tmp_path, with_alice=False)
    result = runner.invoke(app, ["train", "--data", str(data), "--base-model", str(base_dir), "-o",
                                 str(tmp_path / "m"), "--subset", "alice"] + TINY)
    assert isinstance(result.exception, InputError) and "empty after --subset alice" in str(result.exception)
    table = tmp_path / "t.csv"
    table.write_text("sentence,score\nplaceholder,1\n")
    result = runner.invoke(app, ["evaluate", "-c", "profanity-check", "--on", f"table:{table}", "-o",
                                 str(tmp_path / "r")])
    assert isinstance(result.exception, InputError)
    assert "columns found are ['sentence', 'score']" in str(result.exception)


def test_cli_experiment_table4(base_dir, tmp_path):
    out = tmp_path / "t4"
    result = runner.invoke(app, ["experiment", "table4", "--train", str(write_generated(tmp_path)), "--eval",
                                 f"HumanVal={write_annotated_csv(tmp_path)}", "--eval", str(write_eval_jsonl(tmp_path)),
                                 "--base-model", str(base_dir), "-o", str(out)] + TINY)
    assert result.exit_code == 0, result.output
    md = (out / "table4.md").read_text()
    assert "| Model | Test data | None | ALICE | top-k | ALICE + top-k |" in md
    assert "| HumanVal ALICE subset |" in md and "| HumanVal top-k subset |" in md and "| eval |" in md
    assert "zero-shot column empty" in md and "not a classifier" in md
    data = json.loads((out / "table4.json").read_text())
    assert data["train_counts"]["top-k"]["n"] == data["train_counts"]["alice"]["n"] == 16
    assert all(row["ALICE + top-k"]["auc"] is not None for row in data["rows"])
    for variant in ("alice", "top-k", "both"):
        assert (out / variant / "config.json").is_file() and (out / variant / "eval" / "roc.png").is_file()


@pytest.mark.embedded
def test_embedded_minilm_fine_tunes_offline(tmp_path):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = TrainConfig(max_steps=3, batch_size=8, max_length=32, eval_fraction=0.25, device="cpu")
    result = train_classifier(synthetic(8), tmp_path / "minilm", config, progress=False)
    assert result.log["base_model"] == "all-minilm-l6-v2" and result.log["global_steps"] == 3
    clf = load_classifier(tmp_path / "minilm", device="cpu")
    assert type(clf.model).__name__ == "BertForSequenceClassification" and clf.toxic_index == 1
    p = clf.predict_proba(["placeholder sentence alpha 1", "placeholder sentence beta 1"])
    assert p.shape == (2,) and np.all((p > 0) & (p < 1))


def test_an_interrupted_training_leaves_nothing_and_can_be_rerun(base_dir, tmp_path):
    """Issue 27 #7: Ctrl-C used to leave a non-empty -o that the rerun refused."""
    from transformers import TrainerCallback

    from toxiforge.training.trainer import TrainingInterrupted, staging_dir

    class CtrlC(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            assert staging_dir(out).is_dir() and not out.exists()  # training writes beside -o, not into it
            raise KeyboardInterrupt

    out = tmp_path / "model"
    with pytest.raises(TrainingInterrupted) as info:
        train_classifier(synthetic(8), out, tiny_config(base_dir, epochs=1), progress=False, callbacks=[CtrlC()])
    assert f"nothing was written to {out}" in info.value.line() and "run the same command again" in info.value.line()
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    result = train_classifier(synthetic(8), out, tiny_config(base_dir, epochs=1), progress=False)
    assert result.output_dir == out and (out / "config.json").is_file() and (out / LOG_FILE).is_file()
    assert not staging_dir(out).exists() and not (out / "checkpoints").exists()
    again = train_classifier(synthetic(8), out, tiny_config(base_dir, epochs=1), progress=False, overwrite=True)
    assert (again.output_dir / "config.json").is_file() and sorted(p.name for p in tmp_path.iterdir()) == ["model"]
