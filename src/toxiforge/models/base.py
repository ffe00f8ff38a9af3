"""The one protocol every LM backend implements, for both decoders.

A decoder never calls a model's ``forward`` itself. It opens a :class:`LMSession` over a batch of prompts and
then loops: read the next-token log-probabilities of every row (full vocabulary), choose tokens, ``advance``.
``select`` re-indexes the rows — it drops finished rows (top-k sampling), repeats rows to make beams, and
reorders beams after a beam-search step (ALICE). Backends keep a KV cache so each step costs one token per row.

Top-k sampling (:mod:`toxiforge.decoding.topk`) and ALICE both run on this protocol, so a new backend only
implements the session.

An inference server samples whole continuations itself and shows only its top-N next-token log-probabilities.
Such a backend (:class:`~toxiforge.models.openai_lm.OpenAILM`) also implements :class:`RemoteSampler`: top-k
sampling hands it the whole request (one completion per prompt, sampled by the server), and its sessions return
a *sparse* distribution, ``-inf`` everywhere except the top-N tokens, which ALICE ranks as it ranks a full one.

Scoring text is the one other job: :meth:`LanguageModel.loglikelihood` returns log P(continuation | context) for
many (context, continuation) pairs, with lm-evaluation-harness's ``loglikelihood`` semantics, so that perplexity
(:mod:`toxiforge.analysis.perplexity`) and the benchmark's classification mode (:mod:`toxiforge.bench`) never reach
into a backend's model or tokenizer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

import torch


@dataclass(frozen=True)
class Sample:
    """One decoded continuation: the raw text and why decoding stopped (one of
    :data:`~toxiforge.decoding.types.FINISH_REASONS`). Decoders return it, and so does a backend that decodes
    whole continuations itself (:class:`RemoteSampler`, :class:`ChatSampler`).

    ``score`` is the decoder's own score of the continuation where it has one (ALICE: the length-normalized beam
    score); None for top-k samples."""

    raw_output: str
    token_ids: tuple[int, ...]
    finish_reason: str
    score: float | None = None


class Loglikelihood(NamedTuple):
    """The score of one (context, continuation) request; see :meth:`LanguageModel.loglikelihood`."""

    logprob: float    # sum over the continuation's tokens of log P(token | context, earlier continuation tokens)
    is_greedy: bool   # every continuation token is the argmax of its distribution (True for 0 tokens)
    tokens: int       # number of continuation tokens scored (0 for an empty continuation; logprob is then 0.0)


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
class RemoteSampler(Protocol):
    """A backend that samples whole continuations itself (an inference server's completions endpoint).

    :func:`toxiforge.decoding.topk.sample_top_k` sends the whole top-k request to such a backend instead of
    sampling token by token from a session."""

    def sample_top_k(self, prompts: Sequence[str], seeds: Sequence[int], config: Any) -> list:
        """One :class:`~toxiforge.models.base.Sample` per prompt, sampled with ``config``
        (:class:`~toxiforge.decoding.topk.TopKConfig`) and seeded with ``seeds[i]`` where the server takes seeds."""


@runtime_checkable
class ChatSampler(Protocol):
    """A backend that answers chat messages itself (an inference server's chat completions endpoint), so a chat
    benchmark needs no local tokenizer or chat template."""

    def sample_chat(self, messages: Sequence[str], seeds: Sequence[int], config: Any) -> list:
        """One :class:`~toxiforge.models.base.Sample` per user message (one user turn each), decoded with
        ``config`` (:class:`~toxiforge.decoding.topk.TopKConfig`; ``top_k == 1`` is greedy)."""


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
        """Open a session: one row per prompt, prompts already consumed, each encoded as the model's tokenizer
        encodes text by default (with a BOS token where it adds one), as transformers' and vLLM's generation do."""

    def loglikelihood(self, requests: Sequence[tuple[str, str]], *,
                      batch_size: int | None = None) -> list[Loglikelihood]:
        """Score ``continuation`` given ``context`` for every ``(context, continuation)`` pair, in request order.

        The contract (lm-evaluation-harness's ``LM.loglikelihood`` for a causal model, so results can be compared
        request by request):

        * Tokenization: trailing whitespace of ``context`` moves to the front of ``continuation``; the context is
          encoded the way the model's tokenizer encodes text by default (with a BOS token where the tokenizer adds
          one), ``context + continuation`` likewise, and the continuation's tokens are the whole's tokens after
          the context's. So ``(prompt, " Yes")`` scores the token(s) that " Yes" becomes after ``prompt``.
        * An empty ``context`` conditions on the model's start token, BOS, else EOS (the harness's
          ``prefix_token_id``), and scores every token of ``continuation`` encoded without special tokens. This
          is what perplexity uses.
        * An empty ``continuation`` scores nothing: ``Loglikelihood(0.0, True, 0)``.
        * Inputs longer than the model's context window are truncated from the left (the continuation is kept).
        * Log-probabilities are those of :meth:`LMSession.logprobs` (log-softmax at temperature 1); the sum is a
          Python float. Results do not depend on ``batch_size`` or on which requests share a batch, up to float
          rounding of padded batches (well under 1e-4 in float32).

        ``batch_size`` is a hint (sequences per forward pass); backends may ignore it. A backend that cannot
        score text (e.g. a chat API without prompt log-probabilities) raises
        :class:`~toxiforge.errors.InputError` saying so, with a hint naming a backend that can.
        """

    def describe(self) -> dict[str, Any]:
        """Provenance for manifests: name, source, dtype, device, parameter count."""
