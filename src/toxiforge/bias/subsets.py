"""Subsets with the original label ratio, and the random baseline of the data-filtering experiments.

Zhou et al. (2021, Appendix A.2) filter each dataset to 50% with AFLite or DataMaps, then downsample to 33% of the
original so that every subset has the original toxic ratio ("to avoid confounding our results with different toxic
ratio among different training sets"); their Random baseline is a random 33% (§4.1). Here:

* :func:`keep_label_ratio` -- a seeded sample of a candidate pool with a target size and the label counts of the
  whole data (rounded; the remainder goes to the larger class);
* :func:`random_subset` -- the Random baseline: the same with every example a candidate;
* :func:`subset_size` -- ``fraction`` of ``n`` as a row count (at least 1).

When the pool lacks rows of one label, the rows that were ranked next (``fallback``: the ranking the pool was cut
from) fill the gap, so the subset still has the original ratio, and :func:`count_outside` counts them (the
commands record it as ``top_ups``); a pool of a single label without fallback is an
:class:`~toxiforge.errors.InputError`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from toxiforge.errors import InputError

DEFAULT_FRACTION = 0.33  # the subset size of Zhou et al. Tables 1, 2 and 4 (cartography's 0.3319 rounded)
DEFAULT_POOL_FRACTION = 0.5  # filtered first to 50%, as Swayamdipta et al. (Zhou et al., Appendix A.2)


def subset_size(n: int, fraction: float) -> int:
    if not 0 < fraction <= 1:
        raise InputError(f"a subset fraction must be in (0, 1], got {fraction}", hint="use e.g. 0.33")
    return max(1, int(round(n * fraction)))


def label_quota(labels: npt.ArrayLike, size: int) -> dict[int, int]:
    """``{label: rows}`` adding up to ``size`` in the proportions of ``labels``."""
    y = np.asarray(labels)
    toxic_share = float(y.mean()) if len(y) else 0.0
    toxic = int(round(size * toxic_share))
    return {1: toxic, 0: size - toxic}


def keep_label_ratio(pool: Sequence[int] | np.ndarray, labels: npt.ArrayLike, size: int, *, seed: int = 0,
                     fallback: Sequence[int] | np.ndarray = ()) -> np.ndarray:
    """Indices (sorted) of a seeded sample of ``pool`` with ``size`` rows and the label ratio of all ``labels``.

    ``fallback``: further candidates in order of preference, used when ``pool`` lacks rows of a label.
    """
    y = np.asarray(labels)
    if size > len(y):
        raise InputError(f"a subset of {size} rows is larger than the data ({len(y)} rows)",
                         hint="ask for a smaller subset")
    rng = np.random.default_rng(seed)
    chosen: list[np.ndarray] = []
    in_pool = set(int(i) for i in pool)
    for label, wanted in label_quota(y, size).items():
        candidates = np.array([i for i in pool if y[i] == label], dtype=np.int64)
        if len(candidates) >= wanted:
            chosen.append(rng.choice(candidates, size=wanted, replace=False) if wanted else candidates[:0])
            continue
        extra = [i for i in fallback if y[i] == label and int(i) not in in_pool][:wanted - len(candidates)]
        if len(candidates) + len(extra) < wanted:
            raise InputError(f"the data has {len(candidates) + len(extra)} {'toxic' if label else 'benign'} rows "
                             f"to choose from, fewer than the {wanted} a {size}-row subset with the original "
                             "label ratio needs", hint="ask for a smaller subset")
        chosen.append(np.concatenate([candidates, np.asarray(extra, dtype=np.int64)]))
    return np.sort(np.concatenate(chosen))


def count_outside(subset: Sequence[int] | np.ndarray, pool: Sequence[int] | np.ndarray) -> int:
    """Rows of ``subset`` not in ``pool``: the top-ups :func:`keep_label_ratio` took from ``fallback``."""
    return int((~np.isin(np.asarray(subset), np.asarray(pool))).sum())


def random_subset(labels: Sequence[int] | np.ndarray, size: int, *, seed: int = 0) -> np.ndarray:
    """The Random baseline: indices of ``size`` random rows with the original label ratio."""
    return keep_label_ratio(range(len(labels)), labels, size, seed=seed)
