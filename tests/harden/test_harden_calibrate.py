"""Issue 55: each round's classifier at round 0's over-blocking (--calibrate, the default; harden/calibration.py,
training/calibrate.py). The shift is exact on a saved head, the run writes and reports it, --no-calibrate leaves the
model as trained, and a run from before --calibrate resumes only with --no-calibrate. Placeholder text only, on the
tiny models of test_harden.py."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from toxiforge.classifiers import load_classifier
from toxiforge.errors import InputError
from toxiforge.harden import mix
from toxiforge.harden.calibration import CALIBRATION_FILE
from toxiforge.harden.guard import SETTINGS_FILE
from toxiforge.harden.loop import Harden
from toxiforge.training.calibrate import logit, matched_shift, shift_toxic_logit

from .test_harden import config_for, harden

TEXTS = [f"placeholder sentence {i}" for i in range(12)]


@pytest.mark.parametrize("threshold", [0.5, 0.3])
@pytest.mark.parametrize("positives", [0, 1, 3, 5])
def test_the_shift_leaves_as_many_benign_rows_above_the_threshold_as_asked(positives, threshold):
    scores = np.array([0.99, 0.97, 0.9, 0.6, 0.2])
    shift = matched_shift(scores, positives, threshold)
    moved = 1 / (1 + np.exp(-(logit(scores) - shift)))
    assert int((moved > threshold).sum()) == positives


def test_a_count_outside_the_rows_is_refused():
    with pytest.raises(InputError, match="6 benign rows called toxic, of 5"):
        matched_shift([0.1] * 5, 6)
    with pytest.raises(InputError, match="no benign row"):
        matched_shift([], 0)


def test_the_shift_is_written_into_the_head_and_moves_every_score_by_it(setup, tmp_path):
    """P(toxic) after = sigmoid(logit(P before) - shift), for every text, read back from the folder."""
    folder = tmp_path / "c"
    shutil.copytree(setup["start"], folder)
    before = load_classifier(str(folder)).predict_proba(TEXTS)
    done = shift_toxic_logit(folder, 0.7)
    after = load_classifier(str(folder)).predict_proba(TEXTS)
    assert done["shift"] == 0.7 and done["bias_after"] == pytest.approx(done["bias_before"] - 0.7)
    np.testing.assert_allclose(logit(after), logit(before) - 0.7, atol=1e-4)
    assert not (folder / ".calibrating").exists()


class Killed(Exception):
    """A kill -9 at a chosen step, as far as the folder can tell."""


def test_a_kill_while_the_moved_model_is_moved_in_is_finished_not_shifted_twice(setup, tmp_path, monkeypatch):
    """Killed after the first file of the moved model replaced the old one: the resumed step (harden's calibrate)
    finishes the move from the staging, the record keeps the shift it was made with (not a second, near-zero one
    computed from the half-moved folder) and the head is moved once."""
    import toxiforge.training.calibrate as cal
    from toxiforge.harden.calibration import calibrate

    folder = tmp_path / "c"
    shutil.copytree(setup["start"], folder)
    before = load_classifier(str(folder)).predict_proba(TEXTS)
    real, moved = cal.os.replace, []

    def replace_then_die(src, dst):
        if moved:
            raise Killed
        moved.append(src)
        real(src, dst)

    monkeypatch.setattr(cal.os, "replace", replace_then_die)
    with pytest.raises(Killed):
        shift_toxic_logit(folder, 0.7, CALIBRATION_FILE, {"benign_rows": 5})
    monkeypatch.setattr(cal.os, "replace", real)
    assert len(moved) == 1 and not (folder / CALIBRATION_FILE).exists() and (folder / cal.STAGING).is_dir()
    record = calibrate(folder, None, [], None, 0.5, "cpu")   # resumed: no guard needed, nothing scored again
    assert record["shift"] == 0.7 and record["benign_rows"] == 5
    assert not (folder / cal.STAGING).exists() and json.loads((folder / CALIBRATION_FILE).read_text()) == record
    after = load_classifier(str(folder)).predict_proba(TEXTS)
    np.testing.assert_allclose(logit(after), logit(before) - 0.7, atol=1e-4)


def test_a_kill_before_the_record_is_staged_leaves_the_model_as_trained(setup, tmp_path, monkeypatch):
    """Killed after the moved model was saved to the staging but before its record: no file of the folder was
    replaced, so the staging is dropped and the step is redone from the model as trained."""
    import toxiforge.training.calibrate as cal
    from toxiforge.training.calibrate import finish_shift

    folder = tmp_path / "c"
    shutil.copytree(setup["start"], folder)
    before = load_classifier(str(folder)).predict_proba(TEXTS)

    def die(*args, **kwargs):
        raise Killed

    monkeypatch.setattr(cal, "atomic_write_text", die)
    with pytest.raises(Killed):
        shift_toxic_logit(folder, 0.7, CALIBRATION_FILE, {})
    assert (folder / cal.STAGING).is_dir()
    assert finish_shift(folder, CALIBRATION_FILE) is False and not (folder / cal.STAGING).exists()
    np.testing.assert_allclose(load_classifier(str(folder)).predict_proba(TEXTS), before, atol=1e-6)
    assert not finish_shift(folder, CALIBRATION_FILE)   # nothing staged: nothing to do


def test_a_head_of_three_labels_is_refused(tmp_path):
    from transformers import BertConfig, BertForSequenceClassification

    config = BertConfig(vocab_size=30, hidden_size=8, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=8, num_labels=3, id2label={0: "benign", 1: "toxic", 2: "other"})
    BertForSequenceClassification(config).save_pretrained(tmp_path / "three")
    with pytest.raises(InputError, match="3-label head") as info:
        shift_toxic_logit(tmp_path / "three", 1.0)
    assert "--no-calibrate" in info.value.hint


def test_each_round_calls_no_more_benign_decision_rows_toxic_than_round_0(setup, finished):
    """The session's finished run (the default: --calibrate): each arm's model has its record; counted again from
    the saved model, it calls no more of each decision set's benign rows, and of those naming a group, toxic than
    C_0 / the slice's reference do, and exactly as many on the count that binds (up to ties); report.md and
    report.json say so."""
    from toxiforge.bias.lexicon import load_bias_lexicon

    job, out = finished
    eval_set, = job._inputs[1]
    lexicon = load_bias_lexicon(None)
    rows = {}
    for data in (eval_set, job.guard_slice):
        benign = [e.text for e in data.examples if e.label == 0]
        rows[data.name] = {"fpr": benign, "fpr.noi": [t for t, n in zip(benign, lexicon.tag(benign)["noi"]) if n]}
    assert rows[eval_set.name]["fpr.noi"]  # the eval set's NOI_TEXT: a count of its own
    for arm in ("alice", "control"):
        folder = out / "round-1" / arm / "model"
        record = json.loads((folder / CALIBRATION_FILE).read_text())
        assert set(record["sets"]) == {eval_set.name, job.guard_slice.name}
        classifier = load_classifier(str(folder))
        for set_name, by_count in rows.items():
            for key, texts in by_count.items():
                if not texts:
                    assert key not in record["sets"][set_name]
                    continue
                entry = record["sets"][set_name][key]
                assert entry["rows"] == len(texts)
                called = int((classifier.predict_proba(texts) > 0.5).sum())
                assert called == entry["calls_toxic_after"] <= entry["reference_calls_toxic"] + 1  # ties move together
                if record["binding"] == {"set": set_name, "count": key}:
                    assert abs(called - entry["reference_calls_toxic"]) <= 1
                    assert record["shift"] == pytest.approx(entry["own_shift"])
                else:
                    assert entry["own_shift"] <= record["shift"]
        metrics = json.loads((out / "round-1" / "metrics.json").read_text())[arm]
        assert metrics["calibration"] == record
        assert set(metrics["eval"]) == {eval_set.name}
        for data in (eval_set,):  # FNR at the moved threshold: what the calibration costs
            numbers = metrics["eval"][data.name]
            toxic = [e.text for e in data.examples if e.label == 1]
            missed = int((classifier.predict_proba(toxic) <= 0.5).sum())
            assert numbers["fnr"] == pytest.approx(missed / len(toxic))
    report = (out / "report.md").read_text()
    assert "Operating point (--calibrate)" in report and "(binds)" in report and "FPR_NOI stays at round 0's" in report
    assert json.loads((out / "harden.json").read_text())["settings"]["mix"] == {"operating_point": mix.CALIBRATED}


def test_the_largest_shift_binds_and_the_other_counts_end_at_or_below_round_0():
    """Two counts on one set's scores: the benign rows naming a group need the larger move, so after it they are at
    round 0's count and all benign rows below it."""
    scores = np.array([0.95, 0.9, 0.85, 0.8, 0.3, 0.2])   # all benign rows; the first three name a group
    all_rows, noi = matched_shift(scores, 3), matched_shift(scores[:3], 1)
    shift = max(all_rows, noi)
    assert shift == noi
    moved = logit(scores) - shift > logit(0.5)
    assert moved[:3].sum() == 1 and moved.sum() <= 3


def test_no_calibrate_keeps_the_model_training_left(setup, varied_lm, tmp_path):
    out = tmp_path / "h"
    job = harden(setup, out, varied_lm, calibrate=False)
    assert not (out / "round-1" / "alice" / "model" / CALIBRATION_FILE).exists()
    assert "calibration" not in json.loads((out / "round-1" / "metrics.json").read_text())["alice"]
    assert "Operating point" not in (out / "report.md").read_text()
    assert job.config.fingerprint()["mix"] is None  # as the harden.json of runs from before --calibrate


def test_a_run_from_before_calibrate_resumes_only_without_it(setup, tmp_path):
    """Its harden.json records no operating point: resuming with the default names --no-calibrate."""
    out = tmp_path / "h"
    old = Harden(config_for(setup, calibrate=False), out, generator=None)
    old.prepare(False)
    out.mkdir()
    (out / SETTINGS_FILE).write_text(json.dumps({"settings": old.config.fingerprint(), "rounds": 1}))
    with pytest.raises(InputError, match="before --calibrate") as info:
        Harden(config_for(setup), out, generator=None).prepare(True)
    assert info.value.hint == "resume with --no-calibrate"
    Harden(config_for(setup, calibrate=False), out, generator=None).prepare(True)


def test_a_run_calibrated_on_all_benign_rows_only_is_not_resumed_with_both_counts(setup, tmp_path):
    """A run begun before --calibrate matched the rows naming a group: resuming it would calibrate its later rounds
    otherwise, so it is refused, naming the commit it began with."""
    out = tmp_path / "h"
    old = Harden(config_for(setup), out, generator=None)
    old.prepare(False)
    out.mkdir()
    settings = old.config.fingerprint()
    settings["mix"] = {"operating_point": mix.CALIBRATED_FPR}
    (out / SETTINGS_FILE).write_text(json.dumps({"settings": settings, "rounds": 1}))
    with pytest.raises(InputError, match="all benign decision rows only") as info:
        Harden(config_for(setup), out, generator=None).prepare(True)
    assert "commit it began with" in info.value.hint


def test_the_report_says_when_the_error_rate_check_is_too_narrow_for_its_set():
    """Paired FPR intervals of ±0.05 against the tolerance 0.02: even an equal FPR (what --calibrate makes) cannot
    pass; ±0.01 intervals say nothing."""
    from toxiforge.harden.ship import _rate_widths

    def guard(half):
        diff = {"difference": {"value": 0.0, "low": -half, "high": half}, "worse": False}
        return {"tolerance": {"auc": 0.01, "rate": 0.02}, "rounds": {"1": {"sets": {"hc": {"arms": {
            "round-1-alice": {"fpr": diff, "fpr.noi": diff, "over_blocking": diff}}}}}}}

    (line,) = [x for x in _rate_widths(guard(0.05)) if x]
    assert line.startswith("Too few rows for the error-rate check: FPR on hc: paired intervals ±0.050 or wider")
    assert "(about 6× the rows could; or a larger --fpr-tolerance)" in line
    assert _rate_widths(guard(0.01)) == []
