"""Files that flow between commands (issue 27 #8, #9): one reader for a folder of demonstration files in every
command that reads texts, --text-column on stats and split, export to the shared row schema, and prompt files
that `prompts build` writes and `generate --prompts` reads."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from toxiforge.cli import app
from toxiforge.records import read_table

runner = CliRunner()


@pytest.fixture
def demos(tmp_path):
    """Upstream's layout: a checkout holding demonstrations/<category>/{hate,neutral}_<group>_sentences.txt,
    filled with neutral placeholder lines (the label comes from the file name)."""
    root = tmp_path / "upstream"
    for group in ("asian", "women"):
        folder = root / "demonstrations" / "cat"
        folder.mkdir(parents=True, exist_ok=True)
        for label in ("hate", "neutral"):
            lines = [f"- placeholder {label} line {i} about the {group} group and its weekend plans" for i in range(6)]
            (folder / f"{label}_{group}_sentences.txt").write_text("\n".join(lines) + "\n")
    return root


@pytest.mark.parametrize("command", [["stats"], ["mentions"], ["summary"], ["report", "--no-perplexity", "-o", "R"],
                                     ["export", "-o", "R.parquet"], ["classify", "-c", "profanity-check", "-o",
                                                                      "R.csv"]],
                         ids=lambda c: c[0])
def test_a_demonstrations_folder_is_read_by_every_command(demos, tmp_path, command):
    args = [a.replace("R", str(tmp_path / "result")) for a in command]
    for source in (demos, demos / "demonstrations"):
        result = runner.invoke(app, [args[0], str(source), *args[1:], "--overwrite"] if args[0] in (
            "export", "classify", "report") else [args[0], str(source), *args[1:]])
        assert result.exit_code == 0, result.output


def test_split_reads_a_demonstrations_folder_before_loading_the_encoder(demos, tmp_path):
    result = runner.invoke(app, ["split", str(demos), "--test-size", "2", "-o", str(tmp_path / "s"), "--model",
                                 str(tmp_path / "no-encoder")])
    assert "no-encoder" in str(result.exception) and "demonstration" not in str(result.exception)


def test_export_writes_the_shared_row_schema(demos, tmp_path):
    out = tmp_path / "demos.parquet"
    result = runner.invoke(app, ["export", str(demos), "-o", str(out)])
    assert result.exit_code == 0 and "wrote 24 rows" in result.output
    table = read_table(out)
    assert {"generation", "group", "prompt_label", "machine_generated", "row_id"} <= set(table.column_names)
    assert sum(table.column("prompt_label").to_pylist()) == 12
    assert not any(table.column("machine_generated").to_pylist())
    assert runner.invoke(app, ["stats", str(out)]).exit_code == 0
    again = runner.invoke(app, ["export", str(demos), "-o", str(out)])
    assert "--overwrite" in str(again.exception)


def test_stats_and_split_take_text_column(tmp_path):
    import pyarrow as pa

    from toxiforge.records import write_table

    table = pa.table({"post": [f"placeholder post {i}" for i in range(6)], "group": ["asian", "women"] * 3,
                      "label": [0, 1, 1, 0, 0, 1]})
    data = write_table(table, tmp_path / "posts.csv")
    assert "no text column" in str(runner.invoke(app, ["stats", str(data)]).exception)
    result = runner.invoke(app, ["stats", str(data), "--text-column", "post"])
    assert result.exit_code == 0 and "6 statements" in result.output
    result = runner.invoke(app, ["split", str(data), "--text-column", "post", "--test-size", "2", "-o",
                                 str(tmp_path / "s"), "--model", str(tmp_path / "no-encoder")])
    assert "no-encoder" in str(result.exception)


def test_prompts_build_output_feeds_generate_prompts(demos, tmp_path, tiny_llama_dir):
    """Issue 27 #8: a prompt file named after the group and a count was read as an unknown group."""
    prompts = tmp_path / "prompts"
    prompts.mkdir()
    built = {}
    for name, label in (("neutral_women_100.txt", "benign"), ("women.txt", "benign"), (".", "toxic")):
        out = prompts / name if name != "." else prompts
        result = runner.invoke(app, ["prompts", "build", "-d", str(demos), "--group", "women", "--label", label,
                                     "-n", "3", "-k", "2", "-o", str(out)])
        assert result.exit_code == 0, result.output
        line = next(x for x in result.output.splitlines() if x.startswith("generate from them: "))
        built[name] = line.removeprefix("generate from them: toxiforge ").split()
    assert (prompts / "hate_women_1k.txt").exists()
    tiny = ["--model", str(tiny_llama_dir), "--max-new-tokens", "2", "--no-progress", "--no-summary"]
    for name, args in built.items():  # the command prompts build printed, run as printed (output moved to tmp)
        args[args.index("-o") + 1] = str(tmp_path / "runs" / (name if name != "." else "folder"))
        result = runner.invoke(app, args + tiny)
        assert result.exit_code == 0, (name, result.output)
        assert len(read_table(args[args.index("-o") + 1])) == 3
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "x"), "--prompts", str(prompts / "women.txt"),
                                 "--groups", "women", *tiny])
    assert "does not say which group and label" in str(result.exception)
    assert "--groups women --labels" in str(result.exception)
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "y"), "--prompts", str(prompts), "--groups",
                                 "asian", "--labels", "toxic", *tiny])
    assert f"-o {prompts / 'hate_asian_1k.txt'}`" in str(result.exception)
    assert "toxiforge prompts build -d DEMONSTRATIONS --groups asian --labels toxic" in str(result.exception)
