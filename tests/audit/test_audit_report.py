"""What a reader of report.md / report.html sees: the summary card per classifier pair (or of one classifier), the
contents and its anchors, every number named in words and defined, functional tests worst first, one subgroup
AUC column, HateCheck's own group names, a lexical verdict that weighs misses as well as false alarms, and the
figures' fractions and error bars."""

from __future__ import annotations

import json
import os
import re

import matplotlib.axes
import numpy as np
import pytest

from audit.test_audit_cli import CHROMIUM, _audit, fakes, hatecheck, table  # noqa: F401 (fixtures)
from conftest import write_csv
from toxiforge.classifiers.wrap import CallableClassifier


@pytest.fixture
def mentions(tmp_path):
    """A plain table whose rows name a group (Zhou et al.'s NOI slice), half of them toxic-labelled."""
    return write_csv(tmp_path / "mentions.csv", ["text", "label"],
                     [(f"placeholder statement about muslim neighbours {i}", i % 2) for i in range(120)])


@pytest.fixture
def silent(monkeypatch, fakes):  # noqa: F811 (the fixture)
    """Two more -c beside ``fakes``'s: fake-none flags nothing (P(toxic) 0 for every text); fake-squash is
    fake-good's scores squeezed toward 0.5 (``0.5 + (P - 0.5) / 10``): the same ranking and the same predictions,
    so every number but the calibration's is fake-good's."""
    import toxiforge.classifiers

    others = toxiforge.classifiers.load_classifier

    def load(spec, **kwargs):
        if spec == "fake-none":
            return CallableClassifier(lambda texts: [0.0] * len(texts), name=spec)
        if spec == "fake-squash":
            good = others("fake-good", **kwargs)
            return CallableClassifier(lambda texts: [0.5 + (p - 0.5) / 10 for p in good.predict_proba(texts)],
                                      name=spec)
        return others(spec, **kwargs)

    monkeypatch.setattr("toxiforge.classifiers.load_classifier", load)
    return fakes


def _report(tmp_path, *args):
    out = tmp_path / "audit"
    result = _audit(*args, "-o", str(out))
    assert result.exit_code == 0, result.output
    return out, (out / "report.md").read_text()


def test_pair_card_comes_first_with_verdicts_largest_differences_and_weakest(tmp_path, hatecheck, fakes):  # noqa: F811
    out, md = _report(tmp_path, "-c", "fake-good", "-c", "W=fake-weak", "--on", f"hatecheck:{hatecheck}")
    card = md[md.index("## Summary: W against fake-good"):md.index("## Contents")]
    assert md.index("## Summary") < md.index("## Contents") < md.index("## HateCheck")
    assert "| accuracy | **worse** |" in card and "| HateCheck tests | **worse** |" in card
    largest = re.findall(r"^\* (.+) on HateCheck ([+-]\d\.\d{3}) \[(-?\d\.\d{3}), (-?\d\.\d{3})\]: (.+)$", card, re.M)
    assert len(largest) == 3 and all(w == "**worse**" for *_, w in largest)
    report = json.loads((out / "report.json").read_text())

    def small_n(section: str, metric: str) -> bool:   # the card leaves out a proportion of fewer than 30 rows
        found = [report["results"][c]["HateCheck"][section] for c in ("fake-good", "W")]
        for key in metric.split("."):
            found = [f[key] for f in found]
        return any(f.get("small_n") for f in found)

    diffs = [abs(r["value"]) for name, sec in report["comparison"]["HateCheck"]["W"].items()
             for m, r in sec["metrics"].items() if r["shown"] and not small_n(name, m)]
    assert sorted(abs(float(v)) for _, v, *_ in largest) == pytest.approx(sorted(diffs)[-3:], abs=1e-3)
    weak = report["results"]["W"]["HateCheck"]["hatecheck"]["functional_tests"]
    worst = min(weak, key=lambda t: weak[t]["accuracy"]["value"])
    assert re.search(rf"^\| W \| {worst} \d\.\d\d \(fake-good 1\.00\);", card, re.M)
    assert "gay people (lgbtq): " in card   # a weakest group, named as HateCheck names it


def test_contents_links_every_section_and_the_page_has_those_ids(tmp_path, hatecheck, table, fakes):  # noqa: F811
    out, md = _report(tmp_path, "-c", "fake-good", "--on", f"hatecheck:{hatecheck}", "--on", f"T=table:{table}")
    assert "## Summary: fake-good" in md and "| ROC AUC | " in md   # one classifier: its headline numbers
    links = re.findall(r"\]\(#([\w-]+)\)", md[md.index("## Contents"):md.index("## HateCheck")])
    assert {"hatecheck", "accuracy", "accuracy-1", "t", "definitions", "hatecheck-functional-tests"} <= set(links)
    page = (out / "report.html").read_text()
    ids = re.findall(r'<h[1-3] id="([^"]+)"', page)
    assert len(ids) == len(set(ids)) and set(links) <= set(ids)
    card = page[page.index('<section class="card">'):page.index("</section>")]   # the card in a box
    assert '<h2 id="summary-fake-good">' in card and "contents" not in card


def test_every_number_is_named_in_words_and_defined(tmp_path, hatecheck, fakes):  # noqa: F811
    _, md = _report(tmp_path, "-c", "fake-good", "-c", "W=fake-weak", "--on", f"hatecheck:{hatecheck}")
    defs = md[md.index("## Definitions"):]
    for words in ("**BPSN AUC**", "**BNSP AUC**", "**bias score**", "**NOI**", "**OI**", "**ONI**", "**AAE**",
                  "**ECE**", "**Brier score**", "**FPR at 95% TPR**", "**over-blocking**", "**functional test**"):
        assert words in defs
    for paper in ("Borkan et al. 2019", "Zhou et al. 2021", "Röttger et al. 2021"):
        assert paper in defs
    body = md[:md.index("## Definitions")]
    for raw in ("roc_auc", "fpr_at_95_tpr", "subgroup_auc", "bpsn_auc", "final_score", "over_blocking", "fpr.noi",
                "calibration.ece", "lgbtq |"):
        assert raw not in body
    header = next(line for line in body.splitlines() if line.startswith("| group |"))
    assert header.split(" | ").count("subgroup AUC") == 1 and " AUC | FPR" not in header.replace("BNSP AUC", "")
    assert "| gay people (lgbtq) | 24 |" in body


def test_functional_tests_are_listed_worst_first(tmp_path, hatecheck, fakes):  # noqa: F811
    out, md = _report(tmp_path, "-c", "W=fake-weak", "--on", f"hatecheck:{hatecheck}")
    tests = json.loads((out / "report.json").read_text())["results"]["W"]["HateCheck"]["hatecheck"]
    shown = re.findall(r"^\| (\w+_n?h) \| (?:non-)?hateful \| \d+ \| (\d\.\d\d) ", md, re.M)
    assert [t for t, _ in shown] == sorted(tests["functional_tests"],
                                           key=lambda t: (tests["functional_tests"][t]["accuracy"]["value"], t))
    assert [float(a) for _, a in shown] == sorted(float(a) for _, a in shown)


def test_a_classifier_that_flags_nothing_is_not_better_on_the_lexical_section(tmp_path, mentions, silent):
    out, md = _report(tmp_path, "-c", "W=fake-weak", "-c", "fake-none", "--on", f"M=table:{mentions}")
    lexical = json.loads((out / "report.json").read_text())["comparison"]["M"]["fake-none"]["lexical"]
    assert lexical["verdict"] == "mixed"
    assert lexical["metrics"]["fpr.noi"]["better"] is True        # no false alarm: FPR 0 ...
    assert lexical["metrics"]["fnr.noi"]["better"] is False       # ... and every toxic row missed
    assert re.search(r"^\| NOI \| 60 / 60 \| \S+ \[.+\] \| \S+ \[.+\] \| 0\.000 .*\| 1\.000 ", md, re.M)


def test_heat_map_in_fractions_and_bias_auc_bars_with_intervals(tmp_path, hatecheck, fakes, monkeypatch):  # noqa: F811
    texts, errors = [], []
    text, barh = matplotlib.axes.Axes.text, matplotlib.axes.Axes.barh
    monkeypatch.setattr(matplotlib.axes.Axes, "text", lambda self, x, y, s, *a, **k: texts.append(s)
                        or text(self, x, y, s, *a, **k))
    monkeypatch.setattr(matplotlib.axes.Axes, "barh", lambda self, *a, **k: errors.append(k.get("xerr"))
                        or barh(self, *a, **k))
    _report(tmp_path, "-c", "fake-good", "-c", "W=fake-weak", "--on", f"hatecheck:{hatecheck}")
    assert len(texts) == 8 and all(re.fullmatch(r"[01]\.\d\d", t) for t in texts)   # 4 tests x 2 classifiers
    assert len(errors) == 6 and all(e is not None and e.shape == (2, 2) and (e >= 0).all() for e in errors)
    assert any(e.sum() > 0 for e in errors)



@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is absent (apt-get install -y chromium)")
def test_the_card_fits_a_1280_pixel_window_in_chromium(tmp_path, hatecheck, table, fakes):  # noqa: F811
    sync_api = pytest.importorskip("playwright.sync_api")
    out, _ = _report(tmp_path, "-c", "fake-good", "-c", "W=fake-weak", "--on", f"hatecheck:{hatecheck}",
                     "--on", f"T=table:{table}")
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto((out / "report.html").as_uri())
        card = page.eval_on_selector("section.card", "e => e.getBoundingClientRect().toJSON()")
        browser.close()
    assert card["top"] < 200 and card["bottom"] <= 800 and card["right"] <= 1280


def test_the_card_ranks_differences_by_their_nearest_end_and_leaves_out_small_n():
    """A loose large difference ranks below a certain smaller one; a one-row FNR that differs by 1 in every
    resample (interval [-1, -1]) is not a finding of the card."""
    from toxiforge.audit.compare import compare
    from toxiforge.audit.run import AuditResult, AuditSettings, ClassifierSpec, PairResult
    from toxiforge.audit.summary import pair_card
    from toxiforge.intervals import Estimate

    rng = np.random.default_rng(0)

    def sections(auc, f1, fnr_hits):
        noise = rng.normal(0, 1, (2, 200))   # replicates of this classifier (paired differences subtract them)
        return {"accuracy": {"roc_auc": Estimate.of(auc, auc + 0.01 * noise[0]),
                             "f1": Estimate.of(f1, f1 + 0.08 * noise[1])},
                "groups": {"note": "no groups"},
                "lexical": {"fnr": {"oni": Estimate.proportion(fnr_hits, 1, np.full(200, float(fnr_hits)))}}}

    base, other = sections(0.70, 0.40, 1), sections(0.80, 0.65, 0)
    result = AuditResult([ClassifierSpec("a", "a"), ClassifierSpec("b", "b")], [],
                         {("a", "D"): PairResult(np.zeros(1), base, False),
                          ("b", "D"): PairResult(np.zeros(1), other, False)},
                         {"D": {"b": compare(base, other)}}, {}, AuditSettings(), "", {})
    assert result.comparison["D"]["b"]["lexical"]["metrics"]["fnr.oni"]["shown"]   # [-1, -1]: "shown"
    card = "\n".join(pair_card(result, "b"))
    ranked = [line.split(" on D")[0] for line in card.splitlines() if line.startswith("* ")]
    assert ranked == ["* ROC AUC", "* F1"]   # F1 about +0.25 [0.05, 0.49] below ROC AUC +0.10 [0.07, 0.12]
