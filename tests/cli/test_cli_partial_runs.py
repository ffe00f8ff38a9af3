"""Interrupted and partial runs (issue 27 #5, #6): Ctrl-C in generate says what was kept and how to go on, and
every command that reads a run whose manifest is not complete warns (rows present vs planned) and keeps going."""

from __future__ import annotations

import json
import sys
import warnings

import pytest
from typer.testing import CliRunner

from toxiforge.cli import app, main
from toxiforge.errors import ToxiforgeWarning
from toxiforge.records import Row, write_rows

runner = CliRunner()


def _cli(monkeypatch, capsys, *args: str) -> tuple[int, str]:
    """Run ``toxiforge ARGS`` through :func:`toxiforge.cli.main` (as the console script does)."""
    monkeypatch.setattr(sys, "argv", ["toxiforge", *args])
    with pytest.raises(SystemExit) as exit_info:
        main()
    return exit_info.value.code, capsys.readouterr().err


def test_ctrl_c_in_generate_keeps_whole_shards_and_says_how_to_resume(tiny_llama_dir, tmp_path, monkeypatch, capsys):
    import toxiforge.pipeline.job as job

    out = tmp_path / "run"
    args = ["generate", "-o", str(out), "--groups", "asian,women", "-n", "2", "--model", str(tiny_llama_dir),
            "--max-new-tokens", "3", "--shard-size", "1", "--workers", "1",  # in-process: generate_shard patched
            "--no-progress", "--no-summary"]
    real, calls = job.generate_shard, []

    def interrupted_on_the_third_shard(*a, **k):
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(job, "generate_shard", interrupted_on_the_third_shard)
    code, err = _cli(monkeypatch, capsys, *args)
    assert code == 130
    assert f"interrupted: 2 of 4 rows kept in {out}; rerun the same command with --resume to finish it" in err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "interrupted" and manifest["rows_kept"] == 2

    with pytest.warns(ToxiforgeWarning, match=r"the run is interrupted: 2 of 4 planned rows are present"):
        assert runner.invoke(app, ["summary", str(out)]).exit_code == 0

    monkeypatch.setattr(job, "generate_shard", real)
    code, err = _cli(monkeypatch, capsys, *args, "--resume")
    assert code in (0, None), err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and "rows_kept" not in manifest and manifest["counts"]["rows"] == 4


def test_a_plain_ctrl_c_says_interrupted(monkeypatch, capsys):
    import toxiforge.cli.generate as generate

    def ctrl_c(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(generate, "_print_summary", ctrl_c)
    code, err = _cli(monkeypatch, capsys, "summary", "whatever")
    assert code == 130 and "interrupted (Ctrl-C)" in err


@pytest.fixture
def partial_run(tmp_path):
    """A run folder holding 4 of its 8 planned rows, its manifest marked interrupted."""
    run = tmp_path / "partial"
    rows = [Row(prompt="p", generation=f"placeholder statement {g} {i}", generation_method="top-k", group=g,
                prompt_label=i % 2, row_id=f"{g}/{i}") for g in ("asian", "women") for i in range(2)]
    write_rows(rows, run / "data" / "shard-00000.parquet")
    (run / "manifest.json").write_text(json.dumps({"status": "interrupted", "total_rows": 8}))
    return run


@pytest.mark.parametrize("command", [
    ["summary"], ["stats"], ["mentions"], ["classify", "-c", "profanity-check", "-o", "{tmp}/scored.parquet"],
    ["export", "-o", "{tmp}/all.csv"], ["report", "--no-perplexity", "-o", "{tmp}/report"],
    ["annotate", "study", "create", "--db", "{tmp}/s.db"],
], ids=lambda c: c[0] if c[0] != "annotate" else "annotate-study-create")
def test_every_reader_warns_about_a_partial_run_and_keeps_going(partial_run, tmp_path, command):
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    with pytest.warns(ToxiforgeWarning, match=r"4 of 8 planned rows are present.*--resume"):
        result = runner.invoke(app, [*args[:3 if args[0] == "annotate" else 1], str(partial_run),
                                     *args[3 if args[0] == "annotate" else 1:]])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("command", [["split", "--test-size", "1", "-o", "{tmp}/split"],
                                     ["train", "--max-steps", "1", "-o", "{tmp}/model"]])
def test_model_commands_warn_before_loading(partial_run, tmp_path, command):
    """split and train read the run (and warn) before they load a model; the model here does not exist."""
    args = [a.replace("{tmp}", str(tmp_path)) for a in command]
    data = ["--data", str(partial_run)] if args[0] == "train" else [str(partial_run)]
    missing = ["--base-model" if args[0] == "train" else "--model", str(tmp_path / "no-model")]
    with pytest.warns(ToxiforgeWarning, match=r"4 of 8 planned rows are present"):
        runner.invoke(app, [args[0], *data, *args[1:], *missing])


def test_the_cli_prints_a_warning_as_one_line(partial_run, monkeypatch, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        code, err = _cli(monkeypatch, capsys, "stats", str(partial_run))
    assert code in (0, None)
    lines = [line for line in err.splitlines() if "planned rows" in line]
    assert len(lines) == 1 and lines[0].startswith("warning: ") and "UserWarning" not in err
