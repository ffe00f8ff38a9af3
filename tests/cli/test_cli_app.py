"""The command line registers its commands explicitly, in the order ``toxiforge --help`` shows them."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

HELP_ORDER = ["groups", "generate", "summary", "classify", "classifiers", "stats", "split", "perplexity", "mentions",
              "report", "export", "train", "evaluate", "harden", "harden-seeds", "attack", "audit", "demonstrations",
              "prompts", "experiment", "annotate", "bias", "bench"]


def test_help_lists_every_command_in_registration_order():
    from toxiforge.cli import app

    assert [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups] == HELP_ORDER
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    positions = [out.index(f"\n  {name} ") for name in HELP_ORDER]
    assert positions == sorted(positions)


def test_each_module_registers_its_own_commands_on_any_app():
    from toxiforge.cli import analysis, annotate, attack, audit, bench, bias, classify, generate, harden, training

    for module, expected in ((generate, HELP_ORDER[:3] + ["demonstrations", "prompts"]), (attack, ["attack"]),
                             (classify, ["classify", "classifiers"]), (analysis, HELP_ORDER[5:11]),
                             (training, ["train", "evaluate", "experiment"]), (harden, ["harden", "harden-seeds"]),
                             (annotate, ["annotate"]), (bias, ["bias"]), (bench, ["bench"]),
                             (audit, ["audit"])):
        fresh = typer.Typer()
        module.register(fresh)
        assert [c.name for c in fresh.registered_commands] + [g.name for g in fresh.registered_groups] == expected


def test_help_keeps_long_option_names_whole_at_80_columns():
    """Issue 27 #18: rich's help tables cut `--classifier-top-extensions` to `--classifier-top-ex…`."""
    from toxiforge.cli import app

    out = CliRunner().invoke(app, ["generate", "--help"], env={"COLUMNS": "80"}).output
    assert "--classifier-top-extensions" in out and "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 80


def test_errors_have_one_form(tmp_path):
    """Issue 27 #18: click's usage errors say 'Error:', toxiforge's said 'error:'."""
    import subprocess
    import sys

    usage = subprocess.run([sys.executable, "-m", "toxiforge", "generate", "--bogus"], capture_output=True, text=True,
                           timeout=120)
    ours = subprocess.run([sys.executable, "-m", "toxiforge", "generate", "-o", str(tmp_path / "o"), "--groups",
                           "martians"], capture_output=True, text=True, timeout=120)
    assert usage.returncode == ours.returncode == 2
    assert "Error: No such option: --bogus" in usage.stderr and "Error: unknown group 'martians'" in ours.stderr


def test_shared_option_blocks_read_the_same_in_every_command():
    """The ALICE, Ray and server options (and the judge options of -c) are defined once in cli/_options: the same
    name, default and help wherever they appear (before, harden's --candidates and bench's --concurrency said
    other things than generate's, and bench generate had no judge options)."""
    from toxiforge.cli import app

    root = typer.main.get_command(app)
    commands = {"generate": root.commands["generate"], "harden": root.commands["harden"],
                "bench generate": root.commands["bench"].commands["generate"]}

    def options(command):
        return {p.opts[0]: (p.default, p.help) for p in command.params}

    everywhere = ("generate", "harden", "bench generate")
    shared = [(everywhere[:2], ["--beams", "--candidates", "--lambda-lm", "--lambda-clf", "--classifier-top-extensions",
                                "--ray", "--ray-address", "--workers", "--cpus-per-worker", "--gpus-per-worker",
                                "--ray-resources", "--ray-spread", "--ray-placement-timeout"]),
              (everywhere, ["--concurrency", "--api-key-env", "--judge-template", "--judge-policy",
                            "--judge-concurrency", "--toxic-label"])]
    for names, flags in shared:
        found = [options(commands[name]) for name in names]
        for flag in flags:
            assert flag in found[0] and len({repr(f.get(flag)) for f in found}) == 1, flag


def test_classifiers_keeps_every_name_whole_on_a_terminal_and_piped():
    """Issue 56 #10: rich's six-column table cut the names one types at 80-100 columns (`toxigen-r…`) and, piped,
    wrote 2,013-character lines. Each classifier and judge template is now a block whose first line starts with
    its name, wrapped at the terminal's width (80 here) or at 100 columns off a terminal."""
    from toxiforge.classifiers.judge_templates import ALIASES, TEMPLATES
    from toxiforge.classifiers.registry import classifier_catalog
    from toxiforge.cli import app

    names = [row.name for row in classifier_catalog()] + list(TEMPLATES) + list(ALIASES)
    for env, width in (({"COLUMNS": "80"}, 80), ({}, 100)):
        result = CliRunner().invoke(app, ["classifiers"], env=env)
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert "…" not in result.output and max(len(line) for line in lines) <= width, env
        starts = [line.split(" (", 1)[0] for line in lines if line and not line.startswith(" ")]
        assert all(name in starts for name in names), (env, set(names) - set(starts))
