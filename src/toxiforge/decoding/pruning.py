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

*Batched across prompts* (issue 47). A round takes, from every prompt that still needs a candidate, its best-bounded
needed candidates (``2 × num_beams`` in its first round, a quarter of that in its second, doubling in each later
one, so a flat LM distribution, where many candidates stay needed, takes a few rounds and not hundreds) and
scores all of them in one ``class_log_probs`` call, which batches them by length
(:class:`~toxiforge.classifiers.hf.HFClassifier` sorts by length and cuts batches of its ``batch_size``), so a
step makes one classifier call per round, not one per prompt and round. The search's results do not depend on
which candidates a round takes, only on their scores; with a classifier whose scores depend only on the text they
equal the unpruned search's of the same prompts bit for bit (``tests/decoding/test_alice_pruning.py``; each prompt
searched alone: identical statements, scores equal up to float noise, as the LM's batches change). A padded transformer
classifier's log-probs for a text move in the last bits with the batch it is scored in (padding length and batch
size change the kernels: ~1e-7 for a tiny BERT on the CPU), and batches now mix prompts, so a score can differ
from the unpruned search's (or from one prompt searched alone) by that float noise; a statement changes only where
two candidates' totals are that close (the test counts them).

Identical texts (two beams or two prompts reaching the same string, or tokens that decode alike) are scored once
per step. A classifier that returns a positive log-probability breaks the bound; the step then scores every
candidate.

*With a keeper* (issue 50) the total gains ``λK · log p_K(prompt's class | text)``, also ``≤ 0``, so the same bound
holds and pruning stays exact. The keeper is asked second: once the attacked classifier has scored a candidate, its
bound with that term (``running + λL·log p_LM + λC·log p_CLF``) is still ``≥`` its total, and only the candidates
whose bound with the term can still reach their threshold go to the keeper (each prompt's ``num_beams`` best in its
first keeper round, then doubling as above; one more call per round), so the keeper scores a subset of the texts
the attacked classifier scored. Unpruned, it scores all of them, in the same order and one call. A positive keeper
log-probability turns pruning off as well.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from toxiforge.decoding.beam import BeamState
from toxiforge.decoding.scorers import MASKED, ClassifierTerm, complete_text, weighted


@dataclass
class PruningStats:
    """Counts over a search: candidates that could have been scored, texts the classifier scored, texts a keeper
    scored (``kept``), rounds; per step, the texts scored (``calls_by_step``) and the eligible candidates
    (``eligible_by_step``); per prompt (its index in the search's batch), the texts scored for it
    (``scored_by_prompt``): each step, the distinct texts of its own candidates that went to the classifier, which is
    what the classifier scores when that prompt is searched alone (a text two prompts share is scored once, but
    counts for each)."""

    eligible: int = 0
    scored: int = 0
    kept: int = 0
    rounds: int = 0
    calls_by_step: list[int] = field(default_factory=list)
    eligible_by_step: list[int] = field(default_factory=list)
    scored_by_prompt: Counter[int] = field(default_factory=Counter)


def kth_best(values: torch.Tensor, k: int) -> torch.Tensor:
    """Per row of ``values [slots, m]``, its ``k``-th largest value (``-inf`` when a row has fewer than ``k``)."""
    if values.shape[1] < k:
        return torch.full((values.shape[0],), float("-inf"), dtype=values.dtype, device=values.device)
    return torch.topk(values, k, dim=1).values[:, k - 1]


def _take(need: torch.Tensor, order: torch.Tensor, size: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per prompt (row), the first ``size`` needed candidates in ``order``: their rows and flat positions."""
    need_sorted = need.gather(1, order)
    slot_idx, position = (need_sorted & (need_sorted.cumsum(dim=1) <= size)).nonzero(as_tuple=True)
    return slot_idx, order[slot_idx, position]


def _round_size(rounds: torch.Tensor, first: int, follow_up: int) -> torch.Tensor:
    """Candidates a prompt sends to a round: ``first`` in its first, then ``follow_up``, doubling each round."""
    return torch.where(rounds == 0, first, follow_up * torch.pow(2, (rounds - 1).clamp(min=0, max=24)))


def pruned_classifier_scores(term: ClassifierTerm, state: BeamState, scores: torch.Tensor, token_ids: torch.Tensor,
                             finishes: torch.Tensor, *, round_size: int | None = None, exhaustive: bool = False,
                             stats: PruningStats | None = None) -> torch.Tensor:
    """``term(state, scores, token_ids)`` where it can matter, ``-inf`` where it cannot (module docstring).

    ``scores`` and ``token_ids`` are ``[rows, n]`` (the weighted LM step scores of each row's candidates),
    ``finishes [rows, n]`` marks the candidates that would end their hypothesis. ``round_size`` is the number of
    candidates a prompt sends to its first round (default ``2 × num_beams``; the second a quarter of it, doubling
    after).
    ``exhaustive`` scores every candidate, in one round (the unpruned reference: ``alice_search(prune=False)``)."""
    width, n = state.num_beams, scores.shape[1]
    slots, device = state.rows // width, scores.device
    running = state.running.view(-1, 1).to(device)
    live = torch.isfinite(scores) & (running > MASKED / 2)
    bound = (running + scores).view(slots, width * n)           # = the total when the classifier term is 0
    pending = live.view(slots, width * n).clone()               # the attacked classifier not yet asked
    known = bound.masked_fill(pending, float("-inf"))           # totals known so far (-inf: not yet)
    finishing = finishes.view(slots, width * n).to(device)
    flat_out = scores.clone().view(slots, width * n)
    tokens = token_ids.reshape(slots, width * n)
    first, follow_up = (round_size or 2 * width), max(1, (round_size or 2 * width) // 4)
    # each prompt's candidates, best bound first (ties by position): a round takes a prompt's best needed ones
    order = torch.sort(bound.masked_fill(~pending, float("-inf")), dim=1, descending=True, stable=True).indices
    rounds = torch.zeros((slots, 1), dtype=torch.long, device=device)  # rounds in which each prompt sent texts
    targets = state.targets.tolist()                            # host tensor: no device sync
    prefixes: list[list[int]] | None = None                     # the generated ids, copied once when first needed
    keep_targets = None if term.keeper_log_probs is None or state.keep_targets is None else state.keep_targets.tolist()
    clf_scores = _TextScores(term.class_log_probs)               # each text scored once per step
    sent: set[tuple[int, str]] = set()                           # (prompt slot, text) sent this step: scored_by_prompt
    keeper = None if keep_targets is None else _KeeperStage(term, keep_targets, bound, width, follow_up)
    everything = exhaustive
    if stats is not None:
        stats.eligible += int(pending.sum())
        stats.eligible_by_step.append(int(pending.sum()))
        stats.calls_by_step.append(0)
    while True:
        if everything:
            threshold = torch.full_like(bound, float("-inf"))
        else:
            threshold_all = kth_best(known, width)
            threshold_running = kth_best(known.masked_fill(finishing, float("-inf")), width)
            threshold = torch.where(finishing, threshold_all.view(-1, 1), threshold_running.view(-1, 1))
        # this round: each prompt's best needed candidates, ``first`` in its first round, then ``follow_up``,
        # doubling every round (all of them when scoring everything); every prompt's picks go to one classifier call
        need = pending & (bound >= threshold)
        size = _round_size(rounds, first, follow_up) if not everything else torch.full_like(rounds, width * n)
        slot_idx, flat_idx = _take(need, order, size)
        picked = slot_idx.numel() > 0                            # the round's host-device sync
        if picked:
            rounds += need.any(dim=1, keepdim=True)
            rows_t = slot_idx * width + flat_idx // n
            rows, toks = torch.stack([rows_t, tokens[slot_idx, flat_idx]]).tolist()
            if prefixes is None:
                prefixes = state.generated.tolist()
            texts = [complete_text(t)
                     for t in term.batch_decode([prefixes[r] + [tok] for r, tok in zip(rows, toks)])]
            # one call for every prompt's new texts; the classifier batches them by length
            clf, at, fresh = clf_scores.lookup(texts, [targets[r] for r in rows])
            if stats is not None:
                stats.scored += fresh
                stats.calls_by_step[-1] += fresh
                mine = {(r // width, text) for r, text in zip(rows, texts)} - sent
                sent |= mine
                stats.scored_by_prompt.update(state.prompts[slot] for slot, _ in mine)
            everything = everything or bool((clf > 0).any())            # host tensor: no device sync
            step = flat_out[slot_idx, flat_idx] + weighted(term.weight, clf.to(scores))
            flat_out[slot_idx, flat_idx] = step
            pending[slot_idx, flat_idx] = False
            if keeper is None:
                known[slot_idx, flat_idx] = running.view(-1)[rows_t] + step
            else:  # the keeper's term is still to come: the candidate's bound now includes the classifier's
                keeper.add(slot_idx, flat_idx, running.view(-1)[rows_t] + step, at)
        keeper_picked = keeper is not None and keeper.score(threshold, everything, clf_scores.texts, flat_out, known,
                                                            running.view(-1), stats)
        if keeper is not None and keeper.positive:              # a positive keeper log-prob breaks the bound
            everything = True
        if stats is not None and (picked or keeper_picked):
            stats.rounds += 1
        if not picked and not keeper_picked:
            break
    left_out = pending if keeper is None else pending | keeper.halfway
    return flat_out.masked_fill(left_out, float("-inf")).view_as(scores)


class _TextScores:
    """One classifier's log-probs of a step's texts, each distinct text scored once (one call per batch of new
    texts); row ``i`` of the table is ``texts[i]``."""

    def __init__(self, score: Callable[[Sequence[str]], torch.Tensor]):
        self.score = score
        self.index: dict[str, int] = {}
        self.texts: list[str] = []
        self.table: torch.Tensor | None = None

    def lookup(self, texts: list[str], classes: list[int]) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The log-probability of class ``classes[i]`` for ``texts[i]`` (scoring the texts not seen yet this step),
        the texts' rows in the table, and how many texts were new."""
        new = [text for text in dict.fromkeys(texts) if text not in self.index]
        if new:
            self.index.update({text: len(self.index) + i for i, text in enumerate(new)})
            self.texts += new
            scores = self.score(new).float().cpu()
            self.table = scores if self.table is None else torch.cat([self.table, scores])
        assert self.table is not None
        rows = torch.tensor([self.index[t] for t in texts])
        return self.table[rows, torch.tensor(classes)], rows, len(new)


class _KeeperStage:
    """The keeper's part of the pruning rounds (issue 50). A candidate the attacked classifier has scored is
    *halfway*: its bound now includes that term (``running + λL·log p_LM + λC·log p_CLF``, still ``≥`` its total
    since the keeper term is ``≤ 0``). Each round, of the halfway candidates whose bound reaches their threshold,
    each prompt's best (``num_beams`` in its first keeper round, then ``follow_up`` doubling) go to one keeper call
    and their totals become known; the rest never need the keeper. Identical texts are scored once per step."""

    def __init__(self, term: ClassifierTerm, keep_targets: list[int], bound: torch.Tensor, width: int,
                 follow_up: int):
        self.term, self.keep_targets, self.width, self.follow_up = term, keep_targets, width, follow_up
        self.halfway = torch.zeros_like(bound, dtype=torch.bool)
        self.bound = torch.full_like(bound, float("-inf"))
        # the candidate's text: its row in the attacked classifier's table
        self.text_row = torch.full(bound.shape, -1, dtype=torch.long, device=bound.device)
        self.rounds = torch.zeros((bound.shape[0], 1), dtype=torch.long, device=bound.device)
        self.scores = _TextScores(term.keeper_log_probs)  # type: ignore[arg-type]
        self.positive = False

    def add(self, slot_idx: torch.Tensor, flat_idx: torch.Tensor, bound: torch.Tensor, text_row: torch.Tensor):
        self.halfway[slot_idx, flat_idx] = True
        self.bound[slot_idx, flat_idx] = bound
        self.text_row[slot_idx, flat_idx] = text_row.to(self.text_row.device)

    def score(self, threshold: torch.Tensor, everything: bool, clf_texts: list[str], flat_out: torch.Tensor,
              known: torch.Tensor, running: torch.Tensor, stats: PruningStats | None) -> bool:
        """One keeper round (class docstring); False if no candidate needed the keeper."""
        need = self.halfway if everything else self.halfway & (self.bound >= threshold)
        # best bound first; scoring everything, in the attacked classifier's order (the same texts, the same call)
        key = -self.text_row.to(self.bound) if everything else self.bound
        order = torch.sort(key.masked_fill(~need, float("-inf")), dim=1, descending=True, stable=True).indices
        size = (_round_size(self.rounds, self.width, self.follow_up) if not everything
                else torch.full_like(self.rounds, need.shape[1]))
        slot_idx, flat_idx = _take(need, order, size)
        if slot_idx.numel() == 0:
            return False
        self.rounds += need.any(dim=1, keepdim=True)
        rows_t = slot_idx * self.width + flat_idx // (need.shape[1] // self.width)
        texts = [clf_texts[i] for i in self.text_row[slot_idx, flat_idx].tolist()]
        keep, _, fresh = self.scores.lookup(texts, [self.keep_targets[r] for r in rows_t.tolist()])
        if stats is not None:
            stats.kept += fresh
        self.positive = self.positive or bool((keep > 0).any())
        step = flat_out[slot_idx, flat_idx] + weighted(self.term.keeper_weight, keep.to(flat_out))
        flat_out[slot_idx, flat_idx] = step
        known[slot_idx, flat_idx] = running[rows_t] + step
        self.halfway[slot_idx, flat_idx] = False
        return True

