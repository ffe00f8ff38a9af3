"""The ``obfuscate`` family: character edits (:mod:`toxiforge.attacks.edits`) where the classifier is most
sensitive, greedily, within a budget of ``max_edits`` edits.

For a statement the classifier gets right (one it already gets wrong is left as it is, one query spent):

1. rank its words by importance (:func:`~toxiforge.attacks.importance.rank_words`, n queries for n words);
2. for each word in that order, while fewer than ``max_edits`` edits are made and the label has not flipped:
   try each operation once on the word (positions drawn from the row's seeded ``random.Random``), score the
   candidates in one batch (one query each) and keep the one with the lowest P(true label) if it is lower than the
   statement's now; a word is edited at most once (``space_delete`` also uses up the word it joins).

Statements given together are attacked in lockstep (:func:`~toxiforge.attacks.base.run_together`: one classifier
call per step for all of them), each exactly as alone.

A person reads the edited words as the original ones, so the statement keeps its label by construction;
``similarity`` is not measured (None).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from toxiforge.attacks.base import Attempt, Source, Steps, replace_span, run_together, untouched
from toxiforge.attacks.edits import OPERATIONS, SPACE_DELETE, WORD_OPERATIONS, join_words
from toxiforge.attacks.importance import ranking, removal_texts
from toxiforge.errors import InputError
from toxiforge.records import flipped_label

DEFAULT_MAX_EDITS = 5


def check_max_edits(max_edits: int) -> None:
    if not isinstance(max_edits, int) or isinstance(max_edits, bool) or max_edits < 1:
        raise InputError(f"max_edits={max_edits} allows no edit, so nothing would be attacked",
                         hint=f"use --max-edits 1 or more (default {DEFAULT_MAX_EDITS})")


@dataclass(frozen=True)
class ObfuscateConfig:
    """``max_edits``: character edits per statement (each edits one word); ``operations``: the edits tried, a
    subset of :data:`~toxiforge.attacks.edits.OPERATIONS` (all by default)."""

    family: ClassVar[str] = "obfuscate"

    max_edits: int = DEFAULT_MAX_EDITS
    operations: tuple[str, ...] = OPERATIONS

    def __post_init__(self) -> None:
        check_max_edits(self.max_edits)
        ops = tuple(self.operations)
        unknown = [op for op in ops if op not in OPERATIONS]
        if unknown or not ops:
            raise InputError(f"unknown edit operation {', '.join(unknown)}" if unknown else "no edit operation given",
                             hint=f"choose among {', '.join(OPERATIONS)} (comma-separated)")
        object.__setattr__(self, "operations", tuple(dict.fromkeys(ops)))


class ObfuscateAttack:
    """The family (:class:`~toxiforge.attacks.base.AttackFamily`) against ``classifier``."""

    family = "obfuscate"
    method = "obfuscate"
    together = True  # run_together: one classifier call per step for every statement given
    config_type = ObfuscateConfig

    def __init__(self, classifier: Any, config: ObfuscateConfig = ObfuscateConfig()):
        self.classifier = classifier
        self.config = config

    @classmethod
    def from_config(cls, config: ObfuscateConfig, classifier: Any, resources: Any = None) -> ObfuscateAttack:
        return cls(classifier, config)

    def settings(self) -> dict[str, Any]:
        return {"family": self.family, "max_edits": self.config.max_edits, "operations": list(self.config.operations)}

    def attack(self, sources: Sequence[Source]) -> list[Attempt]:
        return run_together(self.classifier, [self.steps(s) for s in sources])

    def steps(self, source: Source) -> Steps:
        """The attack on ``source`` as :data:`~toxiforge.attacks.base.Steps` (module docstring)."""
        label, queries = source.label, 1
        score = float((yield [source.text])[0])
        if flipped_label(score, label):
            return untouched(source, score, queries)
        spans, without = removal_texts(source.text)
        queries += len(without)
        ranked = ranking(spans, score, (yield without), label)
        rng = random.Random(source.seed)
        text = source.text
        free = [True] * len(spans)
        edits: list[dict[str, Any]] = []
        for i in ranked.order:
            if len(edits) >= self.config.max_edits or flipped_label(score, label):
                break
            if not free[i]:
                continue
            candidates = self._candidates(text, spans, free, i, rng)
            if not candidates:
                continue
            texts = [replace_span(text, start, end, new) for _, start, end, new in candidates]
            queries += len(texts)
            scores = yield texts
            p_label = scores if label == 1 else 1.0 - scores
            best = int(np.argmin(p_label))
            if p_label[best] >= (score if label == 1 else 1.0 - score):
                continue
            op, start, end, new = candidates[best]
            edits.append({"op": op, "word": i, "before": text[start:end], "after": new})
            text, score = texts[best], float(scores[best])
            shift = len(new) - (end - start)
            free[i] = False
            if op == SPACE_DELETE:
                free[i + 1] = False
            spans = [(s, e) if k <= i else (s + shift, e + shift) for k, (s, e) in enumerate(spans)]
        return Attempt(text=text, queries=queries, score_before=ranked.score, score_after=score,
                       edits=tuple(edits))

    def _candidates(self, text: str, spans: list[tuple[int, int]], free: list[bool], i: int,
                    rng: random.Random) -> list[tuple[str, int, int, str]]:
        """``(operation, start, end, new)``: each operation's edit of word ``i`` (``text[start:end]`` becomes
        ``new``), for the operations that apply."""
        start, end = spans[i]
        word = text[start:end]
        out = []
        for op in self.config.operations:
            if op == SPACE_DELETE:
                if i + 1 < len(spans) and free[i + 1]:
                    after_start, after_end = spans[i + 1]
                    joined = join_words(word, text[end:after_start], text[after_start:after_end])
                    if joined is not None:
                        out.append((op, start, after_end, joined))
                continue
            new = WORD_OPERATIONS[op](word, rng)
            if new is not None and new != word:
                out.append((op, start, end, new))
        return out


__all__ = ["DEFAULT_MAX_EDITS", "ObfuscateAttack", "ObfuscateConfig", "check_max_edits"]
