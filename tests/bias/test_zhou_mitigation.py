"""Mitigation as Zhou et al. ran it (issue 21 items 5-11): AFLite ties, visible top-ups, LMIXIN-Dialect, fixed
subsets, training settings, the argmax relabeling rule and the experiment's options. Placeholder text only; the
shared twitteraae model is read from ``../shared/data/twitteraae`` (skipped, saying why, when absent)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toxiforge.bias.aflite import AFLiteConfig, AFLiteResult, aflite, aflite_subset
from toxiforge.bias.experiment import DebiasSettings, run_debias_experiment
from toxiforge.data.examples import Example, LabeledData
from toxiforge.errors import InputError
from toxiforge.training.trainer import TrainConfig

from .conftest import shared_file
from .test_debias import base_dir, one_torch_thread, planted, tiny_config, write_table  # noqa: F401 (fixtures)


def separable(n: int, *, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Toxic rows first, then benign; embeddings so far apart that every row is predictable (ties at 1.0)."""
    rng = np.random.default_rng(seed)
    y = np.array([1] * (n // 2) + [0] * (n - n // 2))
    X = rng.normal(size=(n, 8)).astype(np.float32) * 0.1
    X[:, 0] += np.where(y == 1, 5.0, -5.0)
    return X, y


def test_aflite_breaks_ties_at_random_not_by_file_order():
    X, y = separable(400, seed=0)
    config = AFLiteConfig(target_size=200, ensemble_size=8, cut_size=20, seed=3)
    first = aflite(X, y, config)
    assert np.nanmin(first.predictability) == 1.0  # every row ties
    toxic_first = y[first.kept].mean()
    order = np.random.default_rng(1).permutation(len(y))
    shuffled = aflite(X[order], y[order], config)
    assert 0.4 < toxic_first < 0.6  # file order (toxic first) removed only toxic rows before
    assert abs(y[order][shuffled.kept].mean() - toxic_first) < 0.1


def test_aflite_subset_counts_its_top_ups():
    y = np.array([1, 1, 1, 0, 0, 0, 0, 0, 0, 0])
    result = AFLiteResult(kept=np.array([3, 4, 5, 6, 7]), removed_at=np.array([0, 1, 1, -1, -1, -1, -1, -1, 0, 0]),
                          predictability=np.ones(10), config=AFLiteConfig(target_size=5))
    subset, top_ups = aflite_subset(result, y, 3, seed=0)
    assert top_ups == 1 and y[subset].sum() == 1 and set(subset) - set(result.kept) <= {1, 2}


def test_datamap_regions_record_their_top_ups():
    from toxiforge.bias.datamaps import Dynamics, region_pool, region_subset
    from toxiforge.bias.subsets import count_outside

    confidence = np.linspace(1, 0, 12)
    dynamics = Dynamics(confidence=confidence, variability=np.zeros(12), correctness=np.ones(12), epochs=2)
    labels = np.array([0] * 6 + [1] * 6)  # the easy half is all benign
    subset = region_subset(dynamics, labels, "easy", fraction=0.33, seed=0)
    assert count_outside(subset, region_pool(dynamics, "easy")) == 2 and labels[subset].sum() == 2


def test_paper_settings_and_explicit_options():
    from toxiforge.cli.debias import training_settings

    assert training_settings(paper=True) == {"learning_rate": 1e-5, "batch_size": 8, "warmup": 0.0,
                                             "weight_decay": 0.0, "epochs": 3.0}
    assert training_settings(paper=True, warmup=0.1, batch_size=None)["warmup"] == 0.1
    assert training_settings(weight_decay=0.0, learning_rate=None) == {"weight_decay": 0.0}
    with pytest.raises(InputError, match="--warmup-ratio must be in"):
        training_settings(warmup=1.5)


def test_debias_settings_hold_nothing_out_and_refuse_partial_epochs_up_front():
    settings = DebiasSettings(train=TrainConfig())
    assert settings.train.eval_fraction == 0.0
    with pytest.raises(InputError, match="DataMaps needs at least 2 whole epochs, got --epochs 2.5"):
        DebiasSettings(train=TrainConfig(epochs=2.5))
    assert DebiasSettings(train=TrainConfig(epochs=2.5), methods=("vanilla", "random")).methods == ("Vanilla",
                                                                                                  "Random")


def test_relabel_candidates_are_the_texts_whose_most_probable_dialect_is_aae():
    from toxiforge.bias.relabel import relabel

    rows = [Example(f"placeholder {i}", 1) for i in range(3)]
    dialects = np.array([[0.45, 0.2, 0.15, 0.2],  # AAE most probable, p(AAE) < 0.5
                         [0.3, 0.1, 0.1, 0.5],
                         [np.nan] * 4])
    seen: list[str] = []

    def translate(texts):
        seen.extend(texts)
        return [f"translated {t}" for t in texts]

    result = relabel(rows, p_aae=dialects, translate=translate, classify=lambda t: np.zeros(len(t)))
    assert seen == ["placeholder 0"] and result.labels.tolist() == [0, 1, 1]
    threshold = relabel(rows, p_aae=dialects, translate=translate, classify=lambda t: np.zeros(len(t)),
                        aae_threshold=0.25)
    assert threshold.labels.tolist() == [0, 0, 1]
    with pytest.raises(InputError, match="p\\(AAE\\) alone"):
        relabel(rows, p_aae=dialects[:, 0], translate=translate, classify=lambda t: np.zeros(len(t)))


def test_bias_measure_does_not_call_the_measured_datas_r_aae_table_4():
    from toxiforge.bias.metrics import measure_bias
    from toxiforge.bias.report import render_markdown

    labels = np.array([0, 1, 0, 1])
    p = np.array([[0.7, 0.1, 0.1, 0.1], [0.1, 0.1, 0.1, 0.7]] * 2)
    report = measure_bias(labels, {}, scores=np.array([0.1, 0.9, 0.6, 0.4]), p_dialect=p)
    md = render_markdown(report, name="x", model="m")
    table4 = md[md.index("Dialect bias"):].split("\n\n")[0]
    assert "R_AAE |" not in table4 and "training set's" in md


def test_dialect_bias_only_model_on_the_shared_twitteraae_model():
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.svm import LinearSVC

    from toxiforge.bias.bias_only import bias_only_probabilities, dialect_features
    from toxiforge.bias.dialect import load_dialect_model

    folder = shared_file("twitteraae")
    words = ["we", "finna", "go", "the", "store", "she", "be", "working", "late", "they", "have", "finished"]
    rng = np.random.default_rng(0)
    rows = [Example(" ".join(rng.choice(words, size=6)), i % 2) for i in range(40)]
    probs = bias_only_probabilities(f"dialect:{folder}", rows)
    model = load_dialect_model(folder)
    assert model.likelihood.shape == (191_874, 4)  # the vocabulary size dialect.py's docstring gives
    X = dialect_features([e.text for e in rows], model)
    assert X.shape == (40, 4) and np.allclose(X.sum(axis=1), 1)
    reference = CalibratedClassifierCV(LinearSVC(class_weight="balanced", dual=False, tol=1e-2, max_iter=100_000,
                                                 random_state=0), cv=5).fit(X, [e.label for e in rows])
    np.testing.assert_allclose(probs, reference.predict_proba(X)[:, 1])


def fake_dialect_model():
    from toxiforge.bias.dialect import DialectModel

    words = ["placeholder", "note", "alpha", "beta", "zorblax", "one", "two", "three", "four", "five", "six",
             "seven", "eight"]
    rng = np.random.default_rng(0)
    lik = rng.random((len(words), 4))
    return DialectModel(vocab={w: i for i, w in enumerate(words)}, likelihood=lik / lik.sum(axis=1, keepdims=True))


def test_experiment_fixed_subsets_top_ups_and_the_dialect_row(base_dir, tmp_path, monkeypatch):  # noqa: F811
    """AFLite's survivors lack the toxic label (a stand-in AFLite keeps only benign rows): the run goes on, the
    top-ups are recorded; subsets are drawn once (equal digests over runs) unless redrawn; LMIXIN-Dialect trains."""
    import toxiforge.analysis.embeddings as embeddings
    import toxiforge.bias.aflite as aflite_module

    train, test = planted(60, seed=0), planted(30, seed=100, test=True)
    labels = np.array([e.label for e in train])
    benign = np.flatnonzero(labels == 0)

    def only_benign(X, y, config, **kwargs):
        removed = np.where(labels == 1, 0, -1)
        return AFLiteResult(kept=benign[:30], removed_at=removed, predictability=np.ones(len(y)), config=config)

    monkeypatch.setattr(aflite_module, "aflite", only_benign)
    monkeypatch.setattr(embeddings, "load_encoder", lambda name, device="cpu": None)
    monkeypatch.setattr(embeddings, "embed_texts", lambda texts, encoder: np.zeros((len(texts), 4), np.float32))
    evaluation = LabeledData(name="planted-test", examples=test, layout="table", source="memory")
    config = tiny_config(base_dir, epochs=2, batch_size=16, learning_rate=1e-2)
    methods = ("Vanilla", "LMIXIN-Dialect", "Random", "AFLite")
    result = run_debias_experiment(train, evaluation, tmp_path / "fixed",
                                   DebiasSettings(train=config, runs=2, methods=methods),
                                   dialect_model=fake_dialect_model())
    by = {(r["method"], r["run"]): r for r in result["runs"]}
    assert by["AFLite", 0]["top_ups"] == by["AFLite", 1]["top_ups"] == 10 and by["AFLite", 0]["n_train"] == 20
    assert by["Random", 0]["subset"] == by["Random", 1]["subset"] and by["Random", 0]["seed"] != by["Random", 1]["seed"]
    assert ("LMIXIN-Dialect", 1) in by and by["Vanilla", 0]["subset"] is None
    md = (tmp_path / "fixed" / "debias.md").read_text()
    assert "over 2 training seeds (0..1) on one subset per method" in md
    assert "AFLite: 10 of 20 rows are top-ups" in md and "| LMIXIN-Dialect |" in md
    redrawn = run_debias_experiment(train, evaluation, tmp_path / "redrawn",
                                    DebiasSettings(train=config, runs=2, methods=("Vanilla", "Random"),
                                                   redraw_subsets=True))
    by = {(r["method"], r["run"]): r for r in redrawn["runs"]}
    assert by["Random", 0]["subset"] != by["Random", 1]["subset"]
    assert "each drawing its own subsets" in (tmp_path / "redrawn" / "debias.md").read_text()


def test_cli_experiment_reads_eval_labels_and_relabel_output(base_dir, tmp_path):  # noqa: F811
    """--label-column applies to --eval too, and --relabeled reads `bias relabel`'s table as written."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from toxiforge.bias.relabel import RelabelResult, relabeled_table
    from toxiforge.cli import app

    def table(rows, path):
        pq.write_table(pa.table({"text": [e.text for e in rows], "flag": [e.label for e in rows],
                                 "label": [1 - e.label for e in rows]}), path)
        return path

    rows = planted(40, seed=1)
    train = table(rows, tmp_path / "train.parquet")
    test = table(planted(20, seed=2, test=True), tmp_path / "test.parquet")
    old = np.array([e.label for e in rows])
    result = RelabelResult(labels=old, old_labels=old, p_aae=np.full(len(rows), np.nan),
                           translations=[None] * len(rows), scores=[None] * len(rows), errors=[None] * len(rows))
    relabeled = tmp_path / "relabeled.parquet"
    pq.write_table(relabeled_table(rows, result, method="m", model="lm", seed=0), relabeled)
    args = ["experiment", "debias", "--train", str(train), "--eval", str(test), "-o", str(tmp_path / "x"),
            "--base-model", str(base_dir), "--runs", "1", "--methods", "vanilla,aae-relabeled", "--smoke",
            "--label-column", "flag", "--relabeled", str(relabeled), "--paper-settings", "--lr", "1e-2",
            "--max-length", "16"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    saved = json.loads((tmp_path / "x" / "debias.json").read_text())
    assert saved["eval"]["toxic"] == sum(e.label for e in planted(20, seed=2, test=True))
    assert [r["method"] for r in saved["runs"]] == ["Vanilla", "AAE-relabeled"]
    train_settings = saved["settings"]["train"]
    assert (train_settings["batch_size"], train_settings["warmup"], train_settings["weight_decay"],
            train_settings["learning_rate"]) == (8, 0.0, 0.0, 1e-2)


def test_cli_train_paper_settings_reach_the_trainer(base_dir, tmp_path):  # noqa: F811
    from typer.testing import CliRunner

    from toxiforge.cli import app

    data = write_table(planted(24, seed=3), tmp_path / "train.parquet")
    out = tmp_path / "model"
    result = CliRunner().invoke(app, ["train", "--data", str(data), "--base-model", str(base_dir), "-o", str(out),
                                      "--paper-settings", "--epochs", "1", "--weight-decay", "0.05", "--max-length",
                                      "16", "--eval-fraction", "0", "--device", "cpu", "--no-progress"])
    assert result.exit_code == 0, result.output
    config = json.loads((out / "training_log.json").read_text())["config"]
    assert (config["learning_rate"], config["batch_size"], config["warmup"], config["weight_decay"],
            config["epochs"]) == (1e-5, 8, 0.0, 0.05, 1.0)


def test_experiment_measures_aae_rows_by_argmax_or_a_threshold():
    from toxiforge.bias.experiment import _measure
    from toxiforge.bias.lexicon import load_bias_lexicon

    model = fake_dialect_model()
    rows = [Example(f"placeholder note {w}", i % 2) for i, w in enumerate(["alpha", "beta", "one", "two"] * 3)]
    lexicon = load_bias_lexicon({"noi": ["zorb"]})
    from toxiforge.bias.dialect import predict_dialects

    argmax = _measure(rows, "x", lexicon, model, np.full(len(rows), 0.9))
    assert argmax["n"]["aae"] == (predict_dialects([e.text for e in rows], model).argmax(axis=1) == 0).sum()
    everyone = _measure(rows, "x", lexicon, model, np.full(len(rows), 0.9), aae_threshold=0.0)
    nobody = _measure(rows, "x", lexicon, model, np.full(len(rows), 0.9), aae_threshold=0.99)
    assert (everyone["n"]["aae"], nobody["n"]["aae"]) == (len(rows), 0)
    with pytest.raises(InputError, match="--aae-threshold must be in"):
        DebiasSettings(train=None, aae_threshold=1.5)
