"""The ``substitute`` family: word substitution guided by the classifier (TextFooler-style, Jin et al. 2020),
within a meaning budget.

Candidates for a word are its ``candidates`` nearest neighbours among a vocabulary (:class:`Neighbours`), by the
cosine of the sentence encoder's embeddings of the words alone (the embedded all-MiniLM-L6-v2 by default; its
tokenizer's whole words are the vocabulary). For a statement the classifier gets right:

1. rank its words by importance (:func:`~toxiforge.attacks.importance.rank_words`); stopwords (scikit-learn's
   English list) and words with a character other than a letter are never replaced;
2. for each word in that order, while fewer than ``max_changed`` × words have changed and the label has not
   flipped: put each candidate in its place, drop those whose sentence embedding falls below ``min_similarity``
   cosine to the original statement (encoder calls are not classifier queries), score the rest in one batch (one
   query each) and keep the one with the lowest P(true label) if it is lower than the statement's now.

``similarity`` is the final statement's cosine to the original (1.0 when nothing changed). A substitution can
change what a statement says, so its label is not kept by construction: ``--validate-with`` checks it.
``max_changed`` 0.2 is the cap on replaced words of Alzantot et al. (2018), which TextAttack's ``alzantot``
recipe keeps (``MaxWordsPerturbed(max_percent=0.2)``); ``min_similarity`` 0.85 follows the issue's default.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from toxiforge.attacks.base import Attempt, Oracle, Source, replace_span, untouched
from toxiforge.attacks.importance import rank_words
from toxiforge.errors import InputError
from toxiforge.records import flipped_label

DEFAULT_MIN_SIMILARITY = 0.85
DEFAULT_MAX_CHANGED = 0.2


def check_similarity(value: float) -> None:
    if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= 1):
        raise InputError(f"min_similarity={value} is outside (0, 1]: it is a cosine similarity floor",
                         hint=f"use --min-similarity between 0 (excluded) and 1, e.g. {DEFAULT_MIN_SIMILARITY}")


@dataclass(frozen=True)
class SubstituteConfig:
    """``min_similarity``: the sentence-embedding cosine to the original every kept change must keep, in (0, 1];
    ``max_changed``: the largest share of a statement's words that may change, in (0, 1]; ``candidates``:
    neighbours tried per word."""

    family: ClassVar[str] = "substitute"

    min_similarity: float = DEFAULT_MIN_SIMILARITY
    max_changed: float = DEFAULT_MAX_CHANGED
    candidates: int = 10

    def __post_init__(self) -> None:
        check_similarity(self.min_similarity)
        if not (isinstance(self.max_changed, (int, float)) and math.isfinite(self.max_changed)
                and 0 < self.max_changed <= 1):
            raise InputError(f"max_changed={self.max_changed} is outside (0, 1]: it is the share of words that may "
                             "change", hint=f"use --max-changed between 0 (excluded) and 1, e.g. {DEFAULT_MAX_CHANGED}")
        if self.candidates < 1:
            raise InputError(f"candidates={self.candidates} tries no substitute", hint="use --candidates 10")


def encoder_vocabulary(embedder: Any) -> list[str]:
    """The whole words (letters only, 2+ characters) of a sentence-transformers encoder's tokenizer, sorted."""
    tokenizer = getattr(getattr(embedder, "model", None), "tokenizer", None)
    if tokenizer is None:
        raise InputError("the sentence encoder has no tokenizer to take candidate words from",
                         hint="give Resources(vocabulary=[...]) with the words to draw substitutes from")
    return sorted(w for w in tokenizer.get_vocab() if w.isalpha() and len(w) >= 2)


class Neighbours:
    """Nearest words of a vocabulary by the cosine of ``embed``'s embeddings of the words alone. The vocabulary's
    embeddings are cached in toxiforge's cache folder (``attacks/``) under the encoder's name and the vocabulary's
    digest, when ``cache_name`` is given."""

    def __init__(self, embed: Any, vocabulary: Sequence[str], cache_name: str | None = None):
        words = list(dict.fromkeys(w.lower() for w in vocabulary))
        if not words:
            raise InputError("the substitute vocabulary is empty", hint="give words to draw substitutes from")
        self.embed, self.words = embed, words
        self.matrix = self._vectors(cache_name)
        self._found: dict[tuple[str, int], list[str]] = {}

    def _vectors(self, cache_name: str | None) -> np.ndarray:
        from toxiforge.analysis.embeddings import embed_texts

        if cache_name is None:
            return embed_texts(self.words, self.embed)
        from toxiforge._io import atomic_write, cache_dir

        digest = hashlib.sha256("\n".join([cache_name, *self.words]).encode()).hexdigest()[:16]
        path = cache_dir() / "attacks" / f"vocabulary-{digest}.npy"
        if path.is_file():
            return np.load(path)
        vectors = embed_texts(self.words, self.embed)

        def write(tmp: Any) -> None:
            with open(tmp, "wb") as handle:
                np.save(handle, vectors)

        atomic_write(path, write)
        return vectors

    def __call__(self, word: str, k: int) -> list[str]:
        """The ``k`` vocabulary words nearest ``word`` (itself left out), nearest first, in ``word``'s case."""
        key = word.lower()
        if (key, k) not in self._found:
            from toxiforge.analysis.embeddings import embed_texts

            sims = self.matrix @ embed_texts([key], self.embed)[0]
            order = np.argsort(-sims, kind="stable")
            self._found[key, k] = [self.words[j] for j in order[:k + 1] if self.words[j] != key][:k]
        found = self._found[key, k]
        if word.isupper() and len(word) > 1:
            return [w.upper() for w in found]
        return [w.capitalize() for w in found] if word[:1].isupper() else list(found)


@dataclass(frozen=True)
class _Best:
    text: str
    score: float
    similarity: float
    new: str


class SubstituteAttack:
    """The family (:class:`~toxiforge.attacks.base.AttackFamily`) against ``classifier``, with sentence encoder
    ``embed`` and candidate ``neighbours``."""

    family = "substitute"
    method = "substitute"
    together = False
    config_type = SubstituteConfig

    def __init__(self, classifier: Any, embed: Any, neighbours: Neighbours,
                 config: SubstituteConfig = SubstituteConfig(), encoder_name: str = ""):
        self.classifier, self.embed, self.neighbours, self.config = classifier, embed, neighbours, config
        self.encoder_name = encoder_name or getattr(embed, "name", "")

    @classmethod
    def from_config(cls, config: SubstituteConfig, classifier: Any, resources: Any) -> SubstituteAttack:
        embed = resources.sentence_encoder()
        given = resources.vocabulary
        vocabulary = list(given) if given is not None else encoder_vocabulary(embed)
        name = getattr(embed, "name", None) or resources.encoder
        return cls(classifier, embed, Neighbours(embed, vocabulary, cache_name=None if given else name), config,
                   encoder_name=name)

    def settings(self) -> dict[str, Any]:
        return {"family": self.family, "min_similarity": self.config.min_similarity,
                "max_changed": self.config.max_changed, "candidates": self.config.candidates,
                "encoder": self.encoder_name}

    def _similarity(self, texts: Sequence[str], original: np.ndarray) -> np.ndarray:
        from toxiforge.analysis.embeddings import embed_texts

        return embed_texts(list(texts), self.embed) @ original

    def attack(self, sources: Sequence[Source]) -> list[Attempt]:
        return [self.attack_one(s) for s in sources]

    def attack_one(self, source: Source) -> Attempt:
        """The attempt on one statement (module docstring)."""
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        from toxiforge.analysis.embeddings import embed_texts

        oracle = Oracle(self.classifier)
        label = source.label
        score = float(oracle.toxic([source.text])[0])
        if flipped_label(score, label):
            return untouched(source, score, oracle.queries, similarity=1.0, model=self.encoder_name)
        ranking = rank_words(oracle, source.text, label, score)
        allowed = math.floor(self.config.max_changed * len(ranking.spans) + 1e-9)
        original = embed_texts([source.text], self.embed)[0]
        text, spans, similarity = source.text, list(ranking.spans), 1.0
        edits: list[dict[str, Any]] = []
        for i in ranking.order:
            if len(edits) >= allowed or flipped_label(score, label):
                break
            start, end = spans[i]
            word = text[start:end]
            if not word.isalpha() or word.lower() in ENGLISH_STOP_WORDS:
                continue
            best = self._best(oracle, text, start, end, self.neighbours(word, self.config.candidates), original,
                              label)
            if best is None or (best.score if label == 1 else 1.0 - best.score) >= (
                    score if label == 1 else 1.0 - score):
                continue
            edits.append({"op": "substitute", "word": i, "before": word, "after": best.new})
            text, score, similarity = best.text, best.score, best.similarity
            shift = len(best.new) - (end - start)
            spans = [(s, e) if k <= i else (s + shift, e + shift) for k, (s, e) in enumerate(spans)]
        return Attempt(text=text, queries=oracle.queries, score_before=ranking.score, score_after=score,
                       edits=tuple(edits), similarity=similarity, model=self.encoder_name)

    def _best(self, oracle: Oracle, text: str, start: int, end: int, words: list[str], original: np.ndarray,
              label: int) -> _Best | None:
        """The candidate with the lowest P(label) among those that keep ``min_similarity``; None when none does."""
        if not words:
            return None
        texts = [replace_span(text, start, end, w) for w in words]
        sims = self._similarity(texts, original)
        kept = [j for j in range(len(words)) if sims[j] >= self.config.min_similarity]
        if not kept:
            return None
        scores = oracle.toxic([texts[j] for j in kept])
        p_label = scores if label == 1 else 1.0 - scores
        b = int(np.argmin(p_label))
        j = kept[b]
        return _Best(texts[j], float(scores[b]), float(sims[j]), words[j])


__all__ = ["DEFAULT_MAX_CHANGED", "DEFAULT_MIN_SIMILARITY", "Neighbours", "SubstituteAttack", "SubstituteConfig",
           "check_similarity", "encoder_vocabulary"]
