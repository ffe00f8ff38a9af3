"""Exports in ToxiGen's annotated/annotations layouts load back through toxiforge.data."""

from __future__ import annotations

import pytest

from toxiforge.annotation.export import ANNOTATED_COLUMNS, export_study
from toxiforge.annotation.store import Store
from toxiforge.data import load_toxigen_annotated, read_any_table
from toxiforge.errors import InputError


def _answers(ai, human, author="human", ref="direct"):
    return {"author": author, "harmful_ai": ai, "harmful_human": human, "stereotyping": "no", "intent": ai,
            "lewd": "no", "group_reference": ref, "other_groups": "veterans" if ref == "other" else "",
            "framing": "moral", "framing_other": "", "factual": "opinion", "trouble": False}


@pytest.fixture()
def filled(database):
    store = Store(database)
    items = [{"text": "placeholder statement, with a comma", "target_group": "asian", "label": 0, "method": "top-k",
              "source_row_id": "a/0/0"},
             {"text": "another placeholder statement", "target_group": "women", "label": 1, "method": "ALICE",
              "source_row_id": "w/1/0"}]
    study, _ = store.create_study("s", items, per_item=3)
    scores = {0: [(1, 1), (2, 1), (1, 2)], 1: [(5, 4), (4, 4), (1, 1)]}
    for n, token in enumerate(store.invite(study.id, 3)):
        annotator = store.annotator_for(token)
        while (got := store.next_assignment(annotator)) is not None:
            assignment, item = got
            ai, human = scores[item.position][n]
            store.submit(annotator.id, assignment.id,
                         _answers(ai, human, "ai" if n == 2 else "human", "other" if n == 2 else "direct"))
    return store, study


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_annotated_export_loads_back(filled, tmp_path, suffix):
    store, study = filled
    path, n = export_study(store, study.id, tmp_path / f"annotated{suffix}", "annotated")
    assert n == 2
    table = read_any_table(path)
    assert list(table.column_names[:13]) == list(ANNOTATED_COLUMNS)
    rows = {r["text"]: r for r in table.to_pylist()}
    first = rows["placeholder statement, with a comma"]
    assert first["toxicity_ai"] == pytest.approx(4 / 3) and first["toxicity_human"] == pytest.approx(4 / 3)
    assert first["predicted_group"] == "the text directly references asian"
    assert first["predicted_author"] == "human" and first["actual_method"] == "topk"
    assert first["factual?"] == "opinion" and first["lewd"] == "doesn't contain lewd content"
    data = load_toxigen_annotated(path, rule="max")
    by_text = {e.text: e for e in data.examples}
    other = by_text["another placeholder statement"]
    assert other.label == 1 and other.method == "ALICE"
    assert by_text["placeholder statement, with a comma"].label == 0
    assert by_text["placeholder statement, with a comma"].group == "asian"


def test_annotations_export_one_row_per_response(filled, tmp_path):
    store, study = filled
    path, n = export_study(store, study.id, tmp_path / "raw.csv", "annotations")
    assert n == 6
    rows = read_any_table(path).to_pylist()
    assert len({r["annotator"] for r in rows}) == 3
    assert all(len(r["annotator"]) == 16 for r in rows)
    assert {r["other_groups"] for r in rows} in ({None, "veterans"}, {"", "veterans"})
    assert len(load_toxigen_annotated(path).examples) == 6


def test_export_errors(filled, tmp_path):
    store, study = filled
    with pytest.raises(InputError):
        export_study(store, study.id, tmp_path / "x.txt", "annotated")
    with pytest.raises(InputError):
        export_study(store, study.id, tmp_path / "x.csv", "other")


FORMULAS = ["=1+2 placeholder", "+placeholder", "-placeholder", "@placeholder", "\tplaceholder", "\rplaceholder"]


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_formula_cells_are_neutralised_in_csv_only(database, tmp_path, suffix):
    store = Store(database)
    items = [{"text": text, "target_group": "asian", "label": 0, "method": "top-k"} for text in FORMULAS]
    study, _ = store.create_study("f", items, per_item=1)
    annotator = store.annotator_for(store.invite(study.id, 1)[0])
    while (got := store.next_assignment(annotator)) is not None:
        store.submit(annotator.id, got[0].id, {**_answers(1, 1, ref="other"), "other_groups": "=HYPERLINK(x)",
                                               "framing": "other", "framing_other": "-2+3"})
    for fmt, text_col, free in (("annotated", "text", ()), ("annotations", "text", ("other_groups", "framing_other")),
                                ("toxigen-annotations", "Input.text", ("Answer.stateGroup", "Answer.stateFrame"))):
        path, _ = export_study(store, study.id, tmp_path / f"{fmt}{suffix}", fmt)
        rows = read_any_table(path).to_pylist()
        texts = sorted(r[text_col] for r in rows)
        frees = {r[c] for r in rows for c in free}
        if suffix == ".csv":
            assert texts == sorted("'" + t for t in FORMULAS), fmt
            assert frees <= {"'=HYPERLINK(x)", "'-2+3"}
            raw = path.read_text()
            assert '"=1+2' not in raw and '"-placeholder' not in raw and '"=HYPERLINK' not in raw
        else:  # the exact text
            assert texts == sorted(FORMULAS), fmt
            assert frees <= {"=HYPERLINK(x)", "-2+3"}


def test_toxigen_annotations_layout(filled, tmp_path):
    store, study = filled
    path, n = export_study(store, study.id, tmp_path / "hub.parquet", "toxigen-annotations")
    rows = read_any_table(path).to_pylist()
    assert n == 6 and len({r["HashedWorkerId"] for r in rows}) == 3
    names = set(rows[0])
    for name in ("Input.text", "Input.binary_prompt_label", "Input.prompt_label", "Input.target_group",
                 "Input.generation_method", "Answer.factSelect", "Answer.framingQ", "Answer.refTarget",
                 "Answer.stateFrame", "Answer.stateGroup", "Answer.inGroup.on", "HashedWorkerId",
                 *(f"Answer.{q}.{i}" for q in ("toAI", "toPER", "intent") for i in range(1, 6)),
                 *(f"Answer.{q}.{i}" for q in ("stereo", "lewd", "ingroup") for i in range(1, 4)),
                 "Answer.writer.1", "Answer.writer.2"):
        assert name in names, name
    assert all(n.startswith(("Input.", "Answer.")) for n in names - {"HashedWorkerId"})
    second = [r for r in rows if r["Input.text"] == "another placeholder statement"]
    assert {r["Input.binary_prompt_label"] for r in second} == {1} and {r["Input.prompt_label"] for r in second} == \
        {"hate"} and {r["Input.generation_method"] for r in second} == {"cbs"}

    def score(r, q):  # how public readers decode the one-hot columns
        (i,) = [i for i in range(1, 6) if r[f"Answer.{q}.{i}"]]
        return i

    assert sorted((score(r, "toAI"), score(r, "toPER")) for r in second) == [(1, 1), (4, 4), (5, 4)]
    writers = sorted((r["Answer.writer.1"], r["Answer.writer.2"]) for r in second)
    assert writers == [(False, True), (True, False), (True, False)]  # annotator 3 answered "ai"
    assert all(r["Input.time"] >= 0 for r in rows)
