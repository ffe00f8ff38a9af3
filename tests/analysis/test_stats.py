"""Statistics (Tables 1 and 2), the implicitness lexicon, duplicates, input errors and `toxiforge stats`."""

from __future__ import annotations

import json
import math

import pyarrow as pa
import pytest
from typer.testing import CliRunner

from toxiforge.analysis.dataset import load_data
from toxiforge.analysis.implicit import AMBIGUOUS_TERMS, default_lexicon, load_lexicon
from toxiforge.analysis.stats import compute_stats, duplicate_stats, normalize_text, write_stats
from toxiforge.cli import app
from toxiforge.errors import InputError
from toxiforge.records import Row, write_rows

runner = CliRunner()

# Placeholder "profanity" for hand-checked answers: made-up words, so tests need no real profanity.
LEXICON = ["zorp", "blarg fizz", "quux*"]


def row(text, group="asian", label=0, method="top-k", **extra):
    return {"prompt": "p", "generation": text, "generation_method": method, "group": group, "prompt_label": label,
            "roberta_prediction": None, **extra}


def tiny_rows():
    return [
        row("abcd", "asian", 0),                    # 4 chars
        row("abcdef", "asian", 0),                  # 6 chars
        row("a zorp here", "asian", 1),             # 11 chars, explicit
        row("plain words", "women", 1, "ALICE"),    # 11 chars
        row("Blarg   Fizz twice", "women", 1, "ALICE"),  # 18 chars, explicit (multi-word, case)
        row("", "women", 0),                        # no statement: skipped
        row("kept", "women", 0, parse_error=None),  # 4 chars
    ]


def test_table2_counts_means_std_and_implicit_share():
    stats = compute_stats(tiny_rows(), lexicon=load_lexicon(LEXICON))
    assert stats.rows == 6 and stats.skipped == 1
    asian_benign = stats.by_group[("asian", 0)]
    assert asian_benign.count == 2 and asian_benign.mean_chars == 5.0
    assert asian_benign.std_chars == pytest.approx(math.sqrt(2))  # sample std of 4 and 6
    assert asian_benign.implicit == 1.0
    assert stats.by_group[("asian", 1)].implicit == 0.0
    women_toxic = stats.by_group[("women", 1)]
    assert women_toxic.count == 2 and women_toxic.mean_chars == 14.5 and women_toxic.implicit == 0.5
    assert stats.by_group[("women", 0)].count == 1 and stats.by_group[("women", 0)].std_chars == 0.0
    assert stats.by_method["top-k"].count == 4 and stats.by_method["ALICE"].count == 2
    assert stats.by_method["ALICE"].mean_chars == 14.5
    assert stats.total.count == 6 and stats.total.implicit == pytest.approx(4 / 6)
    assert stats.hate_share == pytest.approx(3 / 6)
    assert stats.explicit == 2


def test_markdown_and_json_render_the_tables(tmp_path):
    stats = compute_stats(tiny_rows(), lexicon=load_lexicon(LEXICON))
    md = stats.to_markdown()
    assert "| Asian people | Benign | 2 | 5.00 ± 1.41 | 100.0 |" in md
    assert "| top-k (all) |  | 4 |" in md and "| Total |  | 6 |" in md
    assert "| <data> | 6 | 66.7 | 50.0 |" in md
    data = json.loads(stats.to_json())
    assert data["table1"] == {"size": 6, "implicit": pytest.approx(4 / 6), "hate_class": 0.5}
    assert data["by_group"][0] == {"group": "asian", "label": "benign", "count": 2, "mean_chars": 5.0,
                                   "std_chars": pytest.approx(math.sqrt(2)), "implicit": 1.0}
    paths = write_stats(stats, markdown=tmp_path / "s.md", json_path=tmp_path / "s.json")
    assert [p.name for p in paths] == ["s.md", "s.json"]
    assert json.loads((tmp_path / "s.json").read_text())["rows"] == 6


def test_lexicon_word_boundaries_case_multiword_and_wildcard():
    lex = load_lexicon(LEXICON, ambiguous=False)
    assert lex.find("ZORP, zorp! azorp zorpy") == ["ZORP", "zorp"]
    assert lex.find("blarg\tfizz and blargfizz") == ["blarg\tfizz"]
    assert lex.find("quuxes and quux") == ["quuxes", "quux"]
    assert lex.is_implicit("nothing to see") and not lex.is_implicit("zorp")


def test_lexicon_exclusions_ambiguous_identity_terms_and_user_lists(tmp_path):
    packaged = default_lexicon()
    assert "better-profanity" in packaged.source and len(packaged.terms) > 500
    # "god" is in the packaged list and in the ambiguous terms: dropped by default, kept on request.
    assert "god" in AMBIGUOUS_TERMS and "god" in packaged.excluded
    assert packaged.is_implicit("A statue of a Greek god stood in the hall.")
    assert not load_lexicon(ambiguous=False).is_implicit("A statue of a Greek god stood in the hall.")
    # Identity terms of registered groups (the packaged list has some) never make a statement explicit.
    assert packaged.is_implicit("The gay and queer members of the choir sang.")
    assert not load_lexicon(keep_identity_terms=True).is_implicit("The queer members of the choir sang.")
    # User list files and exclusions.
    words = tmp_path / "words.txt"
    words.write_text("# comment\nZorp\n\nblarg fizz\n", encoding="utf-8")
    skip = tmp_path / "skip.txt"
    skip.write_text("zorp\n", encoding="utf-8")
    assert load_lexicon(words).terms == ("zorp", "blarg fizz")
    assert load_lexicon(words, exclude=skip).terms == ("blarg fizz",)
    assert load_lexicon(words, exclude=["blarg fizz"]).terms == ("zorp",)
    with pytest.raises(InputError, match="no entries left"):
        load_lexicon(words, exclude=["zorp", "blarg fizz"])
    with pytest.raises(InputError, match="not found"):
        load_lexicon(tmp_path / "missing.txt")


def test_duplicates_exact_and_near():
    texts = ["Hello there.", "Hello there.", "hello, THERE", "hello there!", "something else"]
    assert normalize_text("  Héllo,\tTHERE!! ") == "héllo there"
    d = duplicate_stats(texts)
    assert (d.exact, d.near, d.duplicate_sets, d.unique) == (1, 2, 1, 2)
    stats = compute_stats([row(t) for t in texts], lexicon=load_lexicon(LEXICON))
    assert stats.duplicates.exact == 1 and stats.duplicates.near == 2


def test_reads_files_and_generation_directories(tmp_path):
    rows = [Row(**r) for r in tiny_rows()]
    write_rows(rows[:3], tmp_path / "run" / "data" / "shard-00000.parquet")
    write_rows(rows[3:], tmp_path / "run" / "data" / "shard-00001.parquet")
    stats = compute_stats(tmp_path / "run", lexicon=load_lexicon(LEXICON))
    assert stats.rows == 6 and stats.source.endswith("run")
    # ToxiGen train layout: string labels, no provenance columns; CSV.
    import pyarrow.csv as pcsv

    table = pa.table({"prompt": ["p"] * 2, "generation": ["one text", "two text"], "generation_method": ["top-k"] * 2,
                      "group": ["black", "jewish"], "prompt_label": [1, 0], "roberta_prediction": [0.1, 0.9]})
    pcsv.write_csv(table, tmp_path / "train.csv")
    assert compute_stats(tmp_path / "train.csv", lexicon=load_lexicon(LEXICON)).hate_share == 0.5
    # `text` is used when there is no `generation`; label words are accepted.
    alt = load_data([{"text": "a b", "group": "women", "label": "hate"}])
    assert alt.text_column == "text" and alt.labels == [1] and alt.methods is None


def test_several_paths_read_as_one_dataset(tmp_path):
    rows = [Row(**r) for r in tiny_rows()]
    write_rows(rows[:3], tmp_path / "topk.parquet")
    write_rows(rows[3:], tmp_path / "alice.jsonl")
    stats = compute_stats([tmp_path / "topk.parquet", tmp_path / "alice.jsonl"], lexicon=load_lexicon(LEXICON))
    assert stats.rows == 6 and "topk.parquet + " in stats.source
    result = CliRunner().invoke(app, ["stats", str(tmp_path / "topk.parquet"), str(tmp_path / "alice.jsonl")])
    assert result.exit_code == 0, result.output
    assert "Total" in result.output


def test_bad_input_errors(tmp_path):
    with pytest.raises(InputError, match=r"no text column .*columns are \['prompt', 'group'\]"):
        compute_stats([{"prompt": "p", "group": "asian"}])
    with pytest.raises(InputError, match="needs a 'prompt_label' or 'label' column.*'generation', 'group'"):
        compute_stats([{"generation": "x", "group": "asian"}])
    with pytest.raises(InputError, match="needs a 'group' or 'target_group' column"):
        compute_stats([{"generation": "x", "prompt_label": 1}])
    empty = pa.table({"generation": pa.array([], pa.string()), "group": pa.array([], pa.string()),
                      "prompt_label": pa.array([], pa.int8())})
    with pytest.raises(InputError, match="no rows"):
        compute_stats(empty)
    with pytest.raises(InputError, match="none of the 2 rows has a statement"):
        compute_stats([row(""), row("  ")])
    with pytest.raises(InputError, match="unknown label"):
        compute_stats([row("x", label="maybe")])
    with pytest.raises(InputError, match="no such file"):
        compute_stats(tmp_path / "nope.parquet")
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"not parquet at all")
    with pytest.raises(InputError, match="cannot read parquet"):
        compute_stats(broken)


def test_stats_command(tmp_path):
    data = tmp_path / "d.jsonl"
    write_rows([Row(**r) for r in tiny_rows()], data)
    words = tmp_path / "w.txt"
    words.write_text("zorp\nblarg fizz\n")
    out_json, out_md = tmp_path / "out" / "s.json", tmp_path / "out" / "s.md"
    result = runner.invoke(app, ["stats", str(data), "--profanity-list", str(words), "--json", str(out_json),
                                 "--markdown", str(out_md)])
    assert result.exit_code == 0, result.output
    assert "| d.jsonl | 6 | 66.7 | 50.0 |" in result.output
    assert json.loads(out_json.read_text())["table1"]["size"] == 6 and "Table 2" in out_md.read_text()
    bad = runner.invoke(app, ["stats", str(tmp_path / "missing.csv")])
    assert bad.exit_code != 0 and isinstance(bad.exception, InputError)


def test_group_aliases_fold_to_one_row():
    stats = compute_stats([row("one", "mental_dis"), row("two", "mental disability"), row("three", "martians")],
                          lexicon=load_lexicon(LEXICON))
    assert set(stats.by_group) == {("mental_disability", 0), ("martians", 0)}
    assert stats.by_group[("mental_disability", 0)].count == 2
    assert "| People with mental disabilities | Benign | 2 |" in stats.to_markdown()
