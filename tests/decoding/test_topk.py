"""Top-k decoding and the LM session on a tiny random Llama (no downloads)."""

from __future__ import annotations

import pytest
import torch

from toxiforge.decoding import TopKConfig, postprocess, sample_top_k
from toxiforge.errors import InputError

PROMPTS = [
    "- placeholder statement number one\n- another neutral sentence\n-",
    "- a plain line\n-",
    "- people in group gamma enjoy music, food and sports\n- numbers like 1 2 3\n- the quick brown fox\n-",
]


def test_session_logprobs_are_distributions(tiny_lm):
    session = tiny_lm.start(PROMPTS)
    lp = session.logprobs()
    assert lp.shape == (3, tiny_lm.vocab_size)
    assert torch.allclose(lp.exp().sum(-1), torch.ones(3), atol=1e-5)


def test_kv_cache_step_matches_full_forward(tiny_lm):
    token = tiny_lm.encode(" plain")[0]
    session = tiny_lm.start(PROMPTS)
    session.advance(torch.tensor([token] * 3))
    stepped = session.logprobs()
    fresh = tiny_lm.start([p + " plain" for p in PROMPTS]).logprobs()
    # " plain" is one token appended after "-": the re-tokenized prompt may merge differently, so compare rows
    # whose re-tokenization is exactly prompt ids + [token].
    for i, p in enumerate(PROMPTS):
        if tiny_lm.encode(p + " plain") == tiny_lm.encode(p) + [token]:
            assert torch.allclose(stepped[i], fresh[i], atol=1e-4)


def test_select_reorders_subsets_and_repeats_rows(tiny_lm):
    session = tiny_lm.start(PROMPTS)
    before = session.logprobs()
    session.select(torch.tensor([2, 0, 0]))
    assert session.batch_size == 3
    after = session.logprobs()
    assert torch.equal(after[0], before[2]) and torch.equal(after[1], before[0]) and torch.equal(after[2], before[0])
    token = torch.tensor([5, 5, 7])
    session.advance(token)
    reference = tiny_lm.start([PROMPTS[2], PROMPTS[0], PROMPTS[0]])
    reference.advance(token)
    assert torch.allclose(session.logprobs(), reference.logprobs(), atol=1e-5)


def test_logprobs_are_not_mutated_by_session(tiny_lm):
    session = tiny_lm.start(PROMPTS[:2])
    first = session.logprobs()
    copy = first.clone()
    session.select(torch.tensor([1, 0]))
    session.advance(torch.tensor([3, 4]))
    assert torch.equal(first, copy)


def test_batched_greedy_equals_unbatched_greedy(tiny_lm):
    greedy = TopKConfig(top_k=1, max_new_tokens=12, stop_at_newline=False)
    batched = sample_top_k(tiny_lm, PROMPTS, [0, 1, 2], greedy)
    for i, prompt in enumerate(PROMPTS):
        alone = sample_top_k(tiny_lm, [prompt], [i], greedy)[0]
        assert alone.token_ids == batched[i].token_ids
        assert len(alone.token_ids) == 12


def test_stops_at_first_newline(tiny_lm_newlines):
    samples = sample_top_k(tiny_lm_newlines, PROMPTS * 4, list(range(12)), TopKConfig(max_new_tokens=30))
    newline = tiny_lm_newlines.newline_mask()
    reasons = {s.finish_reason for s in samples}
    assert "newline" in reasons
    for s in samples:
        if s.finish_reason == "newline":
            assert newline[s.token_ids[-1]] and not any(newline[t] for t in s.token_ids[:-1])
            assert "\n" not in postprocess(s.raw_output).text
        else:
            assert s.finish_reason in ("eos", "length")
        assert len(s.token_ids) <= 30


def test_sampling_is_seeded_and_independent_of_batch(tiny_lm):
    config = TopKConfig(max_new_tokens=8, stop_at_newline=False)
    a = sample_top_k(tiny_lm, PROMPTS, [11, 12, 13], config)
    b = sample_top_k(tiny_lm, PROMPTS, [11, 12, 13], config)
    assert [s.token_ids for s in a] == [s.token_ids for s in b]
    alone = sample_top_k(tiny_lm, [PROMPTS[1]], [12], config)[0]
    assert alone.token_ids == a[1].token_ids
    other_seed = sample_top_k(tiny_lm, PROMPTS, [21, 22, 23], config)
    assert [s.token_ids for s in other_seed] != [s.token_ids for s in a]


def test_top_k_restricts_choices(tiny_lm):
    session = tiny_lm.start(PROMPTS[:1])
    allowed = set(torch.topk(session.logprobs()[0], 3).indices.tolist())
    samples = sample_top_k(tiny_lm, PROMPTS[:1] * 20, list(range(20)), TopKConfig(top_k=3, max_new_tokens=1))
    assert {s.token_ids[0] for s in samples if s.token_ids} <= allowed


@pytest.mark.parametrize("raw, text, unparsed", [
    (" placeholder statement\n- next", "placeholder statement", False),
    ("- placeholder statement\n", "placeholder statement", False),
    ("  spaced out  ", "spaced out", False),
    ("\n", "", True),
    ("", "", True),
    ("   -  \nmore", "", True),
])
def test_postprocess(raw, text, unparsed):
    statement = postprocess(raw)
    assert statement.text == text
    assert (statement.error is not None) == unparsed


@pytest.mark.parametrize("kwargs", [{"top_k": 0}, {"temperature": 0}, {"max_new_tokens": 0}])
def test_config_validation(kwargs):
    with pytest.raises(InputError):
        TopKConfig(**kwargs)


def test_seed_count_must_match(tiny_lm):
    with pytest.raises(InputError, match="seeds"):
        sample_top_k(tiny_lm, PROMPTS, [1])


# --- the decoder registry ------------------------------------------------------------------------------------

def test_decoder_registry_builds_configs_and_decoders():
    from toxiforge.decoding import DECODERS, AliceConfig, AliceDecoder, TopKDecoder, decoder_config, make_decoder

    assert DECODERS.names() == ["top-k", "alice"]
    config = decoder_config("Top_K", {"top_k": 5, "temperature": None})
    assert config == TopKConfig(top_k=5)
    decoder = make_decoder(config)
    assert isinstance(decoder, TopKDecoder) and decoder.num_return == 1 and decoder.config.top_k == 5
    alice = decoder_config("alice", {"num_beams": 4, "num_return": 2, "top_k": None})
    assert alice == AliceConfig(num_beams=4, num_return=2)
    assert isinstance(make_decoder(alice, classifier=None if alice.lambda_clf == 0 else _Clf()), AliceDecoder)


class _Clf:
    name, num_classes, toxic_index, benign_index = "fake", 2, 1, 0


@pytest.mark.parametrize("method, settings, message", [
    ("alcie", {}, "did you mean 'alice'"),
    ("top-k", {"num_beams": 3}, "--beams does not apply to the top-k method"),
    ("top-k", {"num_beams": 3, "num_return": 2}, "--beams, --num-return do not apply"),
    ("alice", {"top_k": 3}, "--top-k does not apply to the alice method.*--method top-k"),
    ("top-k", {"top_k": 0}, "top_k=0"),
])
def test_decoder_registry_errors(method, settings, message):
    from toxiforge.decoding import decoder_config

    with pytest.raises(InputError, match=message):
        decoder_config(method, settings)


def test_topk_decoder_returns_one_sample_lists(tiny_lm):
    from toxiforge.decoding import Sample, TopKDecoder

    out = TopKDecoder(TopKConfig(max_new_tokens=3)).decode(tiny_lm, PROMPTS, [1, 2, 3], [0, 0, 0], ["a", "b", "c"])
    assert len(out) == 3 and all(len(o) == 1 and isinstance(o[0], Sample) for o in out)
