"""TOXTRIG lexicon: whole-word matching on normalised text, categories, user files, the upstream list fetch.

Stand-in terms only ("zorb", "quux", "blorf"): the tests never need a real slur or swear word.
"""

from __future__ import annotations

import io
import json
import re
import urllib.error

import numpy as np
import pytest

from toxiforge.bias.fetch import TOXTRIG, TWITTERAAE, fetch_resource
from toxiforge.bias.lexicon import (
    BiasLexicon,
    group_alias_terms,
    load_bias_lexicon,
    normalize_text,
    read_lexicon_file,
    shipped_noi_terms,
)
from toxiforge.demonstrations.fetch import FetchError
from toxiforge.errors import InputError


@pytest.fixture(autouse=True)
def _empty_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOXIFORGE_CACHE", str(tmp_path / "cache"))


def lex(**terms) -> BiasLexicon:
    return BiasLexicon(terms={c: tuple(v) for c, v in terms.items()}, sources={})


def cats(lexicon: BiasLexicon, text: str) -> list[tuple[str, list[str]]]:
    return [(m, sorted(c)) for m, c in lexicon.find(text)]


def test_whole_words_only_no_scunthorpe_substrings():
    lx = lex(oni=["zorb"])
    for text in ["zorblax is here", "xzorb", "zorb2", "unzorbed", "2zorb"]:
        assert lx.find(text) == [], text


@pytest.mark.parametrize("text", ["zorb!", "(zorb)", "the zorb's hat", "ZORB.", "\"Zorb\"", "zorb,quux", "zorb\n"])
def test_punctuation_and_case_around_a_term(text):
    assert [m for m, _ in lex(noi=["zorb"]).find(text)] == ["zorb"]


def test_plurals_match_and_other_suffixes_do_not():
    lx = lex(noi=["zorb", "blorfax"])
    assert [m for m, _ in lx.find("zorbs and blorfaxes")] == ["zorbs", "blorfaxes"]
    assert lx.find("zorbed zorbing blorfaxs") == []


def test_plurals_can_be_switched_off():
    lx = BiasLexicon(terms={"noi": ("zorb",)}, sources={}, plurals=False)
    assert lx.find("zorbs") == []


def test_hyphens_and_underscores_split_words_and_join_phrases():
    lx = lex(noi=["zorb quux"], oni=["blorf"])
    assert cats(lx, "a zorb-quux thing") == [("zorb quux", ["noi"])]
    assert cats(lx, "zorb \t quux") == [("zorb quux", ["noi"])]
    assert cats(lx, "anti-blorf and blorf_ish") == [("blorf", ["oni"]), ("blorf", ["oni"])]
    # an entry written with a hyphen matches the spaced spelling too
    assert [m for m, _ in lex(noi=["zorb-quux"]).find("zorb quux")] == ["zorb quux"]


def test_urls_and_mentions_are_dropped_hashtags_kept_as_words():
    lx = lex(noi=["zorb", "zorb quux"])
    assert lx.find("@zorb http://zorb.example/zorb www.zorb.org") == []
    assert [m for m, _ in lx.find("#ZorbQuux rocks")] == ["zorb quux"]
    assert normalize_text("A&amp;B #BlorfQuux @x") .split() == ["a&b", "blorf", "quux"]


def test_a_phrase_and_the_words_inside_it_all_count():
    lx = lex(noi=["zorb"], oi=["zorb quux"], oni=["quux"])
    assert cats(lx, "the zorb quux went") == [("zorb quux", ["noi", "oi"]), ("quux", ["oni"])]
    counts = lx.counts(["the zorb quux went", "quux quux", "nothing"])
    assert counts["noi"].tolist() == [1, 0, 0]
    assert counts["oi"].tolist() == [1, 0, 0]
    assert counts["oni"].tolist() == [1, 2, 0]
    assert counts["toxtrig"].tolist() == [2, 2, 0]


def test_tag_columns_are_bool_arrays():
    tags = lex(noi=["zorb"], oni=["blorf"]).tag(["zorb", "blorf!", "zorb blorf", "none"])
    assert tags["noi"].dtype == np.bool_
    assert tags["noi"].tolist() == [True, False, True, False]
    assert tags["oni"].tolist() == [False, True, True, False]
    assert tags["oi"].tolist() == [False] * 4
    assert tags["toxtrig"].tolist() == [True, True, True, False]


def test_wildcard_entries_match_and_keep_their_category():
    lx = lex(oni=["blorf*"])
    assert cats(lx, "blorfing blorf x-blorfy") == [("blorfing", ["oni"]), ("blorf", ["oni"]), ("blorfy", ["oni"])]


def test_upstreams_unescaped_final_backslash_b_misses_the_last_word_ours_does_not():
    words = ["zorb", "quux"]
    upstream = re.compile(r"\b" + r"\b|\b".join(words) + "\b", re.IGNORECASE)  # upstream's bug, reproduced
    assert upstream.findall("a quux") == []          # "\b" (no r) is a backspace: the last word never matches
    assert [m for m, _ in lex(oi=words).find("a quux")] == ["quux"]
    assert upstream.findall("a zorb") == ["zorb"]      # the other words are fine


def test_regex_characters_in_terms_are_literal():
    lx = lex(oni=["z.rb", "q+x"])
    assert lx.find("zarb") == []
    assert [m for m, _ in lx.find("z.rb and q+x")] == ["z.rb", "q+x"]


def test_empty_lexicon_tags_nothing_and_reports_unavailable():
    lx = lex()
    assert lx.regex is None and lx.find("zorb") == []
    assert lx.tag(["a"])["toxtrig"].tolist() == [False]
    assert not lx.available("oi") and not lx.available("toxtrig")


# --- files ------------------------------------------------------------------------------------------------------


def test_read_lexicon_file_plain_header_and_upstream_layout(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text("# stand-ins\nzorb,noi\nquux , OI\n\nblorf,oni\n", encoding="utf-8")
    assert read_lexicon_file(plain) == {"noi": ["zorb"], "oi": ["quux"], "oni": ["blorf"]}
    upstream = tmp_path / "word_based_bias_list.csv"
    upstream.write_text("categorization,word\nharmless-minority,zorb\noffensive-minority-reference,quux\n"
                        "offensive-not-minority,blorf\n", encoding="utf-8")
    assert read_lexicon_file(upstream) == {"noi": ["zorb"], "oi": ["quux"], "oni": ["blorf"]}


def test_unknown_category_names_the_line(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("term,category\nzorb,noi\nquux,slur\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"bad.csv:3: unknown category 'slur'.*noi, oi or oni"):
        read_lexicon_file(path)


def test_non_utf8_lexicon_is_a_clear_error(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes("zorb\xe9,noi\n".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8.*Fix: save it as UTF-8"):
        read_lexicon_file(path)


def test_row_without_category_and_empty_file(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("zorb\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"short.csv:1: expected 'term,category'"):
        read_lexicon_file(path)
    empty = tmp_path / "empty.csv"
    empty.write_text("term,category\n", encoding="utf-8")
    with pytest.raises(InputError, match="no terms"):
        read_lexicon_file(empty)


def test_unknown_category_in_a_mapping():
    with pytest.raises(InputError, match="unknown lexicon categories"):
        load_bias_lexicon({"slurs": ["zorb"]})


# --- defaults ---------------------------------------------------------------------------------------------------


def test_default_lexicon_noi_from_the_shipped_list_and_group_aliases_oi_unavailable_offline():
    lx = load_bias_lexicon()
    assert {"muslim", "gay", "women", "african american"} <= set(lx.terms["noi"])
    assert "asian americans" in lx.terms["noi"] or "asian american" in lx.terms["noi"]
    assert not {"queer", "bi", "native"} & set(lx.terms["noi"])
    assert lx.terms["oi"] == () and not lx.available("oi")
    assert lx.sources["oi"].startswith("unavailable")
    assert lx.available("oni") and not set(lx.terms["oni"]) & set(lx.terms["noi"])
    assert lx.tag(["Muslim neighbours"])["noi"].tolist() == [True]


def test_shipped_noi_list_is_identity_terms_not_in_the_profanity_list():
    from toxiforge.analysis.implicit import load_lexicon

    profane = set(load_lexicon(ambiguous=False, keep_identity_terms=False).terms)
    assert not set(shipped_noi_terms()) & profane
    assert all("_" not in a for a in group_alias_terms())


def test_user_file_replaces_only_its_categories(tmp_path):
    path = tmp_path / "mine.csv"
    path.write_text("zorb,noi\n", encoding="utf-8")
    lx = load_bias_lexicon(path)
    assert lx.terms["noi"] == ("zorb",)
    assert "muslim" not in lx.terms["noi"] and lx.available("oni")
    assert lx.sources["noi"].startswith("user lexicon")


def test_oi_terms_come_from_the_upstream_csv_and_leave_oni(tmp_path):
    path = tmp_path / "word_based_bias_list.csv"
    path.write_text("word,categorization\nquux,offensive-minority-reference\nzorb,harmless-minority\n",
                    encoding="utf-8")
    lx = load_bias_lexicon(oi_list=tmp_path)
    assert lx.patterns["oi"] == ("quux",)          # only the OI rows of upstream's list
    assert "zorb" not in lx.terms["noi"]         # NOI stays toxiforge's own list
    with pytest.raises(InputError, match="no word_based_bias_list.csv"):
        load_bias_lexicon(oi_list=tmp_path / "missing")


# --- fetch ------------------------------------------------------------------------------------------------------


def test_fetch_offline_fails_at_once_with_a_hint(tmp_path):
    def offline(url, timeout):
        raise urllib.error.URLError("network is unreachable")

    with pytest.raises(FetchError, match=r"could not reach GitHub.*Fix: on a machine with internet.*--oi-list"):
        fetch_resource(TOXTRIG, tmp_path / "dest", opener=offline)
    assert not (tmp_path / "dest").exists()


def test_fetch_writes_the_pinned_file_and_the_lexicon_finds_it_in_the_cache():
    seen = []

    def serve(url, timeout):
        seen.append(url)
        return io.BytesIO(b"word,categorization\nquux,offensive-minority-reference\n")

    dest = fetch_resource(TOXTRIG, opener=serve)
    assert seen == [f"https://raw.githubusercontent.com/XuhuiZhou/Toxic_Debias/{TOXTRIG.commit}/"
                    "data/word_based_bias_list.csv"]
    assert (dest / "SOURCE.json").is_file()
    lx = load_bias_lexicon()
    assert lx.patterns["oi"] == ("quux",) and lx.available("oi")
    assert "Toxic_Debias@bb511db" in lx.sources["oi"]


def test_fetch_failing_midway_keeps_the_old_folder_and_leaves_no_staging(tmp_path):
    served = []

    def second_fails(url, timeout):
        served.append(url)
        if len(served) == 2:
            raise urllib.error.URLError("offline")
        return io.BytesIO(b"placeholder\n")

    dest = tmp_path / "twitteraae"
    dest.mkdir()
    (dest / "old.txt").write_text("kept", encoding="utf-8")
    with pytest.raises(FetchError, match="could not reach GitHub"):
        fetch_resource(TWITTERAAE, dest, opener=second_fails)
    assert [p.name for p in tmp_path.iterdir()] == ["twitteraae"] and [p.name for p in dest.iterdir()] == ["old.txt"]
    fetch_resource(TWITTERAAE, dest, opener=lambda url, timeout: io.BytesIO(b"placeholder\n"))
    assert sorted(p.name for p in dest.iterdir()) == ["SOURCE.json", "model_count_table.txt", "model_vocab.txt"]
    info = json.loads((dest / "SOURCE.json").read_text(encoding="utf-8"))
    assert info["repo"] == "slanglab/twitteraae" and info["commit"] == TWITTERAAE.commit and info["fetched_at"]
    assert info["urls"] == [TWITTERAAE.url(p) for p in TWITTERAAE.files]
    assert [p.name for p in tmp_path.iterdir()] == ["twitteraae"]


def test_fetch_http_404_names_the_commit(tmp_path):
    def missing(url, timeout):
        raise urllib.error.HTTPError(url, 404, "Not Found", {}, None)

    with pytest.raises(FetchError, match="HTTP 404.*check that 'abc123' is a commit"):
        fetch_resource(TOXTRIG, tmp_path / "d", commit="abc123", opener=missing)
