"""The attack-family protocol: statements in (:class:`Source`), one attempt each out (:class:`Attempt`).

A family is built from its config and the attacked classifier (:mod:`toxiforge.attacks.registry`). It may attack
several statements together (one classifier call for all of them at each step, :func:`run_together`), but each
attempt is what attacking its statement alone gives, and the queries are counted per statement: every text the
classifier scores counts one query (:class:`Oracle`), the first being the source statement itself. A family's
attack is deterministic given the source (its ``seed`` drives any random choice), so a resumed run writes the
rows of an uninterrupted one.

Words are the spans of :data:`WORD` (letters, digits and inner apostrophes); everything between them is kept as
it is. :func:`drop_word` removes one word, as the importance ranking of :mod:`toxiforge.attacks.importance`
does.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np

WORD = re.compile(r"\w+(?:['’]\w+)*")


@dataclass(frozen=True)
class Source:
    """A statement to attack: ``label`` 1 toxic, 0 benign (the label the attack tries to make the classifier
    miss); ``seed`` the row's own seed; ``prompt`` the language-model input that wrote it (generation runs:
    ALICE continues it), else None."""

    row_id: str
    text: str
    label: int
    group: str | None
    seed: int
    prompt: str | None = None


@dataclass(frozen=True)
class Attempt:
    """What a family made of a :class:`Source`: the attacked ``text`` ("" when none came out, ``error`` says why),
    the ``edits`` it applied in order (one dict each: ``op``, ``word``, ``before``, ``after``), the classifier
    ``queries`` it spent (the source's own score included), P(toxic) of the source (``score_before``) and of
    ``text`` (``score_after``), and ``similarity`` (sentence-embedding cosine to the source; None when the family
    does not measure it). ``prompt``/``raw_output``/``finish_reason``/``model``: what a generating family (ALICE)
    fed and got back; ``keeper_score``: ALICE's keeper's P(toxic) of ``text`` (``--keep-label-with``)."""

    text: str
    queries: int
    score_before: float
    score_after: float | None
    edits: tuple[dict[str, Any], ...] = ()
    similarity: float | None = None
    prompt: str | None = None
    raw_output: str = ""
    finish_reason: str | None = None
    error: str | None = None
    model: str = ""
    keeper_score: float | None = None


@runtime_checkable
class AttackFamily(Protocol):
    """What ``toxiforge attack`` needs from a family: its ``family`` name (the registry's) and ``method`` (the
    rows' ``generation_method``), the settings recorded in every row and the manifest, and :meth:`attack`.
    ``together``: whether :meth:`attack` gains from a whole shard at once (one classifier call per step for all
    of them, :func:`run_together`); :func:`~toxiforge.attacks.job.run_attack` then gives it a whole shard per
    call, else the job's ``batch_size`` statements per call (:func:`~toxiforge.attacks.job.attack_calls`)."""

    family: str
    method: str
    together: bool

    def settings(self) -> dict[str, Any]:
        """Settings recorded in every row and compared on --resume."""

    def attack(self, sources: Sequence[Source]) -> list[Attempt]:
        """One attempt per source, in order, each what attacking that source alone gives (deterministic)."""


class Oracle:
    """The attacked classifier with a query counter: each text scored adds one to :attr:`queries`."""

    def __init__(self, classifier: Any):
        self.classifier = classifier
        self.queries = 0

    def toxic(self, texts: Sequence[str]) -> np.ndarray:
        """P(toxic) of each text (float64), counting ``len(texts)`` queries."""
        if not texts:
            return np.zeros(0)
        self.queries += len(texts)
        return np.asarray(self.classifier.predict_proba(list(texts)), dtype=np.float64)

    def true_class(self, texts: Sequence[str], label: int) -> np.ndarray:
        """P(``label``) of each text: P(toxic) for a toxic label, 1 - P(toxic) for a benign one."""
        p = self.toxic(texts)
        return p if label == 1 else 1.0 - p


Steps = Generator[list[str], np.ndarray, Attempt]
"""An attack on one statement written as a generator: it yields the texts it wants scored, is sent their P(toxic)
(float64 array) and returns its :class:`Attempt`; :func:`run_together` drives several at once."""


def run_together(classifier: Any, attacks: Sequence[Steps]) -> list[Attempt]:
    """Run ``attacks`` in lockstep: at each step the texts every unfinished one asks for are scored in one
    ``predict_proba`` call and each gets its own scores back. The attempts, in order."""
    results: list[Attempt | None] = [None] * len(attacks)
    pending: dict[int, list[str]] = {}
    for i, steps in enumerate(attacks):
        try:
            pending[i] = next(steps)
        except StopIteration as done:
            results[i] = done.value
    while pending:
        texts = [t for i in pending for t in pending[i]]
        scores = np.asarray(classifier.predict_proba(texts), dtype=np.float64) if texts else np.zeros(0)
        asked, pending, start = pending, {}, 0
        for i, wanted in asked.items():
            part, start = scores[start:start + len(wanted)], start + len(wanted)
            try:
                pending[i] = attacks[i].send(part)
            except StopIteration as done:
                results[i] = done.value
    return [r for r in results if r is not None]


def word_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every word of ``text``, in order."""
    return [m.span() for m in WORD.finditer(text)]


def drop_word(text: str, start: int, end: int) -> str:
    """``text`` without ``text[start:end]`` and the whitespace before it (after it, for a first word): ``"a b c"``
    without ``b`` is ``"a c"``, ``"a b, c"`` is ``"a, c"``."""
    left, right = text[:start], text[end:]
    if not left.strip():
        return right.lstrip()
    return left.rstrip() + right if not right or not right[0].isalnum() else left + right


def replace_span(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def untouched(source: Source, score: float, queries: int, **extra: Any) -> Attempt:
    """The attempt of a statement left as it is: already given the other label (nothing to attack), or one the
    family could not change."""
    return Attempt(text=source.text, queries=queries, score_before=score, score_after=score, **extra)


__all__ = ["WORD", "Attempt", "AttackFamily", "Oracle", "Source", "Steps", "drop_word",
           "replace_span", "run_together", "untouched", "word_spans"]
