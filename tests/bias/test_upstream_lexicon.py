"""Zhou et al.'s own word list as they used it (issue 21 items 1-4; issue 27 findings 4 and 15): regular-expression
entries, paper mode, slurs out of ONI, TOXTRIG without OI said, local copies remembered in the cache.

Stand-in entries only ("zorb", "quux", "blorf"); the tests on upstream's real list read it from
``../shared/data/toxic-debias`` and skip, saying why, when it is absent.
"""

from __future__ import annotations

import csv
import re

import numpy as np
import pytest

from toxiforge.bias.lexicon import BiasLexicon, drop_matched, load_bias_lexicon, read_lexicon_file
from toxiforge.bias.patterns import Regex, translate
from toxiforge.errors import InputError

from .conftest import shared_file

UPSTREAM_HEADER = "word,in list of Naughty/Bad Words,sexual / body,slur / identity mention,notes,categorization\n"


def upstream_like(tmp_path, rows: list[tuple[str, str]]):
    path = tmp_path / "word_based_bias_list.csv"
    path.write_text(UPSTREAM_HEADER + "".join(f"{w},,,,,{c}\n" for w, c in rows), encoding="utf-8")
    return path


def words(lexicon: BiasLexicon, text: str) -> list[str]:
    return [m for m, _ in lexicon.find(text)]


def test_upstream_file_entries_are_regular_expressions(tmp_path):
    path = upstream_like(tmp_path, [("zorbs?", "harmless-minority"), ("quu[xz]", "harmless-minority"),
                                    (r"non-?blorf\w*", "harmless-minority"), ("wug", "offensive-not-minority")])
    entries = read_lexicon_file(path)
    assert all(isinstance(e, Regex) for e in entries["noi"])
    assert load_bias_lexicon(path).match == "raw"  # upstream's layout is paper mode: upstream's matching
    lexicon = load_bias_lexicon(path, match="normalized")
    assert lexicon.patterns["noi"] == ("zorbs?", "quu[xz]", r"non-?blorf\w*") and lexicon.terms["noi"] == ()
    assert words(lexicon, "Zorb and zorbs, quuz, non-blorfing and nonblorf") == [
        "zorb", "zorbs", "quuz", "non blorfing", "nonblorf"]
    assert words(lexicon, "zorbsx quuy unzorb") == []  # whole words only, as upstream's \b
    assert words(lexicon, "a wug, two wugs") == ["wug"]  # a plain entry is exact too: no plural rule
    flags = lexicon.tag(["a quux here", "nothing", "a wug"])
    assert flags["noi"].tolist() == [True, False, False] and flags["oni"].tolist() == [False, False, True]
    assert lexicon.describe()["noi"] == {"terms": 3, "regex": 3, "source": f"user lexicon {path}", "available": True}


def test_translate_keeps_classes_and_maps_hyphens_and_spaces():
    assert translate(r"non-?binar\w*") == r"non(?:\s+)?binar\w*"
    assert translate("lgbt[a-z\\+\\*]*") == "lgbt[a-z\\+\\*]*"
    assert translate("middle eastern[a-z]*") == r"middle(?:\s+)eastern[a-z]*"
    assert translate(r"[-_ ]x\-y") == r"[-_ ]x(?:\s+)y"


def test_a_literal_entry_that_looks_like_a_regex_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("term,category\nzorb,noi\nquu[xz],noi\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"mine\.csv:3: entry 'quu\[xz\]' looks like a regular expression.*match"):
        read_lexicon_file(path)
    with pytest.raises(InputError, match="looks like a regular expression"):
        load_bias_lexicon({"noi": ["zorb|quux"]})
    words_file = tmp_path / "words.txt"
    words_file.write_text("zorb\nquux\\w+\n", encoding="utf-8")
    from toxiforge.bias.bias_only import read_terms

    with pytest.raises(InputError, match=r"words\.txt:2: .*regular expression"):
        read_terms(words_file)


def test_a_match_column_declares_regex_rows_and_a_bad_pattern_names_its_line(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("term,category,match\nzorbs?,noi,regex\nblorf,oni,\n", encoding="utf-8")
    lexicon = load_bias_lexicon(path)
    assert lexicon.patterns["noi"] == ("zorbs?",) and lexicon.terms["oni"] == ("blorf",)
    assert words(lexicon, "zorbs blorfs") == ["zorbs", "blorfs"]  # the literal entry keeps its plural
    path.write_text("term,category,match\nzorb,noi,regex\nquu[x,noi,regex\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"mine\.csv:3: regular expression 'quu\[x' does not compile"):
        read_lexicon_file(path)
    upstream = upstream_like(tmp_path, [("zorb", "harmless-minority"), ("(quux", "harmless-minority")])
    with pytest.raises(InputError, match=r"word_based_bias_list\.csv:3: .*does not compile"):
        load_bias_lexicon(upstream)
    path.write_text("term,category,match\nzorb,noi,glob\n", encoding="utf-8")
    with pytest.raises(InputError, match="match kind"):
        read_lexicon_file(path)


def test_paper_mode_takes_every_category_from_upstreams_list(tmp_path):
    path = upstream_like(tmp_path, [("zorbs?", "harmless-minority"), ("quux", "offensive-minority-reference"),
                                    ("blorf", "offensive-not-minority")])
    lexicon = load_bias_lexicon("upstream", oi_list=path)
    assert {c: lexicon.size(c) for c in ("noi", "oi", "oni")} == {"noi": 1, "oi": 1, "oni": 1}
    assert all(s.startswith("XuhuiZhou/Toxic_Debias word_based_bias_list.csv") for s in lexicon.sources.values())
    assert lexicon.toxtrig_note() is None
    again = load_bias_lexicon("upstream")  # the copy given once is remembered
    assert again.patterns == lexicon.patterns and "copied from" in again.sources["noi"]


def test_paper_mode_without_the_list_says_how_to_get_it():
    with pytest.raises(InputError, match=r"no word_based_bias_list\.csv.*bias lexicon fetch.*--oi-list"):
        load_bias_lexicon("upstream")


def test_oi_patterns_take_their_variants_and_plurals_out_of_oni():
    kept = drop_matched(["zorb", "zorbs", "zorbes", "big zorb", "zorbing", "blorf", "quuxes"],
                        [Regex("zorb"), "quux"])
    assert kept == ["zorbing", "blorf"]
    assert drop_matched(["zorb"], []) == ["zorb"]


def test_without_oi_toxtrig_says_it_is_noi_and_oni_only(capsys, tmp_path):
    from toxiforge.bias.bias_only import toxtrig_bias
    from toxiforge.bias.measure import measure_data
    from toxiforge.data.examples import Example, LabeledData

    path = tmp_path / "mine.csv"
    path.write_text("zorb,noi\nblorf,oni\n", encoding="utf-8")
    lexicon = load_bias_lexicon(path)
    note = lexicon.toxtrig_note()
    assert note is not None and note.startswith("TOXTRIG here is NOI ∪ ONI only; OI unavailable")
    rows = [Example(f"placeholder {w} {i}", int(w == "blorf")) for i in range(6) for w in ("zorb", "blorf")]
    data = LabeledData(name="p", examples=rows, layout="table", source="memory")
    assert note in measure_data(data, lexicon=lexicon).report.notes
    toxtrig_bias(str(path), examples=rows)
    assert "toxtrig: TOXTRIG here is NOI ∪ ONI only" in capsys.readouterr().err


def test_blacks_is_noi_by_the_plural_rule():
    assert load_bias_lexicon().tag(["the blacks here"])["noi"].tolist() == [True]


def test_a_given_dialect_model_is_kept_in_the_cache_and_used_by_default(tmp_path):
    from toxiforge.bias.fetch import TWITTERAAE
    from toxiforge.bias.measure import find_dialect_model

    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "model_vocab.txt").write_text("10\tzorb\n10\tquux\n", encoding="utf-8")
    np.savetxt(folder / "model_count_table.txt", np.array([[9.0, 1, 1, 1], [1, 1, 1, 9]]), delimiter="\t")
    assert find_dialect_model(None)[0] is None
    model, source = find_dialect_model(folder)
    assert model is not None and "now kept in the cache" in source
    cached, source = find_dialect_model(None)
    assert cached is not None and cached.vocab == model.vocab
    assert str(TWITTERAAE.default_dir()) in source and f"copied from {folder}" in source
    assert "same files as the cached copy" in find_dialect_model(folder)[1]


# --- upstream's real list (../shared/data/toxic-debias) --------------------------------------------------------


def _upstream_rows():
    path = shared_file("toxic-debias", "word_based_bias_list.csv")
    with open(path, encoding="utf-8") as f:
        return path, list(csv.DictReader(f))


def _real_sentences() -> list[str]:
    folder = shared_file("toxigen-dev", "demonstrations")
    return [line.strip().lstrip("- ") for p in sorted(folder.rglob("*.txt"))
            for line in p.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_upstreams_noi_regexes_tag_real_sentences_as_upstream_does():
    path, rows = _upstream_rows()
    texts = _real_sentences()
    noi = [r["word"] for r in rows if r["categorization"] == "harmless-minority"]
    fixed = re.compile(r"\b" + r"\b|\b".join(noi) + r"\b", re.IGNORECASE)  # upstream's, its last \b made raw
    as_upstream = re.compile(r"\b" + r"\b|\b".join(noi) + "\b", re.IGNORECASE)  # upstream's exactly (backspace)
    expected = np.array([bool(fixed.findall(t)) for t in texts])
    assert len(noi) == 26 and expected.sum() > 100
    raw = load_bias_lexicon("upstream", oi_list=path).tag(texts)["noi"]  # paper mode: raw
    assert raw.tolist() == [bool(as_upstream.findall(t)) for t in texts]
    normalized = load_bias_lexicon("upstream", oi_list=path, match="normalized").tag(texts)["noi"]
    # normalised matching also finds hyphenated spellings upstream's raw-text regex misses; it never misses one
    assert not (expected & ~normalized).any() and normalized.sum() - expected.sum() <= 0.02 * len(texts)


def test_with_upstreams_list_no_oni_entry_is_an_oi_variant():
    path, rows = _upstream_rows()
    lexicon = load_bias_lexicon(oi_list=path)
    oi = BiasLexicon(terms={"oi": lexicon.patterns["oi"]}, sources={})
    singular = [t[:-1] for t in lexicon.terms["oni"] if t.endswith("s")]
    assert not any(oi.find(t) for t in lexicon.terms["oni"] + tuple(singular))
    assert "entries an OI pattern matches" in lexicon.sources["oni"]
