"""Items for a study from a toxiforge or ToxiGen dataset, optionally a seeded stratified sample.

Columns are read from toxiforge/ToxiGen ``train`` names (``generation``, ``group``, ``prompt_label``,
``generation_method``, ``row_id``) or ToxiGen ``annotated`` names (``text``, ``target_group``,
``actual_method``). Rows with a ``parse_error`` or an empty statement are left out.

Stratified sampling (``stratify=("group", "label", "method")``) splits the rows into strata by those fields and
takes the sample as evenly as possible across strata (a stratum smaller than its share gives all its rows and the
rest is spread over the others), so a sample is balanced by group, label and method the way ToxiGen's
validation sets were.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toxiforge.errors import InputError

STRATA = ("group", "label", "method")


def _pick(columns: Sequence[str], *names: str) -> str | None:
    return next((n for n in names if n in columns), None)


def items_from_table(path: str | Path) -> list[dict[str, Any]]:
    """One item dict per usable row of the dataset at ``path``."""
    from toxiforge.data.examples import normalize_method, read_any_table

    table = read_any_table(path)
    cols = table.column_names
    text_col = _pick(cols, "generation", "text")
    if text_col is None:
        raise InputError(f"no statement column (generation or text); found {cols}", path=path,
                         hint="give a toxiforge dataset or a ToxiGen train/annotated file")
    group_col = _pick(cols, "group", "target_group")
    label_col = _pick(cols, "prompt_label", "label")
    method_col = _pick(cols, "generation_method", "actual_method", "method")
    items = []
    for i, row in enumerate(table.to_pylist()):
        text = str(row.get(text_col) or "").strip()
        if not text or row.get("parse_error"):
            continue
        label = row.get(label_col) if label_col else None
        if label is not None:
            from toxiforge.records import parse_label

            label = parse_label(label)
        items.append({"text": text, "target_group": str(row.get(group_col) or "") if group_col else "",
                      "label": label, "method": (normalize_method(row.get(method_col)) or "") if method_col else "",
                      "source_row_id": str(row.get("row_id") or i)})
    if not items:
        raise InputError("the dataset holds no usable statements", path=path, hint="check the file")
    return items


def stratified_sample(items: list[dict[str, Any]], n: int | None, *, stratify: Sequence[str] = (),
                      seed: int = 0) -> list[dict[str, Any]]:
    """``n`` items (all when None or larger), even across the ``stratify`` strata, seeded; order shuffled."""
    rng = random.Random(seed)
    unknown = [s for s in stratify if s not in STRATA]
    if unknown:
        raise InputError(f"cannot stratify by {unknown}", hint=f"use a comma-separated subset of {','.join(STRATA)}")
    if n is not None and n < 1:
        raise InputError(f"--sample must be at least 1, got {n}", hint="give a positive number")
    if n is None or n >= len(items):
        chosen = list(items)
    elif not stratify:
        chosen = rng.sample(items, n)
    else:
        key = {"group": "target_group", "label": "label", "method": "method"}
        strata: dict[tuple, list] = defaultdict(list)
        for it in items:
            strata[tuple(it[key[s]] for s in stratify)].append(it)
        pools = {k: rng.sample(v, len(v)) for k, v in sorted(strata.items(), key=lambda kv: str(kv[0]))}
        quota = {k: 0 for k in pools}
        left = n
        while left > 0:
            open_ = [k for k in pools if quota[k] < len(pools[k])]
            share, extra = divmod(left, len(open_))
            rng.shuffle(open_)
            for j, k in enumerate(open_):
                take = min(share + (1 if j < extra else 0), len(pools[k]) - quota[k])
                quota[k] += take
                left -= take
        chosen = [it for k in pools for it in pools[k][:quota[k]]]
    rng.shuffle(chosen)
    return chosen
