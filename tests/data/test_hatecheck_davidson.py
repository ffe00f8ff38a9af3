"""The hatecheck and davidson dataset kinds: shaped fixtures (the published columns and value vocabulary, neutral
placeholder text) for the rules and errors, and the real files of ../shared/data for the counts."""

from __future__ import annotations

import csv
import html
from collections import Counter

import pytest

from conftest import shared_file, write_csv
from toxiforge.data import davidson as davidson_module
from toxiforge.data import detect_layout, load_davidson, load_hatecheck, load_spec, split_option
from toxiforge.data import hatecheck as hatecheck_module
from toxiforge.data.examples import read_any_table
from toxiforge.errors import InputError, ToxiforgeError

HATECHECK_HEADER = ["", "functionality", "case_id", "test_case", "label_gold", "target_ident", "direction",
                    "focus_words", "focus_lemma", "ref_case_id", "ref_templ_id", "templ_id", "case_templ"]
# (functionality, label_gold, target_ident, direction); "" is how the published file leaves a target out
HATECHECK_CASES = [("derog_neg_emote_h", "hateful", "women", "general"),
                   ("ident_neutral_nh", "non-hateful", "Muslims", "-"),
                   ("target_obj_nh", "non-hateful", "", "-"),
                   ("spell_leet_h", "hateful", "gay people", "directed")]

DAVIDSON_HEADER = ["", "count", "hate_speech", "offensive_language", "neither", "class", "tweet"]
# (count, hate_speech, offensive_language, neither, class, tweet as in the file, tweet as loaded)
DAVIDSON_ROWS = [
    (3, 0, 0, 3, 2, "placeholder tweet one &amp; two", "placeholder tweet one & two"),
    (3, 2, 1, 0, 0, "placeholder &#128514; tweet", "placeholder \U0001F602 tweet"),
    (3, 0, 3, 0, 1, "RT @someone: placeholder &lt;3 &amp;#128514;", "RT @someone: placeholder <3 &#128514;"),
    (6, 1, 4, 1, 1, "Placeholder  TWEET\nsecond line ", "Placeholder  TWEET\nsecond line "),
    (3, 0, 0, 3, 2, "&copy placeholder &unknown; &#x41;", "&copy placeholder &unknown; A"),
]


@pytest.fixture
def hatecheck_csv(tmp_path):
    rows = [[i, test, i + 1, f"placeholder case {i}", gold, target, direction, "placeholder", "placeholder",
             "", "", 100 + i, "placeholder [IDENTITY_P] template"]
            for i, (test, gold, target, direction) in enumerate(HATECHECK_CASES)]
    return write_csv(tmp_path / "test_suite_cases.csv", HATECHECK_HEADER, rows)


@pytest.fixture
def davidson_csv(tmp_path):
    rows = [[i, *row[:6]] for i, row in enumerate(DAVIDSON_ROWS)]
    return write_csv(tmp_path / "labeled_data.csv", DAVIDSON_HEADER, rows)


def test_hatecheck_labels_groups_and_functional_tests(hatecheck_csv):
    data = load_hatecheck(hatecheck_csv)
    assert data.name == "HateCheck" and data.layout == "hatecheck"
    assert data.texts == [f"placeholder case {i}" for i in range(4)]
    assert data.labels == [1, 0, 0, 1]
    assert [e.group for e in data.examples] == ["women", "muslim", None, "lgbtq"]
    assert data.meta_column("functionality") == [case[0] for case in HATECHECK_CASES]
    assert data.meta_column("case_id") == [1, 2, 3, 4]
    assert [e.row for e in data.examples] == [0, 1, 2, 3]
    for spec in (str(hatecheck_csv), f"hatecheck:{hatecheck_csv}", f"HC=hatecheck:{hatecheck_csv}"):
        via_spec = load_spec(spec)
        assert via_spec.layout == "hatecheck" and via_spec.examples == data.examples
    assert load_spec(f"HC=hatecheck:{hatecheck_csv}").name == "HC"
    with pytest.raises(InputError, match=r"no per-row field 'class'.*fields are "
                                         r"\['case_id', 'functionality', 'target_ident'\]"):
        data.meta_column("class")


def test_hatecheck_missing_columns_and_unknown_labels(tmp_path):
    keep = [c for c in HATECHECK_HEADER if c not in ("label_gold", "target_ident")]
    broken = write_csv(tmp_path / "cases.csv", keep, [[0, "slur_h", 1, "placeholder", "-", "", "", "", "", 1, ""]])
    with pytest.raises(InputError, match=r"missing column\(s\) \['label_gold', 'target_ident'\] for the HateCheck "
                                         r"layout") as info:
        load_hatecheck(broken)
    assert "test_suite_cases.csv" in str(info.value.hint)
    with pytest.raises(InputError, match=r"missing column\(s\) \['label_gold', 'target_ident'\]"):
        load_spec(f"hatecheck:{broken}")
    odd = write_csv(tmp_path / "odd.csv", HATECHECK_HEADER,
                    [[0, "slur_h", 1, "placeholder", "maybe", "women", "general", "", "", "", "", 1, ""]])
    with pytest.raises(InputError, match="label_gold 'maybe' at data row 1 is not hateful/non-hateful"):
        load_hatecheck(odd)


def test_davidson_rules_text_and_votes(davidson_csv):
    toxic = load_davidson(davidson_csv)
    assert toxic.name == "Davidson (toxic)" and toxic.layout == "davidson"
    assert toxic.labels == [0, 1, 1, 1, 0]
    assert load_davidson(davidson_csv, rule="hate").labels == [0, 1, 0, 0, 0]
    # entities ending in ';' are decoded once; case, mentions, RT, newlines and spaces are kept
    assert toxic.texts == [row[6] for row in DAVIDSON_ROWS]
    assert toxic.meta_column("class") == [row[4] for row in DAVIDSON_ROWS]
    for i, key in enumerate(("count", "hate_speech", "offensive_language", "neither")):
        assert toxic.meta_column(key) == [row[i] for row in DAVIDSON_ROWS]
    assert "hate speech or offensive language" in toxic.notes[0]


def test_davidson_rule_in_the_spec(davidson_csv):
    cases = {f"davidson:{davidson_csv}": [0, 1, 1, 1, 0], f"davidson:{davidson_csv}#toxic": [0, 1, 1, 1, 0],
             f"davidson:{davidson_csv}#hate": [0, 1, 0, 0, 0], f"{davidson_csv}#hate": [0, 1, 0, 0, 0],
             str(davidson_csv): [0, 1, 1, 1, 0], f"D=davidson2017:{davidson_csv}#hate": [0, 1, 0, 0, 0]}
    for spec, labels in cases.items():
        data = load_spec(spec)
        assert data.layout == "davidson" and data.labels == labels, spec
    assert load_spec(f"davidson:{davidson_csv}#hate").name == "Davidson (hate)"
    assert load_spec(f"D=davidson:{davidson_csv}#hate").name == "D"
    with pytest.raises(InputError, match="unknown Davidson label rule 'offensive'; the rules are toxic, hate"):
        load_spec(f"davidson:{davidson_csv}#offensive")
    with pytest.raises(InputError, match="unknown Davidson label rule 'neither'"):
        load_davidson(davidson_csv, rule="neither")
    with pytest.raises(InputError, match=r"the table kind takes no #hate option") as info:
        load_spec(f"table:{davidson_csv}#hate")
    assert "davidson: #toxic, #hate" in str(info.value.hint)
    with pytest.raises(InputError, match="no such file"):
        load_spec(f"davidson:{davidson_csv.parent / 'absent.csv'}#hate")


def test_split_option_leaves_existing_paths_alone(tmp_path):
    folder = tmp_path / "runs#hate"
    folder.mkdir()
    assert split_option(str(folder)) == (str(folder), None)
    assert split_option(f"davidson:{folder}") == (f"davidson:{folder}", None)
    assert split_option("davidson:data/labeled_data.csv#hate") == ("davidson:data/labeled_data.csv", "hate")
    assert split_option("davidson#hate") == ("davidson", "hate")
    assert split_option("table:notes#2.csv") == ("table:notes#2.csv", None)


def test_davidson_missing_columns_and_bad_class(tmp_path):
    other = write_csv(tmp_path / "other.csv", ["", "tweet", "class"], [[0, "placeholder", 1]])
    with pytest.raises(InputError, match=r"missing column\(s\) \['count', 'hate_speech', 'offensive_language', "
                                         r"'neither'\] for the Davidson et al. 2017 layout") as info:
        load_spec(f"davidson:{other}")
    assert "labeled_data.csv" in str(info.value.hint)
    bad = write_csv(tmp_path / "bad.csv", DAVIDSON_HEADER, [[0, 3, 0, 0, 3, 2, "placeholder"],
                                                            [1, 3, 0, 0, 3, 3, "placeholder"]])
    with pytest.raises(InputError, match="class 3 at data row 2 is not 0, 1 or 2"):
        load_davidson(bad)


def test_layouts_detected_from_the_published_columns():
    assert detect_layout(HATECHECK_HEADER) == "hatecheck"
    assert detect_layout(DAVIDSON_HEADER) == "davidson"
    assert detect_layout(["tweet", "class"]) == "table"


def test_hub_sources_are_pinned_and_say_how_to_go_offline(monkeypatch, hatecheck_csv, davidson_csv):
    calls = []

    def offline(hub_id, config=None, split=None, **kwargs):
        calls.append(kwargs["data_files"])
        raise ToxiforgeError("could not load csv from the hub: no network")

    from toxiforge.data import examples

    monkeypatch.setattr(examples, "load_hub_table", offline)
    for spec in ("hatecheck:hub", "davidson#hate"):
        with pytest.raises(ToxiforgeError, match="pass a local copy instead: .*at commit [0-9a-f]{40}"):
            load_spec(spec)
    assert calls == [hatecheck_module.HATECHECK_URL, davidson_module.DAVIDSON_URL]
    assert hatecheck_module.HATECHECK_COMMIT in calls[0] and davidson_module.DAVIDSON_COMMIT in calls[1]

    tables = {hatecheck_module.HATECHECK_URL: read_any_table(hatecheck_csv),
              davidson_module.DAVIDSON_URL: read_any_table(davidson_csv)}
    monkeypatch.setattr(examples, "load_hub_table", lambda *args, data_files, **kwargs: tables[data_files])
    assert load_spec("hatecheck").source == hatecheck_module.HATECHECK_URL
    assert load_spec("davidson:hub#hate").labels == [0, 1, 0, 0, 0]


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def test_real_hatecheck_counts():
    path = shared_file("hatecheck", "test_suite_cases.csv")
    rows = read_rows(path)
    data = load_spec(str(path))
    assert data.layout == "hatecheck"
    assert len(rows) == len(data) == 3728
    tests = data.meta_column("functionality")
    assert len(set(tests)) == len({r["functionality"] for r in rows}) == 29
    assert Counter(tests) == Counter(r["functionality"] for r in rows)
    assert data.texts == [r["test_case"] for r in rows]
    assert sum(data.labels) == sum(r["label_gold"] == "hateful" for r in rows)
    # the test names' suffix is the gold label (HateCheck's README)
    assert data.labels == [int(test.endswith("_h")) for test in tests]
    groups = Counter(e.group for e in data.examples)
    assert groups[None] == sum(not r["target_ident"] for r in rows) > 0
    targets = Counter(r["target_ident"] for r in rows if r["target_ident"])
    assert sorted(n for g, n in groups.items() if g is not None) == sorted(targets.values())


def test_real_davidson_counts_and_rules():
    path = shared_file("davidson2017", "labeled_data.csv")
    rows = read_rows(path)
    assert len(rows) == 24783
    classes = Counter(r["class"] for r in rows)
    for rule, positive in (("toxic", ("0", "1")), ("hate", ("0",))):
        data = load_spec(f"davidson:{path}#{rule}")
        assert len(data) == len(rows)
        expected = sum(classes[c] for c in positive) / len(rows)
        assert sum(data.labels) / len(data) == pytest.approx(expected, abs=1e-12), rule
    assert data.texts == [html.unescape(r["tweet"]) for r in rows]
    assert sum(data.meta_column("hate_speech")) == sum(int(r["hate_speech"]) for r in rows)
    assert load_spec(str(path)).name == "Davidson (toxic)"


def test_sample_option_keeps_a_seeded_stratified_sample(tmp_path):
    # 40 cases: 4 functional tests x 10, two hateful and two non-hateful
    tests = [("derog_neg_emote_h", "hateful"), ("spell_leet_h", "hateful"), ("ident_neutral_nh", "non-hateful"),
             ("counter_quote_nh", "non-hateful")]
    rows = [[i, test, i + 1, f"placeholder case {i}", gold, "women", "-", "", "", "", "", 100 + i, ""]
            for i, (test, gold) in enumerate(t for t in tests for _ in range(10))]
    path = write_csv(tmp_path / "test_suite_cases.csv", HATECHECK_HEADER, rows)
    full = load_spec(f"hatecheck:{path}")
    sample = load_spec(f"hatecheck:{path}#sample=8")
    assert len(sample) == 8 and len(full) == 40
    assert Counter(sample.meta_column("functionality")) == {t: 2 for t, _ in tests}   # every test keeps its share
    rows_kept = [e.row for e in sample.examples]
    assert rows_kept == sorted(rows_kept)                                               # original order
    assert rows_kept == [e.row for e in load_spec(f"hatecheck:{path}#sample=8").examples]   # seeded
    assert "stratified sample of 8 of 40 rows" in sample.notes[-1]
    assert len(load_spec(f"hatecheck:{path}#sample=100")) == 40


def test_sample_option_combines_with_the_label_rule_and_rejects_bad_sizes(davidson_csv):
    hate = load_spec(f"davidson:{davidson_csv}#hate#sample=3")
    assert sorted(hate.labels) == [0, 0, 1]   # 1 hate of 5 rows: 0.6 of a row, kept by the largest remainder
    for bad in ("0", "x", "-3", ""):
        with pytest.raises(InputError, match="positive number of rows"):
            load_spec(f"davidson:{davidson_csv}#sample={bad}")


def test_hatechecks_own_label_words_are_binary_in_a_plain_table(hatecheck_csv, tmp_path):
    """Issue 56 #10: a table whose --label-column holds HateCheck's words (hateful / non-hateful) was refused as not
    binary, though hate/nothate and toxic/benign pass."""
    data = load_spec(f"table:{hatecheck_csv}", text_column="test_case", label_column="label_gold")
    assert data.layout == "table" and data.labels == [1, 0, 0, 1]
    words = write_csv(tmp_path / "words.csv", ["text", "label"],
                      [(f"placeholder {i}", w) for i, w in enumerate(("Non-Hateful", "hateful", "not_hateful"))])
    assert load_spec(str(words)).labels == [0, 1, 0]


def test_a_column_option_that_no_set_reads_is_refused_naming_why(hatecheck_csv, davidson_csv, tmp_path):
    """Issue 56 #10: --text-column with a hatecheck: set was ignored without a word (HateCheck's text is its
    test_case); with a plain table among the sets it applies to the table, as before."""
    from toxiforge.data import load_specs

    for spec, option in ((f"hatecheck:{hatecheck_csv}", {"text_column": "case_templ"}),
                         (f"davidson:{davidson_csv}", {"label_column": "hate_speech"})):
        with pytest.raises(InputError) as caught:
            load_spec(spec, **option)
        flag = "--" + next(iter(option)).replace("_", "-")
        assert f"{flag} {next(iter(option.values()))} would be ignored" in str(caught.value)
        assert "table:PATH" in caught.value.hint
    with pytest.raises(InputError, match="--text-column case_templ would be ignored: HateCheck .hatecheck., "
                                         "Davidson .toxic. .davidson. have"):
        load_specs([f"hatecheck:{hatecheck_csv}", f"davidson:{davidson_csv}"], text_column="case_templ")
    table = write_csv(tmp_path / "t.csv", ["sentence", "label"], [("placeholder one", 1), ("placeholder two", 0)])
    both = load_specs([f"hatecheck:{hatecheck_csv}", str(table)], text_column="sentence")
    assert [len(d) for d in both] == [4, 2] and both[1].texts == ["placeholder one", "placeholder two"]


def test_evaluate_and_train_refuse_a_text_column_for_hatecheck_before_any_model_loads(hatecheck_csv, tmp_path):
    """train checks --data and --eval together: --text-column may be for a table in either list."""
    from typer.testing import CliRunner

    from toxiforge.cli import app

    spec = f"hatecheck:{hatecheck_csv}"
    table = write_csv(tmp_path / "t.csv", ["sentence", "label"], [("placeholder one", 1), ("placeholder two", 0)])
    for args in (["evaluate", "-c", "no-such-classifier", "--on", spec],
                 ["train", "--data", spec, "--base-model", "no-such-model"],
                 ["train", "--data", spec, "--eval", spec, "--base-model", "no-such-model"]):
        result = CliRunner().invoke(app, [*args, "--text-column", "case_templ", "-o", str(tmp_path / "out")])
        assert isinstance(result.exception, InputError), (args, result.output)
        assert "--text-column case_templ would be ignored" in str(result.exception), args
    # a table in --eval reads it: the run goes on to the base model, which then is the error
    result = CliRunner().invoke(app, ["train", "--data", spec, "--eval", str(table), "--base-model", "no-such-model",
                                      "--text-column", "sentence", "-o", str(tmp_path / "out")])
    assert "would be ignored" not in str(result.exception) and "no-such-model" in str(result.exception)
