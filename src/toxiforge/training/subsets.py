"""The paper's training-data variants (§5, Table 4): ALICE only, top-k only, ALICE + top-k.

"Since there are fewer ALICE samples than top-k, we downsample top-k for fair comparison via equal-sized
datasets. ALICE + top-k combines these two datasets." So, with ``A`` the ALICE rows and ``T`` the top-k rows:

* ``alice``: ``A``;
* ``top-k``: a seeded sample of ``T`` with ``len(A)`` rows. The sample matches ``A``'s label counts where ``T``
  has enough rows of each label, then fills up from the remaining top-k rows (so the two variants differ in
  decoding method, not in label balance). If ``T`` has fewer rows than ``A``, all of ``T`` is used;
* ``both``: the union of the two above;
* ``all``: every row, no selection (the default of ``toxiforge train``).

An empty result (no ALICE rows for ``alice``/``top-k``/``both``, no top-k rows for ``top-k``) is an
:class:`~toxiforge.errors.InputError` that says what the data holds.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence

from toxiforge.data.examples import Example
from toxiforge.errors import InputError
from toxiforge.records import METHOD_ALICE, METHOD_TOPK

SUBSETS: tuple[str, ...] = ("all", "alice", "top-k", "both")


def normalize_subset(subset: str) -> str:
    key = subset.strip().lower().replace("_", "-")
    key = {"topk": "top-k", "alice+top-k": "both", "union": "both"}.get(key, key)
    if key not in SUBSETS:
        raise InputError(f"unknown subset {subset!r}", hint=f"use one of {', '.join(SUBSETS)}")
    return key


def downsample_topk(topk: Sequence[Example], alice: Sequence[Example], seed: int) -> list[Example]:
    """A seeded sample of ``topk`` with ``len(alice)`` rows and, where possible, ``alice``'s label counts."""
    if len(topk) <= len(alice):
        return list(topk)
    rng = random.Random(seed)
    wanted = Counter(e.label for e in alice)
    pool = list(range(len(topk)))
    rng.shuffle(pool)
    chosen: list[int] = []
    taken: Counter = Counter()
    for i in pool:
        if taken[topk[i].label] < wanted[topk[i].label]:
            chosen.append(i)
            taken[topk[i].label] += 1
    picked = set(chosen)
    for i in pool:
        if len(chosen) >= len(alice):
            break
        if i not in picked:
            chosen.append(i)
            picked.add(i)
    return [topk[i] for i in sorted(chosen)]


def select_subset(examples: Sequence[Example], subset: str, *, seed: int = 0) -> list[Example]:
    """The rows of ``subset`` (see the module docstring), in their input order."""
    subset = normalize_subset(subset)
    if subset == "all":
        rows = list(examples)
    else:
        alice = [e for e in examples if e.method == METHOD_ALICE]
        topk = [e for e in examples if e.method == METHOD_TOPK]
        sampled = downsample_topk(topk, alice, seed) if alice else []
        rows = {"alice": alice, "top-k": sampled, "both": alice + sampled}[subset]
        if subset == "both":
            order = {id(e): i for i, e in enumerate(examples)}
            rows.sort(key=lambda e: order[id(e)])
    if not rows:
        methods = Counter(e.method or "none" for e in examples)
        held = ", ".join(f"{n} {m}" for m, n in sorted(methods.items())) or "no rows"
        why = ("top-k is downsampled to the size of the ALICE part, and there are no ALICE rows"
               if subset == "top-k" else f"there are no {'ALICE' if subset != 'all' else ''} rows".replace("  ", " "))
        raise InputError(f"the training set is empty after --subset {subset}: {why} (the data holds {held})",
                         hint="generate ALICE rows (toxiforge generate --method alice), or use --subset all")
    return rows
