"""Decoders: top-k sampling (ToxiGen's baseline) and ALICE (classifier-in-the-loop beam search).

A decoder turns a batch of prompts into continuations on any :class:`~toxiforge.models.LanguageModel`.
The generation pipeline talks to decoders only through :class:`Decoder`.
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, runtime_checkable

from toxiforge.decoding.alice import AliceConfig, AliceDecoder, alice_search
from toxiforge.decoding.topk import Sample, Statement, TopKConfig, TopKDecoder, postprocess, sample_top_k
from toxiforge.models.base import LanguageModel


@runtime_checkable
class Decoder(Protocol):
    """What a generation job needs from a decoding method."""

    method: str  # the generation_method column value: "top-k" or "ALICE"

    def settings(self) -> dict[str, Any]:
        """Decoding settings recorded in every row and in the manifest."""

    def decode(self, lm: LanguageModel, prompts: Sequence[str], seeds: Sequence[int],
               labels: Sequence[int]) -> list[Sample]:
        """One continuation per prompt; ``labels`` are the prompt labels (1 toxic, 0 benign)."""


__all__ = ["AliceConfig", "AliceDecoder", "alice_search", "Decoder", "Sample", "Statement", "TopKConfig", "TopKDecoder", "postprocess", "sample_top_k"]
