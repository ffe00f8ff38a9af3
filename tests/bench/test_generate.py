"""Generation mode on the tiny Llama with placeholder prompts: greedy continuations equal transformers' greedy
``generate``, shares and intervals computed by hand, empty continuations kept and counted as not toxic, resume,
compare, and bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from toxiforge.bench.generate import GenerateConfig, run_generate, summarize
from toxiforge.bench.report import compare_results
from toxiforge.classifiers.wrap import CallableClassifier
from toxiforge.errors import InputError
from toxiforge.intervals import Share

runner = CliRunner()
ALL = ("all",)
SENTENCES = [f"placeholder statement {w} about the group" for w in ("one", "two", "three", "four", "five", "six")]


def write_prompt_files(folder, groups=("asian", "women"), n=4):
    from toxiforge.demonstrations import build_prompts, write_prompt_file

    folder.mkdir(parents=True, exist_ok=True)
    for g in groups:
        write_prompt_file(build_prompts(SENTENCES, n, k=3, seed=1), folder / f"hate_{g}_1k.txt")
    write_prompt_file(build_prompts(SENTENCES, 2, k=3, seed=2), folder / "neutral_asian_1k.txt")
    return folder


def even_length(texts):
    """P(toxic) = 0.9 for continuations with an even number of characters, else 0.1: a rule the test can redo."""
    return np.array([0.9 if len(t) % 2 == 0 else 0.1 for t in texts])


def length_classifier():
    return CallableClassifier(even_length, name="even-length")


@pytest.fixture(scope="module")
def mixed_lm(tiny_tokenizer):
    """A tiny Llama (seed 1) whose greedy continuations of the test prompts differ in length (some even, some
    odd), so the classifier rule below marks some toxic and some not."""
    from conftest import build_tiny_llama
    from toxiforge.models.transformers_lm import TransformersLM

    return TransformersLM(build_tiny_llama(tiny_tokenizer, seed=1), tiny_tokenizer, name="tiny-llama-1")


def test_greedy_run_matches_transformers_generate_and_hand_counts(mixed_lm, tmp_path):
    from toxiforge.decoding import postprocess
    from toxiforge.demonstrations import read_prompt_file

    prompts = write_prompt_files(tmp_path / "prompts")
    config = GenerateConfig(prompts=str(prompts), groups=ALL, per_group=3, max_new_tokens=12)
    result = run_generate(mixed_lm, config, tmp_path / "out", classifier=length_classifier(),
                          batch_size=2, progress=False)
    assert [r["group"] for r in result.rows] == ["asian"] * 3 + ["women"] * 3  # hate files only, the first 3
    lm = mixed_lm
    first = read_prompt_file(prompts / "hate_asian_1k.txt")[:3]
    for row, prompt in zip(result.rows, first):
        assert row["prompt"] == prompt.text
        ids = torch.tensor([lm.encode(prompt.text)])
        out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=12,
                                pad_token_id=lm.tokenizer.pad_token_id, eos_token_id=None)
        expected = postprocess(lm.decode(out[0, ids.shape[1]:].tolist())).text
        assert row["continuation"] == expected
    for row in result.rows:
        assert row["empty"] == (row["continuation"] == "")
        assert row["toxic"] == (not row["empty"] and len(row["continuation"]) % 2 == 0)
    toxic = [r["toxic"] for r in result.rows]
    assert 0 < sum(toxic) < len(toxic) and all(r["continuation"] for r in result.rows)
    assert result.overall["toxic"]["value"] == pytest.approx(np.mean(toxic))
    assert result.groups["asian"]["toxic"]["value"] == pytest.approx(np.mean(toxic[:3]))
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert saved["groups"]["women"]["n"] == 3 and saved["config"]["classifier"] == "even-length"
    for name in ("results.md", "toxic_by_group.png", "continuations.parquet", "manifest.json"):
        assert (tmp_path / "out" / name).exists()
    again = run_generate(lm, config, tmp_path / "out", classifier=length_classifier(), resume=True, progress=False)
    assert again.rows == result.rows
    table = compare_results([tmp_path / "out", tmp_path / "out"])
    assert "| asian |" in table and "| **overall** |" in table


def test_empty_continuations_are_kept_marked_empty_and_not_toxic(tiny_lm_newlines, tmp_path):
    # this model's newline logit is boosted, so greedy decoding ends every line at once
    always_toxic = CallableClassifier(lambda texts: np.full(len(texts), 0.99), name="always")
    config = GenerateConfig(prompts=str(write_prompt_files(tmp_path / "p")), groups=ALL, per_group=2,
                            max_new_tokens=4)
    result = run_generate(tiny_lm_newlines, config, tmp_path / "out", classifier=always_toxic, progress=False)
    assert len(result.rows) == 4 and all(r["empty"] and r["p_toxic"] is None and not r["toxic"] for r in result.rows)
    assert result.overall["empty"] == 4 and result.overall["toxic"]["value"] == 0.0
    import pyarrow.parquet as pq

    saved = pq.read_table(tmp_path / "out" / "continuations.parquet").to_pylist()  # kept in the output, marked empty
    assert [(r["continuation"], r["empty"], r["toxic"]) for r in saved] == [("", True, False)] * 4
    assert "| asian | 2 | 2 | 0.0" in (tmp_path / "out" / "results.md").read_text()


def test_summary_counts_empty_continuations_as_not_toxic():
    rows = [{"group": "asian", "p_toxic": 0.7, "empty": False}, {"group": "asian", "p_toxic": None, "empty": True},
            {"group": "women", "p_toxic": 0.2, "empty": False}, {"group": "women", "p_toxic": 0.5, "empty": False}]
    groups, overall = summarize(rows)
    assert groups["asian"]["n"] == 2 and groups["asian"]["empty"] == 1 and groups["asian"]["toxic"]["value"] == 0.5
    assert groups["asian"]["mean_p_toxic"] == pytest.approx(0.35)
    assert groups["women"]["toxic"]["value"] == 0.0  # P = 0.5 is benign (toxic iff P > 0.5)
    assert overall["toxic"]["value"] == 0.25 and overall["n"] == 4 and overall["macro_toxic"] == 0.25


def test_bad_input_is_a_clear_error(tmp_path):
    prompts = write_prompt_files(tmp_path / "prompts")
    with pytest.raises(InputError, match="no hate prompt file for group 'black'"):
        GenerateConfig(prompts=str(prompts), groups=("black",)).plan()
    with pytest.raises(InputError, match="unknown group|not a known group|zorblax"):
        GenerateConfig(prompts=str(prompts), groups=("zorblax",)).plan()
    with pytest.raises(InputError, match="exactly one"):
        GenerateConfig()
    plan = GenerateConfig(prompts=str(prompts), groups=ALL, per_group=10).plan()
    assert [c.n for c in plan.cells] == [4, 4]  # a file's lines are never cycled


def test_generate_command_with_profanity_check_and_a_bad_classifier(tiny_lm_newlines, tmp_path):
    from toxiforge.cli import app

    model_dir = tmp_path / "model"
    tiny_lm_newlines.model.save_pretrained(model_dir)
    tiny_lm_newlines.tokenizer.save_pretrained(model_dir)
    demos = tmp_path / "demos"
    demos.mkdir()
    (demos / "hate_asian.txt").write_text("\n".join(f"- {s}" for s in SENTENCES) + "\n")
    (demos / "neutral_asian.txt").write_text("\n".join(f"- {s}" for s in SENTENCES) + "\n")
    args = ["bench", "generate", "--model", str(model_dir), "--demonstrations", str(demos), "-n", "4", "-k", "3",
            "--device", "cpu", "--max-new-tokens", "8", "--no-progress", "--groups", "all"]
    ok = runner.invoke(app, args + ["-c", "profanity-check", "-o", str(tmp_path / "out")])
    assert ok.exit_code == 0, ok.output
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert list(saved["groups"]) == ["asian"] and saved["groups"]["asian"]["n"] == 4
    assert "| asian | 4 |" in ok.output
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "out" / "continuations.parquet").to_pylist()
    assert len(rows) == 4 and saved["groups"]["asian"]["empty"] == sum(r["continuation"] == "" for r in rows)
    bad = runner.invoke(app, args + ["-c", "no-such-classifier", "-o", str(tmp_path / "bad")])
    assert isinstance(bad.exception, InputError) and "unknown classifier" in str(bad.exception)
    assert not (tmp_path / "bad").exists()  # nothing written before the classifier loaded


def test_generate_command_scores_with_a_judge_and_its_template(tiny_lm_newlines, tiny_judge_dir, tmp_path):
    """Issue 28: -c judge:MODEL takes --judge-template wherever -c is accepted, bench generate included."""
    import pyarrow.parquet as pq

    from toxiforge.classifiers import load_classifier
    from toxiforge.cli import app

    model_dir = tmp_path / "model"
    tiny_lm_newlines.model.save_pretrained(model_dir)
    tiny_lm_newlines.tokenizer.save_pretrained(model_dir)
    args = ["bench", "generate", "--model", str(model_dir), "--prompts", str(write_prompt_files(tmp_path / "p")),
            "--groups", "asian", "-n", "3", "--device", "cpu", "--max-new-tokens", "6", "--no-progress"]
    judge = f"judge:{tiny_judge_dir}"
    ok = runner.invoke(app, args + ["-c", judge, "--judge-template", "llama-guard", "-o", str(tmp_path / "out")])
    assert ok.exit_code == 0, ok.output
    rows = [r for r in pq.read_table(tmp_path / "out" / "continuations.parquet").to_pylist() if not r["empty"]]
    assert rows, "the tiny LM wrote no continuation to score"
    expected = load_classifier(judge, template="llama-guard", device="cpu").predict_proba(
        [r["continuation"] for r in rows])
    assert np.allclose([r["p_toxic"] for r in rows], expected, atol=1e-5)
    humanval = load_classifier(judge, device="cpu").predict_proba([r["continuation"] for r in rows])
    assert not np.allclose(expected, humanval, atol=1e-3)  # the template reached the judge
    bad = runner.invoke(app, args + ["-c", "profanity-check", "--judge-template", "humanval",
                                     "-o", str(tmp_path / "bad")])
    assert isinstance(bad.exception, InputError) and "--judge-template" in str(bad.exception)
    assert not (tmp_path / "bad").exists()


def test_chat_wraps_prompts_in_the_models_template(mixed_lm, tmp_path):
    from toxiforge.bench.generate import chat_formatter

    plain = tmp_path / "plain"
    mixed_lm.tokenizer.save_pretrained(plain)
    mixed_lm.model.save_pretrained(plain)
    with pytest.raises(InputError, match="no chat template"):
        chat_formatter(str(plain))
    chat_dir = tmp_path / "chat"
    mixed_lm.model.save_pretrained(chat_dir)
    mixed_lm.tokenizer.save_pretrained(chat_dir)
    (chat_dir / "chat_template.jinja").write_text(
        "{% for m in messages %}[user] {{ m['content'] }}\n{% endfor %}{% if add_generation_prompt %}[bot]{% endif %}")
    wrap = chat_formatter(str(chat_dir))
    assert wrap("hello") == "[user] hello\n[bot]"
    config = GenerateConfig(prompts=str(write_prompt_files(tmp_path / "p", groups=("asian",))), groups=ALL,
                            per_group=2, max_new_tokens=6, chat=True)
    result = run_generate(mixed_lm, config, tmp_path / "out", classifier=length_classifier(), progress=False,
                          chat_format=wrap)
    assert config.decoder().config.stop_at_newline is False  # open-instruct: the chat model decides when to stop
    for row in result.rows:
        assert not row["prompt"].startswith("[user]")  # rows keep the unwrapped prompt
        # open-instruct's user message, no newline stop: the whole answer is the continuation, and it is scored
        ids = torch.tensor([mixed_lm.encode(wrap("Complete the following: " + row["prompt"]))])
        out = mixed_lm.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=6,
                                      pad_token_id=mixed_lm.tokenizer.pad_token_id)
        answer = mixed_lm.decode(out[0, ids.shape[1]:].tolist())
        assert row["continuation"] == answer.strip() and row["raw_output"] == answer
        assert row["p_toxic"] == even_length([answer.strip()])[0]


def test_seeded_sampling_is_reproducible_and_every_row_records_method_model_and_seed(mixed_lm, tmp_path):
    prompts = write_prompt_files(tmp_path / "p", groups=("asian",))
    sampled = GenerateConfig(prompts=str(prompts), groups=ALL, per_group=4, max_new_tokens=8, sample=True, seed=3)

    def run(config, name):
        return run_generate(mixed_lm, config, tmp_path / name, classifier=length_classifier(), batch_size=2,
                            progress=False)

    first, again = run(sampled, "a"), run(sampled, "b")
    greedy = run(GenerateConfig(prompts=str(prompts), groups=ALL, per_group=4, max_new_tokens=8), "greedy")
    texts = [r["continuation"] for r in first.rows]
    assert texts == [r["continuation"] for r in again.rows]  # same seed, same continuations
    assert texts != [r["continuation"] for r in greedy.rows]  # and they are sampled, not the argmax path
    for result, method in ((first, "top-k"), (greedy, "greedy")):
        assert all(r["machine_generated"] and r["method"] == method and r["model"] == "tiny-llama-1"
                   and r["seed"] is not None for r in result.rows)
    assert len({r["seed"] for r in first.rows}) == 4  # a seed per row, so any row can be redone alone
    manifest = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert manifest["config"]["method"] == "top-k" and manifest["config"]["decoding"]["top_k"] == 40
    table = compare_results([tmp_path / "a", tmp_path / "greedy"])  # one column per run, in the order given
    cells = [Share(**r.groups["asian"]["toxic"]).cell() for r in (first, greedy)]
    assert f"| asian | {cells[0]} | {cells[1]} |" in table and "tiny-llama-1 (a) | tiny-llama-1 (greedy)" in table


def test_a_crashed_run_resumes_to_the_uninterrupted_rows(mixed_lm, tmp_path):
    config = GenerateConfig(prompts=str(write_prompt_files(tmp_path / "p")), groups=ALL, per_group=4,
                            max_new_tokens=8)
    reference = run_generate(mixed_lm, config, tmp_path / "ref", classifier=length_classifier(), batch_size=2,
                             shard_size=2, progress=False)
    calls = []

    def crash_on_third_shard(texts):
        calls.append(len(texts))
        if len(calls) == 3:
            raise RuntimeError("simulated crash")
        return even_length(texts)

    crashing = CallableClassifier(crash_on_third_shard, name="even-length")
    with pytest.raises(RuntimeError, match="simulated crash"):
        run_generate(mixed_lm, config, tmp_path / "out", classifier=crashing, batch_size=2, shard_size=2,
                     progress=False)
    assert not (tmp_path / "out" / "results.json").exists()
    resumed = run_generate(mixed_lm, config, tmp_path / "out", classifier=length_classifier(), batch_size=2,
                           shard_size=2, resume=True, progress=False)
    assert resumed.rows == reference.rows and resumed.overall == reference.overall


def test_a_classifier_that_fails_to_load_stops_the_run_before_anything_is_written(tiny_lm_newlines, tmp_path):
    from transformers import RobertaConfig

    from toxiforge.cli import app
    from toxiforge.errors import ToxiforgeError

    prompts = write_prompt_files(tmp_path / "p")
    no_config = tmp_path / "no-config"
    no_config.mkdir()
    no_weights = tmp_path / "no-weights"  # a config.json and nothing else: no tokenizer, no weights
    RobertaConfig(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8,
                  num_labels=2).save_pretrained(no_weights)
    for bad, message in ((no_config, "no config.json"), (no_weights, "could not load classifier")):
        config = GenerateConfig(prompts=str(prompts), groups=ALL, per_group=2, max_new_tokens=4,
                                classifier=str(bad))
        with pytest.raises(ToxiforgeError, match=message):
            run_generate(tiny_lm_newlines, config, tmp_path / "out", progress=False)
        assert not (tmp_path / "out").exists()
    result = runner.invoke(app, ["bench", "generate", "--prompts", str(prompts), "-c", str(no_weights),
                                 "-o", str(tmp_path / "cli"), "--model", "no-such-model-is-loaded", "--groups", "all"])
    assert isinstance(result.exception, ToxiforgeError) and "could not load classifier" in str(result.exception)
    assert not (tmp_path / "cli").exists()  # the classifier fails before the model is loaded


def test_a_group_without_prompts_is_an_error_naming_the_groups_that_have_them(tmp_path):
    from toxiforge.cli import app

    demos = tmp_path / "demos"
    demos.mkdir()
    (demos / "hate_asian.txt").write_text("\n".join(f"- {s}" for s in SENTENCES) + "\n")
    (demos / "neutral_women.txt").write_text("\n".join(f"- {s}" for s in SENTENCES) + "\n")
    with pytest.raises(InputError, match="no hate demonstrations for group 'women'") as err:
        GenerateConfig(demonstrations=str(demos), groups=("women",)).plan()
    assert "groups with them: asian" in err.value.hint
    for source in (["--demonstrations", str(demos)], ["--prompts", str(write_prompt_files(tmp_path / "p"))]):
        result = runner.invoke(app, ["bench", "generate", *source, "--groups", "zorblax", "-o", str(tmp_path / "o")])
        assert isinstance(result.exception, InputError) and "zorblax" in str(result.exception)
    assert not (tmp_path / "o").exists()
