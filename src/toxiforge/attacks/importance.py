"""Word importance by deletion, as TextFooler (Jin et al., 2020) and DeepWordBug's replace-one score rank words:
the importance of word i is the drop in P(true label) when word i is removed (:func:`~toxiforge.attacks.base.
drop_word`). Words are attacked in decreasing importance, ties in reading order.

Ranking a statement of n words costs n queries (one batch of the n statements without one word each), after the
one query that scored the statement itself.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from toxiforge.attacks.base import Oracle, drop_word, word_spans


@dataclass(frozen=True)
class Ranking:
    """A statement's words (``spans``), P(toxic) of the statement (``score``), the drop in P(label) without each
    word (``importance``, one per span) and the word indices in attack order (``order``)."""

    spans: list[tuple[int, int]]
    score: float
    importance: np.ndarray
    order: list[int]


def removal_texts(text: str) -> tuple[list[tuple[int, int]], list[str]]:
    """The words of ``text`` and ``text`` without each of them, the texts whose scores rank the words."""
    spans = word_spans(text)
    return spans, [drop_word(text, s, e) for s, e in spans]


def ranking(spans: list[tuple[int, int]], score: float, without: np.ndarray, label: int) -> Ranking:
    """The :class:`Ranking` of a statement with P(toxic) ``score`` and P(toxic) ``without`` each word."""
    to_label = (lambda p: p) if label == 1 else (lambda p: 1.0 - p)
    importance = to_label(score) - to_label(np.asarray(without, dtype=np.float64))
    order = sorted(range(len(spans)), key=lambda i: (-importance[i], i))
    return Ranking(spans=spans, score=score, importance=importance, order=order)


def rank_words(oracle: Oracle, text: str, label: int, score: float) -> Ranking:
    """Rank the words of ``text``, whose P(toxic) is ``score`` (module docstring); n queries for n words."""
    spans, texts = removal_texts(text)
    return ranking(spans, score, oracle.toxic(texts), label)


__all__ = ["Ranking", "rank_words", "ranking", "removal_texts"]
