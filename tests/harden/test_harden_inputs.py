"""What a ``toxiforge harden`` run takes in (issue 48): caches keyed by the classifiers' content, not their paths.
Tiny models and placeholder text, as test_harden.py."""

from __future__ import annotations

import json
import shutil

import pytest

from toxiforge.attacks.validation import Validation, run_rows
from toxiforge.classifiers.fingerprint import fingerprint
from toxiforge.errors import InputError
from toxiforge.harden.loop import Harden
from toxiforge.pipeline import Generator
from toxiforge.training.trainer import train_classifier

from .test_harden import config_for, harden, train_config


def retrain(setup, folder, seed: int) -> None:
    """Train a classifier into ``folder`` (replacing what is there) on the run's training data."""
    from toxiforge.data import load_specs

    train_classifier([e for d in load_specs([str(setup["data"])]) for e in d.examples], folder,
                     train_config(setup["base"], seed=seed, max_steps=4), progress=False, overwrite=True)


def test_validation_cache_is_keyed_by_the_validators_weights(setup, finished, tmp_path):
    """A validator retrained at the same path scores the run again: its old cached scores are not reused."""
    from toxiforge.classifiers import load_classifier

    _, done = finished
    run_dir = tmp_path / "attack"
    shutil.copytree(done / "round-0" / "attack", run_dir)
    texts = [e.text for e, _ in run_rows(run_dir, "ALICE")]
    validator = tmp_path / "validator"
    retrain(setup, validator, seed=1)
    first = Validation(str(validator), "cpu").scores(run_dir)
    retrain(setup, validator, seed=2)  # the same path, other weights
    now = list(load_classifier(validator, device="cpu").predict_proba(texts))
    assert now != pytest.approx(first)
    scored = []
    assert Validation(str(validator), "cpu").scores(run_dir, scored.append) == pytest.approx(now)
    assert scored  # computed again, not read from the cache
    assert Validation(str(validator), "cpu").scores(run_dir, scored.append) == pytest.approx(now) and len(scored) == 1
    assert json.loads((tmp_path / "attack.validation.json").read_text())["weights"] == fingerprint(validator)


def test_resume_is_refused_when_c0_was_retrained_at_the_same_path(setup, varied_lm, tmp_path):
    """harden.json records the weights digest of -c (and --validate-with): --resume after C_0 was retrained at the
    same path is refused, naming it, before any work."""
    start = tmp_path / "c0"
    shutil.copytree(setup["start"], start)
    config = config_for(setup, classifier=str(start))
    out = tmp_path / "h"
    out.mkdir()
    (out / "harden.json").write_text(json.dumps({"settings": config.fingerprint(), "rounds": 1}))
    generator = Generator(model="tiny", lm=varied_lm, device="cpu")
    Harden(config, out, generator).prepare(resume=True)  # the same weights: resumes
    retrain(setup, start, seed=5)
    with pytest.raises(InputError, match=r"the weights of -c changed since this run began"):
        Harden(config_for(setup, classifier=str(start)), out, generator).prepare(resume=True)


def test_eval_rows_never_join_training_and_an_overlap_is_refused_above_a_share(setup, finished, varied_lm,
                                                                                tmp_path):
    """--eval texts (case and whitespace folded) never join training: a generated statement equal to an eval row is
    left out of its set (here round 0's attack, with --add all), and a --data row equal to one is left out of every
    round's training set. The overlap of --data with --eval is reported, and refused above --max-eval-overlap (5%)
    with the numbers."""
    from toxiforge.harden.data import read_examples

    from .test_harden import base_rows, eval_rows, fold, kept, placeholder_rows, training_texts, write_table

    _, done = finished
    text = kept(run_rows(done / "round-0" / "attack", "ALICE"), training_texts(setup))[0][0].text
    data_text = placeholder_rows(16)[1][0]  # twice in --data (rows 1 and 15)
    held = write_table(tmp_path / "eval.csv", eval_rows(12) + [(f"  {text.upper()} ", 1, "asian"),
                                                               (data_text.upper(), 1, "asian")])
    out = tmp_path / "h"
    with pytest.raises(InputError, match=r"2 of the 16 --data rows \(12\.5%\) are --eval rows .*held 2\), above "
                                         r"--max-eval-overlap 5\.0%"):
        harden(setup, out, varied_lm, eval=(f"held=table:{held}",), add="all", transfer=False)
    assert not out.exists()
    job = harden(setup, out, varied_lm, eval=(f"held=table:{held}",), add="all", transfer=False,
                 max_eval_overlap=0.2)
    report = json.loads((out / "report.json").read_text())
    assert (report["eval_overlap"]["rows"], report["eval_overlap"]["share"]) == (2, 0.125)
    assert report["sets"][0]["set"] == "round-0/attack" and report["sets"][0]["in_eval"] >= 1
    added = read_examples(out / "round-1" / "alice" / "added.jsonl")
    assert added and fold(text) not in {fold(e.text) for e in added}
    log = json.loads((out / "round-1" / "alice" / "model" / "training_log.json").read_text())
    assert log["train"]["n"] == base_rows(out) + len(added)  # --data less its eval rows and guard slice, + additions
    assert base_rows(out) <= 14 and not {fold(e.text) for e in read_examples(out / "data-less-guard-slice.jsonl")} \
        & {fold(data_text), fold(text)}
    assert json.loads((out / "round-0" / "metrics.json").read_text())["alice"]["train_rows"] == base_rows(out)
    assert "--data and --eval: 2 of the 16 --data rows (12.5%) are --eval rows" in (out / "report.md").read_text()
    assert job.eval_overlap["per_set"] == {"held": 2}


# --- the whole recipe (item 3) -----------------------------------------------------------------------------------


def test_a_learned_mixin_c0_is_retrained_as_learned_mixin(setup, varied_lm, tmp_path):
    """C_0 trained with LEARNED-MIXIN+H against a bias-only word list: every round trains with that objective (it
    was retrained as plain cross-entropy without a word); --external-training's commands say it too."""
    from toxiforge.data import load_specs
    from toxiforge.harden.guard import TrainingPending
    from toxiforge.training.debias import train_debiased

    words = tmp_path / "words.txt"
    words.write_text("alpha\n")
    rows = [e for d in load_specs([str(setup["data"])]) for e in d.examples]
    start = tmp_path / "c0"
    train_debiased(rows, start, train_config(setup["base"]), bias_probs=[0.8 if "alpha" in e.text else 0.3
                                                                         for e in rows],
                   method="learned-mixin+h", entropy_weight=0.05, bias_only=f"terms:{words}", progress=False)
    out = tmp_path / "h"
    job = harden(setup, out, varied_lm, classifier=str(start), transfer=False, eval=(), add="all")
    for arm in ("alice", "control"):
        objective = json.loads((out / "round-1" / arm / "model" / "training_log.json").read_text())["objective"]
        assert (objective["loss"], objective["bias_only"], objective["entropy_weight"]) == \
            ("learned-mixin+h", f"terms:{words}", 0.05)
    assert job.recipe is not None and "learned-mixin+h against bias-only terms:" in job.recipe.describe()
    assert "learned-mixin+h against bias-only" in (out / "report.md").read_text()
    external = Harden(config_for(setup, classifier=str(start), transfer=False, eval=(), add="all"), tmp_path / "x",
                      Generator(model="tiny", lm=varied_lm, device="cpu"), external_training=True)
    with pytest.raises(TrainingPending) as stop:
        external.run()
    assert f"--debias learned-mixin+h --bias-only terms:{words} --entropy-weight 0.05" in stop.value.commands[0]


def test_train_with_eval_records_no_held_out_share_and_rounds_use_it(setup, tmp_path):
    """`train --eval X` trains on all its rows: its log records held-out share 0 (it said eval_fraction 0.1), and
    harden's rounds hold out nothing; a log from before (eval_fraction 0.1, no held_out) is read the same way."""
    from typer.testing import CliRunner

    from toxiforge.cli import app
    from toxiforge.harden.recipe import round_recipe
    from toxiforge.training.trainer import TrainConfig

    start = tmp_path / "c0"
    result = CliRunner().invoke(app, ["train", "--data", str(setup["data"]), "--eval", str(setup["eval"]), "-o",
                                      str(start), "--base-model", str(setup["base"]), "--max-steps", "2",
                                      "--max-length", "16", "--device", "cpu", "--no-progress"])
    assert result.exit_code == 0, result.output
    log = json.loads((start / "training_log.json").read_text())
    assert log["config"]["eval_fraction"] == 0.0 and log["held_out"]["share"] == 0.0 and log["train"]["n"] == 16
    assert round_recipe(str(start), TrainConfig(), {}).train.eval_fraction == 0.0
    del log["held_out"]
    log["config"]["eval_fraction"] = 0.1  # as train wrote it before
    (start / "training_log.json").write_text(json.dumps(log))
    assert round_recipe(str(start), TrainConfig(), {}).train.eval_fraction == 0.0
    plain = tmp_path / "plain"
    result = CliRunner().invoke(app, ["train", "--data", str(setup["data"]), "-o", str(plain), "--base-model",
                                      str(setup["base"]), "--max-steps", "2", "--max-length", "16", "--device", "cpu",
                                      "--no-progress", "--eval-fraction", "0.25"])
    assert result.exit_code == 0, result.output
    log = json.loads((plain / "training_log.json").read_text())
    assert log["held_out"].pop("digests")  # the held-out texts it never trained on (harden --init continue: mix.py)
    assert log["held_out"] == {"share": 0.25, "from": "the training rows", "rows": 4} and log["train"]["n"] == 12
    del log["held_out"]
    (plain / "training_log.json").write_text(json.dumps(log))
    assert round_recipe(str(plain), TrainConfig(), {}).train.eval_fraction == 0.25


def test_a_c0_without_its_log_is_refused_unless_options_give_the_recipe(setup, varied_lm, tmp_path):
    """A -c directory without training_log.json: refused before any work, naming what is missing and the options
    that give it (the rounds trained with train's defaults, with a note); options give it: the rounds use them."""
    start = tmp_path / "c0"
    shutil.copytree(setup["start"], start)
    (start / "training_log.json").unlink()
    generator = Generator(model="tiny", lm=varied_lm, device="cpu")
    with pytest.raises(InputError, match=r"harden cannot repeat how C_0 .* it has no training_log.json, so nothing "
                                         r"records its base_model, epochs, batch_size, learning_rate, eval_fraction, "
                                         r"debias") as refused:
        Harden(config_for(setup, classifier=str(start)), tmp_path / "h", generator).prepare(resume=False)
    assert "--base-model, --epochs (or --max-steps), --train-batch-size, --lr, --eval-fraction, --debias" in \
        refused.value.hint
    partly = {"base_model": str(setup["base"]), "learning_rate": 1e-3, "batch_size": 8}
    with pytest.raises(InputError, match=r"records its epochs, eval_fraction, debias"):
        Harden(config_for(setup, classifier=str(start), train_options=partly), tmp_path / "h",
               generator).prepare(resume=False)
    given = {**partly, "max_steps": 2, "eval_fraction": 0.0, "debias": "none"}
    job = Harden(config_for(setup, classifier=str(start), train_options=given), tmp_path / "h", generator)
    job.prepare(resume=False)
    assert job.recipe is not None and job.recipe.source == "the options given"
    assert (job.recipe.train.learning_rate, job.recipe.train.max_steps, job.recipe.objective.loss) == \
        (1e-3, 2, "cross-entropy")
    assert not (tmp_path / "h").exists()


def test_a_c0_trained_with_eval_and_early_stopping_is_refused_before_any_attack(setup, varied_lm, tmp_path):
    """Issue 56, item 4: `train --eval X --early-stopping N` gives a recipe with held-out share 0 and early stopping
    N, which every round's training refused (`early stopping needs an evaluation set`) after round 0's attacks.
    harden refuses it at the start, saying why and how to train C_0 instead; nothing is written."""
    from typer.testing import CliRunner

    from toxiforge.cli import app

    start = tmp_path / "c0"
    result = CliRunner().invoke(app, ["train", "--data", str(setup["data"]), "--eval", str(setup["eval"]), "-o",
                                      str(start), "--base-model", str(setup["base"]), "--max-steps", "2",
                                      "--max-length", "16", "--device", "cpu", "--no-progress", "--early-stopping",
                                      "1"])
    assert result.exit_code == 0, result.output
    out = tmp_path / "h"
    with pytest.raises(InputError, match=r"stops early after 1 epoch\(s\) .* holds out none of the rows") as refused:
        harden(setup, out, varied_lm, classifier=str(start))
    assert "--eval-fraction" in refused.value.hint and not out.exists()


def test_gradient_accumulation_is_trained_by_the_printed_command(setup, tmp_path):
    """Issue 56, item 4: C_0 trained with `train --gradient-accumulation 2`: the rounds' recipe keeps it, and the
    `toxiforge train` command harden prints for --external-training trains with it too (train had no such option)."""
    import shlex

    from typer.testing import CliRunner

    from toxiforge.cli import app
    from toxiforge.harden.guard import train_command
    from toxiforge.harden.recipe import round_recipe
    from toxiforge.training.trainer import TrainConfig

    start = tmp_path / "c0"
    common = ["--base-model", str(setup["base"]), "--max-steps", "2", "--max-length", "16", "--device", "cpu",
              "--no-progress", "--eval-fraction", "0"]
    result = CliRunner().invoke(app, ["train", "--data", str(setup["data"]), "-o", str(start), *common,
                                      "--gradient-accumulation", "2"])
    assert result.exit_code == 0, result.output
    assert json.loads((start / "training_log.json").read_text())["config"]["gradient_accumulation"] == 2
    recipe = round_recipe(str(start), TrainConfig(device="cpu"), {})
    assert recipe.train.gradient_accumulation == 2
    command = train_command(recipe.train, [str(setup["data"])], tmp_path / "again", recipe.objective)
    assert "--gradient-accumulation 2" in command
    result = CliRunner().invoke(app, [*shlex.split(command)[1:], "--no-progress"])
    assert result.exit_code == 0, result.output
    again = json.loads((tmp_path / "again" / "training_log.json").read_text())["config"]
    assert {k: again[k] for k in ("gradient_accumulation", "max_steps", "learning_rate", "batch_size")} == \
        {"gradient_accumulation": 2, "max_steps": 2, "learning_rate": 2e-5, "batch_size": 32}
