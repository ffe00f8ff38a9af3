"""One vocabulary across the command line (issue 33): -o is --out, -n counts statements per group × label,
--groups/--labels everywhere; the old spellings still parse but are hidden from help."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from toxiforge.cli import app

runner = CliRunner()
WIDE = {"COLUMNS": "200"}


def commands(group=None, path: tuple[str, ...] = ()):
    """(path, click command) of every command in the tree."""
    group = group or typer.main.get_command(app)
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            yield from commands(command, (*path, name))
        else:
            yield (*path, name), command


def options(command):
    return [p for p in command.params if p.param_type_name == "option"]


def parsed(path: tuple[str, ...], *args: str) -> dict:
    """The values ``args`` give the command at ``path`` (parsed only, not run)."""
    command = dict(commands())[path]
    return command.make_context(" ".join(path), list(args)).params


def forbid_models(monkeypatch, what: str) -> None:
    """Make loading a language model or classifier fail (the classifiers package caches a lazily imported name on
    first use, so it is patched there as well as in its registry)."""
    import toxiforge.classifiers
    import toxiforge.classifiers.registry as registry
    from toxiforge.cli import generate

    def no_model(*a, **k):
        raise AssertionError(f"a model was loaded before {what}")

    monkeypatch.setattr(generate, "load_lm", no_model)
    # the package first: reading its name resolves (and caches) the registry's real function, which undo restores
    monkeypatch.setattr(toxiforge.classifiers, "load_classifier", no_model)
    monkeypatch.setattr(registry, "load_classifier", no_model)


def test_every_command_is_built_with_the_old_spellings_parser():
    from toxiforge.cli._app import Command

    assert [" ".join(p) for p, c in commands() if not isinstance(c, Command)] == []


def test_dash_o_is_out_everywhere_and_output_is_a_hidden_alias(tmp_path):
    long_names = {" ".join(path): [o for o in p.opts if o.startswith("--")] for path, c in commands()
                  for p in options(c) if "-o" in p.opts}
    assert len(long_names) > 15 and {k: v for k, v in long_names.items() if v != ["--out"]} == {}
    for path in (("classify",), ("export",), ("prompts", "build"), ("annotate", "export"), ("perplexity",)):
        out = runner.invoke(app, [*path, "--help"], env=WIDE).output
        assert "--out " in out and "--output" not in out, path
    assert parsed(("export",), "data.csv", "--output", "x.csv")["output"] == Path("x.csv")
    assert parsed(("classify",), "data.csv", "-c", "profanity-check", "--output", "y.csv")["output"] == Path("y.csv")


def test_dash_n_counts_statements_per_group_and_label_only():
    shown = {" ".join(path): p.help for path, c in commands() for p in options(c) if "-n" in p.opts}
    assert set(shown) == {"generate", "harden", "prompts build", "bench generate", "audit"}
    assert all("per group" in text for text in shown.values()), shown
    # the other counts have their own names; -n still parses there, hidden from help
    assert parsed(("annotate", "invite"), "--study", "s", "-n", "4")["n"] == 4
    assert parsed(("annotate", "invite"), "--study", "s", "--annotators", "4")["n"] == 4
    assert parsed(("bias", "aflite"), "d.csv", "-o", "x", "-n", "40")["target_size"] == 40
    for path, name in ((("annotate", "invite"), "--annotators"), (("bias", "aflite"), "--target-size")):
        out = runner.invoke(app, [*path, "--help"], env=WIDE).output
        assert name in out and " -n" not in out, path
    assert parsed(("prompts", "build"), "--groups", "asian", "--labels", "benign", "-o", "p", "--num", "7")["n"] == 7


def test_prompts_build_takes_groups_and_labels_like_generate(tmp_path):
    out = runner.invoke(app, ["prompts", "build", "--help"], env=WIDE).output
    assert "--groups" in out and "--labels" in out and "--group " not in out and "-g," not in out
    folder = tmp_path / "prompts"
    folder.mkdir()
    result = runner.invoke(app, ["prompts", "build", "--groups", "asian,women", "--labels", "benign", "-n", "2",
                                 "-k", "2", "-o", str(folder)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in folder.iterdir()) == ["neutral_asian_1k.txt", "neutral_women_1k.txt"]
    assert "--groups asian,women --labels benign -n 2" in result.output.replace("\n", "")
    one = runner.invoke(app, ["prompts", "build", "--group", "asian", "-l", "benign", "-n", "2", "-o",
                              str(tmp_path / "one.txt")])  # the old spellings
    assert one.exit_code == 0, one.output
    assert len((tmp_path / "one.txt").read_text().splitlines()) == 2


def test_prompts_build_needs_a_folder_for_several_cells(tmp_path):
    result = runner.invoke(app, ["prompts", "build", "--groups", "asian,women", "--labels", "benign", "-o",
                                 str(tmp_path / "p.txt")])
    assert "need one prompt file each" in str(result.exception)
    assert not (tmp_path / "p.txt").exists()


@pytest.mark.parametrize("old, new", [("--output", "--out"), ("--group", "--groups"), ("--num", "--per-cell")])
def test_an_old_spelling_is_not_accepted_where_the_new_name_is_missing(old, new):
    # summary has neither -o nor --groups nor --per-cell: the old spellings stay unknown there
    result = runner.invoke(app, ["summary", "x", old, "1"])
    assert result.exit_code == 2 and f"No such option: {old}" in result.output


def test_help_starts_with_the_main_path():
    out = runner.invoke(app, ["--help"], env={"COLUMNS": "80"}).output
    start = out[out.index("Start here"):out.index("Options:")]
    steps = [line.split()[1] for line in start.splitlines() if line.strip().startswith("toxiforge ")]
    assert steps == ["demonstrations", "generate", "summary", "train", "evaluate", "bias"]
    assert "toxiforge COMMAND --help" in start and max(len(line) for line in out.splitlines()) <= 80


def test_command_listings_show_whole_phrases():
    """click keeps a docstring's first sentence for the listing: 'DataMaps (Swayamdipta et al.' was all it showed."""
    for path, command in commands():
        short = command.get_short_help_str(limit=200)
        assert not short.endswith(("al.", "(")) and short.count("(") == short.count(")"), (path, short)
    out = runner.invoke(app, ["bias", "--help"], env=WIDE).output
    assert "et al.\n" not in out


def test_tables_keep_their_natural_width_off_a_terminal(monkeypatch):
    """rich squeezed every table to 80 columns when stdout was a pipe or a file, wrapping its cells."""
    from toxiforge.groups import all_groups

    monkeypatch.delenv("COLUMNS", raising=False)
    out = runner.invoke(app, ["groups"]).output
    widest = max(all_groups(), key=lambda g: len(", ".join(g.aliases)))
    assert any(", ".join(widest.aliases) in line for line in out.splitlines())
    assert max(len(line) for line in out.splitlines()) > 80
    wide = runner.invoke(app, ["groups"], env={"COLUMNS": "80"}).output  # an explicit width still holds
    assert max(len(line) for line in wide.splitlines()) <= 80


def test_a_demonstrations_file_without_group_and_label_says_a_fix_the_cli_can_follow(tmp_path):
    """It said 'give the group and label explicitly', which only the Python API can do."""
    (tmp_path / "empty.txt").write_text("a neutral placeholder sentence\n", encoding="utf-8")
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "o"), "-d", str(tmp_path / "empty.txt")])
    message = str(result.exception)
    assert "cannot tell group and label" in message and "explicitly" not in message
    assert "neutral_asian.txt" in message and "text, group and label columns" in message
    # both fixes work
    (tmp_path / "neutral_asian.txt").write_text("a neutral placeholder sentence\n", encoding="utf-8")
    (tmp_path / "table.csv").write_text("text,group,label\na neutral placeholder,asian,benign\n", encoding="utf-8")
    for fixed in ("neutral_asian.txt", "table.csv"):
        listed = runner.invoke(app, ["demonstrations", "list", str(tmp_path / fixed)], env=WIDE)
        assert listed.exit_code == 0 and "asian" in listed.output, listed.output


def test_a_resume_with_another_plan_fails_before_any_model_loads(tiny_llama_dir, tmp_path, monkeypatch):
    """--resume with another -n (or groups, seed, ...) was refused only once the LM and classifier had loaded."""
    out = tmp_path / "run"
    args = ["generate", "-o", str(out), "--groups", "asian", "-n", "2", "--model", str(tiny_llama_dir),
            "--max-new-tokens", "3", "--no-progress", "--no-summary"]
    assert runner.invoke(app, args).exit_code == 0

    forbid_models(monkeypatch, "the resume was checked")
    for extra in (["-n", "3"], ["--seed", "1"], ["--groups", "asian,women"], ["--shard-size", "7"],
                  ["--max-new-tokens", "4"]):
        result = runner.invoke(app, args + extra + ["-c", "profanity-check", "--resume"])
        assert "made with other options" in str(result.exception), (extra, result.exception)
    result = runner.invoke(app, args + ["--groups", "asain", "--resume"])
    assert "unknown group 'asain'" in str(result.exception)


@pytest.fixture
def labelled(tmp_path):
    path = tmp_path / "labelled.csv"
    rows = [f"placeholder statement {i},{'asian' if i % 2 else 'women'},{i % 2}" for i in range(12)]
    path.write_text("text,group,label\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_evaluate_and_bias_measure_refuse_to_overwrite_like_the_other_writers(labelled, tmp_path, monkeypatch):
    """evaluate -o and bias measure --markdown/--json/--png replaced earlier outputs silently."""
    forbid_models(monkeypatch, "the outputs were checked")
    report = tmp_path / "report"
    report.mkdir()
    (report / "evaluation.md").write_text("an earlier report", encoding="utf-8")
    result = runner.invoke(app, ["evaluate", "-c", "profanity-check", "--on", f"table:{labelled}", "-o", str(report)])
    assert "output folder exists and is not empty" in str(result.exception) and "--overwrite" in str(result.exception)
    md = tmp_path / "bias.md"
    md.write_text("earlier tables", encoding="utf-8")
    for args in (["--markdown", str(md)], ["--json", str(md)], ["--png", str(md)],
                 ["--markdown", str(tmp_path / "new.md"), "-c", "profanity-check"]):  # its chart would go to new.png
        (tmp_path / "new.png").write_text("an earlier chart", encoding="utf-8")
        result = runner.invoke(app, ["bias", "measure", str(labelled), *args])
        assert "output file exists" in str(result.exception) and "--overwrite" in str(result.exception), args
    assert md.read_text() == "earlier tables"
    monkeypatch.undo()
    done = runner.invoke(app, ["bias", "measure", str(labelled), "--markdown", str(md), "--overwrite"])
    assert done.exit_code == 0, done.output
    assert md.read_text() != "earlier tables"


def test_report_and_harden_seeds_refuse_to_overwrite_too(labelled, tmp_path, monkeypatch):
    """report -o and harden-seeds -o replaced earlier outputs silently (the rest of the writers refuse)."""
    forbid_models(monkeypatch, "the outputs were checked")
    report = tmp_path / "report"
    report.mkdir()
    (report / "report.html").write_text("an earlier page", encoding="utf-8")
    result = runner.invoke(app, ["report", str(labelled), "-o", str(report), "--no-perplexity"])
    assert "output folder exists and is not empty" in str(result.exception) and "--overwrite" in str(result.exception)
    assert (report / "report.html").read_text() == "an earlier page"
    seeds = tmp_path / "seeds"
    seeds.mkdir()
    (seeds / "harden-seeds.md").write_text("earlier tables", encoding="utf-8")
    result = runner.invoke(app, ["harden-seeds", str(tmp_path / "run-a"), str(tmp_path / "run-b"), "-o", str(seeds)])
    assert "output file exists" in str(result.exception) and "--overwrite" in str(result.exception)
    assert (seeds / "harden-seeds.md").read_text() == "earlier tables"


@pytest.mark.parametrize("command", [["audit", "-c", "profanity-check", "--on", "x.csv"],
                                     ["experiment", "debias", "--train", "x.csv", "--test-fraction", "0.5"]])
def test_resume_with_overwrite_is_refused(tmp_path, command):
    """--resume continues from what -o holds and --overwrite starts it again: together they are refused (issue 49)."""
    result = runner.invoke(app, [*command, "-o", str(tmp_path / "a"), "--resume", "--overwrite"])
    assert "--resume and --overwrite contradict each other" in str(result.exception)
    assert not (tmp_path / "a").exists()
