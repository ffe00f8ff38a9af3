"""Similarity-controlled split on hand-made embeddings (no model), its errors, files and `toxiforge split`."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from toxiforge.analysis.split import (
    allocate,
    choose_test,
    max_similarity,
    similarity_split,
    split_embeddings,
    write_split,
)
from toxiforge.cli import app
from toxiforge.errors import InputError

runner = CliRunner()


def unit(angle_deg: float) -> list[float]:
    """A unit vector in the plane at ``angle_deg``: cos(angle) is its similarity with unit(0)."""
    a = np.deg2rad(angle_deg)
    return [float(np.cos(a)), float(np.sin(a)), 0.0, 0.0]


# text -> vector. "anchor" vs "close": cos 0.9 (> 0.7); "anchor" vs "far": cos 0.5 (< 0.7); "other" is orthogonal.
VECTORS = {
    "anchor": unit(0), "close": unit(np.degrees(np.arccos(0.9))), "far": unit(np.degrees(np.arccos(0.5))),
    "other": [0.0, 0.0, 1.0, 0.0], "edge": unit(np.degrees(np.arccos(0.7))), "last": [0.0, 0.0, 0.0, 1.0],
}


def embed(texts):
    return np.array([VECTORS[t] for t in texts], dtype=np.float32)


def rows(texts, groups=None, labels=None):
    groups = groups or ["asian"] * len(texts)
    labels = labels or [0] * len(texts)
    return [{"prompt": "p", "generation": t, "generation_method": "top-k", "group": g, "prompt_label": lab}
            for t, g, lab in zip(texts, groups, labels)]


def test_pair_above_threshold_is_separated_and_pair_below_is_kept():
    data = rows(["anchor", "close", "far", "other"])
    result, d = similarity_split(data, None, threshold=0.7, embed=embed, test_indices=[0])
    assert list(result.test) == [0]
    assert list(result.removed) == [1]                       # "close": cos 0.9 with the test row
    assert result.removed_similarity[0] == pytest.approx(0.9, abs=1e-6)
    assert list(result.train) == [2, 3]                      # "far" (0.5) and "other" (0.0) kept
    assert result.max_cross_similarity == pytest.approx(0.5, abs=1e-6)
    assert result.max_similarity_before == pytest.approx(0.9, abs=1e-6)
    assert "1 row (25.00%) dropped" in result.line()


def test_similarity_exactly_at_the_threshold_is_kept():
    result, _ = similarity_split(rows(["anchor", "edge"]), None, threshold=0.7, embed=embed, test_indices=[0])
    assert list(result.train) == [1] and result.removed.size == 0


def test_move_mode_moves_conflicts_into_the_test_set_until_none_is_left():
    # a chain: anchor (test) ~ b (0.8) ~ c (0.8 with b, 0.28 with anchor); d unrelated.
    emb = np.array([unit(0), unit(36.87), unit(73.74), [0, 0, 1, 0]], dtype=np.float32)
    strata = [()] * 4
    result = split_embeddings(emb, strata, None, threshold=0.7, on_conflict="move", test_indices=[0])
    assert list(result.test) == [0, 1, 2] and list(result.train) == [3] and list(result.removed) == [1, 2]
    assert result.rounds == 3 and result.max_cross_similarity == pytest.approx(0.0, abs=1e-6)
    dropped = split_embeddings(emb, strata, None, threshold=0.7, test_indices=[0])
    assert list(dropped.train) == [2, 3] and list(dropped.removed) == [1]


def test_random_split_holds_the_invariant_and_is_deterministic():
    rng = np.random.default_rng(1)
    base = rng.normal(size=(30, 8))
    emb = np.concatenate([base, base[:15] + 0.05 * rng.normal(size=(15, 8))])   # 15 near-duplicate pairs
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    strata = [(f"g{i % 3}", i % 2) for i in range(len(emb))]
    a = split_embeddings(emb, strata, 9, threshold=0.7, seed=3)
    b = split_embeddings(emb, strata, 9, threshold=0.7, seed=3)
    assert np.array_equal(a.test, b.test) and np.array_equal(a.train, b.train)
    assert len(a.test) == 9 and len(a.train) + len(a.test) + len(a.removed) == len(emb)
    sims = emb[a.train] @ emb[a.test].T
    assert sims.max() <= 0.7 + 1e-6 and a.max_cross_similarity == pytest.approx(sims.max(), abs=1e-5)
    assert all((emb[i] @ emb[a.test].T).max() > 0.7 for i in a.removed)
    assert {s["stratum"] for s in a.strata} == {f"g{g}/{lab}" for g in range(3) for lab in (0, 1)}
    assert not np.array_equal(split_embeddings(emb, strata, 9, seed=4).test, a.test)


def test_allocation_proportional_and_equal():
    sizes = {("a",): 50, ("b",): 30, ("c",): 20}
    assert allocate(sizes, 10) == {("a",): 5, ("b",): 3, ("c",): 2}
    assert sum(allocate(sizes, 7).values()) == 7
    assert allocate(sizes, 9, "equal") == {("a",): 3, ("b",): 3, ("c",): 3}
    with pytest.raises(InputError, match="needs 25 rows from stratum c but it has only 20"):
        allocate(sizes, 75, "equal")
    with pytest.raises(InputError, match="not smaller than the 100 statements"):
        allocate(sizes, 100)
    with pytest.raises(InputError, match="whole number"):
        allocate(sizes, 0)
    test = choose_test([("a",)] * 5 + [("b",)] * 5, 4, seed=0)
    assert len(test) == 4 and sum(i < 5 for i in test) == 2


def test_max_similarity_in_chunks_equals_the_full_product():
    rng = np.random.default_rng(0)
    q, k = rng.normal(size=(53, 6)).astype(np.float32), rng.normal(size=(11, 6)).astype(np.float32)
    seen = []
    got = max_similarity(q, k, chunk_rows=7, on_progress=seen.append)
    assert np.allclose(got, (q @ k.T).max(axis=1), atol=1e-5) and sum(seen) == 53


@pytest.mark.parametrize("threshold", [0, -0.2, 1.5, float("nan"), "abc"])
def test_threshold_outside_zero_one_is_an_error(threshold):
    with pytest.raises(InputError, match=r"threshold|not a number"):
        similarity_split(rows(["anchor", "far"]), 1, threshold=threshold, embed=embed)


def test_bad_sizes_and_embed_functions():
    data = rows(["anchor", "far", "other"])
    with pytest.raises(InputError, match="not smaller than the 3 statements"):
        similarity_split(data, 3, embed=embed)
    with pytest.raises(InputError, match="needs 2 rows from stratum women/0/top-k but it has only 1"):
        similarity_split(rows(["anchor", "far", "other", "last", "close"],
                              groups=["asian"] * 4 + ["women"]), 4, allocation="equal", embed=embed)
    with pytest.raises(InputError, match="returned shape"):
        similarity_split(data, 1, embed=lambda texts: np.zeros((1, 4)))
    with pytest.raises(InputError, match="on_conflict"):
        similarity_split(data, 1, embed=embed, on_conflict="keep")
    with pytest.raises(InputError, match="no text column"):
        similarity_split([{"group": "asian"}], 1, embed=embed)


def test_write_split_files_and_refuses_a_non_empty_directory(tmp_path):
    result, d = similarity_split(rows(["anchor", "close", "far", "other"]), None, embed=embed, test_indices=[0])
    out = tmp_path / "split"
    written = write_split(result, d, out)
    assert sorted(p.name for p in written.values()) == ["removed.parquet", "split.json", "test.parquet",
                                                         "train.parquet"]
    assert pq.read_table(out / "train.parquet").column("generation").to_pylist() == ["far", "other"]
    assert pq.read_table(out / "test.parquet").column("generation").to_pylist() == ["anchor"]
    removed = pq.read_table(out / "removed.parquet")
    assert removed.column("generation").to_pylist() == ["close"]
    assert removed.column("max_test_similarity")[0].as_py() == pytest.approx(0.9, abs=1e-6)
    report = json.loads((out / "split.json").read_text())
    assert report["removed"] == 1 and report["train"] == 2 and report["threshold"] == 0.7
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(InputError, match="not empty"):
        write_split(result, d, out)
    assert sorted(p.name for p in out.iterdir()) == before
    write_split(result, d, out, fmt="jsonl", overwrite=True)
    assert (out / "train.jsonl").exists()


def test_split_command_with_a_stub_encoder(tmp_path, monkeypatch):
    from toxiforge.records import Row, write_rows

    texts = ["anchor", "close", "far", "other", "last"]
    data = tmp_path / "d.parquet"
    write_rows([Row(**r) for r in rows(texts)], data)

    class Stub:
        name = "stub"

        def __call__(self, batch):
            return embed(batch)

    monkeypatch.setattr("toxiforge.analysis.split.load_encoder", lambda *a, **k: Stub())
    out = tmp_path / "out"
    result = runner.invoke(app, ["split", str(data), "--test-size", "2", "--threshold", "0.7", "--seed", "0",
                                 "-o", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "max cross similarity" in result.output and "(stub, loaded in" in result.output
    report = json.loads((out / "split.json").read_text())
    assert report["test"] == 2 and report["train"] + report["removed"] == 3 and report["max_cross_similarity"] <= 0.7
    again = runner.invoke(app, ["split", str(data), "--test-size", "2", "-o", str(out)])
    assert isinstance(again.exception, InputError) and "not empty" in str(again.exception)
    bad = runner.invoke(app, ["split", str(data), "--test-size", "2", "--threshold", "1.2", "-o", str(tmp_path / "n")])
    assert isinstance(bad.exception, InputError) and not (tmp_path / "n").exists()
    big = runner.invoke(app, ["split", str(data), "--test-size", "9", "-o", str(tmp_path / "m")])
    assert isinstance(big.exception, InputError) and not (tmp_path / "m").exists()
    fmt = runner.invoke(app, ["split", str(data), "--test-size", "2", "--format", "xlsx", "-o", str(tmp_path / "f")])
    assert isinstance(fmt.exception, InputError) and not (tmp_path / "f").exists()
    for option, value, message in (("--allocation", "equal-ish", "unknown allocation 'equal-ish'"),
                                   ("--on-conflict", "keep", "unknown on_conflict 'keep'")):
        wrong = runner.invoke(app, ["split", str(data), "--test-size", "2", option, value, "-o", str(tmp_path / "w")])
        assert isinstance(wrong.exception, InputError) and str(wrong.exception).startswith(message)


@pytest.mark.embedded
def test_embedded_minilm_separates_a_paraphrase():
    texts = ["The museum opens at nine in the morning.", "The museum opens at 9 in the morning.",
             "Bicycles need air in their tires.", "A recipe for bread uses flour and water."]
    result, _ = similarity_split(rows(texts), None, threshold=0.7, test_indices=[0])
    assert list(result.removed) == [1] and list(result.train) == [2, 3]
    assert result.encoder == "all-minilm-l6-v2" and result.max_cross_similarity < 0.7
