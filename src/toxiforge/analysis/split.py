"""Similarity-controlled train/test split (ToxiGen §4.2: no training statement has cosine similarity above 0.7
with any test statement).

1. A test set of ``test_size`` rows is drawn at random (seeded), stratified by group × label × method (the
   columns present). ``allocation="proportional"`` shares the test size out by stratum size (largest
   remainders); ``"equal"`` gives every stratum the same number (an error when a stratum is too small).
2. Every other row's maximum cosine similarity to the test rows is computed with chunked matrix products
   (``chunk_rows`` training rows at a time: a 274,000 × 10,000 comparison never holds more than
   ``chunk_rows × 10,000`` similarities).
3. Training rows above ``threshold`` are dropped (``on_conflict="drop"``, the default) or moved into the test set
   (``"move"``, repeated until no remaining training row is above the threshold against the grown test set).

Rows at exactly the threshold are kept. The result reports the rows removed, the maximum cross similarity
before and after, and per-stratum counts; :func:`write_split` writes train/test/removed files and
``split.json``. With the same data, seed and encoder the split is the same.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from toxiforge._io import require_empty_dir
from toxiforge.analysis.dataset import AnalysisData, load_data
from toxiforge.analysis.embeddings import DEFAULT_ENCODER, Embedder, embed_texts, load_encoder, normalize_rows
from toxiforge.errors import InputError, check_choice

Allocation = Literal["proportional", "equal"]
OnConflict = Literal["drop", "move"]
ALLOCATIONS: tuple[Allocation, ...] = ("proportional", "equal")
ON_CONFLICTS: tuple[OnConflict, ...] = ("drop", "move")
Stratum = tuple


def check_threshold(threshold: float) -> float:
    try:
        value = float(threshold)
    except (TypeError, ValueError):
        raise InputError(f"threshold {threshold!r} is not a number", hint="use a value in (0, 1], e.g. 0.7") from None
    if not 0.0 < value <= 1.0:
        raise InputError(f"threshold {threshold} is outside (0, 1]", hint="use a cosine similarity in (0, 1], e.g. 0.7")
    return value


def allocate(sizes: dict[Stratum, int], test_size: int | None,
             allocation: Allocation = "proportional") -> dict[Stratum, int]:
    """Test rows per stratum summing to ``test_size``; raises when a stratum cannot supply its share."""
    total = sum(sizes.values())
    keys = sorted(sizes)
    if isinstance(test_size, bool) or not isinstance(test_size, (int, np.integer)) or test_size < 1:
        raise InputError(f"test size {test_size!r} must be a whole number of rows >= 1", hint="e.g. --test-size 1000")
    if test_size >= total:
        raise InputError(f"test size {test_size} is not smaller than the {total} statements in the data",
                         hint=f"use a test size below {total}")
    if allocation == "proportional":
        quotas = {k: test_size * sizes[k] / total for k in keys}
        out = {k: int(np.floor(quotas[k])) for k in keys}
        order = sorted(keys, key=lambda k: (-(quotas[k] - out[k]), keys.index(k)))
    elif allocation == "equal":
        share, _ = divmod(test_size, len(keys))
        out = {k: share for k in keys}
        order = list(keys)
    else:
        raise InputError(f"unknown allocation {allocation!r}", hint="use proportional or equal")
    for k in order[:test_size - sum(out.values())]:
        out[k] += 1
    short = [(k, out[k], sizes[k]) for k in keys if out[k] > sizes[k]]
    if short:
        k, want, have = short[0]
        raise InputError(f"the test set needs {want} rows from stratum {_label(k)} but it has only {have}"
                         + (f" ({len(short)} strata are too small)" if len(short) > 1 else ""),
                         hint="use a smaller --test-size or --allocation proportional")
    return out


def _label(key: Stratum) -> str:
    return "/".join(str(v) for v in key) if key else "all"


def strata_of(data: AnalysisData) -> list[Stratum]:
    """Each row's stratum: (group, label, method) for the columns present."""
    columns = [c for c in (data.groups, data.labels, data.methods) if c is not None]
    return list(zip(*columns)) if columns else [()] * len(data)


def choose_test(strata: Sequence[Stratum], test_size: int | None, *, seed: int = 0,
                allocation: Allocation = "proportional") -> np.ndarray:
    """Sorted row indices of a stratified random test set (deterministic given ``seed``)."""
    members: dict[Stratum, list[int]] = {}
    for i, key in enumerate(strata):
        members.setdefault(key, []).append(i)
    quotas = allocate({k: len(v) for k, v in members.items()}, test_size, allocation)
    rng = np.random.default_rng(seed)
    chosen = [rng.permutation(np.asarray(members[k]))[:quotas[k]] for k in sorted(members)]
    return np.sort(np.concatenate(chosen)).astype(np.int64)


def max_similarity(queries: np.ndarray, keys: np.ndarray, *, chunk_rows: int = 2048,
                   on_progress: Callable[[int], None] | None = None) -> np.ndarray:
    """For each row of ``queries``, its largest dot product with any row of ``keys`` (cosine when both are
    normalized), computed ``chunk_rows`` query rows at a time into one reused buffer (numpy's BLAS, all cores).
    Returns float32 ``[len(queries)]``; -inf when ``keys`` is empty."""
    out = np.full(len(queries), -np.inf, dtype=np.float32)
    if len(queries) == 0 or len(keys) == 0:
        return out
    keys_t = np.ascontiguousarray(np.asarray(keys, dtype=np.float32).T)
    buffer = np.empty((min(chunk_rows, len(queries)), keys_t.shape[1]), dtype=np.float32)
    for start in range(0, len(queries), chunk_rows):
        q = np.ascontiguousarray(queries[start:start + chunk_rows], dtype=np.float32)
        products = buffer[:len(q)]
        np.dot(q, keys_t, out=products)
        products.max(axis=1, out=out[start:start + len(q)])
        if on_progress is not None:
            on_progress(len(q))
    return out


@dataclass
class SplitResult:
    """Indices (into the usable rows of the data) and what the split did."""

    train: np.ndarray
    test: np.ndarray
    removed: np.ndarray                 # rows dropped (on_conflict="drop") or moved to the test set ("move")
    removed_similarity: np.ndarray      # their max similarity to the test set when they were removed
    threshold: float
    test_size: int
    seed: int
    allocation: str
    on_conflict: str
    max_similarity_before: float        # max over all non-test rows, before removal
    max_cross_similarity: float         # max over the final train rows against the final test set
    rounds: int = 1
    strata: list[dict[str, Any]] = field(default_factory=list)
    encoder: str = ""
    load_seconds: float = 0.0           # loading the encoder
    embed_seconds: float = 0.0          # embedding the statements
    split_seconds: float = 0.0
    source: str = ""

    def summary(self) -> dict[str, Any]:
        n = len(self.train) + len(self.test) + (len(self.removed) if self.on_conflict == "drop" else 0)
        return {
            "source": self.source, "rows": n, "train": len(self.train), "test": len(self.test),
            "removed": len(self.removed), "removed_share": len(self.removed) / n if n else 0.0,
            "on_conflict": self.on_conflict, "threshold": self.threshold, "test_size": self.test_size,
            "seed": self.seed, "allocation": self.allocation, "encoder": self.encoder,
            "max_similarity_before": self.max_similarity_before, "max_cross_similarity": self.max_cross_similarity,
            "rounds": self.rounds, "encoder_load_seconds": round(self.load_seconds, 3),
            "embed_seconds": round(self.embed_seconds, 3),
            "split_seconds": round(self.split_seconds, 3), "strata": self.strata,
        }

    def line(self) -> str:
        s = self.summary()
        verb = "dropped" if self.on_conflict == "drop" else "moved to the test set"
        return (f"test {s['test']:,} rows, train {s['train']:,} rows; {s['removed']:,} row{'s' * (s['removed'] != 1)} "
                f"({100 * s['removed_share']:.2f}%) {verb} for cosine > {self.threshold:g} with a test row; "
                f"max cross similarity {self.max_cross_similarity:.4f} after the split "
                f"({self.max_similarity_before:.4f} before)")


def fixed_test(test_indices: Sequence[int], n: int) -> np.ndarray:
    """Validate a given test set: distinct row indices in range, at least one row left for training."""
    test = np.asarray(sorted(set(int(i) for i in test_indices)), dtype=np.int64)
    if test.size == 0 or test.size != len(test_indices):
        raise InputError("test indices must be distinct and at least one", hint="pass distinct row numbers")
    if test[0] < 0 or test[-1] >= n or test.size >= n:
        raise InputError(f"test indices must lie in 0..{n - 1} and leave rows for training",
                         hint="pass row numbers of the usable statements")
    return test


def split_embeddings(embeddings: np.ndarray, strata: Sequence[Stratum], test_size: int | None, *,
                     threshold: float = 0.7, seed: int = 0, allocation: Allocation = "proportional",
                     on_conflict: OnConflict = "drop", test_indices: Sequence[int] | None = None,
                     chunk_rows: int = 2048, on_progress: Callable[[int], None] | None = None) -> SplitResult:
    """The split on precomputed embeddings (normalized here). ``strata[i]`` is row i's stratum key.
    ``test_indices`` fixes the test set (e.g. a human-validated one) instead of drawing ``test_size`` rows."""
    threshold = check_threshold(threshold)
    check_choice(on_conflict, ON_CONFLICTS, what="on_conflict", hint="use drop or move")
    if len(strata) != len(embeddings):
        raise InputError(f"{len(embeddings)} embeddings for {len(strata)} rows", hint="give one vector per row")
    started = time.perf_counter()
    emb = normalize_rows(embeddings)
    if test_indices is not None:
        test = fixed_test(test_indices, len(emb))
    else:
        test = choose_test(strata, test_size, seed=seed, allocation=allocation)
    test_size = len(test)
    is_test = np.zeros(len(emb), dtype=bool)
    is_test[test] = True
    train = np.flatnonzero(~is_test)
    best = max_similarity(emb[train], emb[test], chunk_rows=chunk_rows, on_progress=on_progress)
    before = float(best.max()) if best.size else float("nan")
    removed, removed_sim, rounds = [], [], 1
    while True:
        over = best > threshold
        if not over.any():
            break
        removed.append(train[over])
        removed_sim.append(best[over])
        if on_conflict == "drop":
            train, best = train[~over], best[~over]
            break
        new_test, train, best = train[over], train[~over], best[~over]
        test = np.sort(np.concatenate([test, new_test]))
        rounds += 1
        best = np.maximum(best, max_similarity(emb[train], emb[new_test], chunk_rows=chunk_rows))
    removed_idx = np.concatenate(removed) if removed else np.zeros(0, dtype=np.int64)
    removed_s = np.concatenate(removed_sim) if removed_sim else np.zeros(0, dtype=np.float32)
    order = np.argsort(removed_idx, kind="stable")
    result = SplitResult(train=train, test=test, removed=removed_idx[order], removed_similarity=removed_s[order],
                         threshold=threshold, test_size=int(test_size), seed=seed, allocation=allocation,
                         on_conflict=on_conflict, max_similarity_before=before,
                         max_cross_similarity=float(best.max()) if best.size else float("nan"), rounds=rounds)
    result.strata = _strata_counts(strata, result)
    result.split_seconds = time.perf_counter() - started
    return result


def _strata_counts(strata: Sequence[Stratum], result: SplitResult) -> list[dict[str, Any]]:
    counts: dict[Stratum, list[int]] = {}
    for column, idx in enumerate((result.train, result.test, result.removed)):
        for i in idx:
            counts.setdefault(strata[i], [0, 0, 0])[column] += 1
    return [{"stratum": _label(k), "train": c[0], "test": c[1], "removed": c[2]} for k, c in sorted(counts.items())]


def similarity_split(data: Any, test_size: int | None, *, threshold: float = 0.7, seed: int = 0,
                     model: str = DEFAULT_ENCODER, embed: Embedder | None = None,
                     embeddings: np.ndarray | None = None, allocation: Allocation = "proportional",
                     on_conflict: OnConflict = "drop", test_indices: Sequence[int] | None = None,
                     device: str = "cpu", batch_size: int = 128,
                     on_embed_progress: Callable[[int], None] | None = None,
                     on_split_progress: Callable[[int], None] | None = None) -> tuple[SplitResult, AnalysisData]:
    """Split ``data`` (path, table, rows or :class:`AnalysisData`); returns the result and the loaded data.

    ``test_indices`` (row numbers of the usable statements) fixes the test set instead of a stratified draw.
    Embeddings: ``embeddings`` (one row per usable statement) if given, else ``embed(texts)`` if given, else
    the sentence-transformers ``model`` (default: the embedded all-MiniLM-L6-v2). Arguments are checked
    before the encoder is loaded.
    """
    d = load_data(data, need=())
    threshold = check_threshold(threshold)
    check_choice(on_conflict, ON_CONFLICTS, what="on_conflict", hint="use drop or move")
    strata = strata_of(d)
    if test_indices is not None:  # fail fast on a bad test set, before loading the encoder
        fixed_test(test_indices, len(d))
    else:
        choose_test(strata, test_size, seed=seed, allocation=allocation)
    load_seconds = 0.0
    if embeddings is None:
        started = time.perf_counter()
        encoder = embed or load_encoder(model, device=device, batch_size=batch_size)
        load_seconds = time.perf_counter() - started
        name = getattr(encoder, "name", getattr(encoder, "__name__", "custom embed function"))
        started = time.perf_counter()
        embeddings = embed_texts(d.texts, encoder, on_progress=on_embed_progress)
        embed_seconds = time.perf_counter() - started
    else:
        name, embed_seconds = "precomputed embeddings", 0.0
    result = split_embeddings(embeddings, strata, test_size, threshold=threshold, seed=seed, allocation=allocation,
                              on_conflict=on_conflict, test_indices=test_indices, on_progress=on_split_progress)
    result.encoder, result.embed_seconds, result.source = name, embed_seconds, d.source
    result.load_seconds = load_seconds
    return result, d


def write_split(result: SplitResult, data: AnalysisData, out_dir: str | Path, *, fmt: str = "parquet",
                overwrite: bool = False) -> dict[str, Path]:
    """Write ``train``, ``test``, ``removed`` (with column ``max_test_similarity``) and ``split.json`` into
    ``out_dir``, each file atomically. The directory must be new or empty unless ``overwrite``."""
    import pyarrow as pa

    from toxiforge._io import atomic_write_text
    from toxiforge.records import write_table

    if fmt not in ("parquet", "jsonl", "csv"):
        raise InputError(f"unknown format {fmt!r}", hint="use parquet, jsonl or csv")
    out = require_empty_dir(out_dir, overwrite)
    tables = {"train": data.table.take(pa.array(result.train, type=pa.int64())),
              "test": data.table.take(pa.array(result.test, type=pa.int64()))}
    removed = data.table.take(pa.array(result.removed, type=pa.int64()))
    tables["removed"] = removed.append_column("max_test_similarity",
                                              pa.array(result.removed_similarity.astype(np.float64)))
    written = {name: write_table(table, out / f"{name}.{fmt}") for name, table in tables.items()}
    written["report"] = atomic_write_text(out / "split.json", json.dumps(result.summary(), indent=2) + "\n")
    return written
