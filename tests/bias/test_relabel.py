"""Dialect-aware relabeling (Zhou et al. §6) with stand-ins: a made-up dialect model, a dictionary translator and
keyword classifier for the decisions, the tiny random Llama for the LM translator and the command line."""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from toxiforge.bias.relabel import (
    FEW_SHOT,
    lm_translator,
    relabel,
    relabel_manifest,
    relabeled_table,
    translation_error,
    translation_prompt,
)
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
    table = relabeled_table(ROWS, result, method="stand-in", model="dictionary", seed=3)
    assert table.column("old_label").to_pylist() == [1, 1, 0, 1, 1]
    assert table.column("p_aae").to_pylist()[-1] is None and table.column("relabel_method").to_pylist()[0] == "stand-in"
    assert set(table.column("relabel_model").to_pylist()) == {"dictionary"}
    assert set(table.column("relabel_seed").to_pylist()) == {3}
    counts = relabel_manifest(result, {"lm": "dictionary"})["counts"]
    assert counts == {"rows": 5, "translated": 2, "failed_translations": {}, "toxic_to_benign": 1,
                      "benign_to_toxic": 0}


def test_relabel_any_direction_also_flips_benign_rows():
    result = relabel(ROWS, p_aae=P_AAE, translate=translate, classify=classify, direction="any", aae_threshold=0.5)
    assert result.translations[2] == "placeholder c" and result.labels.tolist() == [1, 0, 1, 1, 1]
    high = relabel(ROWS, p_aae=P_AAE, translate=translate, classify=classify, aae_threshold=0.85)
    assert high.translations == ["placeholder a", None, None, None, None]
    with pytest.raises(InputError, match="unknown relabel direction"):
        relabel(ROWS, p_aae=P_AAE, translate=translate, classify=classify, direction="both", aae_threshold=0.5)
    with pytest.raises(InputError, match="4 p\\(AAE\\) values for 5"):
        relabel(ROWS, p_aae=P_AAE[:4], translate=translate, classify=classify, aae_threshold=0.5)


def test_translation_error_by_hand():
    source = "placeholder a zorb"
    assert translation_error(source, "Placeholder a.") is None
    assert translation_error(source, "  ") == "empty translation"
    assert translation_error(source, "...") == "empty translation"          # no word left
    assert translation_error(source, "they have never seen that movie") == "repeats a few-shot example"
    assert translation_error(source, "We finna go to the store!") == "repeats a few-shot example"  # an input too
    assert translation_error("we finna go to the store", "We are about to go to the store.") is None  # its pair
    assert translation_error("we finna go to the store", "They have never seen that movie.") \
        == "repeats a few-shot example"                                      # another pair's
    assert translation_error("they have never seen that movie", "They have never seen that movie.") is None
    assert translation_error(source, "placeholder a Input: placeholder b") == "contains the prompt's scaffolding"
    assert translation_error(source, "output: placeholder") == "contains the prompt's scaffolding"
    assert translation_error(source, "They have never seen that movie.", [("x y", "x z")]) is None


def test_failed_translations_keep_their_label_and_are_not_judged():
    rows = [Example(f"placeholder {c} zorb", 1) for c in "abcd"]
    outputs = {"placeholder a zorb": "", "placeholder b zorb": "They have never seen that movie.",
               "placeholder c zorb": "Output: placeholder c", "placeholder d zorb": "placeholder d calm"}
    judged: list[str] = []

    def spy(texts):
        judged.extend(texts)
        return classify(texts)

    result = relabel(rows, p_aae=[0.9] * 4, translate=lambda texts: [outputs[t] for t in texts], classify=spy,
                     aae_threshold=0.5)
    assert judged == ["placeholder d calm"]                  # failed translations never reach the classifier
    assert result.labels.tolist() == [1, 1, 1, 0]             # ... so they keep their label
    assert result.errors == ["empty translation", "repeats a few-shot example", "contains the prompt's scaffolding",
                             None]
    assert result.scores == [None, None, None, 0.1]
    table = relabeled_table(rows, result, method="stand-in", model="dictionary", seed=0)
    assert relabel_manifest(result, {})["counts"]["failed_translations"] == {
        "contains the prompt's scaffolding": 1, "empty translation": 1, "repeats a few-shot example": 1}
    assert table.column("translation_error").to_pylist() == result.errors
    assert table.column("translation").to_pylist()[1] == "They have never seen that movie."
    none = relabel(rows, p_aae=[0.9] * 4, translate=lambda texts: [""] * len(texts), classify=spy,
                   aae_threshold=0.5)
    assert none.labels.tolist() == [1, 1, 1, 1] and len(judged) == 1


def test_lm_translator_is_greedy_and_batch_independent(tiny_lm_newlines):
    from toxiforge.decoding.topk import TopKConfig, sample_top_k
    from toxiforge.decoding.types import postprocess

    texts = ["placeholder one", "placeholder two words", "three"]
    one = lm_translator(tiny_lm_newlines, max_new_tokens=8, batch_size=1)(texts)
    many = lm_translator(tiny_lm_newlines, max_new_tokens=8, batch_size=8)(texts)
    greedy = sample_top_k(tiny_lm_newlines, [translation_prompt(t) for t in texts], [5, 6, 7],
                          TopKConfig(top_k=1, max_new_tokens=8))
    assert one == many == [postprocess(s.raw_output).text for s in greedy]
    with pytest.raises(InputError, match="--batch-size must be at least 1"):
        lm_translator(tiny_lm_newlines, batch_size=0)


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
                                      "--max-new-tokens", "4", "--device", "cpu", "--dtype", "bfloat16"])
    assert result.exit_code == 0, result.output
    manifest = json.loads(out.with_name("relabeled.manifest.json").read_text())
    assert manifest["settings"]["lm"]["dtype"] == "bfloat16"  # --dtype reaches the translator
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
    bad = CliRunner().invoke(app, ["bias", "relabel", str(data), "-o", str(tmp_path / "x.parquet"), "-c", str(clf),
                                   "--dtype", "float8"])
    assert isinstance(bad.exception, InputError) and "--dtype" in str(bad.exception)


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


def test_cli_relabel_with_a_precomputed_aae_column(model_dir, tmp_path, tiny_tokenizer):  # noqa: F811
    import json

    import pyarrow as pa
    from typer.testing import CliRunner

    from conftest import build_tiny_llama
    from toxiforge.cli import app

    lm_dir = tmp_path / "lm"
    build_tiny_llama(tiny_tokenizer, newline_bias=3.0).save_pretrained(lm_dir)
    tiny_tokenizer.save_pretrained(lm_dir)
    texts = [f"placeholder statement {i}" for i in range(6)]
    data = tmp_path / "data.parquet"
    pq.write_table(pa.table({"text": texts, "label": [1, 0, 1, 1, 0, 1],
                             "p_dialect": [0.9, 0.8, None, 0.2, float("nan"), 0.51]}), data)
    out = tmp_path / "relabeled.parquet"

    def run(*extra):
        return CliRunner().invoke(app, ["bias", "relabel", str(data), "-o", str(out), "-c", "profanity-check",
                                        "--lm", str(lm_dir), "--max-new-tokens", "4", "--device", "cpu",
                                        "--overwrite", *extra])

    result = run("--aae-column", "p_dialect", "--aae-threshold", "0.5", "--direction", "any")
    assert result.exit_code == 0, result.output
    table = pq.read_table(out).to_pylist()
    assert [r["p_aae"] for r in table] == [0.9, 0.8, None, 0.2, None, 0.51]   # empty and NaN cells: no estimate
    assert [r["translation"] is not None for r in table] == [True, True, False, False, False, True]
    for row in table:
        if row["translation"] is not None and row["translation_error"] is None:
            assert row["label"] == int(row["translation_p_toxic"] > 0.5)
        else:
            assert row["label"] == row["old_label"] and row["translation_p_toxic"] is None
    assert table[0]["relabel_method"].endswith("p(AAE) from column p_dialect")
    assert {(r["relabel_model"], r["relabel_seed"]) for r in table} == {(str(lm_dir), 0)}
    manifest = json.loads((tmp_path / "relabeled.manifest.json").read_text())
    assert manifest["settings"]["decoding"]["top_k"] == 1 and manifest["settings"]["seed"] == 0
    assert manifest["settings"]["aae_source"] == "column p_dialect"
    assert manifest["counts"]["translated"] == 3 and manifest["counts"]["rows"] == 6
    assert manifest["counts"]["toxic_to_benign"] == sum(r["old_label"] == 1 and r["label"] == 0 for r in table)
    toxic_only = run("--aae-column", "p_dialect", "--aae-threshold", "0.5")  # the default toxic-to-benign
    assert toxic_only.exit_code == 0, toxic_only.output
    assert [r["translation"] is not None for r in pq.read_table(out).to_pylist()] == [True, False, False, False,
                                                                                      False, True]
    both = run("--aae-column", "p_dialect", "--aae-threshold", "0.5", "--dialect-model", str(model_dir))
    assert isinstance(both.exception, InputError) and "both given" in str(both.exception)
    no_rule = run("--aae-column", "p_dialect")
    assert isinstance(no_rule.exception, InputError) and "add --aae-threshold" in str(no_rule.exception)
    missing = run("--aae-column", "p_nope", "--aae-threshold", "0.5")
    assert isinstance(missing.exception, InputError) and "no p(AAE) column 'p_nope'" in str(missing.exception)
    pq.write_table(pa.table({"text": texts[:2], "label": [1, 0], "p_dialect": [0.9, 1.5]}), data)
    bad = run("--aae-column", "p_dialect", "--aae-threshold", "0.5")
    assert isinstance(bad.exception, InputError) and "outside [0, 1]" in str(bad.exception)


@pytest.mark.embedded
def test_embedded_smollm2_translates_one_line_per_sentence():
    """The real default LM on neutral sentences written for this test: one line each, greedy, batch-independent,
    and a few-shot input comes back as its pair's output (which is not a failed translation)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from toxiforge.models import load_language_model

    lm = load_language_model("smollm2-135m", dtype="float32", device="cpu")
    texts = ["she be reading the placeholder report every morning", "we finna go to the store",
             "they done painted the fence already"]
    out = lm_translator(lm, max_new_tokens=24, batch_size=3)(texts)
    assert out == lm_translator(lm, max_new_tokens=24, batch_size=1)(texts)
    for source, text in zip(texts, out):
        assert text and "\n" not in text and text == text.strip()
        assert translation_error(source, text) is None, (source, text)
    assert out[1] == "We are about to go to the store."
