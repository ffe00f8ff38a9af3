"""The embedded real models, offline (marked ``embedded``: slower than the tiny-model tier)."""

from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.embedded


@pytest.fixture(scope="module")
def smollm2():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from toxiforge.models import load_language_model

    return load_language_model("smollm2-135m", dtype="float32", device="cpu")


def test_smollm2_loads_offline_and_generates_one_line(smollm2):
    from toxiforge.decoding import TopKConfig, postprocess, sample_top_k
    from toxiforge.demonstrations import build_prompts, get_set, load_shipped_benign

    assert smollm2.describe()["architecture"] == "LlamaForCausalLM"
    assert smollm2.vocab_size == 49152 and smollm2.encode("\n") == [198]
    prompt = build_prompts(get_set(load_shipped_benign(), "asian", 0), 1, k=5, seed=0)[0]
    samples = sample_top_k(smollm2, [prompt.text] * 4, [1, 2, 3, 4], TopKConfig())
    statements = [postprocess(s.raw_output) for s in samples]
    assert any(st.error is None for st in statements)
    for sample, statement in zip(samples, statements):
        assert "\n" not in statement.text
        if statement.error is None:
            assert statement.text.strip() == statement.text and len(statement.text) > 0
        assert len(sample.token_ids) <= 30


def test_converted_weights_are_cached(smollm2):
    import time

    from toxiforge.models import EMBEDDED
    from toxiforge.models.transformers_lm import TransformersLM, _gguf_cache_path

    gguf = EMBEDDED.get("smollm2-135m").locate()
    assert (_gguf_cache_path(gguf) / "model.safetensors").exists()
    started = time.perf_counter()
    again = TransformersLM.load(gguf, dtype="float32", device="cpu")
    assert time.perf_counter() - started < 5  # ~0.3 s measured; the GGUF path would take ~15 s
    assert again.vocab_size == smollm2.vocab_size


def test_alice_on_smollm2_with_profanity_check(smollm2):
    from toxiforge.classifiers import load_classifier
    from toxiforge.decoding import AliceConfig, AliceDecoder
    from toxiforge.decoding.scorers import exempt_from_prompt_ban, group_term_tokens
    from toxiforge.demonstrations import build_prompts, get_set, load_shipped_benign
    from toxiforge.groups import resolve_group

    prompt = build_prompts(get_set(load_shipped_benign(), "women", 0), 1, k=5, seed=0)[0].text
    decoder = AliceDecoder(load_classifier("profanity-check"), AliceConfig(num_beams=3, max_new_tokens=12))
    [sample] = decoder.decode(smollm2, [prompt], [0], [0], ["women"])[0]
    assert sample.token_ids and len(sample.token_ids) <= 12
    exempt = exempt_from_prompt_ban(smollm2.token_texts())
    names = group_term_tokens(smollm2.encode(prompt), resolve_group("women"), smollm2.batch_decode)
    assert names  # the demonstrations name the group; those tokens may be copied, no other prompt token may
    assert not ({t for t in smollm2.encode(prompt) if not exempt[t]} - names) & set(sample.token_ids)


def test_a_typo_of_an_embedded_lm_name_says_did_you_mean(monkeypatch):
    import huggingface_hub.constants

    from toxiforge.errors import InputError
    from toxiforge.models import load_language_model

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(InputError, match="did you mean 'smollm2-135m'"):
        load_language_model("smollm2-153m")
