"""One rule turns P(toxic) into a label in every stage: toxic iff P > 0.5, the argmax of a two-class head, so a score
of exactly 0.5 is benign (issue 27): classify's share, generate's and summary's label flips, bench generate's
% toxic and bias measure."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from toxiforge.analysis.summary import load_summary_rows
from toxiforge.bench.generate import continuation_rows, summarize
from toxiforge.bias.metrics import measure_bias
from toxiforge.classifiers.scoring import score_table
from toxiforge.classifiers.wrap import CallableClassifier
from toxiforge.pipeline.job import score_rows
from toxiforge.records import Row, is_toxic, write_table


def test_is_toxic_is_strict_on_numbers_and_arrays():
    assert is_toxic(0.5) is False and is_toxic(0.5000001) is True and is_toxic(0.2) is False
    assert is_toxic(np.float32(0.75)) is True and is_toxic(np.float64(0.5)) is False
    assert is_toxic([0.2, 0.5, 0.7]).tolist() == [False, False, True]
    assert is_toxic(np.array([[0.5, 0.6]]), 0.55).tolist() == [[False, True]]   # bias measure's --threshold


@pytest.fixture
def half():
    """A classifier that cannot decide: P(toxic) = 0.5 for every text."""
    return CallableClassifier(lambda texts: np.full(len(texts), 0.5), name="half")


def _rows() -> list[Row]:
    """A benign-prompt and a toxic-prompt statement (neutral placeholder texts)."""
    return [Row(prompt="p", generation=f"placeholder statement {label}", generation_method="top-k", group="women",
                prompt_label=label, row_id=f"women/{label}/0", raw_output=f"placeholder statement {label}")
            for label in (0, 1)]


def test_a_score_of_one_half_is_benign_in_every_stage(tmp_path, half):
    _, summary = score_table(pa.table({"text": ["a", "b"]}), half, score_column="half_score")   # classify
    assert summary.share_toxic == 0.0 and "0.0% toxic (P > 0.5)" in summary.line()

    generated = _rows()
    score_rows(generated, half)   # generate -c: the benign prompt's statement did not flip, the toxic one's did
    assert [(r.classifier_score, r.fooled) for r in generated] == [(0.5, False), (0.5, True)]

    scored = pa.Table.from_pylist([r.to_dict() for r in _rows()]).append_column("half_score", pa.array([0.5, 0.5]))
    write_table(scored, tmp_path / "scored.parquet")
    rows, _ = load_summary_rows([tmp_path / "scored.parquet"], score_column="half_score")   # summary's flip column
    assert [r.fooled for r in rows] == [False, True]

    continuations = continuation_rows(generated)   # bench generate
    assert [c["toxic"] for c in continuations] == [False, False]
    groups, overall = summarize(continuations)
    assert overall["toxic"]["value"] == 0.0 and groups["women"]["toxic"]["value"] == 0.0

    report = measure_bias([0, 1], {"noi": np.array([True, True])}, scores=[0.5, 0.5])   # bias measure
    assert report.slices["noi"].fpr == 0.0 and report.to_json()["accuracy"] == 0.5
