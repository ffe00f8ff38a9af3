"""DataMaps (Swayamdipta et al., 2020): training dynamics per example, and the easy/ambiguous/hard subsets.

:class:`DataMapRecorder` is a ``TrainerCallback`` (a :class:`~toxiforge.training.indexed.BatchCallback`) that
keeps, for every training example and epoch, the probability the model gave its gold label and whether the
prediction was right. :func:`training_dynamics` turns that into the data-map coordinates:

* ``confidence`` -- the mean over epochs of p(gold label);
* ``variability`` -- their standard deviation (population s.d., ``ddof=0``, as allenai/cartography);
* ``correctness`` -- the share of epochs in which the example was predicted right (cartography counts epochs;
  a share reads the same for any number of epochs).

Regions (:func:`region_subset`): ``easy`` = highest confidence, ``ambiguous`` = highest variability, ``hard`` =
lowest confidence. As Zhou et al. (Appendix A.2) each region is cut to 50% of the data first, then sampled down to
33% with the original label ratio (:mod:`toxiforge.bias.subsets`).

Departure from the paper, and why: as cartography's reference code does, the probabilities are the ones the
training forward passes compute during each epoch (dropout on, the model moving within the epoch), not those of
an extra pass over the training set with the epoch's parameters. That is what keeps the overhead to a few per
cent instead of the ~1/3 of an extra forward pass per epoch. :func:`run_datamap` trains on every row (no held-out
split), so each example gets a coordinate, and needs at least 2 whole epochs.

Checked against allenai/cartography (``run_glue.py`` logs each epoch's training-pass logits;
``train_dy_filtering.py`` takes softmax p(gold) per epoch, ``np.mean`` and ``np.std`` over the epochs): the same,
every epoch from the first included. There is no burn-in: cartography's ``--burn_out N`` keeps the *first* N
epochs (default all), which this module does not offer. A consequence of recording during training, in both: the
first epoch's value of a row seen before the model learned anything is p ~ 0.5. With a pretrained encoder and
thousands of steps per epoch that is a small share of the rows; when the model needs a large share of the first
epochs to fit anything (little data, a small random model), variability ranks how far a row moved from 0.5 -- how
fast it was learned -- rather than how much its prediction swings, and the ambiguous region is then close to a
random mix of easy and hard rows (measured on the planted-shortcut test, ``docs/bias.md``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from toxiforge.bias.subsets import (
    DEFAULT_FRACTION,
    DEFAULT_POOL_FRACTION,
    count_outside,
    keep_label_ratio,
    subset_size,
)
from toxiforge.data.examples import Example
from toxiforge.errors import InputError
from toxiforge.training.indexed import BatchCallback

REGIONS: tuple[str, ...] = ("easy", "ambiguous", "hard")
DYNAMICS_FILE, PLOT_FILE = "dynamics.parquet", "datamap.png"


class DataMapRecorder(BatchCallback):
    """Records p(gold) and correctness of each training example in each epoch (see the module docstring)."""

    def __init__(self, n_examples: int):
        self.n = n_examples
        self.probabilities: list[np.ndarray] = []  # one [n] array per finished epoch
        self.correct: list[np.ndarray] = []
        self._reset()

    def _reset(self) -> None:
        self._p = np.full(self.n, np.nan, dtype=np.float32)
        self._c = np.zeros(self.n, dtype=bool)

    def on_train_begin(self, args, state, control, **kwargs):
        self.probabilities, self.correct = [], []
        self._reset()

    def on_batch(self, index: torch.Tensor, logits: torch.Tensor, labels: torch.Tensor) -> None:
        probs = torch.softmax(logits.float(), dim=-1)
        gold = probs.gather(1, labels.view(-1, 1)).squeeze(1)
        right = logits.argmax(dim=-1) == labels
        where = index.cpu().numpy()
        self._p[where] = gold.cpu().numpy()
        self._c[where] = right.cpu().numpy()

    def on_epoch_end(self, args, state, control, **kwargs):
        self.probabilities.append(self._p)
        self.correct.append(self._c)
        self._reset()

    def dynamics(self) -> Dynamics:
        if not self.probabilities:
            raise InputError("no epoch was recorded", hint="train at least one whole epoch")
        return training_dynamics(np.stack(self.probabilities), np.stack(self.correct))


@dataclass(frozen=True)
class Dynamics:
    """Data-map coordinates of ``n`` examples (arrays of length ``n``) and the epochs they came from."""

    confidence: np.ndarray
    variability: np.ndarray
    correctness: np.ndarray
    epochs: int


def training_dynamics(probabilities: np.ndarray, correct: np.ndarray) -> Dynamics:
    """Confidence, variability and correctness from ``[epochs, n]`` p(gold) and right/wrong matrices."""
    p = np.asarray(probabilities, dtype=np.float64)
    c = np.asarray(correct, dtype=np.float64)
    if p.ndim != 2 or p.shape != c.shape or p.shape[0] < 1:
        raise InputError(f"training dynamics must be two [epochs, examples] arrays of one shape, got {p.shape} "
                         f"and {c.shape}", hint="record at least one whole epoch")
    if np.isnan(p).any():
        missing = int(np.isnan(p).any(axis=0).sum())
        raise InputError(f"{missing} examples were not seen in every epoch",
                         hint="train whole epochs (no --max-steps) on one process")
    return Dynamics(confidence=p.mean(axis=0), variability=p.std(axis=0), correctness=c.mean(axis=0),
                    epochs=p.shape[0])


def region_order(dynamics: Dynamics, region: str) -> np.ndarray:
    """Example indices from most to least typical of ``region`` (ties keep the input order)."""
    if region == "easy":
        key = -dynamics.confidence
    elif region == "hard":
        key = dynamics.confidence
    elif region == "ambiguous":
        key = -dynamics.variability
    else:
        raise InputError(f"unknown data-map region {region!r}", hint=f"use one of {', '.join(REGIONS)}")
    return np.argsort(key, kind="stable")


def region_pool(dynamics: Dynamics, region: str, pool_fraction: float = DEFAULT_POOL_FRACTION) -> np.ndarray:
    """The top ``pool_fraction`` of :func:`region_order`: the region before sampling."""
    order = region_order(dynamics, region)
    return order[:subset_size(len(order), pool_fraction)]


def region_subset(dynamics: Dynamics, labels: npt.ArrayLike, region: str, *, fraction: float = DEFAULT_FRACTION,
                  pool_fraction: float = DEFAULT_POOL_FRACTION, seed: int = 0) -> np.ndarray:
    """Sorted indices of a region's subset: :func:`region_pool`, sampled down to ``fraction`` of the data with the
    original label ratio (``pool_fraction`` < ``fraction`` is an error). When the pool lacks a label, the next
    rows of :func:`region_order` fill it (``count_outside(subset, region_pool(...))`` counts them)."""
    if pool_fraction < fraction:
        raise InputError(f"the pool ({pool_fraction:.0%}) is smaller than the subset ({fraction:.0%})",
                         hint="use a pool fraction at least as large as the subset fraction")
    order = region_order(dynamics, region)
    return keep_label_ratio(region_pool(dynamics, region, pool_fraction), labels, subset_size(len(order), fraction),
                            seed=seed, fallback=order)


@dataclass
class DataMapResult:
    dynamics: Dynamics
    subsets: dict[str, np.ndarray]
    log: dict[str, Any]


def datamap_frame(examples: Sequence[Example], dynamics: Dynamics):
    """The ``dynamics.parquet`` table: id (row position), text, label, group, method and the coordinates."""
    import pyarrow as pa

    return pa.table({
        "id": np.arange(len(examples), dtype=np.int64), "text": [e.text for e in examples],
        "label": np.array([e.label for e in examples], dtype=np.int64), "group": [e.group for e in examples],
        "method": [e.method for e in examples], "confidence": dynamics.confidence,
        "variability": dynamics.variability, "correctness": dynamics.correctness})


def run_datamap(examples: Sequence[Example], out_dir: str | Path, config: Any, *, fraction: float = DEFAULT_FRACTION,
                pool_fraction: float = DEFAULT_POOL_FRACTION, model_dir: str | Path | None = None,
                progress: bool = False, console: Any = None, overwrite: bool = False) -> DataMapResult:
    """Train ``config`` on ``examples`` with a :class:`DataMapRecorder`, then write ``dynamics.parquet``,
    ``easy|ambiguous|hard.parquet`` and ``datamap.png`` into ``out_dir``. The model is saved to ``model_dir``
    when given (else to a temporary folder, removed)."""
    import json

    import pyarrow.parquet as pq

    from toxiforge._io import atomic_write, atomic_write_text, require_empty_dir
    from toxiforge.training.trainer import train_classifier

    out = require_empty_dir(out_dir, overwrite)
    if config.max_steps != -1 or config.epochs < 2 or config.epochs != int(config.epochs):
        raise InputError(f"DataMaps needs at least 2 whole epochs, got epochs={config.epochs:g}, "
                         f"max_steps={config.max_steps}", hint="pass --epochs 2 or more (a whole number)")
    examples = list(examples)
    config = replace(config, eval_fraction=0.0, early_stopping=None)  # every row gets a coordinate
    rec = DataMapRecorder(len(examples))
    with tempfile.TemporaryDirectory(prefix="datamap-model-") as tmp:
        result = train_classifier(examples, model_dir or Path(tmp) / "model", config, progress=progress,
                                  console=console, callbacks=[rec], overwrite=overwrite)
    dynamics = rec.dynamics()
    labels = [e.label for e in examples]
    subsets = {r: region_subset(dynamics, labels, r, fraction=fraction, pool_fraction=pool_fraction,
                                seed=config.seed) for r in REGIONS}
    table = datamap_frame(examples, dynamics)
    atomic_write(out / DYNAMICS_FILE, lambda tmp: pq.write_table(table, tmp))
    for region, index in subsets.items():
        atomic_write(out / f"{region}.parquet", partial(pq.write_table, table.take(index)))
    plot_datamap(dynamics, out / PLOT_FILE)
    log = {"examples": len(examples), "epochs": dynamics.epochs, "fraction": fraction,
           "pool_fraction": pool_fraction, "sizes": {r: int(len(i)) for r, i in subsets.items()},
           "top_ups": {r: count_outside(i, region_pool(dynamics, r, pool_fraction)) for r, i in subsets.items()},
           "train_seconds": result.log.get("train_seconds"), "config": result.log.get("config")}
    atomic_write_text(out / "datamap.json", json.dumps(log, indent=2, default=str) + "\n")
    return DataMapResult(dynamics=dynamics, subsets=subsets, log=log)


def plot_datamap(dynamics: Dynamics, path: str | Path, *, title: str = "Data map", max_points: int = 25_000,
                 seed: int = 0) -> Path:
    """Confidence (y) against variability (x), coloured by correctness, regions named -- the layout of
    cartography's figure (a random ``max_points`` sample of larger data, as cartography plots 25,000)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from toxiforge._io import atomic_write

    n = len(dynamics.confidence)
    keep = np.random.default_rng(seed).choice(n, size=max_points, replace=False) if n > max_points else np.arange(n)
    fig, ax = plt.subplots(figsize=(8, 5))
    levels = np.round(dynamics.correctness[keep], 1)
    cmap = plt.get_cmap("coolwarm_r")
    for level in np.unique(levels):
        mask = levels == level
        ax.scatter(dynamics.variability[keep][mask], dynamics.confidence[keep][mask], s=12, alpha=0.7,
                   color=cmap(float(level)), label=f"{level:.1f}", edgecolors="none")
    box = dict(boxstyle="round,pad=0.3", fc="white", lw=1.5)
    ax.annotate("ambiguous", xy=(0.85, 0.5), xycoords="axes fraction", ha="center", bbox={**box, "ec": "black"})
    ax.annotate("easy-to-learn", xy=(0.27, 0.88), xycoords="axes fraction", ha="center", bbox={**box, "ec": "red"})
    ax.annotate("hard-to-learn", xy=(0.27, 0.12), xycoords="axes fraction", ha="center", bbox={**box, "ec": "blue"})
    ax.set(xlabel="variability", ylabel="confidence", ylim=(-0.02, 1.02), title=f"{title} ({n} examples, "
           f"{dynamics.epochs} epochs)")
    ax.legend(title="correctness", loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.tight_layout()
    try:
        return atomic_write(Path(path), lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    finally:
        plt.close(fig)
