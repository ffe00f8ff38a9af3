"""Perplexity on the tiny random Llama: equal to exp(mean token NLL) computed directly, on both code paths."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from toxiforge.analysis.perplexity import dataset_perplexity, perplexities, perplexity_table, write_scores
from toxiforge.cli import app
from toxiforge.errors import InputError

runner = CliRunner()

TEXTS = ["a plain line of text for testing the tokenizer",
         "people in group gamma enjoy music",
         "numbers like 1 2 3",
         "the quick brown fox jumps over the lazy dog and then some more words follow here"]


def direct_perplexity(model, tokenizer, text: str) -> float:
    """exp of the mean NLL of the text's tokens, each given the EOS context token and the tokens before it."""
    ids = [tokenizer.eos_token_id] + tokenizer(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    logp = torch.log_softmax(logits[:-1], dim=-1)
    nll = -logp[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].mean()
    return math.exp(nll.item())


def test_batched_perplexity_equals_exp_mean_token_nll(tiny_lm):
    expected = [direct_perplexity(tiny_lm.model, tiny_lm.tokenizer, t) for t in TEXTS]
    got = perplexities(TEXTS, tiny_lm, batch_size=3)
    assert np.allclose(got, expected, rtol=1e-4)
    assert all(1 < v < 10 * len(tiny_lm.tokenizer) for v in got)


def test_protocol_path_and_model_tokenizer_pair_agree(tiny_lm):
    fast = perplexities(TEXTS, tiny_lm, batch_size=4)
    protocol = perplexities(TEXTS, tiny_lm, batch_size=2, use_protocol=True)
    pair = perplexities(TEXTS, (tiny_lm.model, tiny_lm.tokenizer), batch_size=1)
    assert np.allclose(fast, protocol, rtol=1e-4) and np.allclose(fast, pair, rtol=1e-5)


def test_empty_text_gives_nan_and_progress_counts_every_text(tiny_lm):
    seen = []
    got = perplexities(["", TEXTS[0]], tiny_lm, on_progress=seen.append)
    assert math.isnan(got[0]) and math.isfinite(got[1]) and sum(seen) == 2
    with pytest.raises(InputError, match="batch size"):
        perplexities(TEXTS, tiny_lm, batch_size=0)


def test_table_drops_statements_over_the_threshold():
    values = np.array([10.0, 20.0, 600.0, 30.0, np.nan, 40.0])
    groups = ["asian", "asian", "asian", "women", "women", "women"]
    methods = ["top-k", "top-k", "top-k", "top-k", "ALICE", "ALICE"]
    cells = {(c["group"], c["method"]): c for c in perplexity_table(values, groups, methods, max_ppl=500)}
    assert cells[("asian", "top-k")] == {"group": "asian", "method": "top-k", "rows": 3, "kept": 2, "dropped": 1,
                                         "mean": 15.0, "median": 15.0}
    assert cells[("women", "ALICE")]["kept"] == 1 and cells[("women", "ALICE")]["mean"] == 40.0
    assert cells[("__total__", "top-k")]["mean"] == 20.0 and cells[("__total__", "top-k")]["dropped"] == 1
    assert perplexity_table(values, groups, methods, max_ppl=700)[0]["kept"] == 3
    with pytest.raises(InputError, match="must be > 0"):
        perplexity_table(values, groups, methods, max_ppl=0)


def test_dataset_perplexity_table_and_scores_file(tiny_lm, tmp_path):
    rows = [{"generation": t, "group": g, "prompt_label": 0, "generation_method": m}
            for t, g, m in zip(TEXTS, ["asian", "asian", "women", "women"], ["top-k", "ALICE", "top-k", "top-k"])]
    result = dataset_perplexity(rows, tiny_lm, max_ppl=1e9)
    assert result.dropped == 0 and result.kept.all() and result.model == "tiny-llama"
    expected = [direct_perplexity(tiny_lm.model, tiny_lm.tokenizer, t) for t in TEXTS]
    assert np.allclose(result.values, expected, rtol=1e-4)
    md = result.table().markdown()
    assert "| Asian people |" in md and "| Total |" in md and "0 (0.0%) dropped" in md
    low = dataset_perplexity(rows, tiny_lm, max_ppl=float(min(expected)) + 1e-6)
    assert low.dropped == 3 and "3 (75.0%) dropped with perplexity > " in low.line()
    from toxiforge.analysis.dataset import load_data

    path = write_scores(result, load_data(rows, need=()), tmp_path / "scores.jsonl")
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["perplexity"] for x in lines] == pytest.approx(list(result.values))


def test_perplexity_command_on_a_model_directory(tiny_lm, tmp_path):
    from toxiforge.records import Row, write_rows

    model_dir = tmp_path / "model"
    tiny_lm.model.save_pretrained(model_dir)
    tiny_lm.tokenizer.save_pretrained(model_dir)
    data = tmp_path / "d.parquet"
    write_rows([Row(prompt="p", generation=t, generation_method="top-k", group="women", prompt_label=1)
                for t in TEXTS], data)
    result = runner.invoke(app, ["perplexity", str(data), "--lm", str(model_dir), "--max-ppl", "1e9",
                                 "--device", "cpu", "--json", str(tmp_path / "p.json"), "-o",
                                 str(tmp_path / "scored.parquet"), "--no-progress"])
    assert result.exit_code == 0, result.output
    assert "| Women |" in result.output and "4 of 4 statements kept" in result.output
    assert json.loads((tmp_path / "p.json").read_text())["rows"] == 4 and (tmp_path / "scored.parquet").exists()
    bad = runner.invoke(app, ["perplexity", str(data), "--lm", str(model_dir), "--max-ppl", "-1"])
    assert isinstance(bad.exception, InputError)
    missing = runner.invoke(app, ["perplexity", str(tmp_path / "none.parquet"), "--lm", str(model_dir)])
    assert isinstance(missing.exception, InputError) and "no such file" in str(missing.exception)
