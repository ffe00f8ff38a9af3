"""Top-k sampling as ToxiGen did it (paper §3.3 and Appendix A): k = 40, temperature 0.9, at most 30 new
tokens, stop at the first newline, one statement per prompt.

Batched across prompts: one :class:`~toxiforge.models.base.LMSession` per batch, one forward step per token for
all unfinished rows; finished rows are dropped from the session (and its KV cache) as they end.

Every row samples from its own ``torch.Generator`` seeded with the row's seed, so a row's statement does not
depend on which other rows share its batch (up to float rounding of padded batches), and a resumed job
reproduces an uninterrupted one exactly.

Departures from upstream code (microsoft/TOXIGEN ``generate.py``, which calls the GPT-3 API): the API's
``stop="\\n"`` is implemented as "stop at the first token whose text contains a newline"; the text before the
newline is kept (a token like ".\\n" keeps its "."). Post-processing strips whitespace and a leading "- ".

A backend that samples on its own (an inference server, :class:`~toxiforge.models.base.RemoteSampler`) gets
the whole request instead: the server applies top-k, temperature, the token budget and the newline stop.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar

import torch

from toxiforge.decoding.types import Sample
from toxiforge.errors import InputError
from toxiforge.models.base import LanguageModel, RemoteSampler


@dataclass(frozen=True)
class TopKConfig:
    """Decoding settings (defaults = the paper's); the one place they are checked."""

    method: ClassVar[str] = "top-k"

    top_k: int = 40
    temperature: float = 0.9
    max_new_tokens: int = 30
    stop_at_newline: bool = True

    def __post_init__(self) -> None:
        if self.top_k < 1:
            raise InputError(f"top_k={self.top_k} must be at least 1", hint="use --top-k 40 (the paper's)")
        if not self.temperature > 0:
            raise InputError(f"temperature={self.temperature} must be > 0", hint="use --temperature 0.9")
        if self.max_new_tokens < 1:
            raise InputError(f"max_new_tokens={self.max_new_tokens} must be at least 1", hint="use 30")

    def to_dict(self) -> dict:
        return {"method": "top-k", **asdict(self)}


def top_k_filter(logprobs: torch.Tensor, top_k: int, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row, the ``top_k`` token ids and their renormalized probabilities at ``temperature``.

    Pure: returns new tensors ``(probs [B, k], ids [B, k])``.
    """
    k = min(top_k, logprobs.shape[-1])
    values, ids = torch.topk(logprobs, k, dim=-1)
    return torch.softmax(values / temperature, dim=-1), ids


def sample_rows(probs: torch.Tensor, generators: Sequence[torch.Generator]) -> torch.Tensor:
    """One draw per row, each from its own generator (CPU), returned as column indices ``LongTensor[B]``."""
    probs = probs.detach().to("cpu", torch.float32)
    return torch.stack([torch.multinomial(probs[i], 1, generator=g)[0] for i, g in enumerate(generators)])


def sample_top_k(lm: LanguageModel, prompts: Sequence[str], seeds: Sequence[int],
                 config: TopKConfig = TopKConfig()) -> list[Sample]:
    """Sample one continuation per prompt, batched. ``seeds[i]`` seeds row ``i``'s generator."""
    if len(prompts) != len(seeds):
        raise InputError(f"{len(prompts)} prompts but {len(seeds)} seeds", hint="pass one seed per prompt")
    if not prompts:
        return []
    if isinstance(lm, RemoteSampler):
        return lm.sample_top_k(prompts, seeds, config)
    generators = [torch.Generator().manual_seed(int(s)) for s in seeds]
    newline = lm.newline_mask() if config.stop_at_newline else None
    eos = torch.tensor(sorted(lm.eos_token_ids), dtype=torch.long, device=lm.device)
    session = lm.start(prompts)
    active = list(range(len(prompts)))  # original row index of each session row
    tokens: list[list[int]] = [[] for _ in prompts]
    reasons = ["length"] * len(prompts)
    for _step in range(config.max_new_tokens):
        probs, ids = top_k_filter(session.logprobs(), config.top_k, config.temperature)
        choice = sample_rows(probs, [generators[r] for r in active]).to(ids.device)
        chosen = ids.gather(1, choice.view(-1, 1)).view(-1)
        ended_eos = torch.isin(chosen, eos.to(chosen.device))
        ended_newline = newline.to(chosen.device)[chosen] if newline is not None else torch.zeros_like(ended_eos)
        # one device-to-host copy per step (not one per row): matters on CUDA
        for row, token, is_eos, is_newline in zip(active, chosen.tolist(), ended_eos.tolist(),
                                                  ended_newline.tolist()):
            if is_eos:
                reasons[row] = "eos"
            else:
                tokens[row].append(token)
                if is_newline:
                    reasons[row] = "newline"
        keep = ~(ended_eos | ended_newline)
        if not bool(keep.any()):
            break
        if not bool(keep.all()):
            kept = keep.nonzero().view(-1)
            session.select(kept)
            active = [active[i] for i in kept.tolist()]
            chosen = chosen.index_select(0, kept)
        if _step + 1 < config.max_new_tokens:
            session.advance(chosen)
    return [Sample(lm.decode(t), tuple(t), reason) for t, reason in zip(tokens, reasons)]


@dataclass(frozen=True)
class TopKDecoder:
    """The top-k method as a pipeline decoder (see :class:`toxiforge.decoding.Decoder`)."""

    config: TopKConfig = TopKConfig()
    method: str = "top-k"  # the generation_method column; toxiforge bench writes top-k=1 rows as "greedy"
    num_return: ClassVar[int] = 1  # one sample per prompt
    config_type: ClassVar[type] = TopKConfig

    @classmethod
    def from_config(cls, config: TopKConfig, classifier=None) -> TopKDecoder:
        """The decoder for ``config``; top-k does not use a classifier (the job may still score its rows)."""
        return cls(config)

    def settings(self) -> dict[str, Any]:
        return self.config.to_dict()

    def decode(self, lm: LanguageModel, prompts: Sequence[str], seeds: Sequence[int], labels: Sequence[int],
               groups: Sequence[str] | None = None) -> list[list[Sample]]:
        """One :class:`Sample` per prompt, as a one-item list (the pipeline writes it as hypothesis rank 0)."""
        return [[sample] for sample in sample_top_k(lm, prompts, seeds, self.config)]
