"""Bias mitigation (Zhou et al. 2021 §3): DataMaps, AFLite, the random baseline and LEARNED-MIXIN(+H).

Everything trains a tiny random BERT with a word-level tokenizer built in-process, on neutral placeholder text.
The planted-shortcut proofs (the stand-in token "zorblax" goes with the toxic label in the training rows) are at
the end. Nothing is downloaded.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from toxiforge.bias.aflite import AFLiteConfig, aflite, predictability, run_aflite
from toxiforge.bias.datamaps import REGIONS, DataMapRecorder, Dynamics, region_subset, run_datamap, training_dynamics
from toxiforge.bias.metrics import pearson_r
from toxiforge.bias.subsets import keep_label_ratio, label_quota, random_subset
from toxiforge.data import Example
from toxiforge.errors import InputError
from toxiforge.training.trainer import TrainConfig, train_classifier

SIGNALS = ["alpha", "beta"]
FILLERS = ["one", "two", "three", "four", "five", "six", "seven", "eight"]
SHORTCUT = "zorblax"


def shortcut_data(n: int, *, seed: int, signal_rate: float = 0.8, shortcut_toxic: float = 0.9,
                  shortcut_benign: float = 0.05) -> list[Example]:
    """Placeholder rows: label 1 rows say "alpha" with ``signal_rate`` (else "beta"), label 0 the reverse; the
    shortcut token appears in ``shortcut_toxic`` of label-1 rows and ``shortcut_benign`` of label-0 rows."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = i % 2
        signal = SIGNALS[0 if (rng.random() < signal_rate) == bool(label) else 1]
        words = ["placeholder", "note", signal, FILLERS[rng.integers(len(FILLERS))]]
        if rng.random() < (shortcut_toxic if label else shortcut_benign):
            words.insert(int(rng.integers(len(words) + 1)), SHORTCUT)
        rows.append(Example(" ".join(words), label))
    return rows


def has_shortcut(rows) -> np.ndarray:
    return np.array([SHORTCUT in e.text.split() for e in rows], dtype=float)


@pytest.fixture(autouse=True, scope="module")
def one_torch_thread():
    """Tiny models train ~15x faster on one thread when the 2-core machine is shared (measured: one epoch of 200
    rows 49 s with torch's default 2 threads, 2.9 s with 1, load average ~15)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def build_tokenizer():
    from conftest import build_word_tokenizer

    return build_word_tokenizer([" ".join(["placeholder note", SHORTCUT] + SIGNALS + FILLERS)])


def save_tiny_bert(folder, **overrides):
    """A tiny random BertModel without dropout (so training-time and eval-time passes agree), seeded, saved."""
    from transformers import BertModel

    from conftest import tiny_bert_config

    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    config = tiny_bert_config(tokenizer, max_position_embeddings=32, hidden_dropout_prob=0.0,
                              attention_probs_dropout_prob=0.0, **overrides)
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert-debias"))


def tiny_config(base_dir, **kwargs) -> TrainConfig:
    settings = dict(base_model=str(base_dir), epochs=4, batch_size=16, learning_rate=5e-3, max_length=16,
                    eval_fraction=0.0, logging_steps=5, device="cpu")
    settings.update(kwargs)
    return TrainConfig(**settings)


def gold_probabilities(model_dir, rows) -> np.ndarray:
    from toxiforge.classifiers import load_classifier

    toxic = load_classifier(model_dir, device="cpu").predict_proba([e.text for e in rows])
    return np.where(np.array([e.label for e in rows]) == 1, toxic, 1 - toxic)


# --- subsets and the random baseline ---------------------------------------------------------------------------


def test_keep_label_ratio_samples_the_pool_with_the_original_ratio():
    labels = [1] * 30 + [0] * 70
    assert label_quota(labels, 33) == {1: 10, 0: 23}
    picked = keep_label_ratio(range(100), labels, 33, seed=3)
    assert len(picked) == 33 and sum(labels[i] for i in picked) == 10 and len(set(picked)) == 33
    assert np.array_equal(picked, keep_label_ratio(range(100), labels, 33, seed=3))
    # a pool short of toxic rows is filled from the fallback ranking, in its order
    pool = list(range(30, 80))  # benign only
    picked = keep_label_ratio(pool, labels, 20, seed=0, fallback=[9, 8, 7, 6, 5, 4, 3, 2] + pool)
    assert sorted(i for i in picked if labels[i]) == [4, 5, 6, 7, 8, 9] and len(picked) == 20
    with pytest.raises(InputError, match="fewer than the 6"):
        keep_label_ratio(pool, labels, 20, seed=0)
    assert np.array_equal(random_subset(labels, 33, seed=1), keep_label_ratio(range(100), labels, 33, seed=1))


# --- DataMaps --------------------------------------------------------------------------------------------------


def test_training_dynamics_by_hand():
    p = np.array([[0.9, 0.2, 0.5], [0.7, 0.4, 0.5], [0.8, 0.9, 0.5]])
    c = np.array([[1, 0, 0], [1, 0, 1], [1, 1, 0]])
    d = training_dynamics(p, c)
    assert np.allclose(d.confidence, [0.8, 0.5, 0.5])
    assert np.allclose(d.variability, [np.sqrt(0.02 / 3), np.sqrt(0.26 / 3), 0.0])
    assert np.allclose(d.correctness, [1.0, 1 / 3, 1 / 3]) and d.epochs == 3
    with pytest.raises(InputError, match="1 examples were not seen"):
        training_dynamics(np.array([[0.5, np.nan]]), np.zeros((1, 2)))


def test_regions_rank_by_confidence_and_variability():
    confidence = np.linspace(0.05, 0.95, 12)
    variability = np.array([0.3, 0.0, 0.29, 0.0, 0.28, 0.0, 0.27, 0.0, 0.0, 0.0, 0.0, 0.0])
    d = Dynamics(confidence=confidence, variability=variability, correctness=confidence, epochs=3)
    labels = [0, 1] * 6
    easy = region_subset(d, labels, "easy", fraction=1 / 3, pool_fraction=1 / 3)
    hard = region_subset(d, labels, "hard", fraction=1 / 3, pool_fraction=1 / 3)
    ambiguous = region_subset(d, labels, "ambiguous", fraction=1 / 3, pool_fraction=1 / 2)
    assert list(easy) == [8, 9, 10, 11] and list(hard) == [0, 1, 2, 3]
    assert set(ambiguous) <= {0, 2, 4, 6, 1, 3} and sum(labels[i] for i in ambiguous) == 2
    with pytest.raises(InputError, match="unknown data-map region"):
        region_subset(d, labels, "medium")


def test_recorder_sees_every_example_with_its_own_probability(base_dir, tmp_path):
    """With learning rate 0 the model never changes, so each recorded p(gold) must equal a separate forward pass
    of the saved model on that very example: the positions in the batches line up with the examples."""
    rows = shortcut_data(40, seed=1)
    rec = DataMapRecorder(len(rows))
    train_classifier(rows, tmp_path / "m", tiny_config(base_dir, epochs=2, learning_rate=0.0, batch_size=8),
                     progress=False, callbacks=[rec])
    assert len(rec.probabilities) == 2
    reference = gold_probabilities(tmp_path / "m", rows)
    for epoch in rec.probabilities:
        assert np.allclose(epoch, reference, atol=1e-5)
    assert np.allclose(rec.dynamics().variability, 0, atol=1e-5)


def test_datamap_writes_dynamics_subsets_and_plot(base_dir, tmp_path):
    rows = shortcut_data(60, seed=2)
    result = run_datamap(rows, tmp_path / "dm", tiny_config(base_dir, epochs=3), model_dir=tmp_path / "model")
    table = pq.read_table(tmp_path / "dm" / "dynamics.parquet")
    assert table.column_names == ["id", "text", "label", "group", "method", "confidence", "variability",
                                  "correctness"] and table.num_rows == 60
    assert set(np.round(np.array(table.column("correctness")) * 3, 6)) <= {0, 1, 2, 3}
    for region in REGIONS:
        subset = pq.read_table(tmp_path / "dm" / f"{region}.parquet")
        assert subset.num_rows == 20 and sum(subset.column("label").to_pylist()) == 10
        assert subset.column("id").to_pylist() == sorted(result.subsets[region].tolist())
    easy = pq.read_table(tmp_path / "dm" / "easy.parquet").column("confidence").to_numpy()
    hard = pq.read_table(tmp_path / "dm" / "hard.parquet").column("confidence").to_numpy()
    assert easy.mean() > hard.mean()
    assert (tmp_path / "dm" / "datamap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    log = json.loads((tmp_path / "dm" / "datamap.json").read_text())
    assert log["epochs"] == 3 and log["sizes"] == {"easy": 20, "ambiguous": 20, "hard": 20}
    with pytest.raises(InputError, match="at least 2 whole epochs"):
        run_datamap(rows, tmp_path / "dm2", tiny_config(base_dir, epochs=1))


# --- AFLite ----------------------------------------------------------------------------------------------------


def test_ridge_ensemble_equals_scikit_learn_ridge_classifier():
    """One ensemble member, rebuilt from the same random draws, against RidgeClassifier on its training rows."""
    from sklearn.linear_model import RidgeClassifier

    rng = np.random.default_rng(0)
    X = rng.standard_normal((640, 5)).astype(np.float32)
    y = (X[:, 0] + 0.7 * rng.standard_normal(640) > 0).astype(int)
    config = AFLiteConfig(target_size=400, ensemble_size=1, train_size=200).resolved(640)
    p = predictability(X, y, config, np.random.default_rng(1))
    draws = np.random.default_rng(1)
    blocks = np.array_split(draws.permutation(640), 64)
    chosen = draws.choice(64, size=20, replace=False)  # 200 rows / 10-row slices
    train = np.concatenate([blocks[j] for j in chosen])
    test = np.setdiff1d(np.arange(640), train)
    expected = RidgeClassifier(alpha=1.0).fit(X[train], y[train]).predict(X[test]) == y[test]
    assert np.isnan(p[train]).all() and np.array_equal(p[test], expected.astype(float))


def test_aflite_removes_the_predictable_rows_first():
    """Half the rows carry their label in feature 0 (predictable), half are noise: AFLite keeps the noise."""
    rng = np.random.default_rng(0)
    n = 800
    y = rng.integers(0, 2, n)
    X = rng.standard_normal((n, 8)).astype(np.float32)
    easy = np.arange(n) < n // 2
    X[easy, 0] = np.where(y[easy] == 1, 3.0, -3.0)
    X[~easy, 0] = 0.0
    result = aflite(X, y, AFLiteConfig(target_size=400, ensemble_size=16, cut_size=100, seed=0))
    assert len(result.kept) == 400 and not result.stopped_early
    assert easy[result.kept].mean() < 0.1
    assert [h["removed"] for h in result.history] == [100, 100, 100, 100]
    assert (result.removed_at[result.kept] == -1).all() and (result.removed_at >= 0).sum() == 400


def test_aflite_stops_early_when_nothing_reaches_tau():
    rng = np.random.default_rng(1)
    X = rng.standard_normal((400, 4)).astype(np.float32)
    y = rng.integers(0, 2, 400)
    result = aflite(X, y, AFLiteConfig(target_size=100, ensemble_size=8, cut_size=50, threshold=0.95))
    assert result.stopped_early and len(result.kept) > 100


def test_aflite_logistic_and_bad_parameters():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((200, 3)).astype(np.float32)
    y = (X[:, 0] > 0).astype(int)
    result = aflite(X, y, AFLiteConfig(target_size=150, ensemble_size=4, cut_size=25, classifier="logistic"))
    assert len(result.kept) == 150
    with pytest.raises(InputError, match="not smaller than the data"):
        aflite(X, y, AFLiteConfig(target_size=200))
    with pytest.raises(InputError, match="below the target size"):
        AFLiteConfig(target_size=10, train_size=10)
    with pytest.raises(InputError, match="unknown AFLite classifier"):
        AFLiteConfig(target_size=10, classifier="svm")


def test_run_aflite_writes_scores_and_a_ratio_keeping_subset(tmp_path):
    rows = shortcut_data(200, seed=3)
    X = bag_of_words(rows)
    result, subset = run_aflite(rows, tmp_path / "af", AFLiteConfig(target_size=100, ensemble_size=8, seed=0),
                                embeddings=X, subset_size=66, embed_seconds=0.5)
    table = pq.read_table(tmp_path / "af" / "aflite.parquet")
    assert table.num_rows == 66 and sum(table.column("label").to_pylist()) == 33
    assert set(table.column("id").to_pylist()) <= set(result.kept.tolist())
    scores = pq.read_table(tmp_path / "af" / "scores.parquet")
    assert scores.num_rows == 200 and (np.array(scores.column("removed_at")) == -1).sum() == len(result.kept)
    log = json.loads((tmp_path / "af" / "aflite.json").read_text())
    assert log["embed_seconds"] == 0.5 and log["config"]["train_size"] == 50 and log["subset"] == 66


def bag_of_words(rows) -> np.ndarray:
    """Word-presence vectors: a transparent stand-in for sentence embeddings."""
    vocab = {w: i for i, w in enumerate(["placeholder", "note", SHORTCUT] + SIGNALS + FILLERS)}
    X = np.zeros((len(rows), len(vocab)), dtype=np.float32)
    for r, e in enumerate(rows):
        for w in e.text.split():
            X[r, vocab[w]] = 1.0
    return X


# --- command line ----------------------------------------------------------------------------------------------


def write_table(rows, path):
    import pyarrow as pa

    pq.write_table(pa.table({"text": [e.text for e in rows], "label": [e.label for e in rows]}), path)
    return path


def test_cli_datamap(base_dir, tmp_path):
    from typer.testing import CliRunner

    from toxiforge.cli import app

    data = write_table(shortcut_data(30, seed=4), tmp_path / "train.parquet")
    result = CliRunner().invoke(app, ["bias", "datamap", str(data), "-o", str(tmp_path / "dm"), "--base-model",
                                      str(base_dir), "--epochs", "2", "--batch-size", "8", "--lr", "5e-3",
                                      "--device", "cpu", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "ambiguous 10" in result.output
    assert pq.read_table(tmp_path / "dm" / "hard.parquet").num_rows == 10
    again = CliRunner().invoke(app, ["bias", "datamap", str(data), "-o", str(tmp_path / "dm"), "--base-model",
                                     str(base_dir)])
    assert isinstance(again.exception, InputError) and "not empty" in str(again.exception)


def test_cli_datamap_keeps_train_defaults_for_unset_options(tmp_path, monkeypatch):
    """Unset --batch-size/--lr/--max-length keep TrainConfig's defaults (they used to be passed as None, which
    crashed the Trainer and lifted the 128-token cap); the given ones are used."""
    from typer.testing import CliRunner

    import toxiforge.bias.datamaps as datamaps
    from toxiforge.cli import app

    seen = []

    def capture(rows, out, config, **kwargs):
        seen.append(config)
        raise InputError("stop after building the config")

    monkeypatch.setattr(datamaps, "run_datamap", capture)
    data = write_table(shortcut_data(12, seed=4), tmp_path / "train.parquet")
    CliRunner().invoke(app, ["bias", "datamap", str(data), "-o", str(tmp_path / "a"), "--epochs", "2"])
    CliRunner().invoke(app, ["bias", "datamap", str(data), "-o", str(tmp_path / "b"), "--batch-size", "8"])
    defaults = TrainConfig()
    assert [(c.batch_size, c.learning_rate, c.max_length, c.epochs) for c in seen] == [
        (32, 2e-5, 128, 2), (8, defaults.learning_rate, defaults.max_length, 3)]

@pytest.mark.embedded
def test_cli_aflite_on_minilm_embeddings(tmp_path):
    from typer.testing import CliRunner

    from toxiforge.cli import app

    data = write_table(shortcut_data(120, seed=5), tmp_path / "train.parquet")
    result = CliRunner().invoke(app, ["bias", "aflite", str(data), "-o", str(tmp_path / "af"), "-m", "8"])
    assert result.exit_code == 0, result.output
    log = json.loads((tmp_path / "af" / "aflite.json").read_text())
    assert log["config"]["target_size"] == 60 and log["embed_seconds"] > 0 and log["encoder"] == "all-minilm-l6-v2"
    assert pq.read_table(tmp_path / "af" / "aflite.parquet").num_rows == min(40, log["kept"])


# --- LEARNED-MIXIN(+H) -----------------------------------------------------------------------------------------


def test_learned_mixin_loss_by_hand():
    from toxiforge.training.debias import learned_mixin_loss, log_bias_probs

    gate = torch.nn.Linear(2, 1)
    with torch.no_grad():
        gate.weight.copy_(torch.tensor([[1.0, -1.0]]))
        gate.bias.fill_(0.5)
    logits = torch.tensor([[0.2, 1.0], [1.5, -0.5]])
    hidden = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    bias = log_bias_probs([0.9, 0.3])
    labels = torch.tensor([1, 0])
    # by hand: g = softplus(w.h + b); combined = log_softmax(logits) + g * log b
    g = np.log1p(np.exp(np.array([1.5, -1.5])))
    log_b = np.log(np.array([[0.1, 0.9], [0.7, 0.3]]))
    z = logits.numpy()
    log_p = z - np.log(np.exp(z).sum(1, keepdims=True))
    combined = log_p + g[:, None] * log_b
    ce = -(combined[[0, 1], [1, 0]] - np.log(np.exp(combined).sum(1))).mean()
    q = np.exp(g[:, None] * log_b) / np.exp(g[:, None] * log_b).sum(1, keepdims=True)
    entropy = -(q * np.log(q)).sum(1).mean()
    assert learned_mixin_loss(logits, hidden, bias, labels, gate).item() == pytest.approx(ce, rel=1e-5)
    assert learned_mixin_loss(logits, hidden, bias, labels, gate, 0.5).item() == pytest.approx(ce + 0.5 * entropy,
                                                                                             rel=1e-5)


def test_lexicon_features_and_word_list_bias_only_model(tmp_path):
    from toxiforge.bias.bias_only import bias_only_probabilities, fit_bias_only, lexicon_features
    from toxiforge.bias.lexicon import BiasLexicon

    lexicon = BiasLexicon(terms={"noi": ("zorblax", "quiet place"), "oni": ("blorp",)}, sources={})
    texts = ["Zorblax and zorblax, zorblaxes", "a quiet place", "the Quiet  Place here blorp", "nothing"]
    # a column per matched form in order of first sight (the plural is its own), then count_terms' totals
    assert lexicon_features(texts, lexicon, ["noi"]).tolist() == [
        [2, 1, 0, 3], [0, 0, 1, 1], [0, 0, 1, 1], [0, 0, 0, 0]]
    assert lexicon_features(texts, lexicon, ["noi", "oni"]).tolist() == [
        [2, 1, 0, 0, 3, 0], [0, 0, 1, 0, 1, 0], [0, 0, 1, 1, 1, 1], [0, 0, 0, 0, 0, 0]]
    rows = shortcut_data(200, seed=6)
    words = tmp_path / "words.txt"
    words.write_text("# stand-in lexicon\nzorblax\n\nZORBLAX\n")
    p = bias_only_probabilities(f"terms:{words}", rows)
    z = has_shortcut(rows).astype(bool)
    assert p[z].min() > 0.8 and p[~z].max() < 0.3  # the token is most of the label
    assert np.allclose(p, fit_bias_only(np.repeat(has_shortcut(rows)[:, None], 2, axis=1), [e.label for e in rows]))
    logistic = fit_bias_only(has_shortcut(rows)[:, None], [e.label for e in rows], model="logistic")
    assert logistic[z].min() > 0.8 and logistic[~z].max() < 0.3
    with pytest.raises(InputError, match="did you mean 'terms'"):
        bias_only_probabilities("term:x.txt", rows)
    with pytest.raises(InputError, match="no such word list"):
        bias_only_probabilities("terms:missing.txt", rows)


def test_lexicon_bias_only_models_noi_oni_toxtrig(tmp_path):
    """noi / oni / toxtrig read only their categories: with a user lexicon where "zorblax" is ONI and "wimble"
    is NOI, oni follows the toxic-only token, noi cannot (its word is label-independent), toxtrig has both."""
    from toxiforge.bias.bias_only import bias_only_probabilities

    lexicon = tmp_path / "lexicon.csv"
    lexicon.write_text("term,category\nzorblax,oni\nwimble,noi\n")
    rows = shortcut_data(200, seed=8)
    rng = np.random.default_rng(0)
    rows = [Example(e.text + (" wimble" if rng.random() < 0.5 else ""), e.label) for e in rows]
    z = has_shortcut(rows).astype(bool)
    oni = bias_only_probabilities(f"oni:{lexicon}", rows)
    assert oni[z].min() > 0.8 and oni[~z].max() < 0.3
    noi = bias_only_probabilities(f"noi:{lexicon}", rows)
    assert 0.3 < noi.min() and noi.max() < 0.7  # "wimble" says nothing about the label
    toxtrig = bias_only_probabilities(f"toxtrig:{lexicon}", rows)
    assert toxtrig[z].min() > 0.8 and toxtrig[~z].max() < 0.3
    with pytest.raises(InputError, match="no OI terms"):
        bias_only_probabilities(f"oi:{lexicon}", rows)
    neutral = [Example("placeholder statement one", 1), Example("placeholder statement two", 0)] * 5
    with pytest.raises(InputError, match="no training text mentions"):
        bias_only_probabilities(f"oni:{lexicon}", neutral)


def test_default_lexicon_bias_only_models_see_identity_mentions():
    """The default NOI list (shipped terms + group aliases): texts naming a group get their own p(toxic)."""
    from toxiforge.bias.bias_only import bias_only_probabilities

    rows = [Example(f"placeholder statement {i} about {'asian' if i % 4 else 'muslim'} people", int(i % 4 != 0))
            for i in range(40)] + [Example(f"placeholder statement {i} about the weather", 0) for i in range(20)]
    p = bias_only_probabilities("noi", rows)
    assert p[[i for i in range(40) if i % 4]].min() > 0.7 and p[40:].max() < 0.5


def test_column_bias_only_matches_rows_by_text(tmp_path):
    import pyarrow as pa

    from toxiforge.bias.bias_only import bias_only_probabilities
    from toxiforge.data import load_table

    path = tmp_path / "train.parquet"
    pq.write_table(pa.table({"text": ["first placeholder", "", "second placeholder"], "label": [1, 0, 0],
                             "p_bias": [0.8, 0.5, 0.1]}), path)
    rows = load_table(path).examples  # the empty row is skipped: positions shift, texts do not
    assert bias_only_probabilities("column:p_bias", rows, sources=[str(path)]).tolist() == [0.8, 0.1]
    with pytest.raises(InputError, match="no column 'p_missing'"):
        bias_only_probabilities("column:p_missing", rows, sources=[str(path)])
    with pytest.raises(InputError, match="none is a local file"):
        bias_only_probabilities("column:p_bias", rows)


def test_debiased_model_is_a_plain_classifier(base_dir, tmp_path):
    from safetensors.torch import load_file

    from toxiforge.training.debias import train_debiased

    rows = shortcut_data(40, seed=7)
    result = train_debiased(rows, tmp_path / "m", tiny_config(base_dir, epochs=1), progress=False,
                            bias_probs=np.full(40, 0.6), method="learned-mixin+h", bias_only="constant")
    config = json.loads((tmp_path / "m" / "config.json").read_text())
    assert config["architectures"] == ["BertForSequenceClassification"]
    assert not any("gate" in k for k in load_file(tmp_path / "m" / "model.safetensors"))
    assert result.log["objective"] == {"loss": "learned-mixin+h", "entropy_weight": 0.01, "bias_only": "constant",
                                       "bias_only_mean_p_toxic": pytest.approx(0.6)}
    with pytest.raises(InputError, match="3 bias-only probabilities for 40"):
        train_debiased(rows, tmp_path / "n", tiny_config(base_dir), bias_probs=[0.5] * 3)
    with pytest.raises(InputError, match="applies to learned-mixin\\+h only"):
        train_debiased(rows, tmp_path / "n", tiny_config(base_dir), bias_probs=[0.5] * 40, method="learned-mixin",
                       entropy_weight=0.1)


# --- proof: a planted shortcut ---------------------------------------------------------------------------------
# planted() training rows (LEARNED-MIXIN): "zorblax" in 95% of toxic and 3% of benign rows; the real signal
# ("alpha"/"beta") agrees with the label in 90% of rows. Test rows: the same signal, "zorblax" in half of all rows,
# independent of the label. The filtering test builds its own rows (its docstring says why).


def planted(n: int, seed: int, *, test: bool = False) -> list[Example]:
    if test:
        return shortcut_data(n, seed=seed, signal_rate=0.9, shortcut_toxic=0.5, shortcut_benign=0.5)
    return shortcut_data(n, seed=seed, signal_rate=0.9, shortcut_toxic=0.95, shortcut_benign=0.03)


def shortcut_fpr(model_dir, rows) -> float:
    """False positive rate on the benign test rows that contain the token."""
    from toxiforge.classifiers import load_classifier

    p = load_classifier(model_dir, device="cpu").predict_proba([e.text for e in rows])
    benign = (np.array([e.label for e in rows]) == 0) & has_shortcut(rows).astype(bool)
    return float((p[benign] > 0.5).mean())


@pytest.fixture(scope="module")
def quick_base_dir(tmp_path_factory):
    """``base_dir``'s tiny BERT initialized with ``initializer_range`` 0.2 instead of BERT's 0.02: at 0.02 its
    output barely depends on the input and it sits at p = 0.5 for its first ~25-30 training steps (measured; see
    docs/bias.md), which a pretrained encoder does not do."""
    return save_tiny_bert(tmp_path_factory.mktemp("tiny-bert-quick"), initializer_range=0.2)


def test_filtering_lowers_the_shortcut_correlation(quick_base_dir, tmp_path):
    """Zhou et al. Table 1's effect: DataMaps ambiguous/hard and AFLite subsets hold a weaker token-label
    correlation than the full data, DataMaps easy a stronger one, and the random baseline about the same.

    Data: the token is in 80% of toxic and 20% of benign rows (R ~ 0.6; the paper's R_ONI is 0.67) and the real
    signal agrees with the label in 80% of rows, so the rows where token and signal disagree are toxic half the
    time -- their label is a coin flip given the text (cartography's ambiguous examples) -- the rows where both
    agree are easy, and the few rows both contradict are hard. Regime: cartography's, in which the model fits the
    clear features early in the first epoch (an epoch of RoBERTa on a real dataset is thousands of steps): 720
    rows (45 steps an epoch), no warm-up (as cartography's and Zhou et al.'s settings), lr 2e-3, and
    ``quick_base_dir``. With 15 steps an epoch and BERT's initialization the rows sit at p = 0.5 for two of the
    four epochs, so variability measured how far a row had moved by the end, not how much it swings, and the
    ambiguous third kept the full data's R (docs/bias.md, "Proof: a planted shortcut"). Subsets: the top third of
    each ranking (no 50% pool), which makes the effect crisp.

    Measured (this setting, seeds 0-12 of data, model and training, docs/bias.md): full - ambiguous 0.156 to
    0.405 (median 0.227); a random third's R stayed within 0.12 of the full data's. At seed 0 (this test): full
    0.526, ambiguous 0.308, hard -0.042, AFLite -0.041, easy 1.0, random 0.410. Margins: 0.3 of Pearson R for hard
    and AFLite, 0.1 for ambiguous (Zhou et al.'s own ambiguous reduction in R_ONI is 0.09)."""
    rows = shortcut_data(720, seed=0, signal_rate=0.8, shortcut_toxic=0.8, shortcut_benign=0.2)
    labels = np.array([e.label for e in rows])
    token = has_shortcut(rows)
    full = pearson_r(token, labels)
    config = tiny_config(quick_base_dir, epochs=4, batch_size=16, learning_rate=2e-3, warmup=0.0)
    result = run_datamap(rows, tmp_path / "dm", config, fraction=1 / 3, pool_fraction=1 / 3)
    r = {region: pearson_r(token[idx], labels[idx]) for region, idx in result.subsets.items()}
    aflite_result, kept = run_aflite(rows, tmp_path / "af", AFLiteConfig(target_size=240, ensemble_size=16, seed=0),
                                     embeddings=bag_of_words(rows))
    r["aflite"] = pearson_r(token[kept], labels[kept])
    baseline = random_subset(labels, 240, seed=0)
    r["random"] = pearson_r(token[baseline], labels[baseline])
    assert 0.45 < full < 0.75
    for name in ("hard", "aflite"):
        assert r[name] is None or r[name] < full - 0.3, (name, full, r)  # margin: 0.3 of Pearson R
    assert r["ambiguous"] < full - 0.1, (full, r)  # margin: 0.1 of Pearson R
    assert r["easy"] > full and abs(r["random"] - full) < 0.2, (full, r)


def test_learned_mixin_lowers_the_false_positive_rate_on_the_token(base_dir, tmp_path):
    """LEARNED-MIXIN+H with the token as the bias-only feature flags fewer benign test rows that contain it than
    vanilla training does, by at least 0.3 (measured once at this seed: vanilla 1.00, LEARNED-MIXIN+H 0.00), and
    is not degenerate (accuracy on the test rows above 0.55; vanilla's is ~0.5 there, the token being noise)."""
    from toxiforge.bias.bias_only import bias_only_probabilities
    from toxiforge.classifiers import load_classifier
    from toxiforge.training.debias import train_debiased

    train, test = planted(200, seed=0), planted(400, seed=100, test=True)
    config = tiny_config(base_dir, epochs=6, batch_size=8, learning_rate=1e-2, seed=0)
    train_classifier(train, tmp_path / "vanilla", config, progress=False)
    lexicon = tmp_path / "lexicon.csv"
    lexicon.write_text("term,category\nzorblax,oni\n")  # the token as the only ONI word: LMIXIN-ONI
    bias = bias_only_probabilities(f"oni:{lexicon}", train)
    train_debiased(train, tmp_path / "lmixin", config, bias_probs=bias, method="learned-mixin+h", progress=False)
    vanilla, debiased = shortcut_fpr(tmp_path / "vanilla", test), shortcut_fpr(tmp_path / "lmixin", test)
    assert vanilla > 0.8 and debiased < vanilla - 0.3, (vanilla, debiased)
    p = load_classifier(tmp_path / "lmixin", device="cpu").predict_proba([e.text for e in test])
    assert ((p > 0.5) == np.array([e.label for e in test])).mean() > 0.55
