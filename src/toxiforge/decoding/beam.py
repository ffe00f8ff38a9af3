"""The pieces of ALICE's batched beam search, split the way transformers' ``_beam_search`` is split.

* :class:`BeamState` — running scores, generated ids, the prompt of each batch slot and the classifier target of
  each row; :meth:`BeamState.keep_rows` follows a row selection.
* :func:`top_continuations` — each prompt's best (beam, token) extensions (transformers'
  ``_get_top_k_continuations``), ties in column order (:func:`best_first`).
* :class:`StepOnHost` — what the host needs of a step, in one device-to-host copy.
* :class:`FinishedPool` and :func:`record_finished` — finished hypotheses (``_update_finished_beams``).
* :func:`next_beams` — the beams that go on (``_get_running_beams_for_next_iteration``).
* :func:`search_done` — transformers' early stop (``_check_early_stop_heuristic``).

Rows are ``prompt slot × beam``: row ``s * num_beams + b`` is beam ``b`` of the prompt in batch slot ``s``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from toxiforge.decoding.scorers import MASKED


@dataclass(frozen=True)
class Hypothesis:
    """A finished continuation: its tokens (a newline token included, an EOS token not), its length-normalized
    beam score, and why it ended ("newline", "eos", "length"; "blocked" when nothing could finish)."""

    token_ids: tuple[int, ...]
    score: float
    finish_reason: str


@dataclass(frozen=True)
class BeamState:
    """What the search knows between steps. Tensors are on the LM's device except ``targets`` and
    ``keep_targets`` (CPU)."""

    num_beams: int
    vocab_size: int
    running: torch.Tensor        # [rows] beam score of each row (sum of step scores); MASKED: an unused row
    generated: torch.Tensor      # [rows, steps] token ids generated so far
    targets: torch.Tensor        # [rows] the classifier class each row steers toward
    prompts: list[int] = field(default_factory=list)  # original prompt index of each batch slot
    keep_targets: torch.Tensor | None = None  # [rows] the keeper's class of each row's prompt (CPU); None: no keeper

    @classmethod
    def start(cls, targets: Sequence[int], num_beams: int, vocab_size: int, device: torch.device,
              keep_targets: Sequence[int] | None = None) -> BeamState:
        """Every prompt's beams before step 1: beam 0 scores 0, the others are masked copies, so step 1 expands
        each prompt once (its beams are still identical). ``keep_targets``: the keeper's class per prompt."""
        running = torch.full((len(targets), num_beams), MASKED, device=device)
        running[:, 0] = 0.0
        keep = None if keep_targets is None else \
            torch.tensor(list(keep_targets), dtype=torch.long).repeat_interleave(num_beams)
        return cls(num_beams, vocab_size, running.view(-1), torch.zeros((running.numel(), 0), dtype=torch.long,
                   device=device), torch.tensor(list(targets), dtype=torch.long).repeat_interleave(num_beams),
                   list(range(len(targets))), keep)

    @property
    def rows(self) -> int:
        return self.running.shape[0]

    def keep_rows(self, rows: torch.Tensor, slots: Sequence[int] | None = None) -> BeamState:
        """The state of rows ``rows`` (``LongTensor``, in blocks of ``num_beams`` rows of one prompt each);
        ``slots``, when the caller knows them, are the batch slots of those blocks (saves a device-to-host copy)."""
        rows = rows.to(self.running.device)
        if slots is None:
            slots = (rows[::self.num_beams] // self.num_beams).tolist()
        keep = None if self.keep_targets is None else self.keep_targets.index_select(0, rows.cpu())
        return BeamState(self.num_beams, self.vocab_size, self.running.index_select(0, rows),
                         self.generated.index_select(0, rows), self.targets.index_select(0, rows.cpu()),
                         [self.prompts[s] for s in slots], keep)

    def extend(self, tokens: torch.Tensor, running: torch.Tensor) -> BeamState:
        """This state with one more generated token per row and new running scores."""
        return BeamState(self.num_beams, self.vocab_size, running.view(-1),
                         torch.cat([self.generated, tokens.view(-1, 1)], dim=1), self.targets, self.prompts,
                         self.keep_targets)

    def slot_rows(self, slots: Sequence[int]) -> torch.Tensor:
        """The rows of batch slots ``slots``, in order."""
        base = torch.tensor(list(slots), device=self.running.device).view(-1, 1) * self.num_beams
        return (base + torch.arange(self.num_beams, device=self.running.device)).view(-1)


@dataclass(frozen=True)
class Continuations:
    """Each prompt slot's best extensions, best first: ``[slots, K]`` tensors."""

    scores: torch.Tensor   # beam score if the token is appended (running + step score)
    beams: torch.Tensor    # which beam (0 .. num_beams-1) the token extends
    tokens: torch.Tensor   # the token


def best_first(values: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` largest values of each row and their columns, equal values in column order (a stable sort, where
    ``torch.topk`` orders ties as its algorithm happens to): so the order of extensions with equal scores does not
    depend on the other extensions' scores, which exact pruning (:mod:`.pruning`) replaces by ``-inf``."""
    values, columns = torch.sort(values, dim=-1, descending=True, stable=True)
    return values[:, :k].contiguous(), columns[:, :k].contiguous()


def beams_to_keep(num_beams: int, num_stop_tokens: int, candidates: int) -> int:
    """How many extensions per prompt :func:`top_continuations` keeps.

    transformers keeps ``max(2, 1 + n_eos) * num_beams``: even if every stop token of every beam ranks first,
    ``num_beams`` extensions that do not stop remain to carry the search on. Here every token containing a newline
    stops a hypothesis (upstream's ``stop="\\n"``), so all of them count (≈ 1,600 for SmolLM2's vocabulary), capped
    by the ``num_beams × candidates`` extensions there are.
    """
    return min(max(2, 1 + num_stop_tokens) * num_beams, num_beams * candidates)


def top_continuations(state: BeamState, step_scores: torch.Tensor, token_ids: torch.Tensor,
                      keep: int) -> Continuations:
    """The ``keep`` best (beam, token) extensions of each prompt by total beam score.

    ``step_scores`` and ``token_ids`` are ``[rows, n]``: the step score (eq. 1) of appending ``token_ids[r, j]`` to
    row ``r``."""
    n = step_scores.shape[1]
    slots = state.rows // state.num_beams
    total = (state.running.view(-1, 1) + step_scores).view(slots, state.num_beams * n)
    scores, flat = best_first(total, keep)
    return Continuations(scores, flat // n, token_ids.reshape(slots, -1).gather(1, flat))


class FinishedPool:
    """One prompt's best finished hypotheses (at most ``size``), as transformers' ``BeamHypotheses``."""

    def __init__(self, size: int):
        self.size = size
        self.hypotheses: list[Hypothesis] = []

    def add(self, hypothesis: Hypothesis) -> None:
        if len(self.hypotheses) < self.size:
            self.hypotheses.append(hypothesis)
            return
        worst = min(range(self.size), key=lambda i: self.hypotheses[i].score)
        if hypothesis.score > self.hypotheses[worst].score:
            self.hypotheses[worst] = hypothesis

    def is_done(self, best_running: float) -> bool:
        """Nothing better can finish: no live beam is left, or the pool is full and the best running beam
        (normalized as if it ended now) does not beat its worst hypothesis (``early_stopping=False``)."""
        if best_running <= MASKED / 2:
            return True
        return len(self.hypotheses) == self.size and best_running <= min(h.score for h in self.hypotheses)

    def best(self, n: int) -> list[Hypothesis]:
        return sorted(self.hypotheses, key=lambda h: -h.score)[:n]


@dataclass(frozen=True)
class StepOnHost:
    """What the host needs of a step, copied from the device in one transfer (:meth:`fetch`): each prompt slot's
    first ``num_beams`` extensions (``[slots, num_beams, 7 + steps]`` float64 columns: finishes, total score, beam,
    token, is EOS, is stop, the slot's best new running score, then the extended beam's generated ids; float64
    holds these ids and float32 scores exactly)."""

    values: torch.Tensor

    @classmethod
    def fetch(cls, state: BeamState, cont: Continuations, finishing: torch.Tensor, stop: torch.Tensor,
              eos: torch.Tensor, running: torch.Tensor) -> StepOnHost:
        """``finishing [slots, K]`` marks extensions that end a hypothesis, ``stop``/``eos`` (``BoolTensor[vocab]``)
        the stop and EOS tokens, ``running`` the new beams' scores (:func:`next_beams`)."""
        width = state.num_beams
        slots = cont.scores.shape[0]
        beams, tokens = cont.beams[:, :width], cont.tokens[:, :width]
        rows = torch.arange(slots, device=beams.device).view(-1, 1) * width + beams
        best = running.view(slots, width)[:, :1].expand(slots, width)
        columns = (finishing[:, :width], cont.scores[:, :width], beams, tokens, eos[tokens], stop[tokens], best)
        packed = torch.stack([c.to(torch.float64) for c in columns], dim=2)
        sequences = state.generated[rows.view(-1)].view(slots, width, state.generated.shape[1]).to(torch.float64)
        return cls(torch.cat([packed, sequences], dim=2).cpu())

    @property
    def best_running(self) -> list[float]:
        """Per slot, the best new running score."""
        return self.values[:, 0, 6].tolist()


def record_finished(pools: Sequence[FinishedPool], state: BeamState, host: StepOnHost, length_norm: float) -> None:
    """Add the hypotheses among each prompt's first ``num_beams`` extensions that end here (as transformers): a
    stop token or the last step; an EOS token is left out of the hypothesis' tokens. Reads only ``host``'s copy
    (no device access: on CUDA every ``int(t[i])`` would be a synchronizing copy)."""
    values = host.values
    hits = values[:, :, 0].nonzero().tolist()
    if not hits:
        return
    raw, tokens = values[:, :, 1].tolist(), values[:, :, 3].long().tolist()
    is_eos, is_stop = values[:, :, 4].tolist(), values[:, :, 5].tolist()
    for slot, j in hits:
        if raw[slot][j] <= MASKED / 2:  # a masked extension (banned, or a copy of beam 0 at step 1)
            continue
        token, ids = tokens[slot][j], values[slot, j, 7:].long().tolist()
        reason = "eos" if is_eos[slot][j] else "newline" if is_stop[slot][j] else "length"
        kept = ids if reason == "eos" else ids + [token]
        pools[state.prompts[slot]].add(Hypothesis(tuple(kept), raw[slot][j] / length_norm, reason))


def next_beams(state: BeamState, cont: Continuations, finishing: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The ``num_beams`` best extensions of each prompt that do not finish: ``(rows, tokens, scores)``, each
    ``[slots * num_beams]`` — the row each new beam extends, its new token and its beam score."""
    width = state.num_beams
    scores, pick = best_first(cont.scores.masked_fill(finishing, MASKED), width)
    slots = torch.arange(scores.shape[0], device=scores.device).view(-1, 1)
    rows = (slots * width + cont.beams.gather(1, pick)).view(-1)
    return rows, cont.tokens.gather(1, pick).view(-1), scores.view(-1)


def search_done(pools: Sequence[FinishedPool], state: BeamState, host: StepOnHost, length_norm: float) -> list[bool]:
    """Per batch slot, whether its prompt's result can no longer change (see :meth:`FinishedPool.is_done`), from
    the new beams' best score in ``host``."""
    best = host.best_running
    return [pools[prompt].is_done(b / length_norm if b > MASKED / 2 else b) for prompt, b in zip(state.prompts, best)]
