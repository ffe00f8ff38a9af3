"""`toxiforge experiment debias` (Zhou et al.'s comparison) on planted placeholder data with the tiny BERT."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toxiforge.bias.experiment import DebiasSettings, aggregate, render_markdown, run_debias_experiment
from toxiforge.data.examples import Example, LabeledData
from toxiforge.errors import InputError

from .test_debias import base_dir, one_torch_thread, planted, tiny_config, write_table  # noqa: F401 (fixtures)


def test_aggregate_is_the_mean_and_sample_sd_per_cell():
    runs = [{"method": "Vanilla", "accuracy": 0.5, "f1": {"overall": 0.4, "noi": None}, "n_train": 10},
            {"method": "Vanilla", "accuracy": 0.7, "f1": {"overall": 0.6, "noi": None}, "n_train": 10},
            {"method": "Random", "accuracy": 0.9, "f1": {"overall": 0.8}, "n_train": 4}]
    summary = aggregate(runs)
    assert summary["Vanilla"]["accuracy"] == {"mean": pytest.approx(0.6), "sd": pytest.approx(0.1414213562), "n": 2}
    assert summary["Vanilla"]["f1.noi"] == {"mean": None, "sd": None, "n": 0}
    assert summary["Random"]["accuracy"] == {"mean": 0.9, "sd": None, "n": 1}
    md = render_markdown(summary, runs=2)
    assert "| Vanilla | 60.0 ± 14.1 | 50.0 ± 14.1 |" in md and "| Random | 90.0 | 80.0 |" in md
    assert "| Vanilla | 10 ± 0 |" in md  # Table 1's training rows
    with pytest.raises(InputError, match="unknown methods"):
        DebiasSettings(train=None, methods=("Vanila",))


def test_experiment_trains_measures_and_tabulates_every_method(base_dir, tmp_path):  # noqa: F811
    """Two runs of Vanilla, LMIXIN-ONI (the planted token as the only ONI word), Random, DataMaps-Hard and a
    relabeled copy: each has two measured runs in debias.json, the tables average them, the models are gone."""
    train, test = planted(120, seed=0), planted(80, seed=100, test=True)
    lexicon = tmp_path / "lexicon.csv"
    lexicon.write_text("term,category\nzorblax,oni\n")
    relabeled = [Example(e.text, 1 - e.label if i % 10 == 0 else e.label) for i, e in enumerate(train)]
    settings = DebiasSettings(train=tiny_config(base_dir, epochs=2, batch_size=16, learning_rate=1e-2), runs=2,
                              methods=("Vanilla", "LMIXIN-ONI", "Random", "DataMaps-Hard", "AAE-relabeled"),
                              lexicon=str(lexicon))
    evaluation = LabeledData(name="planted-test", examples=test, layout="table", source="memory")
    result = run_debias_experiment(train, evaluation, tmp_path / "x", settings, relabeled=relabeled)
    saved = json.loads((tmp_path / "x" / "debias.json").read_text())
    assert [(r["method"], r["run"], r["seed"]) for r in saved["runs"]] == [
        (m, run, run) for run in (0, 1) for m in ("Vanilla", "LMIXIN-ONI", "Random", "DataMaps-Hard",
                                                  "AAE-relabeled")]
    by = {(r["method"], r["run"]): r for r in saved["runs"]}
    assert by["Vanilla", 0]["n_train"] == 120 and by["Random", 0]["n_train"] == by["DataMaps-Hard", 1]["n_train"] == 40
    labels = np.array([e.label for e in train])
    token = np.array(["zorblax" in e.text.split() for e in train], dtype=float)
    assert by["Vanilla", 0]["train_r"]["oni"] == pytest.approx(np.corrcoef(token, labels)[0, 1])
    for method in ("Vanilla", "LMIXIN-ONI"):
        accs = [by[method, run]["accuracy"] for run in (0, 1)]
        assert saved["summary"][method]["accuracy"]["mean"] == pytest.approx(np.mean(accs))
        assert saved["summary"][method]["accuracy"]["sd"] == pytest.approx(np.std(accs, ddof=1))
    assert by["Vanilla", 0]["fpr"]["oni"] is not None and by["Vanilla", 0]["n_eval"]["all"] == 80
    md = (tmp_path / "x" / "debias.md").read_text()
    assert "## Table 2" in md and "## Table 4" in md and "| LMIXIN-ONI |" in md and "±" in md
    assert "no dialect model" in md and result["settings"]["runs"] == 2
    assert not (tmp_path / "x" / "models").exists()


def test_cli_experiment_debias(base_dir, tmp_path):  # noqa: F811
    from typer.testing import CliRunner

    from toxiforge.cli import app

    train = write_table(planted(60, seed=1), tmp_path / "train.parquet")
    test = write_table(planted(40, seed=2, test=True), tmp_path / "test.parquet")
    lexicon = tmp_path / "lexicon.csv"
    lexicon.write_text("term,category\nzorblax,oni\n")
    args = ["experiment", "debias", "--train", str(train), "--eval", str(test), "-o", str(tmp_path / "x"),
            "--base-model", str(base_dir), "--runs", "1", "--methods", "Vanilla,LMIXIN-TOXTRIG,DataMaps-Easy",
            "--lexicon", str(lexicon), "--smoke", "--lr", "1e-2", "--keep-models"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "x" / "debias.json").read_text())
    assert [r["method"] for r in saved["runs"]] == ["Vanilla", "LMIXIN-TOXTRIG", "DataMaps-Easy"]
    assert saved["settings"]["train"]["epochs"] == 2 and saved["settings"]["train"]["learning_rate"] == 1e-2
    assert (tmp_path / "x" / "models" / "run0" / "LMIXIN-TOXTRIG" / "config.json").exists()
    bad = CliRunner().invoke(app, args[:-1] + ["--methods", "Vanilla,Aflight", "--overwrite"])
    assert isinstance(bad.exception, InputError) and "unknown methods" in str(bad.exception)
