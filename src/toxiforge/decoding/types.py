"""The decoder contract: what a decoder returns (:class:`Sample`), how a sample becomes a statement
(:func:`postprocess`), and the :class:`Decoder` protocol the generation job talks to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from toxiforge.errors import ToxiforgeError
from toxiforge.models.base import LanguageModel, Sample  # Sample: what a backend that samples returns too

FINISH_REASONS = ("newline", "eos", "length", "blocked")
"""Why decoding stopped: a token with a newline, an end-of-sequence token, the token budget, or (ALICE) no
hypothesis could finish because every candidate was banned or scored -inf (the sample is then empty)."""


@dataclass(frozen=True)
class Statement:
    """A post-processed statement; ``error`` is set (and ``text`` empty) when none could be extracted."""

    text: str
    error: str | None


def postprocess(raw_output: str) -> Statement:
    """Turn a raw continuation into a statement: text before the first newline, stripped, leading '- ' dropped."""
    text = raw_output.split("\n", 1)[0].strip()
    if text.startswith("-"):
        text = text[1:].strip()
    if not text:
        return Statement("", "empty: no text before the first newline" if raw_output.strip() else "empty output")
    return Statement(text, None)


@runtime_checkable
class Decoder(Protocol):
    """What a generation job needs from a decoding method."""

    method: str       # the generation_method column value: "top-k" or "ALICE"
    num_return: int   # the most samples :meth:`decode` returns per prompt; the job writes one row per sample

    def settings(self) -> dict[str, Any]:
        """Decoding settings recorded in every row and in the manifest."""

    def decode(self, lm: LanguageModel, prompts: Sequence[str], seeds: Sequence[int], labels: Sequence[int],
               groups: Sequence[str]) -> list[list[Sample]]:
        """Per prompt, a non-empty list of at most ``num_return`` samples, best first. ``labels`` are the prompt
        labels (1 toxic, 0 benign), ``groups`` the prompts' target groups (registry names, see
        :mod:`toxiforge.groups`). Deterministic for given inputs, so a resumed job reproduces an uninterrupted
        one."""


def as_hypotheses(output: Sequence[Sample], limit: int) -> list[Sample]:
    """One prompt's decoder output checked against the contract: a non-empty list of at most ``limit`` samples.

    Raises :class:`~toxiforge.errors.ToxiforgeError` otherwise: a decoder that breaks its own ``num_return`` would
    make a job's rows unpredictable.
    """
    samples = list(output) if isinstance(output, (list, tuple)) else None
    if not samples or not all(isinstance(s, Sample) for s in samples):
        raise ToxiforgeError(f"decoder returned {output!r} for a prompt; expected a non-empty list of Samples")
    if len(samples) > limit:
        raise ToxiforgeError(f"decoder returned {len(samples)} outputs for a prompt but its num_return is {limit}")
    return samples


__all__ = ["FINISH_REASONS", "Decoder", "Sample", "Statement", "as_hypotheses", "postprocess"]
