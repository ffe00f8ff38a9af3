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


def rank_words(oracle: Oracle, text: str, label: int, score: float) -> Ranking:
    """Rank the words of ``text``, whose P(toxic) is ``score`` (module docstring); n queries for n words."""
    p_label = score if label == 1 else 1.0 - score
    spans = word_spans(text)
    without = oracle.true_class([drop_word(text, s, e) for s, e in spans], label)
    importance = p_label - without
    order = sorted(range(len(spans)), key=lambda i: (-importance[i], i))
    return Ranking(spans=spans, score=score, importance=importance, order=order)


__all__ = ["Ranking", "rank_words"]
