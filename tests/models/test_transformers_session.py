"""TransformersSession.select: a beam step (rows stay with their prompt) moves only the generated part of the KV
cache; any other selection reorders it whole. Both give the log-probs of a session that never reordered."""

from __future__ import annotations

import torch

from floats import alice_depth, noise_tolerance
from toxiforge.models.transformers_lm import TransformersLM, TransformersSession

PROMPTS = ["- a plain line of placeholder text\n-", "- placeholder statement 3\n- another neutral line\n-"]


def _close(a, b, steps):
    """Log-probs after ``steps`` steps of the tiny 2-layer Llama, equal up to float noise."""
    tol = noise_tolerance(alice_depth(steps))
    return torch.allclose(a, b, rtol=tol, atol=tol)


def _steps(lm, selections, partial=True, monkeypatch=None):
    """Start both prompts, repeat each 3 times, then per step: select, advance one token per row."""
    if not partial:
        monkeypatch.setattr(TransformersSession, "_reorder_generated", lambda self, index: False)
    session = lm.start(PROMPTS)
    session.select(torch.tensor([0, 0, 0, 1, 1, 1]))
    out = []
    for step, rows in enumerate(selections):
        session.select(torch.tensor(rows))
        session.advance(torch.tensor([(7 * step + 3 * r) % 200 + 5 for r in range(len(rows))]))
        out.append(session.logprobs().clone())
    return out


def test_a_beam_step_reorders_only_the_generated_cache(tiny_tokenizer, monkeypatch):
    from conftest import build_tiny_llama

    lm = TransformersLM(build_tiny_llama(tiny_tokenizer, seed=3, initializer_range=0.3), tiny_tokenizer, name="t")
    # within each prompt (beam steps), then rows of prompt 1 dropped, then a beam step on what is left
    selections = [[0, 1, 2, 3, 4, 5], [2, 2, 0, 5, 3, 3], [1, 0, 0, 4, 5, 3], [3, 4, 5], [2, 0, 0]]
    moved = []
    original = TransformersSession._reorder_generated
    monkeypatch.setattr(TransformersSession, "_reorder_generated",
                        lambda self, index: moved.append(index.tolist()) or original(self, index))
    partial = _steps(lm, selections)
    assert moved == [selections[0], selections[1], selections[2], selections[4]]  # not the drop, nor the repeat
    full = _steps(lm, selections, partial=False, monkeypatch=monkeypatch)
    # the same values in caches of other strides (a part reordered in place, or the whole copied): equal up to the
    # float noise of an attention kernel that may differ with the strides (bit for bit on some CPUs)
    assert all(_close(a, b, len(selections)) for a, b in zip(partial, full))
    # and both are what a session of the same tokens without any reordering computes
    direct = lm.start([PROMPTS[0]] * 3)
    direct.advance(torch.tensor([3 * r + 5 for r in range(3)]))  # step 0's tokens of rows 0-2
    assert torch.allclose(direct.logprobs(), partial[0][:3], atol=1e-5)


def test_the_kv_cache_grows_in_place_with_the_same_log_probs(tiny_tokenizer, monkeypatch):
    """A step writes its position into the layer's buffer (transformers' DynamicLayer copied the whole cache with
    torch.cat each step), and the log-probs equal a plain DynamicCache's up to float noise (the same values, read as a
    view of a larger buffer instead of a compact tensor; bit for bit on some CPUs), across buffer growth, beam steps,
    dropped rows and repeated rows."""
    from transformers import DynamicCache

    import toxiforge.models._kv_cache as kv
    from conftest import build_tiny_llama

    lm = TransformersLM(build_tiny_llama(tiny_tokenizer, seed=3, initializer_range=0.3), tiny_tokenizer, name="t")
    monkeypatch.setattr(kv, "SPARE_TOKENS", 3)  # the buffers grow every 3 steps
    selections = [[0, 1, 2, 3, 4, 5], [2, 2, 0, 5, 3, 3], [1, 0, 0, 4, 5, 3], [0, 1, 2, 3, 4, 5],
                  [3, 4, 5, 0, 1, 2], [1, 1, 2, 3, 4, 5], [3, 4, 5], [2, 0, 0], [0, 1, 2], [0, 0, 0, 1, 1, 2]]
    session = lm.start(PROMPTS)
    layer = session._cache.layers[0]
    assert isinstance(layer, kv.GrowingLayer)
    session.select(torch.tensor([0, 0, 0, 1, 1, 1]))
    addresses = []
    for step in range(3):
        session.advance(torch.tensor([5 + step] * 6))
        addresses.append(layer.keys.data_ptr())
    assert addresses[1] == addresses[2]  # no copy while the buffer has room
    grown = _steps(lm, selections)
    monkeypatch.setattr(kv, "growing_cache", lambda config: DynamicCache(config=config))
    plain = _steps(lm, selections)
    assert not isinstance(lm.start(PROMPTS)._cache.layers[0], kv.GrowingLayer)
    assert all(_close(a, b, len(selections)) for a, b in zip(grown, plain))
