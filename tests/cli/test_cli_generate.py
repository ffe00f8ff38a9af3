"""`toxiforge generate` / `summary` / `groups` end to end on a tiny Llama saved as a local model directory."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from toxiforge.cli import app
from toxiforge.errors import InputError
from toxiforge.records import read_rows

runner = CliRunner()


def test_generate_from_a_model_directory(tiny_llama_dir, tmp_path):
    out = tmp_path / "run"
    args = ["generate", "-o", str(out), "--groups", "asian,Middle Eastern", "-n", "3", "--model", str(tiny_llama_dir),
            "--max-new-tokens", "5", "--batch-size", "2", "--no-progress"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert len(rows) == 6 and {r.group for r in rows} == {"asian", "middle_east"}
    assert all(r.prompt_label == 0 and r.model == str(tiny_llama_dir) for r in rows)
    assert "Generated statements" in result.output and "middle_east" in result.output
    # parse errors are "unparsed", not "flagged" (which reads as flagged toxic; issue 33 #4)
    assert "(6 in the dataset; 0 unparsed, kept with a parse_error) to" in " ".join(result.output.split())
    assert "flagged" not in result.output

    again = runner.invoke(app, args)
    assert again.exit_code != 0 and isinstance(again.exception, InputError)
    assert "--resume" in str(again.exception)

    resumed = runner.invoke(app, args + ["--resume"])
    assert resumed.exit_code == 0 and "wrote 0 rows" in resumed.output

    summary = runner.invoke(app, ["summary", str(out)])
    assert summary.exit_code == 0 and "asian" in summary.output
    assert "unparsed" in summary.output and "flagged" not in summary.output


def test_toxic_label_without_demonstrations_says_to_fetch(tmp_path):
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "x"), "--groups", "asian", "--labels", "toxic"])
    assert isinstance(result.exception, InputError)
    assert "fetch" in str(result.exception)
    assert not (tmp_path / "x").exists()


def test_groups_command_lists_all_groups():
    result = runner.invoke(app, ["groups"])
    assert result.exit_code == 0
    for name in ("native_american", "physical_disability", "immigrant", "trans"):
        assert name in result.output


def test_python_dash_m_reports_errors_as_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "toxiforge", "generate", "-o", str(tmp_path / "o"), "--groups",
                           "martians"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "unknown group 'martians'" in proc.stderr and "Traceback" not in proc.stderr


def test_generate_alice_against_profanity_check(tiny_llama_dir, tmp_path):
    out = tmp_path / "alice"
    result = runner.invoke(app, ["generate", "-o", str(out), "--groups", "women", "-n", "2", "--model",
                                 str(tiny_llama_dir), "--method", "alice", "-c", "profanity-check", "--beams", "2",
                                 "--candidates", "8", "--max-new-tokens", "4", "--no-progress"])
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert [r.generation_method for r in rows] == ["ALICE", "ALICE"]
    assert all(r.classifier == "profanity-check" for r in rows if r.parse_error is None)
    assert "label flip by method" in result.output and "ALICE" in result.output


def test_generate_runs_through_the_pipeline_generator(tiny_llama_dir, tiny_judge_dir, tmp_path, monkeypatch):
    """generate is Generator.run (no second copy of its local/Ray dispatch): the judge options reach it, the
    classifier it names scores the rows, and the CLI still prints the LM's load time."""
    from toxiforge.pipeline.generator import Generator

    calls, run = [], Generator.run

    def spy(self, plan, decoding, out, **kw):
        calls.append(kw)
        return run(self, plan, decoding, out, **kw)

    monkeypatch.setattr(Generator, "run", spy)
    out = tmp_path / "judged"
    result = runner.invoke(app, ["generate", "-o", str(out), "--groups", "women", "-n", "2", "--model",
                                 str(tiny_llama_dir), "-c", f"judge:{tiny_judge_dir}", "--judge-template",
                                 "llama-guard", "--max-new-tokens", "4", "--device", "cpu", "--no-progress",
                                 "--no-summary"])
    assert result.exit_code == 0, result.output
    assert [kw["classifier_options"]["template"] for kw in calls] == ["llama-guard"]
    assert all(r.classifier == f"judge:{tiny_judge_dir}" for r in read_rows(out) if r.parse_error is None)
    assert "loaded " in result.output  # Generator loads the LM with the CLI's load_lm


def test_a_bad_classifier_fails_before_the_language_model_loads(tmp_path, monkeypatch):
    from toxiforge.cli import generate

    def no_model(*a, **k):
        raise AssertionError("the language model loaded before the classifier")

    monkeypatch.setattr(generate, "load_lm", no_model)
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "o"), "--groups", "women", "-n", "1",
                                 "--method", "alice", "-c", "no-such-classifier"])
    assert isinstance(result.exception, InputError) and "no-such-classifier" in str(result.exception)
    assert not (tmp_path / "o").exists()


def test_generate_alice_num_return(tiny_llama_dir, tmp_path):
    out = tmp_path / "alice3"
    result = runner.invoke(app, ["generate", "-o", str(out), "--groups", "women", "-n", "2", "--model",
                                 str(tiny_llama_dir), "--method", "alice", "-c", "profanity-check", "--beams", "6",
                                 "--candidates", "20", "--max-new-tokens", "6", "--num-return", "3", "--no-progress",
                                 "--no-summary"])
    assert result.exit_code == 0, result.output
    rows = read_rows(out)
    assert [r.hypothesis_rank for r in rows] == [0, 1, 2, 0, 1, 2]
    assert [r.row_id for r in rows[:3]] == ["women/benign/000000", "women/benign/000000/1", "women/benign/000000/2"]
    assert len({r.row_id for r in rows}) == 6 and len({r.generation for r in rows[:3]}) == 3
    assert all(r.classifier == "profanity-check" for r in rows if r.parse_error is None)


@pytest.mark.parametrize("extra, message", [
    (["--method", "alice"], "--classifier"),
    (["--method", "beam"], "unknown decoding method 'beam'"),
    (["--method", "alice", "-c", "profanity-check", "--lambda-lm", "0", "--lambda-clf", "0"], "not both 0"),
    (["--method", "alice", "-c", "no-such-classifier"], "no-such-classifier"),
    (["--method", "alice", "-c", "profanity-check", "--beams", "0"], "num_beams"),
    (["--num-return", "2"], "--num-return does not apply to the top-k method"),
    (["--method", "top-k", "--num-return", "1"], "use --method alice"),
    (["--method", "alice", "--top-k", "5", "-c", "profanity-check"], "--top-k does not apply to the alice method"),
    (["--method", "alice", "-c", "profanity-check", "--beams", "2", "--num-return", "3"],
     "between 1 and num_beams (2)"),
    (["--method", "alice", "-c", "profanity-check", "--num-return", "0"], "between 1 and num_beams (10)"),
])
def test_generate_alice_bad_input(tmp_path, extra, message):
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "o"), "--groups", "women", "-n", "1"] + extra)
    assert isinstance(result.exception, InputError), result.output
    assert message in str(result.exception)
    assert not (tmp_path / "o").exists()


def test_a_refused_resume_names_each_option_that_differs_with_both_values(tiny_llama_dir, tmp_path):
    """Issue 27 #17."""
    out = tmp_path / "run"
    args = ["generate", "-o", str(out), "--groups", "asian", "-n", "2", "--model", str(tiny_llama_dir),
            "--max-new-tokens", "3", "--no-progress", "--no-summary"]
    assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(app, args[:-6] + ["-n", "3", "--seed", "1", "--max-new-tokens", "4", "--groups",
                                              "asian,women", "--no-progress", "--resume"])
    message = str(result.exception)
    assert isinstance(result.exception, InputError) and "made with other options" in message
    for part in ("-n 2 (the run) vs 3 (now)", "--seed 0 (the run) vs 1 (now)", "--groups asian (the run) vs "
                 "asian,women (now)", "--max-new-tokens 3 (the run) vs 4 (now)"):
        assert part in message
    assert "Fix: resume with the run's values (" in message and "-n 2" in message.split("Fix:")[1]
    result = runner.invoke(app, args + ["--method", "alice", "-c", "profanity-check", "--resume"])
    assert "--method top-k (the run) vs ALICE (now)" in str(result.exception)
    assert "--classifier (none) (the run) vs profanity-check (now)" in str(result.exception)
    assert "no --classifier" in str(result.exception)
    assert "classifier_settings" not in str(result.exception)  # the classifier's own settings: --classifier says it
    assert "--temperature" not in str(result.exception)


def test_resume_refuses_another_judge_template_and_accepts_runs_that_never_recorded_one(tiny_llama_dir,
                                                                                         tiny_judge_dir, tmp_path):
    """The judge's template changes every score, so a resumed run must use the run's (it once resumed silently with
    another); runs written before the setting was recorded still resume."""
    import json

    out = tmp_path / "judged"
    args = ["generate", "-o", str(out), "--groups", "women", "-n", "2", "--model", str(tiny_llama_dir), "-c",
            f"judge:{tiny_judge_dir}", "--max-new-tokens", "3", "--device", "cpu", "--no-progress", "--no-summary"]
    assert runner.invoke(app, args + ["--judge-template", "llama-guard"]).exit_code == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["classifier_settings"] == {"template": "llama-guard", "policy": None}
    result = runner.invoke(app, args + ["--judge-template", "humanval", "--resume"])
    assert isinstance(result.exception, InputError)
    assert "--judge-template llama-guard (the run) vs humanval (now)" in str(result.exception)
    assert runner.invoke(app, args + ["--judge-template", "llama-guard", "--resume"]).exit_code == 0
    del manifest["config"]["classifier_settings"]  # a run from before the setting was recorded
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert runner.invoke(app, args + ["--judge-template", "humanval", "--resume"]).exit_code == 0
