"""The one protocol every LM backend implements, for both decoders.

A decoder never calls a model's ``forward`` itself. It opens a :class:`LMSession` over a batch of prompts and
then loops: read the next-token log-probabilities of every row (full vocabulary), choose tokens, ``advance``.
``select`` re-indexes the rows — it drops finished rows (top-k sampling), repeats rows to make beams, and
reorders beams after a beam-search step (ALICE). Backends keep a KV cache so each step costs one token per row.

Top-k sampling (:mod:`toxiforge.decoding.topk`) and ALICE both run on this protocol, so a new backend (an
OpenAI-compatible server that returns full logits, llama.cpp, ...) only implements the session.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import torch


@runtime_checkable
class LMSession(Protocol):
    """Decoding state of a batch of rows that share one model."""

    @property
    def batch_size(self) -> int:
        """Number of rows currently in the session."""

    def logprobs(self) -> torch.Tensor:
        """Next-token log-probabilities, float32 ``[batch_size, vocab_size]`` (log-softmax of the logits at
        temperature 1). Read-only: the session never mutates it in place (it makes new tensors), and callers
        must not mutate it either."""

    def advance(self, tokens: torch.Tensor) -> None:
        """Append one token per row (``LongTensor[batch_size]``) and compute the next distribution."""

    def select(self, index: torch.Tensor) -> None:
        """Keep rows ``index`` (``LongTensor[n]``) in that order: subset, repeat or reorder the batch, on the
        model's device, including the KV cache."""


@runtime_checkable
class LanguageModel(Protocol):
    """A causal LM that decoders can drive."""

    name: str

    @property
    def vocab_size(self) -> int:
        """Size of the log-probability vectors a session returns."""

    @property
    def device(self) -> torch.device:
        """Where sessions keep their tensors (token tensors passed in are moved here)."""

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """Tokens that end a sequence."""

    def newline_mask(self) -> torch.Tensor:
        """``BoolTensor[vocab_size]`` on :attr:`device`: tokens whose text contains a newline."""

    def token_texts(self) -> list[str]:
        """The text of every token id (``len == vocab_size``; ids without a token map to "")."""

    def batch_decode(self, sequences: list[list[int]]) -> list[str]:
        """:meth:`decode` of many sequences at once."""

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens."""

    def decode(self, token_ids: Sequence[int]) -> str:
        """Text of ``token_ids`` (special tokens skipped)."""

    def start(self, prompts: Sequence[str]) -> LMSession:
        """Open a session: one row per prompt, prompts already consumed."""

    def describe(self) -> dict[str, Any]:
        """Provenance for manifests: name, source, dtype, device, parameter count."""
