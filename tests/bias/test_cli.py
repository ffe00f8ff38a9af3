"""``toxiforge bias ...`` end to end on small stand-in tables, and on the shared toxigen-dev data when present."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from toxiforge.cli import app
from toxiforge.errors import InputError

DEV = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "toxigen-dev"
runner = CliRunner()

# text, label, group, score: zorb = NOI stand-in, blorf = ONI stand-in, quux = OI stand-in
ROWS = [
    ("placeholder statement about zorb people", 1, "a", 0.9),
    ("placeholder blorf statement", 1, "a", 0.2),
    ("zorb neighbours share a placeholder meal", 0, "b", 0.7),
    ("a placeholder sentence on zorb history", 0, "b", 0.4),
    ("plain placeholder text", 0, None, 0.1),
    ("another placeholder", 1, "a", 0.8),
    ("blorf placeholder with quux", 0, "b", 0.6),
    ("last placeholder", 0, "b", 0.5),
]


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOXIFORGE_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def lexicon(tmp_path):
    path = tmp_path / "lexicon.csv"
    path.write_text("term,category\nzorb,noi\nquux,oi\nblorf,oni\n", encoding="utf-8")
    return path


def table_csv(tmp_path, rows=ROWS, name="data.csv") -> Path:
    path = tmp_path / name
    lines = ["text,label,group,score"] + [f"{t},{y},{g or ''},{s}" for t, y, g, s in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def invoke(*args):
    result = runner.invoke(app, ["bias", *map(str, args)])
    return result


def test_measure_with_a_predictions_column_writes_json_markdown_png(tmp_path, lexicon):
    data = table_csv(tmp_path)
    out = tmp_path / "report"
    result = invoke("measure", data, "--predictions", "score", "--lexicon", lexicon,
                    "--json", out / "bias.json", "--markdown", out / "bias.md")
    assert result.exit_code == 0, result.output
    report = json.loads((out / "bias.json").read_text())
    # same numbers as tests/test_bias_metrics.py's hand-computed table (zorb = NOI, blorf = ONI)
    assert report["accuracy"] == pytest.approx(5 / 8)
    assert report["f1"]["overall"] == pytest.approx(4 / 7)
    assert report["pearson_r"]["noi"] == pytest.approx(-1 / 15)
    assert report["fpr"]["noi"] == pytest.approx(0.5) and report["fpr"]["oni"] == pytest.approx(1.0)
    assert report["n"]["oi"] == 1 and report["fpr"]["oi"] == pytest.approx(1.0)
    assert report["n"]["aae"] is None and report["pearson_r"]["aae"] is None   # no dialect model
    assert report["groups"]["b"]["fpr"] == pytest.approx(0.5)
    markdown = (out / "bias.md").read_text()
    assert "| NOI (3) F1 | FPR_NOI |" in markdown and "![FPR per category and per group](bias.png)" in markdown
    assert (out / "bias.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "Classifier bias" in result.output


def test_measure_dataset_only_has_empty_classifier_cells(tmp_path, lexicon):
    result = invoke("measure", table_csv(tmp_path), "--lexicon", lexicon, "--json", tmp_path / "d.json")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "d.json").read_text())
    assert report["accuracy"] is None and set(report["fpr"].values()) == {None}
    assert report["pearson_r"]["oni"] == pytest.approx(np.corrcoef([0, 1, 0, 0, 0, 0, 1, 0],
                                                                   [r[1] for r in ROWS])[0, 1])


def test_measure_with_a_dialect_model_fills_aae(tmp_path, lexicon):
    folder = tmp_path / "aae"
    folder.mkdir()
    words = ["placeholder", "zorb", "statement", "text"]
    (folder / "model_vocab.txt").write_text("".join(f"1\t{w}\n" for w in words), encoding="utf-8")
    np.savetxt(folder / "model_count_table.txt",
               np.array([[50.0, 5, 5, 40], [90, 1, 1, 8], [10, 5, 5, 80], [5, 5, 5, 85]]), delimiter="\t")
    result = invoke("measure", table_csv(tmp_path), "--predictions", "score", "--lexicon", lexicon,
                    "--dialect-model", folder, "--json", tmp_path / "a.json")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["pearson_r"]["aae"] is not None and -1 <= report["pearson_r"]["aae"] <= 1
    assert report["n"]["aae"] >= 1


def test_measure_a_toxiforge_run_layout_with_its_prediction_column(tmp_path, lexicon):
    table = pa.table({"prompt": ["p"] * 4, "generation": ["zorb placeholder", "placeholder", "", "zorb text"],
                      "generation_method": ["top-k"] * 4, "group": ["a", "a", "b", "b"],
                      "prompt_label": [0, 1, 0, 0], "roberta_prediction": [0.9, 0.8, 0.3, 0.1],
                      "machine_generated": [True] * 4, "parse_error": [None, None, None, None]})
    path = tmp_path / "run.parquet"
    pq.write_table(table, path)
    result = invoke("measure", path, "--predictions", "roberta_prediction", "--lexicon", lexicon,
                    "--json", tmp_path / "r.json")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["n"]["all"] == 3                     # the empty generation is left out ...
    assert report["fpr"]["noi"] == pytest.approx(0.5)  # ... and predictions stay lined up (rows 0 and 3)


def test_bad_inputs_are_one_line_errors(tmp_path, lexicon):
    data = table_csv(tmp_path)
    both = invoke("measure", data, "--predictions", "score", "-c", "profanity-check")
    assert isinstance(both.exception, InputError) and "both given" in str(both.exception)
    nolabel = tmp_path / "nolabel.csv"
    nolabel.write_text("text,score\nplaceholder,0.2\n", encoding="utf-8")
    result = invoke("measure", nolabel)
    assert isinstance(result.exception, InputError) and "no label column" in str(result.exception)
    result = invoke("measure", data, "--predictions", "nope")
    assert "no predictions column 'nope'" in str(result.exception)
    bad = table_csv(tmp_path, rows=[("placeholder", 0, "a", 1.7), ("zorb", 1, "a", 0.1)], name="bad.csv")
    result = invoke("measure", bad, "--predictions", "score")
    assert "outside [0, 1]" in str(result.exception)
    latin = tmp_path / "latin.csv"
    latin.write_bytes("zorb\xe9,noi\n".encode("latin-1"))
    assert "not UTF-8" in str(invoke("measure", data, "--lexicon", latin).exception)
    unknown = tmp_path / "unknown.csv"
    unknown.write_text("zorb,slurs\n", encoding="utf-8")
    assert "unknown category 'slurs'" in str(invoke("measure", data, "--lexicon", unknown).exception)
    result = invoke("measure", data, "--png", tmp_path / "x.png")
    assert "needs predictions" in str(result.exception)


def test_single_class_data_reports_fpr_and_empty_r(tmp_path, lexicon):
    rows = [(t, 0, g, s) for t, _, g, s in ROWS]
    result = invoke("measure", table_csv(tmp_path, rows), "--predictions", "score", "--lexicon", lexicon,
                    "--json", tmp_path / "s.json")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "s.json").read_text())
    assert set(report["pearson_r"].values()) == {None}
    assert report["fpr"]["noi"] == pytest.approx(2 / 3)   # rows 0, 2, 3: scores 0.9, 0.7 flagged, 0.4 not
    assert any("single class" in n for n in report["notes"])


def test_lexicon_show_and_offline_fetch(tmp_path, lexicon, monkeypatch):
    result = invoke("lexicon", "show", "--lexicon", lexicon)
    assert result.exit_code == 0 and "OI       1 entries" in result.output
    import urllib.request

    def offline(url, timeout):
        raise OSError("network is unreachable")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    for group in ("lexicon", "dialect"):
        result = invoke(group, "fetch", "--dest", tmp_path / group)
        assert "could not reach GitHub" in str(result.exception) and "Fix:" in str(result.exception)


@pytest.mark.skipif(not DEV.is_dir(), reason="../shared/data/toxigen-dev is not present")
def test_measure_on_toxigen_dev_with_profanity_check(tmp_path):
    result = invoke("measure", DEV, "-c", "profanity-check", "--json", tmp_path / "dev.json",
                    "--markdown", tmp_path / "dev.md")
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "dev.json").read_text())
    assert report["n"]["all"] > 100 and report["n"]["noi"] > 0
    assert report["n"]["oi"] is None and report["n"]["aae"] is None    # not fetched: explicit empty cells
    assert len(report["groups"]) == 8
    for value in report["pearson_r"].values():
        assert value is None or (math.isfinite(value) and -1 <= value <= 1)


def test_demonstration_folders_load_as_labelled_data_and_tables_keep_rows(tmp_path):
    from toxiforge.data import load_spec

    folder = tmp_path / "upstream" / "demonstrations" / "race"
    folder.mkdir(parents=True)
    (folder / "hate_asian_sentences.txt").write_text("- placeholder one\n- placeholder two\n", encoding="utf-8")
    (folder / "neutral_asian_sentences.txt").write_text("- placeholder three\n", encoding="utf-8")
    data = load_spec(str(tmp_path / "upstream"))
    assert data.layout == "demonstrations"
    assert sorted((e.text, e.label, e.group) for e in data.examples) == [
        ("placeholder one", 1, "asian"), ("placeholder three", 0, "asian"), ("placeholder two", 1, "asian")]
    rows = load_spec(str(table_csv(tmp_path, [("a", 0, "x", 0.1), (" ", 1, "x", 0.2), ("b", 1, "x", 0.3)])))
    assert [e.row for e in rows.examples] == [0, 2]


def test_dialect_predict_writes_tags_and_probabilities(tmp_path):
    folder = tmp_path / "aae"
    folder.mkdir()
    (folder / "model_vocab.txt").write_text("1\tplaceholder\n1\tzorb\n", encoding="utf-8")
    np.savetxt(folder / "model_count_table.txt", np.array([[10.0, 1, 1, 80], [90, 1, 1, 8]]), delimiter="\t")
    out = tmp_path / "d.parquet"
    result = invoke("dialect", "predict", table_csv(tmp_path), "--dialect-model", folder, "-o", out)
    assert result.exit_code == 0, result.output
    table = pq.read_table(out).to_pydict()
    assert len(table["text"]) == len(ROWS)
    assert {"noi", "oi", "oni", "toxtrig", "p_aae", "p_hispanic", "p_other", "p_white"} <= set(table)
    assert all(p is not None for p in table["p_aae"])     # every row has >= 20 % known tokens
    assert table["p_white"][4] > table["p_aae"][4]          # "plain placeholder text": the White-heavy word
    for row in range(len(ROWS)):
        total = sum(table[f"p_{d}"][row] for d in ("aae", "hispanic", "other", "white"))
        assert total == pytest.approx(1.0)
