"""The harden tests' shared fixtures, made once per session (each module that imported them from test_harden.py
made its own: the starting classifier was trained 7 times, the finished one-round run made 3 times, good_start 2),
and torch on one thread while they run."""

from __future__ import annotations

import shutil
from contextlib import contextmanager

import pytest
import torch

from toxiforge.training.trainer import LOG_FILE, train_classifier

from .test_harden import NOI_TEXT, eval_rows, harden, placeholder_rows, train_config, write_table


@contextmanager
def one_thread():
    """torch on one thread, as tests/bias/test_debias.py's tiny models: the tiny BERTs' training steps are mostly
    threading overhead (fused AdamW took 0.1 s a step on torch's default 2 threads with the 2 cores shared, load 8)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@pytest.fixture(autouse=True, scope="package")
def one_torch_thread():
    with one_thread():
        yield


@pytest.fixture(scope="session")
def setup(tmp_path_factory):
    """Base encoder dir, a starting classifier dir, demonstrations, training and eval tables."""
    from transformers import BertModel

    from conftest import build_word_tokenizer, tiny_bert_config

    root = tmp_path_factory.mktemp("harden")
    tokenizer = build_word_tokenizer([t for t, _, _ in placeholder_rows(20)] + [NOI_TEXT])
    torch.manual_seed(0)
    base = root / "base"
    BertModel(tiny_bert_config(tokenizer)).save_pretrained(base)
    tokenizer.save_pretrained(base)
    demos = root / "demonstrations"
    for category, group in [("race", "asian"), ("nationality", "mexican")]:
        (demos / category).mkdir(parents=True)
        for prefix in ("hate", "neutral"):
            lines = [f"placeholder {prefix} sentence {i} about {group}" for i in range(8)]
            (demos / category / f"{prefix}_{group}_sentences.txt").write_text("\n".join(lines) + "\n")
    data = write_table(root / "train.csv", placeholder_rows(16))
    held = write_table(root / "eval.csv", eval_rows(12) + [(NOI_TEXT, 0, "asian")])
    from toxiforge.data import load_specs

    start = root / "start"
    with one_thread():
        train_classifier([e for d in load_specs([str(data)]) for e in d.examples], start, train_config(base),
                         progress=False)
    return {"root": root, "base": base, "demos": demos, "data": data, "eval": held, "start": start}


@pytest.fixture(scope="session")
def varied_lm(tiny_tokenizer):
    """A tiny Llama whose short lines follow their prompt (varied_lm writes one text after every prompt, so
    every statement but the first of a run would be left out as a repeat)."""
    from conftest import build_tiny_llama
    from toxiforge.models.transformers_lm import TransformersLM

    return TransformersLM(build_tiny_llama(tiny_tokenizer, newline_bias=2.0, initializer_range=0.3), tiny_tokenizer,
                          name="tiny-llama-varied")


@pytest.fixture(scope="session")
def finished(setup, varied_lm, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "h"
    with one_thread():
        return harden(setup, out, varied_lm), out


@pytest.fixture(scope="session")
def good_start(setup):
    """C_0 trained with a recipe other than harden's defaults (80 steps at lr 3e-3, batch 8), which separates the
    placeholder classes; and a copy without its training_log.json (recipe unknown)."""
    from toxiforge.data import load_specs

    folder = setup["root"] / "good"
    with one_thread():
        train_classifier([e for d in load_specs([str(setup["data"])]) for e in d.examples], folder,
                         train_config(setup["base"], max_steps=80, learning_rate=3e-3), progress=False)
    copy = setup["root"] / "good-nolog"
    shutil.copytree(folder, copy)
    (copy / LOG_FILE).unlink()
    return folder, copy
