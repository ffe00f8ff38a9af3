"""Exact pruning of ALICE's classifier calls: score only the candidates that can still change the search.

A candidate's total is ``running + λL·log p_LM + λC·log p_CLF`` and ``log p_CLF ≤ 0``, so its *bound*
``running + λL·log p_LM`` (the same float operations, without the classifier term) is never below its total
(float rounding is monotone). Of a step's candidates the beam loop uses only

* the ``num_beams`` best extensions of each prompt (:func:`~toxiforge.decoding.beam.record_finished` adds the
  ones that finish, finished and running alike), and
* the ``num_beams`` best extensions that do not finish (:func:`~toxiforge.decoding.beam.next_beams`; at most
  ``n_stop`` of a beam's candidates finish, so :func:`~toxiforge.decoding.beam.beams_to_keep` keeps them all).

So :func:`pruned_classifier_scores` scores candidates in descending bound order, a round at a time, and stops when
every candidate left has a bound strictly below its threshold: the ``num_beams``-th best total known so far among
all extensions (for a candidate that finishes: a stop token, or any token on the last step), among those that do
not finish (for the others). The thresholds only rise as more totals become known, so a candidate left out has
a total below ``num_beams`` known totals of its kind and can enter neither set. Left-out candidates get ``-inf``.
Totals that need no classifier are known from the start: ``-inf`` (banned) candidates and the masked copies of a
prompt's beam 0 at step 1. With the ties broken by position (:func:`~toxiforge.decoding.beam.top_continuations`
sorts stably), the chosen beams and finished hypotheses, with their scores, are exactly those of scoring every
candidate: ``tests/decoding/test_alice_pruning.py`` checks it over seeds, λ weights, stop rules and options.

*Bit for bit with real classifiers.* A padded transformer classifier's log-probs for a text move in the last bits
with the batch it is scored in (padding length and batch size change the kernels: ~1e-7 for a tiny BERT), so
equal scores need equal batches. The batches are fixed before any is scored: each prompt's live candidates, best
bound first (ties by position), cut into a first batch of ``round_size`` (``2 × num_beams``) and then batches of a
quarter of that; a round scores the next batch of each prompt that still needs a candidate, one
``class_log_probs`` call per batch. The unpruned reference
(``exhaustive``, ``alice_search(prune=False)``) scores every batch, so each text pruning scores is in the same
call, with the same texts, in both searches. (A round scores a whole batch where the needed candidates are fewer,
prompts no longer share a call, and a text two prompts reach is scored for each: that is the price.)

Identical texts (two beams of a prompt reaching the same string, or tokens that decode alike) are scored once per
step and prompt. A classifier that returns a positive log-probability breaks the bound; the step then scores every
candidate.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from toxiforge.decoding.beam import BeamState
from toxiforge.decoding.scorers import MASKED, ClassifierTerm, complete_text, weighted


@dataclass
class PruningStats:
    """Counts over a search: candidates that could have been scored, texts the classifier scored, rounds; per step,
    the texts scored (``calls_by_step``) and the eligible candidates (``eligible_by_step``)."""

    eligible: int = 0
    scored: int = 0
    rounds: int = 0
    calls_by_step: list[int] = field(default_factory=list)
    eligible_by_step: list[int] = field(default_factory=list)


def kth_best(values: torch.Tensor, k: int) -> torch.Tensor:
    """Per row of ``values [slots, m]``, its ``k``-th largest value (``-inf`` when a row has fewer than ``k``)."""
    if values.shape[1] < k:
        return torch.full((values.shape[0],), float("-inf"), dtype=values.dtype, device=values.device)
    return torch.topk(values, k, dim=1).values[:, k - 1]


def pruned_classifier_scores(term: ClassifierTerm, state: BeamState, scores: torch.Tensor, token_ids: torch.Tensor,
                             finishes: torch.Tensor, *, round_size: int | None = None, exhaustive: bool = False,
                             stats: PruningStats | None = None) -> torch.Tensor:
    """``term(state, scores, token_ids)`` where it can matter, ``-inf`` where it cannot (module docstring).

    ``scores`` and ``token_ids`` are ``[rows, n]`` (the weighted LM step scores of each row's candidates),
    ``finishes [rows, n]`` marks the candidates that would end their hypothesis. ``round_size`` is the number of
    candidates per prompt in a batch (default ``2 × num_beams``). ``exhaustive`` scores every candidate, in the same
    batches (the unpruned reference: ``alice_search(prune=False)``)."""
    width, n = state.num_beams, scores.shape[1]
    slots = state.rows // width
    running = state.running.view(-1, 1).to(scores.device)
    live = torch.isfinite(scores) & (running > MASKED / 2)
    bound = (running + scores).view(slots, width * n)           # = the total when the classifier term is 0
    pending = live.view(slots, width * n).clone()
    known = bound.masked_fill(pending, float("-inf"))           # totals known so far (-inf: not yet)
    finishing = finishes.view(slots, width * n)
    out = scores.clone()
    flat_out = out.view(slots, width * n)
    prefixes = state.generated.tolist()
    tokens = token_ids.reshape(slots, width * n)
    targets = state.targets.view(slots, width)
    per_round = round_size or 2 * width
    # after the first batch, few more candidates are usually needed: smaller batches waste fewer classifier calls
    follow_up = max(1, per_round // 4)
    # The batches: each prompt's live candidates, best bound first (ties by position), cut into ``per_round``.
    # They depend on the LM scores only, never on which candidates pruning skips, so a text's class log-probs come
    # from the same classifier call (same texts, same padding) whether the search prunes or not.
    order = torch.sort(bound.masked_fill(~pending, float("-inf")), dim=1, descending=True, stable=True).indices
    order, counts = order.tolist(), pending.sum(dim=1).tolist()
    next_batch = [0] * slots
    caches: list[dict[str, torch.Tensor]] = [{} for _ in range(slots)]  # per prompt: text -> its class log-probs
    everything = exhaustive
    if stats is not None:
        stats.eligible += int(pending.sum())
        stats.eligible_by_step.append(int(pending.sum()))
        stats.calls_by_step.append(0)
    while True:
        if everything:
            need = pending
        else:
            threshold_all = kth_best(known, width)
            threshold_running = kth_best(known.masked_fill(finishing, float("-inf")), width)
            threshold = torch.where(finishing, threshold_all.view(-1, 1), threshold_running.view(-1, 1))
            need = pending & (bound >= threshold)
        needy = need.any(dim=1).nonzero().view(-1).tolist()
        if not needy:
            break
        # every prompt that still needs a candidate scores its next batch (the best-bounded pending ones)
        picks = []
        for slot in needy:
            k = next_batch[slot]
            begin, size = (0, per_round) if k == 0 else (per_round + (k - 1) * follow_up, follow_up)
            picks += [(slot, flat) for flat in order[slot][begin:min(begin + size, counts[slot])]]
            next_batch[slot] += 1
        slot_idx = torch.tensor([s for s, _ in picks], dtype=torch.long, device=scores.device)
        flat_idx = torch.tensor([f for _, f in picks], dtype=torch.long, device=scores.device)
        beam_idx = flat_idx // n
        rows = (slot_idx * width + beam_idx).tolist()
        toks = tokens[slot_idx, flat_idx].tolist()
        wanted = targets[slot_idx.cpu(), beam_idx.cpu()].tolist()
        texts = [complete_text(t) for t in term.batch_decode([prefixes[r] + [tok] for r, tok in zip(rows, toks)])]
        for slot in needy:  # one classifier call per batch: batching inside the classifier cannot mix batches
            cache = caches[slot]
            new = list(dict.fromkeys(text for (s, _), text in zip(picks, texts) if s == slot and text not in cache))
            if new:
                cache.update(zip(new, term.class_log_probs(new).unbind(0)))
                if stats is not None:
                    stats.scored += len(new)
                    stats.calls_by_step[-1] += len(new)
        if stats is not None:
            stats.rounds += 1
        clf = torch.stack([caches[s][text][target] for (s, _), text, target in zip(picks, texts, wanted)]).to(scores)
        everything = everything or bool((clf > 0).any())
        step = flat_out[slot_idx, flat_idx] + weighted(term.weight, clf)
        flat_out[slot_idx, flat_idx] = step
        known[slot_idx, flat_idx] = running.view(-1)[slot_idx * width + beam_idx] + step
        pending[slot_idx, flat_idx] = False
    return flat_out.masked_fill(pending, float("-inf")).view_as(scores)
