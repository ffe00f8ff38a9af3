"""``--lexicon-match raw|normalized`` (issue 34 item 3; issue 37): paper mode matches as upstream's
``src/bias_stats.py`` does, on the raw text, so its NOI/OI/ONI counts equal upstream's code; normalised matching
stays the default of toxiforge's lexicon and user lists.

NOI rows use neutral identity words of upstream's NOI list; OI and ONI use stand-in words ("quux", "blorf") in a
tiny CSV in upstream's ``word,categorization`` layout. The test on the real files reads ``../shared/data`` and
skips, saying why, when it is absent.
"""

from __future__ import annotations

import csv
import json
import re

import pytest
from typer.testing import CliRunner

from toxiforge.bias.lexicon import load_bias_lexicon
from toxiforge.errors import InputError

from .conftest import shared_file

UPSTREAM_HEADER = "word,in list of Naughty/Bad Words,sexual / body,slur / identity mention,notes,categorization\n"
# upstream's pattern drops the last entry of each category (its closing "\b" is a backspace): "zzlast" rows
ROWS = [("gays?", "harmless-minority"), ("blacks?", "harmless-minority"), ("wom[ae]n", "harmless-minority"),
        ("zzlastnoi", "harmless-minority"),
        ("quux", "offensive-minority-reference"), ("zzlastoi", "offensive-minority-reference"),
        ("blorf", "offensive-not-minority"), ("zzlastoni", "offensive-not-minority")]
# text -> (categories matched raw, categories matched normalised)
SHAPED = {
    "#BlackLivesMatter placeholder": (set(), {"noi"}),  # raw \b sees no boundary inside a CamelCase hashtag
    "placeholder gay_pride parade": (set(), {"noi"}),  # '_' is a word character for \b
    "#gay placeholder": ({"noi"}, {"noi"}),  # '#' is not: both tag a one-word hashtag
    "@black_cat says placeholder": (set(), set()),
    "@women placeholder": ({"noi"}, set()),  # normalised matching drops @mentions
    "read http://example.org/gay/news placeholder": ({"noi"}, set()),  # ... and URLs
    "Women &amp; placeholder": ({"noi"}, {"noi"}),
    "placeholder zzlastnoi": (set(), {"noi"}),  # upstream's bug: the last entry never matches raw
    "#QuuxFan placeholder": (set(), {"oi"}),
    "placeholder www.example.org/quux": ({"oi"}, set()),
    "blorf_zone placeholder": (set(), {"oni"}),
    "@blorf placeholder": ({"oni"}, set()),
    "zzlastoni and zzlastoi placeholder": (set(), {"oi", "oni"}),
    "gays, quux and blorf placeholder": ({"noi", "oi", "oni"}, {"noi", "oi", "oni"}),
}


@pytest.fixture
def upstream_csv(tmp_path):
    path = tmp_path / "word_based_bias_list.csv"
    path.write_text(UPSTREAM_HEADER + "".join(f"{w},,,,,{c}\n" for w, c in ROWS), encoding="utf-8")
    return path


def tagged(lexicon, texts) -> list[set[str]]:
    flags = lexicon.tag(texts)
    return [{c for c in ("noi", "oi", "oni") if flags[c][i]} for i in range(len(texts))]


def test_paper_mode_matches_raw_text_and_normalized_differs_on_hashtags_mentions_urls(upstream_csv):
    texts = list(SHAPED)
    raw = load_bias_lexicon("upstream", oi_list=upstream_csv)
    assert raw.match == "raw" and load_bias_lexicon(upstream_csv).match == "raw"  # paper mode, either way given
    normalized = load_bias_lexicon("upstream", oi_list=upstream_csv, match="normalized")
    assert tagged(raw, texts) == [r for r, _ in SHAPED.values()]
    assert tagged(normalized, texts) == [n for _, n in SHAPED.values()]


def test_raw_counts_are_upstreams_findall_and_toxtrig_counts_positions(upstream_csv):
    lexicon = load_bias_lexicon("upstream", oi_list=upstream_csv)
    counts = lexicon.counts(["gay gays women #QuuxFan quux blorf", "nothing here"])
    assert {c: v.tolist() for c, v in counts.items()} == {"noi": [3, 0], "oi": [1, 0], "oni": [1, 0],
                                                          "toxtrig": [5, 0]}
    assert lexicon.find("Gay  and BLACK") == [("gay", frozenset({"noi"})), ("black", frozenset({"noi"}))]


def test_toxiforge_lexicon_defaults_to_normalized_and_raw_is_chosen_by_name(upstream_csv):
    assert load_bias_lexicon({"noi": ["zorb"]}).match == "normalized"
    assert load_bias_lexicon(oi_list=upstream_csv).match == "normalized"  # toxiforge's lexicon with upstream's OI
    literal = load_bias_lexicon({"noi": ["zorb.x", "zorb", "last"]}, match="raw")
    # literal entries are escaped before upstream's join; no plural rule; the last one never matches
    assert tagged(literal, ["zorb.x", "zorbax", "zorbs", "zorb", "last"]) == [{"noi"}, set(), set(), {"noi"}, set()]
    with pytest.raises(InputError, match="lexicon match mode") as err:
        load_bias_lexicon({"noi": ["zorb"]}, match="fuzzy")
    assert "normalized" in str(err.value)


def test_cli_measure_and_show_take_lexicon_match(tmp_path, upstream_csv, monkeypatch):
    from toxiforge.cli import app

    monkeypatch.setenv("TOXIFORGE_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "data.csv"
    rows = [(t, i % 2) for i, t in enumerate(SHAPED)]
    data.write_text("text,label\n" + "".join(f'"{t}",{y}\n' for t, y in rows), encoding="utf-8")
    runner, n = CliRunner(), {}
    for mode in ("raw", "normalized"):
        out = tmp_path / f"{mode}.json"
        result = runner.invoke(app, ["bias", "measure", str(data), "--lexicon", str(upstream_csv),
                                     "--lexicon-match", mode, "--json", str(out)])
        assert result.exit_code == 0, result.output
        report = json.loads(out.read_text())
        assert report["meta"]["lexicon_match"] == mode and any(f"matching: {mode}" in x for x in report["notes"])
        n[mode] = {c: report["n"][c] for c in ("noi", "oi", "oni")}
    expected = {m: {c: sum(c in s[k] for s in SHAPED.values()) for c in ("noi", "oi", "oni")}
                for k, m in enumerate(("raw", "normalized"))}
    assert n == expected and n["raw"] != n["normalized"]
    shown = runner.invoke(app, ["bias", "lexicon", "show", "--lexicon", str(upstream_csv)])
    assert shown.exit_code == 0 and "lexicon matching: raw" in shown.output


# --- the real files: Davidson et al.'s tweets and upstream's list (../shared/data) ------------------------------


def test_paper_mode_on_davidson_counts_equal_upstreams_regexes_on_the_raw_tweets():
    from toxiforge.bias.measure import measure_data
    from toxiforge.data.davidson import load_davidson

    words_path = shared_file("toxic-debias", "word_based_bias_list.csv")
    tweets_path = shared_file("davidson2017", "labeled_data.csv")
    with open(words_path, encoding="utf-8", newline="") as fh:
        words = list(csv.DictReader(fh))
    with open(tweets_path, encoding="utf-8", newline="") as fh:
        tweets = [row["tweet"] for row in csv.DictReader(fh)]  # the raw column, as upstream's pandas reads it
    names = {"noi": "harmless-minority", "oi": "offensive-minority-reference", "oni": "offensive-not-minority"}
    expected = {}
    for category, name in names.items():
        entries = [w["word"] for w in words if w["categorization"] == name]
        # as SOURCE.md describes upstream's src/bias_stats.py: unescaped words, \b...\b|\b..., closing "\b"
        # a backspace (not a raw string), case-insensitive; a row is in the category when findall finds any
        pattern = re.compile(r"\b" + r"\b|\b".join(entries) + "\x08", re.IGNORECASE)
        expected[category] = sum(bool(pattern.findall(t)) for t in tweets)
    assert len(tweets) == 24783 and expected["noi"] > 1000
    data = load_davidson(tweets_path)  # decodes HTML entities: paper mode's counts must not change by it
    report = measure_data(data, lexicon=load_bias_lexicon("upstream", oi_list=words_path)).report
    assert {c: report.to_json()["n"][c] for c in names} == expected
