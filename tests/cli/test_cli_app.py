"""The command line registers its commands explicitly, in the order ``toxiforge --help`` shows them."""

from __future__ import annotations

import typer
from typer.testing import CliRunner

HELP_ORDER = ["groups", "generate", "summary", "classify", "classifiers", "stats", "split", "perplexity", "mentions",
              "report", "train", "evaluate", "demonstrations", "prompts", "experiment", "annotate", "bias", "bench"]


def test_help_lists_every_command_in_registration_order():
    from toxiforge.cli import app

    assert [c.name for c in app.registered_commands] + [g.name for g in app.registered_groups] == HELP_ORDER
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"}).output
    positions = [out.index(f"│ {name} ") for name in HELP_ORDER]
    assert positions == sorted(positions)


def test_each_module_registers_its_own_commands_on_any_app():
    from toxiforge.cli import analysis, annotate, bench, bias, classify, generate, training

    for module, expected in ((generate, HELP_ORDER[:3] + ["demonstrations", "prompts"]),
                             (classify, ["classify", "classifiers"]), (analysis, HELP_ORDER[5:10]),
                             (training, ["train", "evaluate", "experiment"]),
                             (annotate, ["annotate"]), (bias, ["bias"]), (bench, ["bench"])):
        fresh = typer.Typer()
        module.register(fresh)
        assert [c.name for c in fresh.registered_commands] + [g.name for g in fresh.registered_groups] == expected
