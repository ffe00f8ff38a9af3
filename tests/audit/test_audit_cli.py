"""`toxiforge audit` end to end with fake classifiers on a tiny HateCheck-layout file and a plain table: the
report files and schema, the score cache (one more -c scores only it), Ctrl-C then --resume, a classifier that
fails mid-run, errors before scoring, and the HTML page in Chromium."""

from __future__ import annotations

import json
import os
import zlib
from collections import Counter

import numpy as np
import pytest
from typer.testing import CliRunner

from conftest import write_csv
from toxiforge.audit import scores as score_module
from toxiforge.classifiers.wrap import CallableClassifier
from toxiforge.cli import app

runner = CliRunner()
TESTS = [("ident_neutral_nh", "non-hateful"), ("derog_neg_emote_h", "hateful"), ("spell_leet_h", "hateful"),
         ("counter_quote_nh", "non-hateful")]


@pytest.fixture
def hatecheck(tmp_path):
    rows = [(test, i, f"placeholder case {i} for {test}", gold, "women" if i % 2 else "gay people")
            for test, gold in TESTS for i in range(12)]
    return write_csv(tmp_path / "test_suite_cases.csv",
                     ["functionality", "case_id", "test_case", "label_gold", "target_ident"], rows)


@pytest.fixture
def table(tmp_path):
    return write_csv(tmp_path / "plain.csv", ["text", "label"],
                     [(f"neutral placeholder sentence {i}", i % 2) for i in range(40)])


def _score(text: str, skill: float) -> float:
    """A deterministic score that knows the label (from the placeholder's wording) with strength ``skill``."""
    toxic = "_h " in text + " " or text.endswith(("1", "3", "5", "7", "9"))
    noise = (zlib.crc32(text.encode()) % 1000) / 1000
    return float(np.clip(skill * toxic + (1 - skill) * noise, 0, 1))


@pytest.fixture
def fakes(monkeypatch):
    """-c fake-good / fake-weak / fake-broken, counting the texts each scores."""
    calls: Counter = Counter()
    skills = {"fake-good": 0.7, "fake-weak": 0.2}

    def load(spec, **kwargs):
        def fn(texts, spec=spec):
            calls[spec] += len(texts)
            if spec == "fake-broken" and any("case 7 for counter_quote_nh" in t for t in texts):
                raise RuntimeError("server went away")
            if spec == "fake-interrupt" and any("sentence" in t for t in texts):
                raise KeyboardInterrupt
            return [_score(t, skills.get(spec, 0.5)) for t in texts]

        return CallableClassifier(fn, name=spec)

    monkeypatch.setattr("toxiforge.classifiers.load_classifier", load)
    return calls


def _audit(*args):
    return runner.invoke(app, ["audit", *args, "--bootstrap", "50"])


def _error(result) -> str:
    """The one-line error a failed command ends with (the CLI's main() prints it; the runner keeps it)."""
    assert result.exit_code != 0
    return " ".join(str(result.exception).split())


def test_audit_writes_the_report_and_scores_only_what_is_new(tmp_path, hatecheck, table, fakes):
    out = tmp_path / "audit"
    on = ["--on", f"hatecheck:{hatecheck}", "--on", f"T=table:{table}"]
    first = _audit("-c", "fake-good", *on, "-o", str(out))
    assert first.exit_code == 0, first.output
    assert fakes == {"fake-good": 48 + 40}
    report = json.loads((out / "report.json").read_text())
    assert report["schema"] == "toxiforge.audit/1"
    hc = report["results"]["fake-good"]["HateCheck"]
    assert set(hc["hatecheck"]["functional_tests"]) == {t for t, _ in TESTS}
    assert set(hc["hatecheck"]["targets"]) == {"women", "lgbtq"}  # normalize_group's names
    auc = hc["accuracy"]["roc_auc"]
    assert auc["low"] <= auc["value"] <= auc["high"]
    assert set(hc["groups"]["by_group"]["women"]) >= {"n", "auc", "fpr", "fnr", "subgroup_auc", "bpsn_auc",
                                                      "bnsp_auc"}
    assert report["results"]["fake-good"]["T"]["groups"] == {"note": "T has no target groups"}
    assert set(report["results"]["fake-good"]["T"]["lexical"]["fpr"]) == {"noi", "oi", "oni", "aae"}
    again = _audit("-c", "fake-good", *on, "-o", str(out))   # an existing output needs --resume or --overwrite
    assert "pass --resume (reuse its scores) or --overwrite" in _error(again)
    fakes.clear()
    second = _audit("-c", "fake-good", "-c", "W=fake-weak", *on, "-o", str(out), "--resume")
    assert second.exit_code == 0, second.output
    assert fakes == {"fake-weak": 88}   # the cached classifier is not even loaded
    report = json.loads((out / "report.json").read_text())
    verdict = report["comparison"]["HateCheck"]["W"]["accuracy"]
    assert verdict["metrics"]["roc_auc"]["value"] < 0 and verdict["verdict"] in ("worse", "no difference shown")
    markdown = (out / "report.md").read_text()
    assert "## Summary: W against fake-good" in markdown and "derog_neg_emote_h" in markdown
    assert {p.name for p in (out / "figures").iterdir()} == {
        "roc-hatecheck.png", "reliability-hatecheck.png", "groups-hatecheck.png", "hatecheck-hatecheck.png",
        "roc-t.png", "reliability-t.png"}
    page = (out / "report.html").read_text()
    assert page.count('src="data:image/png;base64,') == 6 and "http" not in page.replace("http-equiv", "")


def test_a_sampled_dataset_scores_only_its_sample_and_the_report_says_so(tmp_path, hatecheck, fakes):
    out = tmp_path / "audit"
    result = _audit("-c", "fake-good", "--on", f"hatecheck:{hatecheck}#sample=16", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert fakes == {"fake-good": 16}
    report = json.loads((out / "report.json").read_text())
    assert {t: v["n"] for t, v in report["results"]["fake-good"]["HateCheck"]["hatecheck"]["functional_tests"]
            .items()} == {t: 4 for t, _ in TESTS}   # stratified: every functional test keeps its share
    assert "* stratified sample of 16 of 48 rows" in (out / "report.md").read_text()


def test_ctrl_c_keeps_finished_pairs_and_resume_finishes(tmp_path, hatecheck, table, fakes):
    out = tmp_path / "audit"
    on = ["--on", f"hatecheck:{hatecheck}", "--on", f"table:{table}"]
    stopped = _audit("-c", "fake-interrupt", *on, "-o", str(out))
    assert stopped.exit_code == 130
    assert len(list((out / "scores").glob("*.npy"))) == 1   # HateCheck finished, the table not
    fakes.clear()
    # the same classifier works now (say the server came back): only the missing pair is scored
    done = _audit("-c", "fake-interrupt", *on[:2], "-o", str(out), "--resume")
    assert done.exit_code == 0 and fakes == {}   # HateCheck alone: everything cached


def test_a_classifier_failing_mid_run_keeps_its_rows_and_says_how_to_resume(tmp_path, hatecheck, fakes,
                                                                            monkeypatch):
    monkeypatch.setattr(score_module, "CHUNK", 10)
    out = tmp_path / "audit"
    failed = _audit("-c", "fake-broken", "--on", f"hatecheck:{hatecheck}", "-o", str(out))
    message = _error(failed)
    assert "fake-broken on HateCheck failed after 40 rows (RuntimeError: server went away)" in message
    assert "rerun the same command with --resume" in message
    kept, = (out / "scores").glob("*.partial.npy")   # rows 0-39 (four chunks), row 43 failed
    assert np.load(kept).shape == (40,) and list((out / "scores").glob("*.npy")) == [kept]   # none finished


def test_partial_scores_resume_at_the_chunk_that_stopped(tmp_path, monkeypatch):
    from toxiforge.audit.scores import ScoreCache

    monkeypatch.setattr(score_module, "CHUNK", 4)
    cache, texts, seen, broken = ScoreCache(tmp_path), [f"t{i}" for i in range(10)], [], [True]

    def flaky(chunk):
        seen.extend(chunk)
        if "t9" in chunk and broken.pop():
            raise RuntimeError("stop")
        return np.full(len(chunk), 0.5)

    with pytest.raises(RuntimeError):
        cache.score("c", "d", texts, flaky, {})
    assert len(cache.partial("c", "d")) == 8
    seen.clear()
    broken.append(False)
    assert cache.score("c", "d", texts, flaky, {}).shape == (10,) and seen == ["t8", "t9"]
    assert not cache.path("c", "d", ".partial.npy").exists()


def test_errors_before_any_scoring(tmp_path, hatecheck, fakes):
    twice = _audit("-c", "fake-good", "-c", "fake-good", "--on", str(hatecheck), "-o", str(tmp_path / "b"))
    assert "NAME=SPEC" in _error(twice)
    bad = write_csv(tmp_path / "hc.csv", ["functionality", "test_case", "label_gold"], [("x_h", "t", "hateful")])
    missing = _audit("-c", "fake-good", "--on", f"hatecheck:{bad}", "-o", str(tmp_path / "c"))
    assert "case_id" in _error(missing)
    assert fakes == {}


CHROMIUM = os.environ.get("TOXIFORGE_CHROMIUM", "/usr/bin/chromium")


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is absent (apt-get install -y chromium)")
def test_report_html_renders_in_chromium_without_errors(tmp_path, hatecheck, fakes):
    sync_api = pytest.importorskip("playwright.sync_api")
    out = tmp_path / "audit"
    assert _audit("-c", "fake-good", "-c", "fake-weak", "--on", f"hatecheck:{hatecheck}", "-o",
                  str(out)).exit_code == 0
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--headless", "--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors, requests = [], []
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("request", lambda r: requests.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
        page.goto((out / "report.html").as_uri())
        widths = page.eval_on_selector_all("img", "imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
        browser.close()
    assert len(widths) == 4 and all(w > 100 for w in widths)
    assert errors == [] and requests == []


def test_attack_section_attacks_flagged_toxic_rows_and_is_cached(tmp_path, table, fakes):
    """--family obfuscate: each classifier's flagged toxic rows (at most --attack-n, seeded) are attacked against
    it; the success rate is the share no longer flagged (the cached row outcomes say which); --resume with one more
    -c attacks only the new classifier; an unknown family fails before anything is scored."""
    out = tmp_path / "audit"
    on = ["--on", f"T=table:{table}"]
    first = _audit("-c", "fake-good", *on, "-o", str(out), "--family", "obfuscate", "--attack-n", "8")
    assert first.exit_code == 0, first.output
    section = json.loads((out / "report.json").read_text())["results"]["fake-good"]["T"]["attacks"]["obfuscate"]
    flagged = sum(_score(f"neutral placeholder sentence {i}", 0.7) > 0.5 for i in range(1, 40, 2))
    assert (section["attacked"], section["flagged_toxic"]) == (8, flagged)
    (cached,) = (out / "attacks").iterdir()
    record = json.loads(cached.read_text())
    success = record["outcomes"]["obfuscate"]["success"]
    assert len(record["rows"]) == 8 and section["success_rate"]["value"] == pytest.approx(np.mean(success))
    assert all(int(table.read_text().splitlines()[1 + r].rsplit(",", 1)[1]) == 1 for r in record["rows"])
    assert "### Attacks" in (out / "report.md").read_text()
    fakes.clear()
    second = _audit("-c", "fake-good", "-c", "W=fake-weak", *on, "-o", str(out), "--resume", "--family",
                    "obfuscate", "--attack-n", "8")
    assert second.exit_code == 0, second.output
    assert set(fakes) == {"fake-weak"} and len(list((out / "attacks").iterdir())) == 2
    fakes.clear()
    bad = _audit("-c", "fake-good", *on, "-o", str(tmp_path / "bad"), "--family", "obfuscat")
    assert "obfuscat" in _error(bad) and not fakes


def test_prompt_attack_section_compares_alice_with_topk_on_the_same_prompts(tmp_path, table, fakes, tiny_llama_dir):
    """-d with -n: one top-k run from the prompts (shared by every classifier) and one ALICE run per classifier,
    attacking it, from the same prompts; flip rates recomputed from the runs' rows, the paired difference over the
    prompts both decoded; --validate-with adds validated and confirmed rates; --resume with one more -c generates
    only its ALICE run; a validator that is an audited classifier is refused before any scoring."""
    from conftest import write_upstream_layout
    from toxiforge.data.examples import read_any_table
    from toxiforge.records import is_toxic

    demos = write_upstream_layout(tmp_path / "up", prompts=False) / "demonstrations"
    out = tmp_path / "audit"
    attack = ["-d", str(demos), "--groups", "asian,muslim", "-n", "3", "-k", "2", "--model", str(tiny_llama_dir),
              "--beams", "2", "--candidates", "4", "--max-new-tokens", "4", "--device", "cpu"]
    attack += ["--validate-with", "fake-mid"]
    first = _audit("-c", "fake-good", "--on", f"T=table:{table}", "-o", str(out), *attack)
    assert first.exit_code == 0, first.output
    report = json.loads((out / "report.json").read_text())
    section = report["prompt_attacks"]["fake-good"]
    (runs,) = [p for p in (out / "attacks" / "prompts").iterdir() if p.is_dir()]   # one folder per generation setting
    (alice_dir,) = [p for p in runs.glob("alice-*") if p.is_dir()]

    def rows(run):
        return [r for r in read_any_table(run).to_pylist() if r["generation"] and not r["parse_error"]]

    alice_rows, topk_rows = rows(alice_dir), rows(runs / "topk")
    assert len(alice_rows) == len(topk_rows) == 12 == section["alice"]["statements"] == section["top-k"]["statements"]
    assert [r["row_id"] for r in alice_rows] == [r["row_id"] for r in topk_rows]
    assert [r["prompt"] for r in alice_rows] == [r["prompt"] for r in topk_rows]   # the same prompts
    alice_flips = [bool(r["fooled"]) for r in alice_rows]
    topk_flips = [is_toxic(_score(r["generation"], 0.7)) != (r["prompt_label"] == 1) for r in topk_rows]
    assert section["alice"]["all"]["value"] == pytest.approx(np.mean(alice_flips))
    assert section["top-k"]["all"]["value"] == pytest.approx(np.mean(topk_flips))
    diff = section["alice_minus_topk"]["flip_rate"]
    assert diff["prompts"] == 12
    assert diff["difference"]["value"] == pytest.approx(np.mean(alice_flips) - np.mean(topk_flips))
    agree = [is_toxic(_score(r["generation"], 0.5)) == (r["prompt_label"] == 1) for r in alice_rows]
    assert section["alice"]["validator_agrees"]["all"]["value"] == pytest.approx(np.mean(agree))
    assert section["alice"]["confirmed"]["all"]["value"] == pytest.approx(
        np.mean([f and a for f, a in zip(alice_flips, agree)]))
    assert "## ALICE vs top-k from prompts" in (out / "report.md").read_text()
    fakes.clear()
    second = _audit("-c", "fake-good", "-c", "W=fake-weak", "--on", f"T=table:{table}", "-o", str(out), "--resume",
                    *attack)
    assert second.exit_code == 0, second.output
    assert len([p for p in runs.glob("alice-*") if p.is_dir()]) == 2 and "fake-good" not in fakes
    assert set(fakes) == {"fake-weak", "fake-mid"}   # the new ALICE run, and the validator on it only
    fakes.clear()
    bad = _audit("-c", "fake-good", "--on", f"T=table:{table}", "-o", str(tmp_path / "bad"), *attack[:-1],
                 "fake-good")
    assert "attacked classifier" in _error(bad) and not fakes
    lonely = _audit("-c", "fake-good", "--on", f"T=table:{table}", "-o", str(tmp_path / "bad2"),
                    "--validate-with", "fake-weak")
    assert "prompt source" in _error(lonely)


def test_prompt_attack_section_with_a_keeper_names_it_beside_the_validator(tmp_path, table, fakes, tiny_llama_dir):
    """--keep-label-with K steers the section's ALICE (its runs record K) and the report names K beside the
    validator; a validator that is K is refused before any scoring (no self-confirmation), and so is a keeper without
    a prompt source."""
    from conftest import write_upstream_layout
    from toxiforge.data.examples import read_any_table

    demos = write_upstream_layout(tmp_path / "up", prompts=False) / "demonstrations"
    attack = ["-d", str(demos), "--groups", "asian", "-n", "1", "-k", "2", "--model", str(tiny_llama_dir),
              "--beams", "2", "--candidates", "4", "--max-new-tokens", "3", "--device", "cpu",
              "--keep-label-with", "fake-weak"]
    bad = _audit("-c", "fake-good", "--on", f"T=table:{table}", "-o", str(tmp_path / "bad"), *attack,
                 "--validate-with", "fake-weak")
    assert "is the keeper" in _error(bad) and not fakes
    lonely = _audit("-c", "fake-good", "--on", f"T=table:{table}", "-o", str(tmp_path / "bad2"),
                    "--keep-label-with", "fake-weak")
    assert "prompt source" in _error(lonely)
    out = tmp_path / "audit"
    result = _audit("-c", "fake-good", "--on", f"T=table:{table}", "-o", str(out), *attack, "--validate-with",
                    "fake-mid")
    assert result.exit_code == 0, result.output
    section = json.loads((out / "report.json").read_text())["prompt_attacks"]["fake-good"]
    assert (section["keep_label_with"], section["validate_with"]) == ("fake-weak", "fake-mid")
    (alice_dir,) = [p for p in (out / "attacks" / "prompts").glob("*/alice-*") if p.is_dir()]
    rows = [r for r in read_any_table(alice_dir).to_pylist() if r["generation"]]
    assert rows and all(r["keeper_score"] == pytest.approx(_score(r["generation"], 0.2)) for r in rows)
    text = " ".join((out / "report.md").read_text().split())
    assert "the keeper fake-weak" in text and "Validator: fake-mid" in text
