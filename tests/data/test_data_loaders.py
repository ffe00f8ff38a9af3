"""Data loaders on small fixture files written in each published layout (neutral placeholder text only)."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import write_csv
from toxiforge.data import (
    Example,
    annotated_label,
    detect_layout,
    load_dynahate,
    load_generated,
    load_ihc,
    load_sbf,
    load_spec,
    load_specs,
    load_table,
    load_toxigen_annotated,
    parse_spec,
)
from toxiforge.data.toxigen import ANNOTATED_COLUMNS
from toxiforge.errors import InputError
from toxiforge.records import Row, write_rows

# (toxicity_ai, toxicity_human) -> (label under "sum", label under "max")
SCORES = [((3.0, 3.0), (1, 0)), ((4.0, 1.0), (0, 1)), ((1.0, 1.0), (0, 0)), ((5.0, 4.7), (1, 1))]


@pytest.fixture
def annotated_csv(tmp_path):
    rows = []
    for i, ((ai, human), _) in enumerate(SCORES):
        values = {"text": f"placeholder sentence {i}", "target_group": ["mental_dis", "women", "asian", "jewish"][i],
                  "factual?": "opinion", "ingroup_effect": "doesn't use in-group language", "lewd": "doesn't contain "
                  "lewd content", "framing": "", "predicted_group": "the text directly references asian",
                  "stereotyping": "doesn't use positive stereotyping", "intent": 1.0, "toxicity_ai": ai,
                  "toxicity_human": human, "predicted_author": "human", "actual_method": ["topk", "CBS"][i % 2]}
        rows.append([values[c] for c in ANNOTATED_COLUMNS])
    return write_csv(tmp_path / "annotated_test.csv", ANNOTATED_COLUMNS, rows)


def test_toxigen_annotated_label_rules_groups_and_methods(annotated_csv):
    for rule, position in (("sum", 0), ("max", 1)):
        data = load_toxigen_annotated(annotated_csv, rule=rule)
        assert data.labels == [expected[position] for _, expected in SCORES]
        assert data.name == "ToxiGen-HumanVal" and data.layout == "toxigen-annotated"
        assert rule in data.notes[0]
    data = load_toxigen_annotated(annotated_csv)
    assert [e.group for e in data.examples] == ["mental_disability", "women", "asian", "jewish"]
    assert [e.method for e in data.examples] == ["top-k", "ALICE", "top-k", "ALICE"]
    assert annotated_label(2.75, 2.75) == 0 and annotated_label(2.75, 2.76) == 1
    with pytest.raises(InputError, match="label rule"):
        load_toxigen_annotated(annotated_csv, rule="mean")  # type: ignore[arg-type]


def test_toxigen_annotated_parquet_and_missing_columns(annotated_csv, tmp_path):
    import pyarrow.csv as pcsv

    table = pcsv.read_csv(annotated_csv)
    pq.write_table(table, tmp_path / "annotated.parquet")
    assert load_spec(str(tmp_path / "annotated.parquet")).labels == [1, 0, 0, 1]
    pq.write_table(table.drop_columns(["toxicity_human"]), tmp_path / "broken.parquet")
    with pytest.raises(InputError, match=r"missing column\(s\) \['toxicity_human'\].*found are \['text'"):
        load_toxigen_annotated(tmp_path / "broken.parquet")


def test_toxigen_train_layout_and_human_label_column(tmp_path):
    table = pa.table({"prompt": ["- placeholder a\\n-"] * 4, "generation": [f"placeholder sentence {i}" for i in
                                                                          range(4)],
                      "generation_method": ["top-k", "ALICE", "top-k", "ALICE"], "group": ["black", "women"] * 2,
                      "prompt_label": [1, 0, 1, 0], "roberta_prediction": [0.9, 0.1, 0.8, 0.2],
                      "human_label": ["toxic", "benign", "benign", "toxic"]})
    pq.write_table(table, tmp_path / "train.parquet")
    data = load_generated(tmp_path / "train.parquet")
    assert data.labels == [1, 0, 1, 0] and data.layout == "toxigen-train"
    assert [e.method for e in data.examples] == ["top-k", "ALICE", "top-k", "ALICE"]
    assert load_generated(tmp_path / "train.parquet", label_column="human_label").labels == [1, 0, 0, 1]
    with pytest.raises(InputError, match="not binary: found 0.9"):
        load_generated(tmp_path / "train.parquet", label_column="roberta_prediction")
    assert detect_layout(table.column_names) == "toxigen-train"


def test_toxiforge_output_directory_skips_unparsed_rows(tmp_path):
    rows = [Row(prompt="p", generation=f"placeholder sentence {i}", generation_method="ALICE" if i % 2 else "top-k",
                group="asian", prompt_label=i % 2, row_id=f"asian/x/{i}") for i in range(5)]
    rows[4].parse_error = "empty statement"
    rows[4].generation = ""
    write_rows(rows, tmp_path / "run" / "data" / "shard-00000.parquet")
    data = load_spec(str(tmp_path / "run"))
    assert data.layout == "toxiforge" and len(data) == 4 and data.skipped == {"unparsed (parse_error)": 1}
    assert data.labels == [0, 1, 0, 1] and data.name == "run"


SBF_HEADER = ["whoTarget", "intentYN", "sexYN", "sexReason", "offensiveYN", "annotatorGender", "annotatorMinority",
              "sexPhrase", "speakerMinorityYN", "WorkerId", "HITId", "annotatorPolitics", "annotatorRace",
              "annotatorAge", "post", "targetMinority", "targetCategory", "targetStereotype", "dataSource"]


def sbf_row(post, offensive):
    values = {c: "" for c in SBF_HEADER}
    values.update(post=post, offensiveYN=offensive, WorkerId="w1", HITId="h1", dataSource="t/placeholder")
    return [values[c] for c in SBF_HEADER]


def test_sbf_annotations_are_averaged_per_post(tmp_path):
    multi_line = "placeholder sentence one\nsecond line of the same post"
    path = write_csv(tmp_path / "SBIC.v2.tst.csv", SBF_HEADER, [
        sbf_row(multi_line, "1.0"), sbf_row(multi_line, "0.5"), sbf_row(multi_line, "0.0"),
        sbf_row("placeholder sentence two", "0.0"), sbf_row("placeholder sentence two", "0.0"),
        sbf_row("placeholder sentence three", "1.0"), sbf_row("placeholder sentence four", "")])
    data = load_sbf(path)
    assert data.texts == [multi_line, "placeholder sentence two", "placeholder sentence three"]
    assert data.labels == [1, 0, 1] and data.skipped == {"no offensiveYN rating": 1}
    assert load_sbf(path, threshold=0.6).labels == [0, 0, 1]
    assert load_spec(str(path)).layout == "sbf" and load_spec(f"sbf:{path}").name == "SBF test"
    agg = write_csv(tmp_path / "SBIC.v2.agg.tst.csv", ["post", "offensiveYN", "targetCategory"],
                    [["placeholder a", 0.6667, "[]"], ["placeholder b", 0.0, "[]"]])
    assert load_sbf(agg).labels == [1, 0]
    bad = write_csv(tmp_path / "bad.csv", ["post", "offensiveYN"], [["placeholder", 3]])
    with pytest.raises(InputError, match="outside 0..1"):
        load_sbf(bad)


def test_ihc_stage1_posts_tsv(tmp_path):
    path = write_csv(tmp_path / "implicit_hate_v1_stg1_posts.tsv", ["post", "class"], [
        ["placeholder sentence 1", "implicit_hate"], ["placeholder sentence 2", "not_hate"],
        ["placeholder sentence 3", "explicit_hate"], ["placeholder sentence 4", "not_hate"]], delimiter="\t")
    data = load_ihc(path)
    assert data.labels == [1, 0, 1, 0] and data.name == "IHC"
    assert load_ihc(path, implicit_only=True).labels == [1, 0, 0]
    assert load_spec(str(path)).layout == "ihc"
    bad = write_csv(tmp_path / "stg2.tsv", ["post", "class"], [["placeholder", "irony"]], delimiter="\t")
    with pytest.raises(InputError, match="unknown class 'irony' at data row 1"):
        load_ihc(bad)
    with pytest.raises(InputError, match="no hub copy"):
        load_ihc(None)


DYNAHATE_HEADER = ["", "acl.id", "X1", "text", "label", "type", "target", "level", "split", "round.base",
                   "annotator", "round", "acl.id.matched"]


def test_dynahate_published_csv_and_split(tmp_path):
    rows = [[i, f"acl{i}", i, f"placeholder sentence {i}", ["hate", "nothate"][i % 2], "none", "none", "original",
             ["train", "test", "test", "dev"][i % 4], 1, "a1", "1", ""] for i in range(8)]
    path = write_csv(tmp_path / "Dynamically Generated Hate Dataset v0.2.3.csv", DYNAHATE_HEADER, rows)
    test = load_dynahate(path)
    assert test.texts == ["placeholder sentence 1", "placeholder sentence 2", "placeholder sentence 5",
                          "placeholder sentence 6"]
    assert test.labels == [0, 1, 0, 1]
    assert len(load_dynahate(path, split=None)) == 8
    assert load_spec(str(path)).layout == "dynahate"
    with pytest.raises(InputError, match=r"no rows with split 'validation'; the split values are \['dev', 'test', "):
        load_dynahate(path, split="validation")


def test_generic_tables_named_columns_and_errors(tmp_path):
    path = write_csv(tmp_path / "mine.csv", ["id", "utterance", "is_toxic", "target_group"],
                     [[1, "placeholder sentence 1", "true", "women"], [2, "placeholder sentence 2", "false", "asian"],
                      [3, "  ", "true", "asian"]])
    data = load_table(path, text_column="utterance")
    assert data.labels == [1, 0] and [e.group for e in data.examples] == ["women", "asian"]
    assert data.skipped == {"empty text": 1}
    with pytest.raises(InputError, match=r"no text column.*found are \[.id., .utterance., .is_toxic., "):
        load_table(path)
    with pytest.raises(InputError, match=r"no label column 'y'; the columns found are"):
        load_table(path, text_column="utterance", label_column="y")
    jsonl = tmp_path / "multi.jsonl"
    jsonl.write_text("".join(json.dumps({"text": f"placeholder {i}", "label": i}) + "\n" for i in range(3)))
    with pytest.raises(InputError, match=r"label column 'label' is not binary: found 2 \(first at data row 3\)"):
        load_table(jsonl)
    words = tmp_path / "words.jsonl"
    words.write_text("".join(json.dumps({"text": f"placeholder {i}", "label": w}) + "\n"
                             for i, w in enumerate(["hate", "nothate", "1.0", "0"])))
    assert load_spec(f"mine=table:{words}").labels == [1, 0, 1, 0]
    empty = write_csv(tmp_path / "empty.csv", ["text", "label"], [])
    with pytest.raises(InputError, match="no usable rows"):
        load_table(empty)


def test_spec_parsing_and_unique_names(tmp_path):
    assert parse_spec("dynahate:hub") == (None, "dynahate", None)
    assert parse_spec("humanval") == (None, "toxigen-annotated", None)
    assert parse_spec("SBF=sbf:/data/SBIC.v2.tst.csv") == ("SBF", "sbf", "/data/SBIC.v2.tst.csv")
    assert parse_spec("runs/alice") == (None, None, "runs/alice")
    with pytest.raises(InputError, match="no such file"):
        load_spec("sbf:/nonexistent/file.csv")
    path = tmp_path / "a.jsonl"
    path.write_text(json.dumps({"text": "placeholder", "label": 1}) + "\n" + json.dumps({"text": "x", "label": 0}))
    names = [d.name for d in load_specs([str(path), str(path)])]
    assert names == ["a", "a (2)"]
    assert Example("t", 1).group is None
