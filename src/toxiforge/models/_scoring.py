"""Batched log-likelihood of tokenized (context, continuation) requests on a transformers causal LM.

The transformers backend's :meth:`~toxiforge.models.transformers_lm.TransformersLM.loglikelihood` tokenizes and
calls :func:`score_requests`. The model input of a request is ``(context + continuation)[:-1]``, left-truncated
to the context window; its last ``len(continuation)`` positions predict the continuation's tokens.

Requests with the same input share one row (the same prompt with one-token continuations: one row for " No" and
" Yes"). Rows are sorted by length (longest first, so padding stays small), left-padded with explicit position
ids and an attention mask, and the model returns logits for the last ``K`` positions only, ``K`` = the longest
continuation in the batch (``logits_to_keep``): lm-evaluation-harness right-pads and computes logits and a
log-softmax over the whole vocabulary at every position, most of which it throws away.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from toxiforge.models.base import Loglikelihood


def score_requests(model, encoded: Sequence[tuple[list[int], list[int]]], *, pad_id: int, batch_size: int,
                   window: int | None) -> list[Loglikelihood]:
    """One :class:`Loglikelihood` per ``(context_ids, continuation_ids)``, in order. ``window``: the model's
    context length (inputs are left-truncated to it), None for no limit."""
    results: list[Loglikelihood | None] = [None] * len(encoded)
    rows: dict[tuple[int, ...], list[int]] = {}  # model input -> indices of the requests it scores
    for i, (context, continuation) in enumerate(encoded):
        if not continuation:
            results[i] = Loglikelihood(0.0, True, 0)
            continue
        whole = context + continuation
        if window is not None:
            whole = whole[-(window + 1):]  # the harness's left truncation; the continuation is kept whole
        rows.setdefault(tuple(whole[:-1]), []).append(i)
    order = sorted(rows, key=len, reverse=True)
    for b in range(0, len(order), batch_size):
        inputs = order[b:b + batch_size]
        keep = max(len(encoded[i][1]) for key in inputs for i in rows[key])
        logprobs, greedy = _forward(model, inputs, keep, pad_id)
        for r, key in enumerate(inputs):
            for i in rows[key]:
                continuation = encoded[i][1]
                n = len(continuation)
                target = torch.tensor(continuation, device=logprobs.device)
                picked = logprobs[r, keep - n:].gather(1, target.view(-1, 1)).view(-1)
                results[i] = Loglikelihood(float(picked.sum()), bool((greedy[r, keep - n:] == target).all()), n)
    scored = [r for r in results if r is not None]
    assert len(scored) == len(results), "every request is scored (empty continuations above, the rest in batches)"
    return scored


@torch.inference_mode()
def _forward(model, inputs: list[tuple[int, ...]], keep: int, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Log-probabilities ``[B, keep, V]`` (float32) and argmax ids ``[B, keep]`` at each row's last ``keep``
    positions (left padding; a row shorter than ``keep`` is never asked for its padded positions)."""
    width = max(len(x) for x in inputs)
    input_ids = torch.full((len(inputs), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(inputs), width), dtype=torch.long)
    for r, ids in enumerate(inputs):
        input_ids[r, width - len(ids):] = torch.tensor(ids)
        attention[r, width - len(ids):] = 1
    device = model.device
    attention = attention.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    logits = model(input_ids=input_ids.to(device), attention_mask=attention, position_ids=positions,
                   use_cache=False, logits_to_keep=keep).logits.float()
    return torch.log_softmax(logits, dim=-1), logits.argmax(-1)
