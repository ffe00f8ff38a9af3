"""Deterministic fakes for the attack tests: a keyword classifier whose scores are known by hand, and a tiny
bag-of-words sentence encoder."""

from __future__ import annotations

import numpy as np
import torch


class KeywordClassifier:
    """P(toxic) = ``base`` + the weights of the whitespace-separated words present, clipped to [0.01, 0.99]. An edited
    word ("alhpa", "al pha", a homoglyph) no longer matches, so the effect of every edit is known by hand. Counts the
    texts it scored (``texts_scored``) and its calls (``calls``), through either scoring method."""

    num_classes, toxic_index, benign_index = 2, 1, 0

    def __init__(self, weights: dict[str, float], base: float = 0.3, name: str = "keywords"):
        self.weights, self.base, self.name = weights, base, name
        self.texts_scored = self.calls = 0

    def score(self, text: str) -> float:
        return float(min(0.99, max(0.01, self.base + sum(self.weights.get(w, 0.0) for w in text.split()))))

    def predict_proba(self, texts):
        self.texts_scored += len(texts)
        self.calls += 1
        return np.array([self.score(t) for t in texts])

    def class_log_probs(self, texts):
        p = torch.tensor(self.predict_proba(texts), dtype=torch.float32)
        return torch.stack([torch.log1p(-p), torch.log(p)], dim=1)

    def describe(self):
        return {"name": self.name, "backend": "test"}


class BagOfWordsEncoder:
    """A sentence encoder: each word a fixed seeded random vector (``close`` pairs nearly the same vector), a
    sentence the sum of its words' vectors (rows are normalized by embed_texts)."""

    name = "bag-of-words"

    def __init__(self, words, close: dict[str, str] | None = None, dim: int = 64, seed: int = 0):
        rng = np.random.default_rng(seed)
        self.vectors = {w: rng.normal(size=dim) for w in words}
        for word, like in (close or {}).items():
            self.vectors[word] = self.vectors[like] + 0.05 * rng.normal(size=dim)
        self.dim = dim
        self.calls = 0

    def __call__(self, texts):
        self.calls += len(texts)
        out = np.zeros((len(texts), self.dim))
        for i, t in enumerate(texts):
            for w in t.lower().split():
                out[i] += self.vectors.get(w, np.zeros(self.dim))
        return out
