"""AFLite (Le Bras et al., 2020, Algorithm 1): drop the examples that simple linear models predict too easily.

Over frozen embeddings ``X`` (default: the embedded all-MiniLM-L6-v2 sentence embeddings,
:mod:`toxiforge.analysis.embeddings`) and labels ``y``, starting from the whole data ``S``:

1. ``m`` times, split ``S`` at random into a training part of ``t`` rows and the rest; train a linear classifier
   on the training part and predict the rest;
2. an example's *predictability* is the share of those predictions that were right;
3. remove the (up to) ``k`` most predictable examples whose predictability is at least ``tau``;
4. repeat until ``S`` has the target size ``n``, or stop early when fewer than ``k`` examples reach ``tau``.

Parameters keep the paper's names (:class:`AFLiteConfig`: ``ensemble_size`` m, ``train_size`` t, ``cut_size`` k,
``threshold`` tau, ``target_size`` n). ``m = 64`` and ``tau = 0.75`` are the paper's values; ``t`` and ``k`` have
no data-independent value in the paper, so the defaults here scale with the data: ``t`` = half the target size,
``k`` = 5% of the input.

Departures, and why:

* the linear model defaults to ridge classification (least squares on +-1 targets, closed form; the model of
  scikit-learn's ``RidgeClassifier``), not the paper's logistic regression, and its ``m`` training parts are
  random unions of 1/64 slices of ``S`` (``t`` rounded to whole slices): the slices' Gram matrices are computed
  once per iteration and each member is a 384 x 384 solve, which is what lets 250,000 x 384 embeddings filter in
  minutes on a CPU instead of ``m`` full fits per iteration; ``classifier="logistic"`` gives the paper's model
  (scikit-learn ``LogisticRegression``, exact random parts of ``t`` rows), much slower;
* the last cut is capped at ``|S| - n`` rows, so the result has exactly ``n`` rows when the loop is not stopped
  early (Algorithm 1 may overshoot by up to ``k - 1``);
* ties in predictability (a ratio of small counts: many rows tie, often at 1.0) are broken at random with the
  run's seed, not by file order, so the order of the input file does not decide which rows go.

Zhou et al. then sample the survivors down to 33% of the data with the original label ratio
(:func:`aflite_subset`; ``subset_size`` in :func:`run_aflite`). When the survivors lack rows of a label, the rows
removed last fill the gap; how many is recorded (``top_ups``), as the paper "could not downsample" then.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from toxiforge.errors import InputError, check_choice

CLASSIFIERS: tuple[str, ...] = ("ridge", "logistic")
SCORES_FILE, SUBSET_FILE, LOG_FILE = "scores.parquet", "aflite.parquet", "aflite.json"


@dataclass(frozen=True)
class AFLiteConfig:
    """AFLite's parameters (Le Bras et al. names in brackets); None = the size-dependent default."""

    target_size: int  # n
    ensemble_size: int = 64  # m
    train_size: int | None = None  # t; default: target_size // 2
    cut_size: int | None = None  # k; default: 5% of the input rows
    threshold: float = 0.75  # tau
    classifier: str = "ridge"
    seed: int = 0

    def __post_init__(self) -> None:
        if self.target_size < 2:
            raise InputError(f"target size must be at least 2, got {self.target_size}", hint="pass --target-size")
        if self.ensemble_size < 1:
            raise InputError(f"ensemble size must be at least 1, got {self.ensemble_size}", hint="use e.g. 64")
        if self.train_size is not None and not 2 <= self.train_size < self.target_size:
            raise InputError(f"train size {self.train_size} must be at least 2 and below the target size "
                             f"{self.target_size}", hint="AFLite predicts the rows outside each training part")
        if self.cut_size is not None and self.cut_size < 1:
            raise InputError(f"cut size must be at least 1, got {self.cut_size}", hint="use e.g. 500")
        if not 0 <= self.threshold <= 1:
            raise InputError(f"threshold must be in [0, 1], got {self.threshold}", hint="use e.g. 0.75")
        check_choice(self.classifier, CLASSIFIERS, what="AFLite classifier")

    def resolved(self, n_rows: int) -> AFLiteConfig:
        """The config with ``t`` and ``k`` filled in for ``n_rows`` input rows."""
        from dataclasses import replace

        return replace(self, train_size=self.train_size or max(2, self.target_size // 2),
                       cut_size=self.cut_size or max(1, math.ceil(0.05 * n_rows)))


@dataclass
class AFLiteResult:
    """``kept``: sorted indices of the surviving rows; ``removed_at``: per input row, the iteration that removed
    it (-1: kept); ``predictability``: per row, its last predictability score (NaN: never scored)."""

    kept: np.ndarray
    removed_at: np.ndarray
    predictability: np.ndarray
    config: AFLiteConfig
    history: list[dict[str, Any]] = field(default_factory=list)
    stopped_early: bool = False
    seconds: float = 0.0


RIDGE_ALPHA = 1.0  # scikit-learn RidgeClassifier's default
RIDGE_BLOCKS = 64  # training parts are unions of 1/64 slices of S (see _ridge_ensemble)


def _ridge_ensemble(X: np.ndarray, y: np.ndarray, config: AFLiteConfig, rng: np.random.Generator
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``(right, seen)`` counts of ``m`` ridge classifiers, each trained on a random part of ~``t`` rows.

    Equal to scikit-learn's ``RidgeClassifier(alpha=1)`` fitted on each part (tested), but fast: the rows are
    shuffled into :data:`RIDGE_BLOCKS` slices whose Gram matrices are computed once; a member's training part is a
    random union of slices (so ``t`` is rounded to whole slices), its normal equations the sum of their Grams.
    One pass over the data per iteration instead of ``m`` fits.
    """
    n, d = X.shape
    blocks = np.array_split(rng.permutation(n), min(RIDGE_BLOCKS, n))
    sizes = np.array([len(b) for b in blocks])
    target = np.where(y == 1, 1.0, -1.0)
    gram = np.empty((len(blocks), d, d))
    xsum = np.empty((len(blocks), d))
    xy = np.empty((len(blocks), d))
    ysum = np.empty(len(blocks))
    for j, b in enumerate(blocks):
        Z = X[b]
        gram[j] = Z.T @ Z
        xsum[j], xy[j], ysum[j] = Z.sum(axis=0), Z.T @ target[b], target[b].sum()
    per_member = int(np.clip(round(config.train_size / (n / len(blocks))), 1, len(blocks) - 1))
    member_blocks = [rng.choice(len(blocks), size=per_member, replace=False) for _ in range(config.ensemble_size)]
    count = np.array([sizes[c].sum() for c in member_blocks], dtype=np.float64)
    mean_x = np.stack([xsum[c].sum(axis=0) for c in member_blocks]) / count[:, None]
    mean_y = np.array([ysum[c].sum() for c in member_blocks]) / count
    # centred normal equations: (Xc'Xc + alpha I) w = Xc'yc, intercept = mean_y - mean_x . w; one batched solve
    a = np.stack([gram[c].sum(axis=0) for c in member_blocks])
    a -= count[:, None, None] * mean_x[:, :, None] * mean_x[:, None, :]
    a += RIDGE_ALPHA * np.eye(d)
    rhs = np.stack([xy[c].sum(axis=0) for c in member_blocks]) - (count * mean_y)[:, None] * mean_x
    weights = np.linalg.solve(a, rhs[:, :, None])[:, :, 0].T  # [d, m]
    bias = mean_y - np.einsum("md,dm->m", mean_x, weights)
    predicted = (X @ weights.astype(np.float32) + bias.astype(np.float32)) > 0  # [n, m]
    in_train = np.zeros((n, config.ensemble_size), dtype=bool)
    block_of = np.empty(n, dtype=np.int64)
    for j, b in enumerate(blocks):
        block_of[b] = j
    for k, chosen in enumerate(member_blocks):
        in_train[:, k] = np.isin(block_of, chosen)
    right = ((predicted == (y == 1)[:, None]) & ~in_train).sum(axis=1)
    return right.astype(np.float64), (~in_train).sum(axis=1).astype(np.float64)


def _logistic_ensemble(X: np.ndarray, y: np.ndarray, config: AFLiteConfig, rng: np.random.Generator
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``(right, seen)`` counts of ``m`` scikit-learn logistic regressions on random parts of ``t`` rows."""
    from sklearn.linear_model import LogisticRegression

    right = np.zeros(len(y))
    seen = np.zeros(len(y))
    for _ in range(config.ensemble_size):
        perm = rng.permutation(len(y))
        train, test = perm[:config.train_size], perm[config.train_size:]
        if len(np.unique(y[train])) < 2:  # a one-class part predicts that class everywhere
            right[test] += y[test] == y[train[0]]
        else:
            model = LogisticRegression(max_iter=200).fit(X[train], y[train])
            right[test] += model.predict(X[test]) == y[test]
        seen[test] += 1
    return right, seen


def predictability(X: np.ndarray, y: np.ndarray, config: AFLiteConfig, rng: np.random.Generator) -> np.ndarray:
    """Predictability of each row (steps 1-2 of the module docstring); NaN where never predicted."""
    ensemble = _ridge_ensemble if config.classifier == "ridge" else _logistic_ensemble
    right, seen = ensemble(X, y, config, rng)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(seen > 0, right / np.maximum(seen, 1), np.nan)


def aflite(X: np.ndarray, y: npt.ArrayLike, config: AFLiteConfig, *,
           on_iteration: Callable[[dict[str, Any]], None] | None = None) -> AFLiteResult:
    """Run AFLite on embeddings ``X`` [n, d] with binary labels ``y`` (see the module docstring)."""
    started = time.perf_counter()
    X = np.ascontiguousarray(X, dtype=np.float32)
    y = np.asarray(y, dtype=np.int64)
    if X.ndim != 2 or len(X) != len(y):
        raise InputError(f"embeddings of shape {X.shape} do not match {len(y)} labels",
                         hint="pass one embedding row per example")
    if config.target_size >= len(y):
        raise InputError(f"target size {config.target_size} is not smaller than the data ({len(y)} rows)",
                         hint="pass a --target-size below the number of rows")
    config = config.resolved(len(y))
    k = config.cut_size
    assert k is not None, "resolved() fills in the cut size"
    rng = np.random.default_rng(config.seed)
    rows = np.arange(len(y))
    removed_at = np.full(len(y), -1, dtype=np.int64)
    scores = np.full(len(y), np.nan)
    history: list[dict[str, Any]] = []
    stopped_early = False
    iteration = 0
    while len(rows) > config.target_size:
        p = predictability(X[rows], y[rows], config, rng)
        scores[rows] = p
        eligible = np.flatnonzero(np.nan_to_num(p, nan=-1.0) >= config.threshold)
        eligible = rng.permutation(eligible)  # ties go in random order, not file order
        eligible = eligible[np.argsort(-p[eligible], kind="stable")]
        cut = eligible[:min(k, len(rows) - config.target_size)]
        removed_at[rows[cut]] = iteration
        step = {"iteration": iteration, "rows": int(len(rows)), "removed": int(len(cut)),
                "eligible": int(len(eligible)), "mean_predictability": float(np.nanmean(p)),
                "seconds": round(time.perf_counter() - started, 3)}
        history.append(step)
        if on_iteration is not None:
            on_iteration(step)
        rows = np.delete(rows, cut)
        iteration += 1
        if len(cut) < min(k, len(rows) + len(cut) - config.target_size):
            stopped_early = True  # fewer than k rows reached tau (Algorithm 1's early stop)
            break
    return AFLiteResult(kept=np.sort(rows), removed_at=removed_at, predictability=scores, config=config,
                        history=history, stopped_early=stopped_early, seconds=time.perf_counter() - started)


def aflite_subset(result: AFLiteResult, labels: Sequence[int] | np.ndarray, size: int, *, seed: int = 0
                  ) -> tuple[np.ndarray, int]:
    """The survivors sampled down to ``size`` rows (at most all survivors) with the original label ratio;
    rows removed last (the least predictable of the removed) fill a label the survivors lack. Returns
    ``(sorted indices, top-ups)``: top-ups are the rows taken from outside the survivors."""
    from toxiforge.bias.subsets import count_outside, keep_label_ratio

    order = np.argsort(-np.where(result.removed_at < 0, np.iinfo(np.int64).max, result.removed_at), kind="stable")
    subset = keep_label_ratio(result.kept, labels, min(size, len(result.kept)), seed=seed, fallback=order)
    return subset, count_outside(subset, result.kept)


def run_aflite(examples: Sequence[Any], out_dir: str | Path, config: AFLiteConfig, *, embeddings: np.ndarray,
               subset_size: int | None = None, embed_seconds: float | None = None, encoder: str | None = None,
               overwrite: bool = False, on_iteration: Callable[[dict[str, Any]], None] | None = None
               ) -> tuple[AFLiteResult, np.ndarray]:
    """AFLite over ``embeddings`` of ``examples``; writes ``scores.parquet`` (every row: id, text, label,
    predictability, removed_at), ``aflite.parquet`` (the subset) and ``aflite.json`` into ``out_dir``.

    ``subset_size``: sample the survivors down to that many rows with the original label ratio (Zhou et al.);
    returns ``(result, subset indices)``."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    from toxiforge._io import atomic_write, atomic_write_text, require_empty_dir
    out = require_empty_dir(out_dir, overwrite)
    examples = list(examples)
    labels = [e.label for e in examples]
    result = aflite(embeddings, labels, config, on_iteration=on_iteration)
    subset, top_ups = result.kept, 0
    if subset_size is not None:
        subset, top_ups = aflite_subset(result, labels, subset_size, seed=config.seed)
    table = pa.table({
        "id": np.arange(len(examples), dtype=np.int64), "text": [e.text for e in examples],
        "label": np.asarray(labels, dtype=np.int64), "group": [e.group for e in examples],
        "method": [e.method for e in examples], "predictability": result.predictability,
        "removed_at": result.removed_at})
    atomic_write(out / SCORES_FILE, lambda tmp: pq.write_table(table, tmp))
    atomic_write(out / SUBSET_FILE, lambda tmp: pq.write_table(table.take(subset), tmp))
    log = {"config": asdict(result.config), "rows": len(examples), "kept": int(len(result.kept)),
           "subset": int(len(subset)), "top_ups": top_ups, "stopped_early": result.stopped_early, "encoder": encoder,
           "filter_seconds": round(result.seconds, 3),
           "embed_seconds": None if embed_seconds is None else round(embed_seconds, 3), "history": result.history}
    atomic_write_text(out / LOG_FILE, json.dumps(log, indent=2) + "\n")
    return result, subset
