"""Every "Fix:" is a command or a path the user can paste (issue 27 #14)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from toxiforge.cli import app
from toxiforge.errors import InputError, ToxiforgeError

runner = CliRunner()


def test_a_demonstrations_table_hint_names_columns_not_python_arguments(tmp_path):
    from toxiforge.demonstrations.sets import load_demonstrations

    table = tmp_path / "d.csv"
    table.write_text("sentence,group,label\nplaceholder,asian,0\n")
    with pytest.raises(InputError) as info:
        load_demonstrations(table)
    assert "text_col=" not in str(info.value) and "rename the table's columns to text, group and label" in str(
        info.value)


def test_a_missing_group_says_where_the_file_goes(tmp_path):
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "o"), "--groups", "trans"])
    message = str(result.exception)
    assert "DIR/neutral_trans.txt and pass --demonstrations DIR" in message
    assert "toxiforge/demonstrations/benign" in message  # where the shipped sets are, to copy them
    own = tmp_path / "mine"
    own.mkdir()
    (own / "neutral_asian.txt").write_text("- placeholder one\n- placeholder two\n")
    result = runner.invoke(app, ["generate", "-o", str(tmp_path / "o"), "--groups", "trans", "-d", str(own),
                                 "--labels", "benign"])
    assert f"add {own / 'neutral_trans.txt'} (one statement per line)" in str(result.exception)


def test_offline_word_list_and_dialect_model_hints_name_the_folder():
    from toxiforge.bias.fetch import TOXTRIG, TWITTERAAE

    for resource, option in ((TOXTRIG, "--oi-list"), (TWITTERAAE, "--dialect-model")):
        hint = resource.local_copy_hint()
        assert "copy them here" not in hint
        assert f"copy them into {resource.default_dir()}" in hint and f"{option} DIR" in hint


def test_an_unreachable_server_does_not_point_to_resume_before_a_run_exists():
    from toxiforge._net import free_port
    from toxiforge.models.api_client import RetryPolicy
    from toxiforge.models.openai_lm import OpenAILM

    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(InputError) as info:
        OpenAILM.open(f"openai:{url}", retry=RetryPolicy(max_attempts=1, base_delay=0.01, timeout=2.0))
    message = str(info.value)
    assert "--resume" not in message and message.count("Fix:") == 1 and "openai:http://127.0.0.1:8000/v1" in message


def test_a_server_lost_mid_run_says_rows_kept_and_resume(tiny_lm, tmp_path):
    from toxiforge.decoding import TopKConfig, TopKDecoder
    from toxiforge.pipeline import GenerationPlan, JobConfig, run_generation

    class LostServer(TopKDecoder):
        calls = 0

        def decode(self, lm, prompts, seeds, labels, groups=None):
            LostServer.calls += 1
            if LostServer.calls == 2:
                raise ToxiforgeError("POST http://127.0.0.1:1/v1/completions failed. Fix: check that the server is "
                                     "running and reachable: curl http://127.0.0.1:1/v1/models")
            return super().decode(lm, prompts, seeds, labels, groups)

    out = tmp_path / "run"
    plan = GenerationPlan.grid(["asian"], ["benign"], 2, seed=0)
    with pytest.raises(ToxiforgeError) as info:
        run_generation(plan, tiny_lm, out, decoder=LostServer(TopKConfig(max_new_tokens=2)),
                       config=JobConfig(batch_size=1, shard_size=1), progress=False)
    assert f"1 of 2 rows are kept in {out}: once fixed, rerun the same command with --resume" in str(info.value)
    assert json.loads((out / "manifest.json").read_text())["status"] == "interrupted"
