"""``toxiforge harden``'s bookkeeping with tiny models built in-process (a 2-layer Llama attacks a 2-layer BERT):
the statements that fooled the classifier join its training data with their prompt label, the control arm adds
as many top-k statements per label, resume skips finished steps, the reports are written; and every bad input
fails before any work. Placeholder text only; nothing is downloaded."""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from typer.testing import CliRunner

from toxiforge.attacks.validation import run_rows
from toxiforge.cli import app
from toxiforge.data.examples import column, read_any_table
from toxiforge.decoding import decoder_config
from toxiforge.errors import InputError
from toxiforge.harden.config import METRICS_FILE, AttackPlan, HardenConfig
from toxiforge.harden.data import read_examples
from toxiforge.harden.loop import Harden
from toxiforge.pipeline import Generator, JobConfig
from toxiforge.training.trainer import LOG_FILE, TrainConfig

runner = CliRunner()
GROUPS = ("asian", "mexican")
NOI_TEXT = "placeholder sentence about asian people"  # benign and naming a group: the FPR_NOI slice


def placeholder_rows(n: int) -> list[tuple[str, int, str]]:
    return [(f"placeholder sentence {'alpha' if i % 2 else 'beta'} {i % 7}", i % 2, GROUPS[i % 2])
            for i in range(n)]


def eval_rows(n: int) -> list[tuple[str, int, str]]:
    """:func:`placeholder_rows` with a full stop (a token the tiny tokenizer does not know): no eval text is a training
    text (harden keeps them apart, and refuses a --data set of which more than 5% are --eval rows)."""
    return [(f"{text}.", label, group) for text, label, group in placeholder_rows(n)]


def write_table(path, rows, header=("text", "label", "group")):
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def train_config(base, **overrides) -> TrainConfig:
    """20 steps at lr 3e-3: the tiny BERT separates the placeholder classes (held-out AUC 1.0, 46% called toxic of
    46% toxic), so the paired check has a real classifier to compare rounds with."""
    return TrainConfig(**{**dict(base_model=str(base), max_steps=20, batch_size=8, learning_rate=3e-3, max_length=16,
                                 eval_fraction=0.0, logging_steps=1, device="cpu"), **overrides})


def fold(text: str) -> str:
    return " ".join(text.casefold().split())


def kept(rows, seen: set[str]):
    """``run_rows`` less the statements of ``seen`` (folded texts: the training data, earlier sets) or repeated in the
    run; ``seen`` grows by the kept ones."""
    out, inside = [], set()
    for e, fooled in rows:
        key = fold(e.text)
        if key not in seen and key not in inside:
            out.append((e, fooled))
        inside.add(key)
    seen.update(fold(e.text) for e, _ in out)
    return out


def base_rows(out) -> int:
    """The rows every round trains on besides its additions: --data less the guard slice (issue 48)."""
    return len((out / "data-less-guard-slice.jsonl").read_text().splitlines())


def training_texts(setup) -> set[str]:
    with setup["data"].open() as f:
        return {fold(r["text"]) for r in csv.DictReader(f)}


def kept_sets(setup, out) -> dict[str, list]:
    """Each set's kept statements of a one-round run, the sets read in the order they were made; the two arms'
    attacks are checked against the earlier sets, not against each other."""
    seen = training_texts(setup)
    sets = {run: kept(run_rows(out / run, method), seen) for run, method in
            (("round-0/attack", "ALICE"), ("round-0/transfer", "ALICE"), ("round-1/control/topk", "top-k"))}
    earlier = set(seen)
    for arm in ("alice", "control"):
        sets[f"round-1/{arm}/attack"] = kept(run_rows(out / "round-1" / arm / "attack", "ALICE"), set(earlier))
    return sets


def config_for(setup, **overrides) -> HardenConfig:
    """A one-round run on the tiny models, with harden's defaults: the paired check on at its default tolerances
    (issue 56: they were both 1, so most tests ran with the check off). C_0 and the rounds learn the placeholder
    classes (:func:`train_config`), so a round the check finds worse is a bug, not noise."""
    settings = dict(
        rounds=1, attack=AttackPlan(groups=GROUPS, per_cell=3, source=str(setup["demos"]), k=2, seed=3),
        alice=decoder_config("alice", {"num_beams": 2, "candidates": 4, "max_new_tokens": 4}),
        topk=decoder_config("top-k", {"max_new_tokens": 4}), train=train_config(setup["base"]),
        data=(str(setup["data"]),), eval=(f"held=table:{setup['eval']}",), classifier=str(setup["start"]),
        device="cpu", ship_margin=1.0)  # a slice of 4 rows detects no margin (test_harden_ship.py): no round ships
    settings.update(overrides)
    return HardenConfig(**settings)


def harden(setup, out, tiny_lm, *, resume=False, keep_going=True, **overrides) -> Harden:
    """Run (or resume) harden on the tiny models. The paired check runs at its default tolerances, but goes on
    (``keep_going``: a warning, and the problems in the report) unless a test asks to stop: the tiny LM's flips
    are mostly of one label, so a round trained on the 12 rows of --data less the slice plus them may call every
    held-out text one class, which the check rightly finds worse; the bookkeeping tests test the rest of the run.
    The tests of stopping pass ``keep_going=False``."""
    generator = Generator(model="tiny", lm=tiny_lm, device="cpu", job=JobConfig(batch_size=4, shard_size=4))
    job = Harden(config_for(setup, **overrides), out, generator, keep_going=keep_going)
    job.run(resume)
    return job


def attack_rows(run_dir):
    table = read_any_table(run_dir)
    return list(zip(column(table, "generation"), column(table, "prompt_label"), column(table, "fooled"),
                    column(table, "parse_error")))


def test_flipped_statements_join_with_their_prompt_label(setup, finished):
    job, out = finished
    rows = kept(run_rows(out / "round-0" / "attack", "ALICE"), training_texts(setup))
    fooled = sorted((e.text, e.label) for e, f in rows if f)
    added = read_examples(out / "round-1" / "alice" / "added.jsonl")
    assert sorted((e.text, e.label) for e in added) == fooled
    assert all(e.method == "ALICE" for e in added)
    log = json.loads((out / "round-1" / "alice" / "model" / LOG_FILE).read_text())
    assert log["train"]["n"] == base_rows(out) + len(added)  # --data less the guard slice, plus the additions


def test_control_arm_adds_as_many_top_k_statements_per_label(finished):
    _, out = finished
    alice = read_examples(out / "round-1" / "alice" / "added.jsonl")
    control = read_examples(out / "round-1" / "control" / "added.jsonl")
    assert sorted(e.label for e in control) == sorted(e.label for e in alice)
    topk = {(text.strip(), label) for text, label, _, _ in attack_rows(out / "round-1" / "control" / "topk")}
    assert all((e.text, e.label) in topk and e.method == "top-k" for e in control)
    metrics = json.loads((out / "round-1" / "metrics.json").read_text())
    assert metrics["alice"]["added_this_round"] == metrics["control"]["added_this_round"] == len(alice) > 0
    assert metrics["control"]["control_shortfall"] == 0


def test_layout_metrics_and_report(setup, finished):
    job, out = finished
    for arm in ("alice", "control"):
        manifest = json.loads((out / "round-1" / arm / "attack" / "manifest.json").read_text())
        assert manifest["status"] == "complete" and manifest["config"]["method"] == "ALICE"
        assert manifest["config"]["plan"]["seed"] == 4  # seed 3 + round 1: a new attack
        assert manifest["config"]["classifier"] == f"round-1-{arm}"
    assert json.loads((out / "round-0" / "attack" / "manifest.json").read_text())["config"]["plan"]["seed"] == 3
    report = json.loads((out / "report.json").read_text())
    assert len(report["rounds"]) == 2
    first = report["rounds"][1]["alice"]
    assert set(first["eval"]) == {"held"} and 0 <= first["eval"]["held"]["auc"] <= 1
    assert first["eval"]["held"]["noi_benign"] >= 1
    assert first["flip_rate"]["all"]["n"] == len(kept_sets(setup, out)["round-1/alice/attack"]) > 0
    md = (out / "report.md").read_text()
    assert "| 1 | control |" in md and "AUC held" in md
    assert (out / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert job.steps == [
        "train round-0/reference/model",  # the guard slice's reference: C_0's recipe, less the slice (issue 48)
        "generate round-0/attack", "generate round-0/transfer", "measure round-0/metrics.json",
        "generate round-1/control/topk", "select round-1/alice/added.jsonl",
        "select round-1/control/added.jsonl", "train round-1/alice/model",
        "train round-1/control/model", "generate round-1/alice/attack", "generate round-1/control/attack",
        "measure round-1/metrics.json"]


def test_transfer_attack_is_made_once_on_c0_and_scored_by_every_round(setup, finished):
    """round-0/transfer: one more ALICE attack on C_0 (seed + 20,000), never trained on; each round's classifier
    scores it, and its flips are the statements it gets wrong."""
    import numpy as np

    from toxiforge.classifiers import load_classifier
    from toxiforge.records import is_toxic

    _, out = finished
    manifest = json.loads((out / "round-0" / "transfer" / "manifest.json").read_text())
    assert manifest["config"]["plan"]["seed"] == 3 + 20_000 and manifest["config"]["classifier"] == "round-0"
    rows = kept_sets(setup, out)["round-0/transfer"]
    metrics = json.loads((out / "round-1" / "metrics.json").read_text())
    for arm in ("alice", "control"):
        scores = load_classifier(out / "round-1" / arm / "model", device="cpu").predict_proba([e.text for e, _ in rows])
        wrong = is_toxic(np.asarray(scores)) != np.array([bool(e.label) for e, _ in rows])
        got = metrics[arm]["transfer"]
        assert got["all"]["n"] == len(rows) > 0 and got["all"]["value"] == pytest.approx(wrong.mean())
    start = json.loads((out / "round-0" / "metrics.json").read_text())["alice"]["transfer"]
    fooled = [f for _, f in rows]  # C_0 scored them in the run; re-scored in round 0, the same flips
    assert start["all"]["value"] == pytest.approx(np.mean(fooled))
    md = (out / "report.md").read_text()
    assert "transfer flip %" in md and f"| 0 | start | 0 | {base_rows(out)} |" in md  # round 0: the rows


def test_validate_with_filters_both_arms_and_reports_validated_flips(setup, varied_lm, tmp_path):
    """--validate-with: only statements the validator gives their prompt label join (ALICE flips and the control
    pool alike); its scores are cached beside each run; the flip rate among validated statements is reported."""
    from toxiforge.classifiers import load_classifier
    from toxiforge.records import is_toxic

    out = tmp_path / "h"
    job = harden(setup, out, varied_lm, validate_with="profanity-check", transfer=False, eval=())
    validator = load_classifier("profanity-check")
    every = run_rows(out / "round-0" / "attack", "ALICE")
    cached = json.loads((out / "round-0" / "attack.validation.json").read_text())
    assert cached["validator"] == "profanity-check"
    assert cached["scores"] == pytest.approx(list(validator.predict_proba([e.text for e, _ in every])))
    rows = kept(every, training_texts(setup))  # the statements the run keeps (sets.py)
    scores = validator.predict_proba([e.text for e, _ in rows])
    agree = [bool(is_toxic(float(s))) == bool(e.label) for (e, _), s in zip(rows, scores)]
    assert 0 < sum(agree) < len(rows)  # placeholder text scores benign: benign prompts kept, toxic ones not
    expected = sorted((e.text, e.label) for (e, fooled), ok in zip(rows, agree) if fooled and ok)
    added = read_examples(out / "round-1" / "alice" / "added.jsonl")
    assert sorted((e.text, e.label) for e in added) == expected
    control = read_examples(out / "round-1" / "control" / "added.jsonl")
    pool = run_rows(out / "round-1" / "control" / "topk", "top-k")
    pool_scores = validator.predict_proba([e.text for e, _ in pool])
    validated_pool = {(e.text, e.label) for (e, _), s in zip(pool, pool_scores) if bool(is_toxic(float(s))) == e.label}
    assert all((e.text, e.label) in validated_pool for e in control)
    assert sorted(e.label for e in control) == sorted(e.label for e in added)
    flips = json.loads((out / "round-0" / "metrics.json").read_text())["alice"]["flip_rate"]
    assert flips["validated"]["all"]["n"] == sum(ok for (_, f), ok in zip(rows, agree) if f is not None)
    assert flips["validator_agrees"]["all"]["value"] == pytest.approx(sum(agree) / len(rows))
    scored = [(f, ok) for (_, f), ok in zip(rows, agree) if f is not None]
    assert flips["confirmed"]["all"]["value"] == pytest.approx(sum(f and ok for f, ok in scored) / len(scored))
    assert "validate round-0/attack" in job.steps and "confirmed flip %" in (out / "report.md").read_text()
    versus = json.loads((out / "round-1" / "metrics.json").read_text())["alice"]["versus_control"]
    assert "confirmed" in versus  # the arms compared on confirmed flips too (tests/harden/test_harden_arms.py)
    assert "| round | shared prompts | flip rate | confirmed flip rate |" in (out / "report.md").read_text()
    again = harden(setup, out, varied_lm, resume=True, validate_with="profanity-check", transfer=False,
                   eval=())
    assert again.steps == []  # the validator's scores are read back, not recomputed


def test_validator_that_is_the_attacked_classifier_is_refused(setup):
    with pytest.raises(InputError, match="is the attacked classifier"):
        config_for(setup, validate_with=str(setup["start"]))


def test_resume_skips_finished_steps(setup, varied_lm, finished, tmp_path):
    _, done = finished
    out = tmp_path / "h"
    shutil.copytree(done, out)
    assert harden(setup, out, varied_lm, resume=True).steps == []
    shutil.rmtree(out / "round-1" / "control" / "attack")
    (out / "round-1" / "metrics.json").unlink()
    again = harden(setup, out, varied_lm, resume=True)
    assert again.steps == ["generate round-1/control/attack", "measure round-1/metrics.json"]


def test_runs_with_other_seeds_read_together(setup, varied_lm, finished, tmp_path):
    """harden-seeds reads real runs: the finished one (seed 3) and the same settings at seed 4."""
    from dataclasses import replace

    from toxiforge.harden.seeds import combine

    _, first = finished
    plan = AttackPlan(groups=GROUPS, per_cell=3, source=str(setup["demos"]), k=2, seed=4)
    harden(setup, tmp_path / "s4", varied_lm, attack=plan, train=replace(train_config(setup["base"]), seed=4))
    combined = combine([first, tmp_path / "s4"])
    reports = [json.loads((d / "report.json").read_text()) for d in (first, tmp_path / "s4")]
    assert combined["seeds"] == [3, 4] and combined["headline"] == "attack"  # no validator: the raw flip rate
    pooled = combined["table"][1]["flips"]["attack"]["pooled"]  # round 1, ALICE arm
    shares = [r["rounds"][1]["alice"]["flip_rate"]["all"] for r in reports]
    assert pooled["n"] == sum(s["n"] for s in shares)
    assert pooled["value"] == pytest.approx(sum(s["value"] * s["n"] for s in shares) / pooled["n"])
    change = combined["changes"][0]["alice_minus_round0"]["per_run"]
    assert change == pytest.approx([r["rounds"][1]["alice"]["flip_rate"]["all"]["value"]
                                    - r["rounds"][0]["alice"]["flip_rate"]["all"]["value"] for r in reports])


def test_continue_and_add_all(setup, varied_lm, tmp_path):
    job = harden(setup, tmp_path / "h", varied_lm, classifier=None, add="all", init="continue", eval=())
    out = tmp_path / "h"
    assert (out / "round-0" / "model" / LOG_FILE).exists()  # C_0 trained on --data
    usable = kept(run_rows(out / "round-0" / "attack", "ALICE"), training_texts(setup))
    assert len(read_examples(out / "round-1" / "alice" / "added.jsonl")) == len(usable)
    log = json.loads((out / "round-1" / "alice" / "model" / LOG_FILE).read_text())
    assert log["base_model"] == str(out / "round-0" / "model")  # continued from C_0
    assert "train round-0/model" in job.steps


def test_external_training_stops_with_train_commands_then_resumes(setup, varied_lm, tmp_path):
    """--external-training: the loop stops where models are due with `toxiforge train` commands (for torchrun);
    those commands train on the same rows, and --resume goes on with their models."""
    import shlex

    from toxiforge.harden.guard import TrainingPending

    out = tmp_path / "h"
    generator = Generator(model="tiny", lm=varied_lm, device="cpu", job=JobConfig(batch_size=4, shard_size=4))
    job = Harden(config_for(setup, eval=()), out, generator, external_training=True, keep_going=True)  # as harden()
    with pytest.raises(TrainingPending) as stop:  # first the guard slice's reference: C_0's recipe, less the slice
        job.run()
    assert len(stop.value.commands) == 1 and "round-0/reference/model" in stop.value.commands[0]
    assert f"--data table:{out / 'data-less-guard-slice.jsonl'} " in stop.value.commands[0]
    base = len((out / "data-less-guard-slice.jsonl").read_text().splitlines())
    assert base < 16
    for command in stop.value.commands:
        assert runner.invoke(app, [*shlex.split(command)[1:], "--no-progress"]).exit_code == 0
    with pytest.raises(TrainingPending) as stop:
        Harden(config_for(setup, eval=()), out, generator, external_training=True, keep_going=True).run(resume=True)
    assert len(stop.value.commands) == 2 and not (out / "round-1" / "alice" / "model").exists()
    assert f"table:{out / 'round-1' / 'alice' / 'added.jsonl'}" in stop.value.commands[0]
    for command in stop.value.commands:
        result = runner.invoke(app, [*shlex.split(command)[1:], "--no-progress"])
        assert result.exit_code == 0, result.output
    added = read_examples(out / "round-1" / "alice" / "added.jsonl")
    log = json.loads((out / "round-1" / "alice" / "model" / LOG_FILE).read_text())
    assert log["train"]["n"] == base + len(added)
    again = Harden(config_for(setup, eval=()), out, generator, external_training=True, keep_going=True)
    again.run(resume=True)
    assert not any(step.startswith("train") for step in again.steps)
    assert (out / "round-1" / "control" / "attack" / "manifest.json").exists() and (out / "report.md").exists()


# --- bad input: a clear error before any work ------------------------------------------------------------------


def test_rounds_zero_is_refused(setup):
    with pytest.raises(InputError, match="--rounds 0"):
        config_for(setup, rounds=0)


def test_errors_before_any_work(setup, tiny_lm, tmp_path):
    out = tmp_path / "h"
    with pytest.raises(InputError, match="not a sequence classifier"):
        harden(setup, out, tiny_lm, classifier=str(setup["base"]))
    unlabelled = write_table(tmp_path / "nolabels.csv", [("placeholder text",)], header=("text",))
    with pytest.raises(InputError, match="no label column"):
        harden(setup, out, tiny_lm, eval=(str(unlabelled),))
    assert not out.exists()
    (out / "round-0").mkdir(parents=True)
    with pytest.raises(InputError, match="another harden run"):
        harden(setup, out, tiny_lm)


def test_resume_with_other_settings_is_refused(setup, tiny_lm, finished, tmp_path):
    _, done = finished
    out = tmp_path / "h"
    shutil.copytree(done, out)
    with pytest.raises(InputError, match="add differ"):
        harden(setup, out, tiny_lm, resume=True, add="all")


def test_cli_errors(setup, tmp_path):
    common = ["harden", "--data", str(setup["data"]), "-o", str(tmp_path / "h")]
    result = runner.invoke(app, [*common, "--rounds", "0"])
    assert result.exit_code != 0 and "--rounds 0" in str(result.exception)
    result = runner.invoke(app, [*common, "-c", str(setup["base"]), "--groups", "asian"])
    assert "not a sequence classifier" in str(result.exception)
    assert not (tmp_path / "h").exists()


def test_the_tolerance_options_say_what_they_govern():
    """--fpr-tolerance governs every error rate of the paired check, FNR included (its help named FPR only)."""
    import inspect

    from toxiforge.cli.harden import harden_command

    options = inspect.signature(harden_command).parameters
    assert "(FPR, FNR, FPR_NOI or over-blocking)" in options["fpr_tolerance"].default.help
    assert "ROC AUC" in options["auc_tolerance"].default.help


def test_lambda_keep_at_its_default_needs_no_keeper(setup):
    """--lambda-keep 1 (the default) without --keep-label-with weighs what the default weighs: accepted; another
    value without a keeper would weigh nothing, and is refused."""
    config = config_for(setup, alice=decoder_config("alice", {"num_beams": 2, "lambda_keep": 1.0}))
    assert "lambda_keep" not in config.fingerprint()["alice"]  # as a run without the option records it
    with pytest.raises(InputError, match="lambda_keep=0.5 was given without a keeper"):
        config_for(setup, alice=decoder_config("alice", {"num_beams": 2, "lambda_keep": 0.5}))


def test_cli_judge_options_are_checked_before_any_work(setup, tmp_path):
    common = ["harden", "--data", str(setup["data"]), "-o", str(tmp_path / "h")]
    for extra, message in [
        (["--judge-template", "llama-guard"], "--judge-template apply to -c, and without -c"),
        (["-c", str(setup["start"]), "--judge-template", "llama-guard"], "apply to judge classifiers"),
        (["-c", "judge:smollm2-135m", "--toxic-label", "toxic"], "apply to transformers classification heads"),
        (["-c", "judge:smollm2-135m", "--init", "continue"], "a judge (judge:smollm2-135m) cannot be trained"),
        (["-c", str(setup["start"]), "--validate-with", str(setup["start"])], "is the attacked classifier"),
        (["-c", str(setup["start"]), "--validate-with", "no-such-validator"], "unknown classifier"),
    ]:
        result = runner.invoke(app, [*common, *extra])
        assert isinstance(result.exception, InputError) and message in str(result.exception), extra
    assert not (tmp_path / "h").exists()


def test_cli_attacks_and_measures_a_judge_with_its_template(setup, tiny_llama_dir, tiny_judge_dir, tmp_path):
    """-c judge:MODEL --judge-template as in generate: round 0 attacks and measures the judge with that template;
    the rounds' classifiers are trained (here: stopped where they are due, --external-training)."""
    import numpy as np

    from toxiforge.classifiers import load_classifier
    from toxiforge.records import read_rows

    out, judge = tmp_path / "h", f"judge:{tiny_judge_dir}"
    result = runner.invoke(app, [
        "harden", "--data", str(setup["data"]), "-c", judge, "--judge-template", "llama-guard", "-o", str(out),
        "--rounds", "1", "--eval", f"held=table:{setup['eval']}", "--groups", ",".join(GROUPS), "-n", "2", "-d",
        str(setup["demos"]), "-k", "2", "--beams", "2", "--candidates", "4", "--max-new-tokens", "4", "--model",
        str(tiny_llama_dir), "--base-model", str(setup["base"]), "--device", "cpu", "--no-progress",
        "--external-training", "--ship-margin", "1"])  # a 4-row slice detects no margin (test_harden_ship.py)
    assert result.exit_code == 0, result.output
    assert "stopped: 2 model(s) to train" in result.output
    rows = [r for r in read_rows(out / "round-0" / "attack") if r.parse_error is None]
    expected = load_classifier(judge, template="llama-guard", device="cpu").predict_proba([r.generation for r in rows])
    assert rows and np.allclose([r.classifier_score for r in rows], expected, atol=1e-4)
    metrics = json.loads((out / "round-0" / METRICS_FILE).read_text())
    assert metrics["alice"]["classifier"] == judge and metrics["alice"]["eval"]["held"]["auc"] is not None
    settings = json.loads((out / "harden.json").read_text())["settings"]
    assert settings["classifier_options"] == {"template": "llama-guard"}


def test_cli_runs_a_round(setup, varied_lm, tmp_path, monkeypatch):
    import toxiforge.models

    monkeypatch.setattr(toxiforge.models, "load_language_model", lambda name, **options: varied_lm)
    out = tmp_path / "h"
    args = ["harden", "--data", str(setup["data"]), "-c", str(setup["start"]), "-o", str(out), "--rounds", "1",
            "--eval", f"held=table:{setup['eval']}", "--groups", ",".join(GROUPS), "-n", "2", "-d",
            str(setup["demos"]), "-k", "2", "--beams", "2", "--candidates", "4", "--max-new-tokens", "4",
            "--base-model", str(setup["base"]), "--device", "cpu", "--no-progress",  # C_0's base model: agreed
            "--keep-going", "--ship-margin", "1"]  # as harden(): the check runs and reports; a 4-row slice
    # detects no margin (test_harden_ship.py); this tests the command's outputs
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "guard slice: 4 rows of --data kept apart" in result.output and "closing audit" in result.output
    assert "**The classifier to ship: " in (out / "report.md").read_text() and (out / "audit" / "report.html").exists()
    assert "| 1 | alice |" in result.output and (out / "report.png").exists()
    again = runner.invoke(app, [*args, "--resume"])
    assert again.exit_code == 0 and "0 steps run" in again.output


def test_attacks_pass_through_to_ray_and_servers(tmp_path, monkeypatch):
    """--ray: the attack is run_generation_ray with the model named and the classifier loaded in each worker;
    openai: models: ALICE's candidates are capped at the server's top log-probabilities (as generate does)."""
    import toxiforge.models
    import toxiforge.pipeline.ray_runner as ray_runner
    from toxiforge.pipeline.plan import GenerationPlan

    calls = []
    monkeypatch.setattr(ray_runner, "run_generation_ray", lambda plan, setup, out, **kw: calls.append((setup, kw)))
    ray_config = ray_runner.RayConfig(workers=2)
    alice = decoder_config("alice", {"candidates": 40})
    generator = Generator(model="openai:http://127.0.0.1:9/v1#m", model_options={"concurrency": 4}, ray=ray_config)
    plan = GenerationPlan.grid(["asian"], ["benign"], 1)
    generator.run(plan, alice, tmp_path / "a", classifier=tmp_path / "clf", classifier_name="round-1-alice")
    setup, options = calls[0]
    assert setup.model == "openai:http://127.0.0.1:9/v1#m" and setup.model_options == {"concurrency": 4}
    assert setup.classifier == str(tmp_path / "clf") and setup.classifier_options["name"] == "round-1-alice"
    assert options["ray_config"] is ray_config and setup.make_decoder.args == (alice,)

    class Server:
        def top_logprobs(self):
            return 20

    monkeypatch.setattr(toxiforge.models, "load_language_model", lambda name, **options: Server())
    assert generator.fit(alice).candidates == 20


# --- issue 34: rounds trained as C_0 was, a round that got worse stops, no leaks ----------------------------------


def test_rounds_train_with_c0_recipe_and_stay_as_good(setup, good_start, varied_lm, tmp_path):
    """The issue's set-up, shrunk: C_0 trained with another recipe than harden's defaults, harden run with its
    defaults. Every round trains with C_0's recipe (from its training_log.json), so round 1 changes the data only:
    the paired check finds no round worse. (Before: the rounds trained at lr 2e-5, batch 32 and
    called every held-out text one class.)"""
    out = tmp_path / "h"
    job = harden(setup, out, varied_lm, classifier=str(good_start[0]), transfer=False, add="all",
                 train=TrainConfig(base_model=str(setup["base"]), device="cpu"))  # all: both labels join
    for arm in ("alice", "control"):
        config = json.loads((out / "round-1" / arm / "model" / LOG_FILE).read_text())["config"]
        assert (config["learning_rate"], config["batch_size"], config["max_steps"], config["max_length"]) == \
            (3e-3, 8, 80, 16)
    report = json.loads((out / "report.json").read_text())
    assert report["recipe"]["source"] == "C_0's training_log.json" and report["problems"] == {}
    assert report["rounds"][0]["alice"]["eval"]["held"]["auc"] > 0.9
    check = report["guard"]["rounds"]["1"]["sets"]["held"]["arms"]  # the paired check against C_0, every rate
    for arm in ("alice", "control"):
        assert {"roc_auc", "fpr", "fnr"} <= set(check[f"round-1-{arm}"])
        assert not any(row["worse"] for row in check[f"round-1-{arm}"].values())
    assert "Every round trains with this recipe (C_0's training_log.json)" in (out / "report.md").read_text()
    assert job.problems == {}


def test_training_options_must_agree_with_c0_recipe(setup, good_start, varied_lm, tmp_path):
    with pytest.raises(InputError, match=r"--lr 2e-05 differ from the recipe C_0 was trained with \(learning_rate "
                                         r"0.003"):
        harden(setup, tmp_path / "h", varied_lm, classifier=str(good_start[0]),
               train_options={"learning_rate": 2e-5})
    assert not (tmp_path / "h").exists()


def test_a_round_worse_than_round_0_stops_the_loop(setup, good_start, varied_lm, tmp_path):
    """C_0's recipe unknown (no training_log.json), the rounds' recipe too weak to learn: the paired check finds
    both arms of round 1 worse than C_0 on the eval set, so the loop stops with the numbers and the fix; --keep-going
    warns and goes on."""
    from toxiforge.errors import ToxiforgeWarning
    from toxiforge.harden.guard import HardenStopped

    weak = train_config(setup["base"], max_steps=1, learning_rate=1e-6)
    # a C_0 without its log: the options give the whole recipe (issue 48: else refused, test_harden_inputs.py)
    given = {"base_model": str(setup["base"]), "max_steps": 1, "learning_rate": 1e-6, "batch_size": 8,
             "eval_fraction": 0.0, "debias": "none"}
    out = tmp_path / "h"
    with pytest.raises(HardenStopped, match=r"round 1 made the classifier worse than round 0, so harden stopped: "
                                            r"round-1-alice's .*Fix: the rounds train with .*lr 1e-06") as stop:
        harden(setup, out, varied_lm, classifier=str(good_start[1]), transfer=False, train=weak, train_options=given,
               keep_going=False)
    assert any(p.startswith("round-1-control's") and " on held moved " in p for p in stop.value.problems)
    report = json.loads((out / "report.json").read_text())  # written before stopping, with the numbers
    assert report["problems"]["1"] == stop.value.problems and "no training_log.json" in report["recipe"]["note"]
    assert "**Round 1 is worse than round 0**" in (out / "report.md").read_text()
    with pytest.raises(HardenStopped):  # resuming stops again at the same round
        harden(setup, out, varied_lm, resume=True, classifier=str(good_start[1]), transfer=False, train=weak,
               train_options=given, keep_going=False)
    generator = Generator(model="tiny", lm=varied_lm, device="cpu", job=JobConfig(batch_size=4, shard_size=4))
    job = Harden(config_for(setup, classifier=str(good_start[1]), transfer=False, train=weak, train_options=given),
                 out, generator, keep_going=True)
    with pytest.warns(ToxiforgeWarning, match="going on: --keep-going"):
        job.run(resume=True)
    assert job.problems[1] == stop.value.problems


def test_validator_is_compared_by_content(setup, tmp_path):
    """-c DIR --validate-with ./DIR, or a copy of DIR: the same weights, refused (they were compared as strings)."""
    start = setup["start"]
    copy = tmp_path / "copy"
    shutil.copytree(start, copy)
    for other in (f"{start.parent}/./{start.name}", str(copy)):
        with pytest.raises(InputError, match="is the attacked classifier"):
            config_for(setup, validate_with=other)
    from toxiforge.classifiers.fingerprint import same_classifier

    assert same_classifier(start, copy) and not same_classifier(start, setup["base"])


@pytest.fixture(scope="module")
def few_prompts(setup):
    """Demonstration sets of 4 sentences: 12 ordered pairs (k=2) per group and label."""
    demos = setup["root"] / "few"
    for category, group in [("race", "asian"), ("nationality", "mexican")]:
        (demos / category).mkdir(parents=True)
        for prefix in ("hate", "neutral"):
            lines = [f"placeholder {prefix} line {i} on {group}" for i in range(4)]
            (demos / category / f"{prefix}_{group}_sentences.txt").write_text("\n".join(lines) + "\n")
    return demos


def test_no_prompt_is_used_in_two_sets_or_twice_in_one(setup, few_prompts, varied_lm, tmp_path):
    """With 12 prompts per cell and 10 drawn (attack 2, transfer 2, pool 4, round-1 attack 2), seeds alone repeat
    prompts; each set re-draws, the arms' attacks of a round share theirs, and a run needing more is refused."""
    plan = AttackPlan(groups=GROUPS, per_cell=2, source=str(few_prompts), k=2, seed=3)
    out = tmp_path / "h"
    harden(setup, out, varied_lm, attack=plan, eval=())
    prompts = {run: column(read_any_table(out / run), "prompt") for run in
               ("round-0/attack", "round-0/transfer", "round-1/control/topk", "round-1/alice/attack",
                "round-1/control/attack")}
    assert prompts["round-1/alice/attack"] == prompts.pop("round-1/control/attack")
    every = [p for run in prompts.values() for p in run]
    assert len(every) == 2 * 4 * (1 + 1 + 2 + 1) and len(set(every)) == len(every)
    report = json.loads((out / "report.json").read_text())
    assert sum(s["prompts_redrawn"] for s in report["sets"]) > 0  # the seeded draws did collide
    assert "prompts re-drawn" in (out / "report.md").read_text()
    with pytest.raises(InputError, match=r"round-2/control/topk needs 4 asian toxic prompts that no earlier set of "
                                         r"this run used, and only 2 are left: 4 demonstrations give 12"):
        harden(setup, tmp_path / "h2", varied_lm, attack=plan, eval=(), rounds=2)
    assert not (tmp_path / "h2").exists()


def test_statements_of_the_training_data_or_an_earlier_set_are_left_out(setup, finished, varied_lm, tmp_path):
    """A statement text (case and whitespace folded) of the training data, of an earlier set or twice in one is
    neither added nor measured: the flip rates count the kept statements only."""
    from toxiforge.harden.sets import StatementLedger

    ledger = StatementLedger()
    ledger.train_on(["Placeholder  Alpha"])
    keep, counts = ledger.check(["placeholder alpha", "beta", " BETA ", "gamma"])
    assert keep == (False, True, False, True) and counts["in_training_data"] == counts["repeated_in_set"] == 1
    ledger.admit(["beta", "gamma"], [True, True], "set-1")
    assert ledger.check(["GAMMA"])[1]["in_earlier_set"] == 1

    _, done = finished
    report = json.loads((done / "report.json").read_text())
    sets = kept_sets(setup, done)
    assert {s["set"]: s["kept"] for s in report["sets"]} == {k: len(v) for k, v in sets.items()}
    assert sum(s["statements"] - s["kept"] for s in report["sets"]) > 0  # this run did repeat itself
    # a statement of round 0's attack put into the training data: the same run leaves it out of every set
    text = sets["round-0/attack"][0][0].text
    data = write_table(tmp_path / "train.csv", placeholder_rows(16) + [(f"  {text.upper()} ", 1, "asian")])
    out = tmp_path / "h"
    harden(setup, out, varied_lm, data=(str(data),), eval=())
    again = json.loads((out / "report.json").read_text())["sets"]
    assert again[0]["in_training_data"] >= 1 and again[0]["kept"] == len(sets["round-0/attack"]) - 1
    added = read_examples(out / "round-1" / "alice" / "added.jsonl")
    assert fold(text) not in {fold(e.text) for e in added}


def test_a_keeper_steers_every_attack_and_the_report_names_it(setup, varied_lm, tmp_path):
    """--keep-label-with (issue 50): the attacks and the transfer set are ALICE with the keeper (their rows carry its
    P(toxic)), the report names it; a validator that is the keeper, or a keeper that is -c, is refused before any
    work; without a keeper the fingerprint is what older runs recorded."""
    keeper_alice = decoder_config("alice", {"num_beams": 2, "candidates": 4, "max_new_tokens": 4,
                                            "keep_label_with": "profanity-check", "lambda_keep": 0.7})
    with pytest.raises(InputError, match="is the keeper"):
        config_for(setup, alice=keeper_alice, validate_with="profanity-check")
    with pytest.raises(InputError, match="is the attacked classifier"):
        config_for(setup, alice=decoder_config("alice", {"keep_label_with": str(setup["start"])}))
    assert "keep_label_with" not in config_for(setup).fingerprint()["alice"]
    out = tmp_path / "h"
    harden(setup, out, varied_lm, alice=keeper_alice, eval=(), rounds=1)
    from toxiforge.classifiers import load_classifier
    from toxiforge.records import read_rows

    keeper = load_classifier("profanity-check")
    for run in ("round-0/attack", "round-0/transfer", "round-1/alice/attack"):
        decoding = json.loads((out / run / "manifest.json").read_text())["config"]["decoding"]
        assert (decoding["keep_label_with"], decoding["lambda_keep"]) == ("profanity-check", 0.7), run
        rows = [r for r in read_rows(out / run) if r.generation]
        assert rows and [r.keeper_score for r in rows] == pytest.approx(
            list(keeper.predict_proba([r.generation for r in rows])))
    md = " ".join((out / "report.md").read_text().split())
    assert "ALICE with the keeper profanity-check (--keep-label-with, λK 0.7" in md


def test_a_judges_concurrency_is_not_part_of_what_a_resume_must_match(setup):
    """--judge-concurrency changes how fast a server judge C_0 scores, not what: a run resumed with another value
    (say 1, after a timeout) has the same fingerprint; a judge template does not."""
    judge = "judge:openai:http://127.0.0.1:8000/v1#guard"
    fast, slow = (config_for(setup, classifier=judge, classifier_options={"concurrency": n}).fingerprint()
                  for n in (16, 1))
    assert fast == slow == config_for(setup, classifier=judge).fingerprint()
    assert fast["classifier_options"] is None  # as older judge runs recorded: they resume
    templated = config_for(setup, classifier=judge, classifier_options={"template": "llama-guard"}).fingerprint()
    assert templated["classifier_options"] == {"template": "llama-guard"}
