"""Blodgett et al. dialect model: file format, the vectorised CVB0 against a per-document loop, thresholds, fetch.

The model files here are a tiny stand-in in upstream's format (neutral made-up words), written per test.
"""

from __future__ import annotations

import io
import urllib.error

import numpy as np
import pytest

from toxiforge.bias.dialect import (
    DIALECTS,
    DialectModel,
    load_dialect_model,
    predict_dialects,
    predict_dialects_loop,
    tokenize,
)
from toxiforge.bias.fetch import TWITTERAAE, fetch_resource
from toxiforge.demonstrations.fetch import FetchError
from toxiforge.errors import InputError

WORDS = ["zorb", "quux", "blorf", "the", "!!", "i'm", "#tag", "wug"]
COUNTS = np.array([
    [900.0, 10.0, 5.0, 100.0],     # zorb: mostly column 0 (AA)
    [5.0, 800.0, 3.0, 50.0],       # quux: Hispanic
    [2.0, 3.0, 700.0, 10.0],       # blorf: other
    [500.0, 400.0, 300.0, 4000.0],  # the: White-aligned
    [60.0, 20.0, 10.0, 80.0],
    [70.0, 30.0, 5.0, 90.0],
    [1.0, 1.0, 1.0, 9.0],
    [0.0, 0.0, 0.0, 0.0],          # wug: never seen (add-one smoothing only)
])


@pytest.fixture
def model_dir(tmp_path):
    folder = tmp_path / "twitteraae"
    folder.mkdir()
    vocab = "".join(f"{int(c.sum())}\t{w}\n" for w, c in zip(WORDS, COUNTS))
    (folder / "model_vocab.txt").write_text(vocab, encoding="utf-8")
    np.savetxt(folder / "model_count_table.txt", COUNTS, delimiter="\t", fmt="%.2f")
    return folder


def reference_model() -> DialectModel:
    """The stand-in model built from COUNTS with upstream's formulas, independently of load_dialect_model: word
    probabilities (N_wk + 1) / N_k, each word's row normalised."""
    wordprobs = (COUNTS + 1) / COUNTS.sum(0)
    return DialectModel(vocab={w: i for i, w in enumerate(WORDS)},
                        likelihood=wordprobs / wordprobs.sum(1, keepdims=True))


def test_tokenize_keeps_tweet_units():
    assert tokenize("I’m @Bob!! see http://x.y/z #Tag :) ... ok") == [
        "i'm", "@bob", "!!", "see", "http://x.y/z", "#tag", ":)", "...", "ok"]


def test_vectorised_cvb0_equals_the_per_document_loop(model_dir):
    model = load_dialect_model(model_dir)
    rng = np.random.default_rng(0)
    docs = [list(rng.choice(WORDS + ["oov", "ZORB"], size=rng.integers(1, 25))) for _ in range(300)]
    got = predict_dialects(docs, model, batch_size=37)   # small batches: many length buckets
    want = predict_dialects_loop(docs, reference_model())
    assert want.shape == got.shape == (300, 4)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)  # NaN rows compare equal
    assert np.isfinite(got).all(axis=1).sum() > 250
    np.testing.assert_allclose(np.nansum(want, axis=1)[np.isfinite(want).all(axis=1)], 1.0)


def test_columns_are_aae_hispanic_other_white(model_dir):
    model = load_dialect_model(model_dir)
    p = predict_dialects(["zorb zorb zorb", "quux quux", "blorf", "the the the"], model)
    assert DIALECTS == ("aae", "hispanic", "other", "white")
    assert p.argmax(axis=1).tolist() == [0, 1, 2, 3]
    np.testing.assert_allclose(p.sum(axis=1), 1.0)


def test_thresholds_give_nan_rows(model_dir):
    model = load_dialect_model(model_dir)
    p = predict_dialects(["", "nothing known here at all", "zorb a b c d e f g h i", "zorb a b c"], model)
    assert np.isnan(p[0]).all() and np.isnan(p[1]).all()
    assert np.isnan(p[2]).all()            # 1 of 10 tokens known: below 20 %
    assert np.isfinite(p[3]).all()         # 1 of 4: 25 %


def test_missing_and_malformed_model_files(tmp_path, monkeypatch, model_dir):
    monkeypatch.setenv("TOXIFORGE_CACHE", str(tmp_path / "cache"))
    with pytest.raises(InputError, match="no dialect model.*toxiforge bias dialect fetch"):
        load_dialect_model()
    (model_dir / "model_count_table.txt").write_text("1\t2\t3\n", encoding="utf-8")
    with pytest.raises(InputError, match="shape"):
        load_dialect_model(model_dir)
    np.savetxt(model_dir / "model_count_table.txt", COUNTS[:3], delimiter="\t")
    with pytest.raises(InputError, match="8 vocabulary words but 3 count rows"):
        load_dialect_model(model_dir)


def test_fetch_offline_fails_at_once_and_online_writes_both_files(tmp_path, monkeypatch, model_dir):
    monkeypatch.setenv("TOXIFORGE_CACHE", str(tmp_path / "cache"))

    def offline(url, timeout):
        raise urllib.error.URLError("no route to host")

    with pytest.raises(FetchError, match="could not reach GitHub.*--dialect-model"):
        fetch_resource(TWITTERAAE, opener=offline)
    assert not TWITTERAAE.default_dir().exists()

    def serve(url, timeout):
        name = url.rsplit("/", 1)[-1]
        assert f"/slanglab/twitteraae/{TWITTERAAE.commit}/model/{name}" in url
        return io.BytesIO((model_dir / name).read_bytes())

    fetch_resource(TWITTERAAE, opener=serve)
    model = load_dialect_model()          # from the cache
    assert model.likelihood.shape == (8, 4)
