"""Issue 48, items 1, 2 and 7: harden keeps a guard slice of --data apart, checks every round against round 0 with
the audit's paired bootstrap (catching moderate damage), and ends with an audit that names the classifier to ship.
Placeholder text only; the loop runs on the tiny models of test_harden.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from audit.test_audit_cli import hatecheck  # noqa: F401 (fixtures)
from toxiforge.cli import app
from toxiforge.data.examples import Example, LabeledData
from toxiforge.data.examples import fold_text as fold
from toxiforge.harden.guard import HardenStopped
from toxiforge.harden.guardset import GUARD_SET, GuardCheck, Tolerance, split_guard
from toxiforge.harden.ship import recommend

from .test_harden import harden

runner = CliRunner()


def rows(n: int, start: int = 0) -> list[Example]:
    return [Example(f"placeholder statement {i}", i % 2, "asian") for i in range(start, start + n)]


def test_guard_slice_is_stratified_seeded_and_never_shares_a_text_with_training():
    data = rows(1000) + [Example("Placeholder  STATEMENT 3", 1, "asian")]  # a folded repeat of a row
    train, guard, note = split_guard(data, seed=1)
    assert note is None and 145 <= len(guard) <= 155 and abs(sum(guard.labels) - len(guard) / 2) <= 1
    kept_apart = {fold(t) for t in guard.texts}
    assert not kept_apart & {fold(e.text) for e in train}
    # every row is on exactly one side, a text's rows together: training is --data less the slice's texts, in order
    assert train == [e for e in data if fold(e.text) not in kept_apart]
    assert kept_apart | {fold(e.text) for e in train} == {fold(e.text) for e in data}
    assert len(guard) == len(kept_apart) and {fold(e.text) for e in data if fold(e.text) in kept_apart} == kept_apart
    assert split_guard(data, seed=1)[1].texts == guard.texts and split_guard(data, seed=2)[1].texts != guard.texts
    _, small, note = split_guard(rows(500), seed=1)
    assert len(small) == 100 and note is None  # 15% is 75: at least 100 rows where they are a quarter at most
    _, tiny, note = split_guard(rows(200), seed=1)
    assert len(tiny) == 30 and "guard slice is 30 rows (about 15%), not 100" in note


class Fixed:
    """A classifier whose P(toxic) per text is given."""

    def __init__(self, scores: dict[str, float]):
        self.scores = scores

    def predict_proba(self, texts):
        return np.asarray([self.scores[t] for t in texts])

    def describe(self) -> str:
        return "fixed scores"


def balanced(n: int = 200) -> LabeledData:
    return LabeledData("balanced", rows(n), "table", "test")


def moderate_damage(data: LabeledData) -> tuple[dict[str, float], dict[str, float]]:
    """C_0: AUC about 0.93, calls about 10% of benign rows toxic; the round: AUC about 0.86, calls 90% of the set
    toxic (the issue's example)."""
    rng = np.random.default_rng(0)
    y = np.asarray(data.labels)
    start = 1 / (1 + np.exp(-(1.05 * (2 * y - 1) + rng.normal(0, 1, len(y)) - 0.3)))
    ranked = 0.78 * (2 * y - 1) + rng.normal(0, 1, len(y))
    worse = 1 / (1 + np.exp(-(ranked - np.quantile(ranked, 0.1))))  # 90% of the rows above 0.5
    return dict(zip(data.texts, start.tolist())), dict(zip(data.texts, worse.tolist()))


def check_with(tmp_path: Path, scores: dict[str, dict[str, float]]) -> GuardCheck:
    from toxiforge.audit.run import AuditSettings

    return GuardCheck(tmp_path, Tolerance(), AuditSettings(resume=True), lambda spec, **_: Fixed(scores[spec]),
                      start="c0", reference="c0")


def test_moderate_damage_on_a_balanced_set_is_found_worse(tmp_path):
    """Issue 48's case (b): AUC 0.934 -> 0.86 and 90% of a balanced set called toxic passed issue 34's round check
    (its AUC interval reached round 0's AUC; 90% was not degenerate); the paired check finds it worse."""
    from sklearn.metrics import roc_auc_score

    data = balanced()
    start, worse = moderate_damage(data)
    y = data.labels
    auc0, auc1 = roc_auc_score(y, [start[t] for t in data.texts]), roc_auc_score(y, [worse[t] for t in data.texts])
    called = np.mean([worse[t] > 0.5 for t in data.texts])
    assert 0.9 < auc0 < 0.96 and 0.8 < auc1 < auc0 - 0.03 and 0.85 <= called < 0.95
    guard = check_with(tmp_path, {"c0": start, "r1": worse, "same": start})
    problems = guard.check(1, {"alice": "r1", "control": "same"}, [data], None)
    assert problems and all(p.startswith("round-1-alice's") for p in problems)
    assert any("FPR (accuracy.fpr) on balanced moved +" in p for p in problems)
    rows_ = guard.results[1]["sets"]["balanced"]["arms"]
    assert rows_["round-1-alice"]["fpr"]["worse"] and not any(r["worse"] for r in rows_["round-1-control"].values())
    assert json.loads((tmp_path / "round-1" / "guard.json").read_text())["problems"] == problems
    ship = recommend(guard, 1, ("alice", "control"), [data], None)
    # the control arm scores as C_0 does: not worse, but not above round 0 by the margin either, so C_0 is shipped
    assert ship["name"] == "C_0" and "round-1-control: ROC AUC +0.000" in ship["why"]
    alice = next(c for c in ship["candidates"] if c["name"] == "round-1-alice")
    assert "round-1-alice: found worse than round 0 by the paired check" in alice["short"]


def test_a_round_that_calls_everything_benign_is_found_worse_and_a_better_round_is_shipped(tmp_path):
    """A collapsed round that calls every row benign lowers FPR (seen on toxigen-dev: FPR -0.13 and not found worse
    while only FPR was checked): its FNR is checked too. A round that ranks better than C_0 and is no worse on any
    check is the classifier to ship; one that is not above round 0 is not (C_0 is)."""
    data = balanced()
    start, _ = moderate_damage(data)
    y = dict(zip(data.texts, data.labels))
    benign = {t: 0.2 + 0.1 * start[t] for t in data.texts}               # C_0's ranking, every row below 0.5
    better = {t: 0.9 if y[t] else 0.1 for t in data.texts}               # perfect
    guard = check_with(tmp_path, {"c0": start, "collapsed": benign, "better": better})
    problems = guard.check(1, {"alice": "collapsed", "control": "better"}, [data], None)
    assert problems and all(p.startswith("round-1-alice's") for p in problems)
    assert any("FNR (accuracy.fnr) on balanced moved +" in p for p in problems)
    ship = recommend(guard, 1, ("alice", "control"), [data], None)
    assert ship["name"] == "round-1-control" and ship["folder"] == "better" and ship["reference"] == "C_0"
    alice = next(c for c in ship["candidates"] if c["name"] == "round-1-alice")
    assert not alice["ships"] and "round-1-alice: found worse than round 0 by the paired check" in alice["short"]


def test_no_eval_destructive_lr_stops_at_round_1_and_ships_c0(setup, good_start, varied_lm, tmp_path):
    """The issue's case (a): no --eval, C_0 without its training log (the recipe from the options), rounds trained
    with a destructive learning rate. Before, nothing was measured and harden finished; now the guard slice stops
    the loop at round 1, the report names C_0 as the classifier to ship, and OUT/audit/ holds the audit."""
    out = tmp_path / "h"
    destructive = {"base_model": str(setup["base"]), "max_steps": 4, "learning_rate": 5.0, "batch_size": 8,
                   "eval_fraction": 0.0, "debias": "none"}  # the whole recipe, as a C_0 without its log needs
    with pytest.raises(HardenStopped, match=r"round 1 made the classifier worse .*on guard-slice moved") as stop:
        harden(setup, out, varied_lm, classifier=str(good_start[1]), eval=(), transfer=False,
               train_options=destructive, keep_going=False)
    report = json.loads((out / "report.json").read_text())
    assert report["problems"]["1"] == stop.value.problems
    assert report["guard"]["slice"]["rows"] >= 2 and report["guard"]["reference"] == str(good_start[1])
    assert "C_0's recipe is unknown" in report["guard"]["reference_note"]
    assert GUARD_SET in report["guard"]["rounds"]["1"]["sets"]
    assert report["ship"]["name"] == "C_0" and report["ship"]["folder"] == str(good_start[1])
    md = (out / "report.md").read_text()
    assert "**The classifier to ship: C_0** (round 0)" in md
    audit = json.loads((out / "audit" / "report.json").read_text())
    assert (out / "audit" / "report.html").exists() and (out / "audit" / "report.md").exists()
    assert GUARD_SET in json.dumps(audit) and "round-1-alice" in json.dumps(audit)
    def texts(name: str) -> set[str]:
        return {fold(json.loads(line)["text"]) for line in (out / name).read_text().splitlines()}

    trained, kept_apart = texts("data-less-guard-slice.jsonl"), texts("guard-slice.jsonl")
    assert trained and kept_apart and not trained & kept_apart
    assert report["rounds"][0]["alice"]["train_rows"] == len((out / "data-less-guard-slice.jsonl").read_text()
                                                             .splitlines()) < 16


def test_over_blocking_on_hatecheck_non_hateful_tests_is_found_worse(tmp_path):
    """On a set with HateCheck's functional tests, a round that calls more of the non-hateful cases hateful is worse
    (over-blocking), while the same round's FPR on a set without them is not checked for it."""
    tests = ["ident_neutral_nh", "counter_quote_nh", "derog_neg_emote_h", "threat_dir_h"]
    data = LabeledData("hatecheck", [Example(f"placeholder case {i}", int(tests[i % 4].endswith("_h")), "women",
                                             meta={"functionality": tests[i % 4]}) for i in range(160)],
                       "hatecheck", "test")
    start = {e.text: (0.8 if e.label else 0.2) for e in data.examples}
    blocking = {e.text: (0.8 if e.label or i % 8 < 4 else 0.2) for i, e in enumerate(data.examples)}
    guard = check_with(tmp_path, {"c0": start, "r1": blocking, "same": start})
    problems = guard.check(1, {"alice": "r1", "control": "same"}, [data], None)
    assert any("over-blocking (hatecheck.over_blocking) on hatecheck moved +" in p
               for p in problems)
    assert guard.results[1]["sets"]["hatecheck"]["arms"]["round-1-alice"]["over_blocking"]["worse"]


def test_cli_checks_hatecheck_over_blocking_and_ends_with_the_audit(setup, good_start, varied_lm,  # noqa: F811
                                                                    hatecheck, tmp_path, monkeypatch):  # noqa: F811
    """The documented command on the tiny models: `harden -c C_0 --eval hatecheck:FILE` keeps a guard slice too, the
    round's check has over-blocking on the HateCheck set and every check on the slice (against C_0's recipe retrained
    without it), report.md names the classifier to ship and OUT/audit/ has the audit of C_0, the retrained
    reference and both arms."""
    import toxiforge.models

    monkeypatch.setattr(toxiforge.models, "load_language_model", lambda name, **options: varied_lm)
    out = tmp_path / "h"
    result = runner.invoke(app, [
        "harden", "--data", str(setup["data"]), "-c", str(good_start[0]), "-o", str(out), "--rounds", "1",
        "--eval", f"hatecheck:{hatecheck}", "--groups", "asian,mexican", "-n", "2", "-d", str(setup["demos"]),
        "-k", "2", "--beams", "2", "--candidates", "4", "--max-new-tokens", "4", "--no-transfer", "--device", "cpu",
        "--no-progress", "--ship-margin", "1",  # a small slice detects no margin (test_harden_ship.py)
        "--no-calibrate"])  # the rounds as trained (test_harden_calibrate.py moves their threshold)
    # The tiny BERT knows none of HateCheck's words: C_0 scores every case 0.007 (benign), both rounds call its
    # benign cases toxic (scores near 0.99). The paired check finds both arms worse there, by far (FPR and
    # over-blocking +0.833 [+0.666, +0.958]), and on nothing else: harden stops with exit 1 and ships C_0.
    check = json.loads((out / "round-1" / "guard.json").read_text())
    assert result.exit_code == 1 and isinstance(result.exception, HardenStopped), result.output
    assert result.exception.problems == check["problems"] and len(check["problems"]) == 4
    expected = [(arm, what) for arm in ("alice", "control") for what in ("FPR", "over-blocking")]
    assert all(p.startswith(f"round-1-{arm}'s {what} ") and " on HateCheck moved +0.833 " in p
               for p, (arm, what) in zip(check["problems"], expected))
    assert "guard slice: " in result.output and "closing audit" in result.output
    assert json.loads((out / "report.json").read_text())["ship"]["name"] == "C_0"
    (name,) = [s for s in check["sets"] if s != GUARD_SET]
    assert "over_blocking" in check["sets"][name]["arms"]["round-1-alice"]
    assert check["sets"][GUARD_SET]["reference"] == "round-0-retrained"
    assert set(check["sets"][GUARD_SET]["arms"]["round-1-control"]) >= {"roc_auc", "fpr"}
    assert "**The classifier to ship: " in (out / "report.md").read_text()
    audit = json.loads((out / "audit" / "report.json").read_text())
    assert {"C_0", "round-0-retrained", "round-1-alice", "round-1-control"} <= set(audit["results"])


# --- issue 56, item 3: one rule for "worse" ----------------------------------------------------------------------


def test_an_auc_drop_within_the_tolerance_does_not_stop_the_loop(setup, tmp_path):
    """Round 1 at ROC AUC 0.004 below C_0's, on a set large enough that its own bootstrap interval lies wholly below
    C_0's AUC (the interval is written as such a set gives it): a second rule compared that interval with round 0's
    point value, with no tolerance, and stopped the loop whatever --auc-tolerance said. The paired check (tolerance
    0.01) is the one rule: nothing stops, and no arm is kept from shipping."""
    from toxiforge.harden.loop import Harden
    from toxiforge.harden.recipe import Recipe
    from toxiforge.training.trainer import TrainConfig

    from .test_harden import config_for

    data = balanced()
    start, _ = moderate_damage(data)
    noise = np.random.default_rng(16).normal(0, 0.03, len(data))
    slight = {t: float(np.clip(start[t] + d, 0.001, 0.999)) for t, d in zip(data.texts, noise)}
    arms = {arm: str(tmp_path / "round-1" / arm / "model") for arm in ("alice", "control")}  # what the loop checks
    guard = check_with(tmp_path, {"c0": start, **dict.fromkeys(arms.values(), slight)})
    from sklearn.metrics import roc_auc_score

    auc0, auc1 = (roc_auc_score(data.labels, [scores[t] for t in data.texts]) for scores in (start, slight))
    assert 0.003 < auc0 - auc1 < 0.005
    job = Harden(config_for(setup), tmp_path, generator=None)  # type: ignore[arg-type]
    job.recipe, job.guard = Recipe(TrainConfig(), "test"), guard
    job._report = lambda rounds: {}  # type: ignore[method-assign]  # a stopped loop writes its report first
    own = {"auc": auc1, "auc_interval": [auc1 - 0.003, auc1 + 0.003], "texts": 200}
    rounds = [dict.fromkeys(("alice", "control"), {"eval": {"balanced": {"auc": auc0, "texts": 200}}}),
              dict.fromkeys(("alice", "control"), {"eval": {"balanced": own}})]
    job._check(1, rounds, [data])  # no HardenStopped
    assert job.problems == {} and guard.results[1]["problems"] == []
    ship = recommend(guard, 1, ("alice", "control"), [data], None)
    assert ship["name"] == "C_0"  # below round 0: C_0
    # both arms were candidates, neither found worse: each falls short on its ROC AUC (below round 0's)
    assert {c["name"] for c in ship["candidates"]} == {"round-1-alice", "round-1-control"}
    assert all("ROC AUC -0.004" in c["short"][0] and not any("found worse" in s for s in c["short"])
               for c in ship["candidates"])


def test_each_eval_set_is_scored_once_per_classifier(setup, good_start, varied_lm, tmp_path,
                                                     monkeypatch):
    """A round's metrics (AUC, FPR_NOI) and its paired check read the same audit scores: C_0, each round's
    classifier and (in the closing audit) the slice's reference score every --eval text once (the metrics scored them
    a second time through `evaluate`), and the AUC in metrics.json is the one the paired check compared."""
    from collections import Counter

    import toxiforge.classifiers

    held = {line.split(",")[0] for line in setup["eval"].read_text().splitlines()[1:]}
    real, scored = toxiforge.classifiers.load_classifier, Counter()

    def counting(spec, **options):
        classifier = real(spec, **options)
        predict = classifier.predict_proba

        def predict_proba(texts):
            scored.update((str(spec), t) for t in texts if t in held)
            return predict(texts)

        classifier.predict_proba = predict_proba
        return classifier

    monkeypatch.setattr(toxiforge.classifiers, "load_classifier", counting)
    out = tmp_path / "h"
    harden(setup, out, varied_lm, classifier=str(good_start[0]), transfer=False)
    specs = {str(good_start[0]), *(str(out / "round-1" / arm / "model") for arm in ("alice", "control")),
             str(out / "round-0" / "reference" / "model")}  # the reference: by the closing audit
    assert {spec for spec, _ in scored} == specs and len(scored) == 4 * len(held)
    # --calibrate (the default) scores a round's classifier as trained on the benign rows once more, to move its
    # threshold (harden/calibration.py): weights that then change, so a classifier of its own
    benign = {line.split(",")[0] for line in setup["eval"].read_text().splitlines()[1:] if line.split(",")[1] == "0"}
    rounds = {str(out / "round-1" / arm / "model") for arm in ("alice", "control")}
    assert benign and all(n == (2 if spec in rounds and text in benign else 1) for (spec, text), n in scored.items())
    metrics = json.loads((out / "round-1" / "metrics.json").read_text())
    check = json.loads((out / "round-1" / "guard.json").read_text())["sets"]["held"]
    for arm in ("alice", "control"):
        assert metrics[arm]["eval"]["held"]["auc"] == check["auc"][f"round-1-{arm}"]
