"""The decoder protocol the generation pipeline talks to, and helpers for a decoder's per-prompt output."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from toxiforge.decoding.topk import Sample
from toxiforge.errors import ToxiforgeError
from toxiforge.models.base import LanguageModel

DecoderOutput = Sample | Sequence[Sample]
"""What a decoder returns for one prompt: one :class:`Sample`, or several, best first."""


@runtime_checkable
class Decoder(Protocol):
    """What a generation job needs from a decoding method.

    A decoder may also have an int attribute ``num_return``: the most outputs :meth:`decode` returns per prompt
    (1 when absent). The job records it in its fingerprint and writes one row per output.
    """

    method: str  # the generation_method column value: "top-k" or "ALICE"

    def settings(self) -> dict[str, Any]:
        """Decoding settings recorded in every row and in the manifest."""

    def decode(self, lm: LanguageModel, prompts: Sequence[str], seeds: Sequence[int],
               labels: Sequence[int]) -> Sequence[DecoderOutput]:
        """One entry per prompt: a :class:`Sample`, or a non-empty list of samples ranked best first (at most
        ``num_return``). ``labels`` are the prompt labels (1 toxic, 0 benign). Deterministic for given inputs, so
        a resumed job reproduces an uninterrupted one."""


def outputs_per_prompt(decoder: Decoder) -> int:
    """The most outputs ``decoder`` returns per prompt (its ``num_return``, else 1)."""
    return int(getattr(decoder, "num_return", 1))


def as_hypotheses(output: DecoderOutput, limit: int | None = None) -> list[Sample]:
    """One prompt's decoder output as a list of samples, best first (rank 0 = best).

    Raises :class:`~toxiforge.errors.ToxiforgeError` for an empty list or more than ``limit`` samples: a decoder
    that breaks its own ``num_return`` would make a job's rows unpredictable.
    """
    samples = [output] if isinstance(output, Sample) else list(output)
    if not samples or not all(isinstance(s, Sample) for s in samples):
        raise ToxiforgeError(f"decoder returned {output!r} for a prompt; expected a Sample or a non-empty list of "
                             "Samples")
    if limit is not None and len(samples) > limit:
        raise ToxiforgeError(f"decoder returned {len(samples)} outputs for a prompt but its num_return is {limit}")
    return samples

