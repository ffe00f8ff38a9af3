"""Dialect-aware relabeling (Zhou et al. §6) with stand-ins: a made-up dialect model, a dictionary translator and
keyword classifier for the decisions, the tiny random Llama for the LM translator and the command line."""

from __future__ import annotations

import numpy as np
import pyarrow.parquet as pq
import pytest

from toxiforge.bias.relabel import FEW_SHOT, lm_translator, relabel, relabeled_table, translation_prompt
from toxiforge.data.examples import Example
from toxiforge.errors import InputError

from .test_dialect import model_dir  # noqa: F401 (fixture)


def test_translation_prompt_by_hand():
    prompt = translation_prompt("we  finna\nleave", FEW_SHOT[:1])
    assert prompt == ("Rewrite each sentence in Standard American English, keeping its meaning.\n\n"
                      "Input: she be working late on tuesdays\nOutput: She usually works late on Tuesdays.\n\n"
                      "Input: we finna leave\nOutput:")


ROWS = [Example("placeholder a zorb", 1), Example("placeholder b zorb", 1), Example("placeholder c zorb", 0),
        Example("placeholder d", 1), Example("placeholder e zorb", 1)]
P_AAE = [0.9, 0.8, 0.9, 0.1, float("nan")]
# the stand-in translator marks sentence b's translation as "calm"; the stand-in classifier calls "calm" benign
TRANSLATE = {"placeholder a zorb": "placeholder a", "placeholder b zorb": "placeholder b calm",
             "placeholder c zorb": "placeholder c"}


def translate(texts):
    return [TRANSLATE[t] for t in texts]


def classify(texts):
    return np.array([0.1 if "calm" in t else 0.9 for t in texts])


def test_relabel_toxic_to_benign_only_touches_toxic_aae_rows():
    result = relabel(ROWS, p_aae=P_AAE, translate=translate, classify=classify, aae_threshold=0.5)
    # candidates: toxic rows with p(AAE) > 0.5 -> a and b; b's translation is judged benign
    assert result.translations == ["placeholder a", "placeholder b calm", None, None, None]
    assert result.labels.tolist() == [1, 0, 0, 1, 1] and result.relabeled.tolist() == [False, True, False, False,
                                                                                       False]
    assert result.scores[:2] == [0.9, 0.1]
    table = relabeled_table(ROWS, result, method="stand-in")
    assert table.column("old_label").to_pylist() == [1, 1, 0, 1, 1]
    assert table.column("p_aae").to_pylist()[-1] is None and table.column("relabel_method").to_pylist()[0] == "stand-in"


def test_relabel_any_direction_also_flips_benign_rows():
    result = relabel(ROWS, p_aae=P_AAE, translate=translate, classify=classify, direction="any")
    assert result.translations[2] == "placeholder c" and result.labels.tolist() == [1, 0, 1, 1, 1]
    high = relabel(ROWS, p_aae=P_AAE, translate=translate, classify=classify, aae_threshold=0.85)
    assert high.translations == ["placeholder a", None, None, None, None]
    with pytest.raises(InputError, match="unknown relabel direction"):
        relabel(ROWS, p_aae=P_AAE, translate=translate, classify=classify, direction="both")
    with pytest.raises(InputError, match="4 p\\(AAE\\) values for 5"):
        relabel(ROWS, p_aae=P_AAE[:4], translate=translate, classify=classify)


def test_lm_translator_is_greedy_and_batch_independent(tiny_lm_newlines):
    from toxiforge.decoding.topk import TopKConfig, sample_top_k

    texts = ["placeholder one", "placeholder two words", "three"]
    one = lm_translator(tiny_lm_newlines, max_new_tokens=8, batch_size=1)(texts)
    many = lm_translator(tiny_lm_newlines, max_new_tokens=8, batch_size=8)(texts)
    greedy = sample_top_k(tiny_lm_newlines, [translation_prompt(t) for t in texts], [5, 6, 7],
                          TopKConfig(top_k=1, max_new_tokens=8))
    assert one == many == [s.raw_output.strip() for s in greedy]


def test_cli_relabel(model_dir, tmp_path, tiny_tokenizer):  # noqa: F811
    import pyarrow as pa
    from typer.testing import CliRunner

    from conftest import build_tiny_llama
    from toxiforge.cli import app

    from .test_debias import base_dir as _unused  # noqa: F401
    from .test_debias import build_tokenizer, shortcut_data, tiny_config

    lm_dir = tmp_path / "lm"
    build_tiny_llama(tiny_tokenizer).save_pretrained(lm_dir)
    tiny_tokenizer.save_pretrained(lm_dir)
    rows = shortcut_data(20, seed=0)
    texts = [e.text + (" zorb zorb" if i % 2 else " the the") for i, e in enumerate(rows)]
    data = tmp_path / "data.parquet"
    pq.write_table(pa.table({"text": texts, "label": [e.label for e in rows]}), data)
    clf = _tiny_classifier(tmp_path, build_tokenizer, shortcut_data, tiny_config)
    out = tmp_path / "relabeled.parquet"
    result = CliRunner().invoke(app, ["bias", "relabel", str(data), "-o", str(out), "-c", str(clf), "--lm",
                                      str(lm_dir), "--dialect-model", str(model_dir), "--direction", "any",
                                      "--max-new-tokens", "4", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    table = pq.read_table(out).to_pylist()
    for row in table:
        candidate = row["p_aae"] is not None and row["p_aae"] > 0.5
        assert (row["translation"] is not None) == candidate, row
        if candidate:
            assert row["label"] == int(row["translation_p_toxic"] > 0.5)
        else:
            assert row["label"] == row["old_label"]
        assert row["relabeled"] == (row["label"] != row["old_label"])
    assert sum(r["translation"] is not None for r in table) == 10  # the " zorb zorb" rows are AAE here
    again = CliRunner().invoke(app, ["bias", "relabel", str(data), "-o", str(out), "-c", str(clf)])
    assert isinstance(again.exception, InputError) and "exists" in str(again.exception)


def _tiny_classifier(tmp_path, build_tokenizer, shortcut_data, tiny_config):
    """A tiny BERT classifier trained one epoch on placeholder rows (its verdicts are whatever it learned)."""
    import torch
    from transformers import BertConfig, BertModel

    from toxiforge.training.trainer import train_classifier

    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id)
    base = tmp_path / "bert"
    BertModel(config).save_pretrained(base)
    tokenizer.save_pretrained(base)
    train_classifier(shortcut_data(16, seed=1), tmp_path / "clf", tiny_config(base, epochs=1, max_length=48),
                     progress=False)
    return tmp_path / "clf"
