"""Issue 55 item 3: how the added statements enter each round's training (harden/mix.py). --added-weight 1 trains a
round as before (the same rows, files, settings and command); --added-weight K gives every added row weight K, in
process and in --external-training's `toxiforge train` commands alike; --init continue trains at a lower learning
rate and, from a given -c, never compares on rows C_0 trained on; and the refusals. Placeholder text only, on the tiny
models of test_harden.py; no test runs a whole round (each training here is one tiny BERT, seconds)."""

from __future__ import annotations

import json
import shlex
import shutil
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from toxiforge.cli import app
from toxiforge.data import load_specs
from toxiforge.data.examples import Example, fold_text
from toxiforge.errors import InputError
from toxiforge.harden import mix
from toxiforge.harden.guard import train_command
from toxiforge.harden.guardset import slice_reference
from toxiforge.harden.loop import Harden
from toxiforge.training.trainer import LOG_FILE, split_heldout, train_classifier

from .test_harden import config_for, train_config, write_table

runner = CliRunner()
HELD_SHARE = 0.3  # C_0 holds out 30% of each label: 5 of --data's texts it never trained on, of both labels


def prepared(setup, tmp_path, **overrides) -> Harden:
    """A Harden run checked and ready (prepare: every check before any work), nothing generated or trained."""
    job = Harden(config_for(setup, **overrides), tmp_path / "h", generator=None)
    job.prepare(False)
    job.out.mkdir(parents=True)
    return job


def statements(n: int) -> list[Example]:
    return [Example(f"placeholder added statement {i}", i % 2, "asian", "ALICE") for i in range(n)]


class Captured:
    """Stands in for recipe.train_round: records what a round would train on, and with what."""

    def __init__(self):
        self.calls = []

    def __call__(self, rows, folder, config, objective, sources, progress, command=None, label=None):
        self.calls.append({"rows": rows, "config": config, "command": command})


# --- --added-weight ---------------------------------------------------------------------------------------------


def test_added_weight_1_trains_a_round_as_before(setup, tmp_path, monkeypatch):
    """The default: the added rows are the selected ones (the same objects), added.jsonl is written as before (no
    weight column), and the round trains with the recipe's settings and the command of before."""
    job = prepared(setup, tmp_path, calibrate=False)  # the operating point is test_harden_calibrate.py's
    assert job.config.fingerprint()["mix"] is None  # as the harden.json of older runs: they resume
    captured = Captured()
    monkeypatch.setattr("toxiforge.harden.steps.train_round", captured)
    selected = statements(4)
    path = job.out / "added.jsonl"
    added = job._added(path, lambda: selected)
    assert added is selected
    assert path.read_text() == "".join(json.dumps({"text": e.text, "label": e.label, "group": e.group,
                                                   "method": e.method}) + "\n" for e in selected)
    base = job._inputs[0]
    job._data_specs = ["table:base.jsonl"]
    job._train(job.out / "model", base + added, None, "round 1 alice", [f"table:{path}"])
    (call,) = captured.calls
    assert all(a is b for a, b in zip(call["rows"], base + selected)) and {e.weight for e in call["rows"]} == {1.0}
    assert call["config"] == job.recipe.train
    assert call["command"] == train_command(job.recipe.train, ["table:base.jsonl", f"table:{path}"],
                                            job.out / "model", job.recipe.objective)
    assert "--weight-column" not in call["command"]


def test_added_weight_k_weighs_every_added_row_in_process_and_in_train_commands(setup, tmp_path,
                                                                                monkeypatch):
    """--added-weight 3: added.jsonl carries loss_weight 3 (read back on --resume), the round trains its added rows
    at weight 3 and --data's at 1, and the external `toxiforge train` command reads the column: its model's log
    says the same weights as the in-process training's."""
    job = prepared(setup, tmp_path, added_weight=3.0)
    assert job.config.fingerprint()["mix"] == {"added_weight": 3.0, "operating_point": mix.CALIBRATED}
    path = job.out / "added.jsonl"
    added = job._added(path, lambda: statements(4))
    assert [e.weight for e in added] == [3.0] * 4 and [e.weight for e in job._added(path, list)] == [3.0] * 4
    assert all(json.loads(line)[mix.WEIGHT_COLUMN] == 3.0 for line in path.read_text().splitlines())
    base = job._inputs[0]
    specs = [f"table:{tmp_path / 'base.jsonl'}"]
    from toxiforge.harden.data import write_examples

    write_examples(tmp_path / "base.jsonl", base)
    job._data_specs = specs
    captured = Captured()
    monkeypatch.setattr("toxiforge.harden.steps.train_round", captured)
    job._train(job.out / "model", base + added, None, "round 1 alice", [f"table:{path}"])
    (call,) = captured.calls
    assert [e.weight for e in call["rows"]] == [1.0] * len(base) + [3.0] * 4
    assert call["command"].endswith("--weight-column loss_weight")
    monkeypatch.undo()
    from toxiforge.harden.recipe import train_round

    in_process = tmp_path / "in-process"
    with pytest.warns(Warning):  # too few rows
        train_round(call["rows"], in_process, call["config"], job.recipe.objective, specs, False)
    external = tmp_path / "external"
    command = call["command"].replace(shlex.quote(str(job.out / "model")), shlex.quote(str(external)))
    result = runner.invoke(app, [*shlex.split(command)[1:], "--no-progress"])
    assert result.exit_code == 0, result.output
    logs = [json.loads((folder / LOG_FILE).read_text()) for folder in (in_process, external)]
    assert logs[0]["objective"] == logs[1]["objective"]
    assert logs[0]["objective"]["weights"]["rows_weighted"] > 0 and logs[0]["objective"]["weights"]["max"] == 3.0


def test_added_weight_with_a_debiased_recipe_is_refused(setup, tmp_path):
    with pytest.raises(InputError, match="--added-weight 2 weighs the cross-entropy loss, and the rounds train "
                                         "with learned-mixin against bias-only noi"):
        prepared(setup, tmp_path, classifier=None, added_weight=2.0,
                 train_options={"debias": "learned-mixin", "bias_only": "noi"})


@pytest.mark.parametrize(("overrides", "message"), [
    ({"added_weight": 0.0}, "--added-weight 0.0 is not a weight above 0"),
    ({"continue_lr_scale": 0.5}, "--continue-lr-scale sets the learning rate of rounds that continue"),
    ({"continue_lr_scale": 2.0, "init": "continue"}, r"--continue-lr-scale 2.0 is outside \(0, 1\]"),
])
def test_bad_mix_options_are_refused(setup, overrides, message):
    with pytest.raises(InputError, match=message):
        config_for(setup, **overrides)


# --- --init continue ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def held_out_start(setup):
    """C_0 trained on --data with 30% of each label held out (its log names the texts it never trained on), and the
    texts it trained on."""
    rows = [e for d in load_specs([str(setup["data"])]) for e in d.examples]
    folder = setup["root"] / "held-out-start"
    train_classifier(rows, folder, train_config(setup["base"], eval_fraction=HELD_SHARE), progress=False)
    trained, held = split_heldout(rows, HELD_SHARE, 0)
    return folder, {fold_text(e.text) for e in trained}, {fold_text(e.text) for e in held}


def test_continue_from_c0_compares_only_on_rows_c0_never_trained_on(setup, held_out_start, tmp_path):
    """The guard slice is the --data rows C_0 held out and never trained on (a repeated text C_0 trained on is left
    out); the rounds train on the rest; the slice's reference is C_0 itself (no reference is trained); and a
    continued round trains from the previous classifier at a tenth of C_0's learning rate."""
    folder, trained, held = held_out_start
    job = prepared(setup, tmp_path, classifier=str(folder), init="continue", eval=())
    sliced = {fold_text(t) for t in job.guard_slice.texts}
    assert sliced == held - trained and len(sliced) == 5 and set(job.guard_slice.labels) == {0, 1}
    assert not sliced & {fold_text(e.text) for e in job._inputs[0]}  # no round trains on the slice
    assert job.config.fingerprint()["guard"]["from"] == mix.CONTINUE_SLICE
    assert job.config.fingerprint()["mix"] == {"continue_lr_scale": mix.CONTINUE_LR_SCALE,
                                               "operating_point": mix.CALIBRATED}
    assert slice_reference(job.config, job.recipe.source) == mix.CONTINUE_REFERENCE
    guard = job._guard(folder, *job._inputs)
    assert guard.reference == str(folder) and job.steps == []  # C_0 is the slice's reference: nothing trained
    captured = Captured()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("toxiforge.harden.steps.train_round", captured)
        job._data_specs = ["table:base.jsonl"]
        job._train(job.out / "model", job._inputs[0], tmp_path / "round-0-model", "round 1 alice", [])
    (call,) = captured.calls
    assert call["config"] == replace(job.recipe.train, base_model=str(tmp_path / "round-0-model"),
                                     learning_rate=job.recipe.train.learning_rate * mix.CONTINUE_LR_SCALE)
    assert f"--lr {job.recipe.train.learning_rate * mix.CONTINUE_LR_SCALE:g}" in call["command"]


def test_continue_refuses_eval_rows_c0_trained_on(setup, held_out_start, tmp_path):
    folder, trained, held = held_out_start
    rows = [e for d in load_specs([str(setup["data"])]) for e in d.examples]
    seen = next(e for e in rows if fold_text(e.text) in trained - held)
    unseen = next(e for e in rows if fold_text(e.text) in held - trained)
    eval_rows = [(f"placeholder sentence gamma {i}.", i % 2, "asian") for i in range(20)]
    ok = write_table(tmp_path / "ok.csv", eval_rows + [(unseen.text, unseen.label, "asian")])
    prepared(setup, tmp_path / "a", classifier=str(folder), init="continue", eval=(str(ok),),
             max_eval_overlap=1.0)  # a row C_0 held out: fine
    bad = write_table(tmp_path / "bad.csv", eval_rows + [(seen.text, seen.label, "asian")])
    with pytest.raises(InputError, match="1 --eval rows are --data rows C_0 trained on: with --init continue"):
        prepared(setup, tmp_path / "b", classifier=str(folder), init="continue", eval=(str(bad),),
                 max_eval_overlap=1.0)
    prepared(setup, tmp_path / "c", classifier=str(folder), init="base", eval=(str(bad),),
             max_eval_overlap=1.0)  # --init base retrains without it: fine


def test_continue_from_a_c0_whose_log_does_not_name_its_held_out_rows_is_refused(setup, held_out_start,
                                                                                  tmp_path):
    with pytest.raises(InputError, match="says it held none of its rows out") as error:
        prepared(setup, tmp_path / "a", classifier=str(setup["start"]), init="continue")  # trained with none held out
    assert "retrain C_0 with `toxiforge train --eval-fraction 0.15`" in error.value.hint
    assert "--no-guard-slice with --eval" in error.value.hint
    older = tmp_path / "older"
    shutil.copytree(held_out_start[0], older)
    log = json.loads((older / LOG_FILE).read_text())
    del log["held_out"]["digests"]  # as toxiforge wrote it before
    (older / LOG_FILE).write_text(json.dumps(log))
    with pytest.raises(InputError, match="does not name the rows it held out"):
        prepared(setup, tmp_path / "b", classifier=str(older), init="continue")
    # the fix the error names: no slice, compared on --eval sets apart from C_0's training data
    job = prepared(setup, tmp_path / "c", classifier=str(older), init="continue", guard_slice=False)
    assert job.guard_slice is None
    with pytest.raises(InputError, match="--guard-slice-size cannot size it"):
        prepared(setup, tmp_path / "d", classifier=str(held_out_start[0]), init="continue", guard_slice_size=4)


def test_the_report_says_the_mix():
    assert mix.mix_markdown(None, 3e-3) == []
    assert mix.mix_markdown({"added_weight": 3.0, "continue_lr_scale": 0.1}, 3e-3) == [
        "", "Training mix: every added statement (both arms) weighs 3 in the loss (--added-weight); a continued round "
            "trains at 0.1 × that learning rate, 0.0003 (--continue-lr-scale)."]


def test_a_continue_run_from_before_the_lr_scale_resumes_with_scale_1(setup, tmp_path):
    from toxiforge.harden.guard import SETTINGS_FILE, check_out_dir

    old = config_for(setup, classifier=None, init="continue", continue_lr_scale=1.0, calibrate=False).fingerprint()
    assert old["mix"] is None  # as a continue run wrote harden.json before issue 55
    (tmp_path / SETTINGS_FILE).write_text(json.dumps({"settings": old, "rounds": 1}))
    with pytest.raises(InputError, match="trained at C_0's learning rate") as error:
        check_out_dir(tmp_path, config_for(setup, classifier=None, init="continue", calibrate=False).fingerprint(),
                      resume=True)
    assert error.value.hint == "resume with --continue-lr-scale 1"
    check_out_dir(tmp_path, old, resume=True)


def test_continue_when_harden_trains_c0_keeps_the_slice_as_before(setup, tmp_path):
    """Without -c, C_0 is trained here on --data less the slice: the slice is drawn as for --init base, and C_0 is
    its reference."""
    base = prepared(setup, tmp_path / "a", classifier=None)
    cont = prepared(setup, tmp_path / "b", classifier=None, init="continue")
    assert cont.guard_slice.texts == base.guard_slice.texts
    assert "from" not in cont.config.fingerprint()["guard"]
    assert slice_reference(cont.config, cont.recipe.source) == "C_0 was trained here, on --data less the slice"
