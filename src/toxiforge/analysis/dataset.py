"""Load a dataset for the analyses: any toxiforge output (file or generation directory) or a ToxiGen file.

The statements are read from ``generation`` (ToxiGen's ``train`` layout and toxiforge's rows) or, when there is
no ``generation`` column, from ``text``. Groups come from ``group`` (or ``target_group``; registered names and
aliases are folded to the canonical name, e.g. ToxiGen's ``mental_dis`` -> ``mental_disability``), labels from
``prompt_label`` (or ``label``; words like hate/neutral are accepted), the decoding method from
``generation_method`` when present. Rows without a statement (a null or blank text, or a toxiforge
``parse_error``) are left out and counted in :attr:`AnalysisData.skipped`.

Every analysis takes what :func:`load_data` returns, a path, a pyarrow table, or a list of row dicts/``Row``s.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toxiforge.errors import InputError
from toxiforge.records import TEXT_COLUMNS

GROUP_COLUMNS = ("group", "target_group")
LABEL_COLUMNS = ("prompt_label", "label")
METHOD_COLUMN = "generation_method"
NO_METHOD = "(none)"


@dataclass
class AnalysisData:
    """The usable rows of a dataset: original columns in :attr:`table`, and the fields the analyses use."""

    table: Any                    # pyarrow.Table of the usable rows, every original column kept
    texts: list[str]
    groups: list[str] | None      # None when the dataset has no group column
    labels: list[int] | None      # 1 toxic, 0 benign; None when there is no label column
    methods: list[str] | None     # None when there is no generation_method column
    text_column: str
    source: str
    skipped: int = 0              # rows without a statement (null/blank text or a parse_error)
    runs: list[str] | None = None  # per row, the path it was read from, when several paths were read as one

    @property
    def run_names(self) -> list[str]:
        """The paths read, in order, each by its last part (``runs/topk`` -> ``topk``; whole paths when two
        share a last part): one name for a single source."""
        paths = list(dict.fromkeys(self.runs)) if self.runs else [self.source]
        names = [Path(p).name or p for p in paths]
        return names if len(set(names)) == len(names) else paths

    def __len__(self) -> int:
        return len(self.texts)

    def require(self, *fields: str) -> None:
        """Raise :class:`InputError` when one of ``fields`` ("groups", "labels") is missing."""
        columns = {"groups": GROUP_COLUMNS, "labels": LABEL_COLUMNS}
        for name in fields:
            if getattr(self, name) is None:
                raise InputError(f"this analysis needs a {' or '.join(map(repr, columns[name]))} column; "
                                 f"the columns are {self.table.column_names}", path=self.source,
                                 hint="give a toxiforge or ToxiGen train file (prompt, generation, "
                                      "generation_method, group, prompt_label)")


def _pick(names: Sequence[str], choices: Sequence[str]) -> str | None:
    for c in choices:
        if c in names:
            return c
    return None


def load_data(data: Any, *, need: Iterable[str] = ("groups", "labels"), text_column: str | None = None,
              source: str | None = None) -> AnalysisData:
    """Read ``data`` (a path, several paths read as one dataset, a pyarrow table, a list of dicts or ``Row``s,
    or an :class:`AnalysisData`).

    ``need`` lists the fields the caller requires ("groups", "labels"); a missing column raises
    :class:`InputError` naming the columns found. An empty dataset, or one with no statement at all, raises too.
    """
    if isinstance(data, AnalysisData):
        data.require(*need)
        return data
    import pyarrow as pa

    if isinstance(data, (list, tuple)) and len(data) == 1 and isinstance(data[0], (str, Path)):
        data = data[0]
    runs: list[str] | None = None
    if isinstance(data, (str, Path)):
        from toxiforge.data.examples import read_any_table

        source = source or str(data)
        table = read_any_table(data)
    elif isinstance(data, (list, tuple)) and data and all(isinstance(d, (str, Path)) for d in data):
        from toxiforge.data.examples import read_any_table

        source = source or " + ".join(str(d) for d in data)
        tables = [read_any_table(d) for d in data]
        runs = [str(d) for d, t in zip(data, tables) for _ in range(t.num_rows)]
        table = pa.concat_tables(tables, promote_options="default")
    elif isinstance(data, pa.Table):
        table = data
    else:
        rows = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in data]
        table = pa.Table.from_pylist(rows)
    source = source or "<data>"
    names = table.column_names
    if text_column is not None and text_column not in names:
        raise InputError(f"no column {text_column!r}; the columns are {names}", path=source,
                         hint="pass a text column that exists")
    text_col = text_column or _pick(names, TEXT_COLUMNS)
    if text_col is None:
        raise InputError(f"no text column ('generation' or 'text'); the columns are {names}", path=source,
                         hint="give a toxiforge or ToxiGen train file, whose statements are in 'generation'")
    if table.num_rows == 0:
        raise InputError("the dataset has no rows", path=source, hint="point at a dataset with statements")

    texts = table.column(text_col).to_pylist()
    errors = table.column("parse_error").to_pylist() if "parse_error" in names else [None] * len(texts)
    keep = [i for i, (t, e) in enumerate(zip(texts, errors)) if isinstance(t, str) and t.strip() and e is None]
    if not keep:
        raise InputError(f"none of the {table.num_rows} rows has a statement (all {text_col!r} values are null "
                         "or blank, or the rows have a parse_error)", path=source,
                         hint="check the text column; rows with a parse_error (unparsed LM output) hold no statement")
    if len(keep) < table.num_rows:
        table = table.take(pa.array(keep, type=pa.int64()))
        runs = [runs[i] for i in keep] if runs is not None else None
    texts = [texts[i] for i in keep]

    group_col, label_col = _pick(names, GROUP_COLUMNS), _pick(names, LABEL_COLUMNS)
    groups = labels = methods = None
    if group_col is not None:
        canonical: dict[Any, str] = {}
        groups = []
        for g in table.column(group_col).to_pylist():
            if g not in canonical:
                canonical[g] = canonical_group(g)
            groups.append(canonical[g])
    if label_col is not None:
        labels = _parse_labels(table.column(label_col).to_pylist(), source)
    if METHOD_COLUMN in names:
        methods = [m if isinstance(m, str) and m else NO_METHOD for m in table.column(METHOD_COLUMN).to_pylist()]
        if all(m == NO_METHOD for m in methods):
            methods = None  # e.g. human-written rows: no method to split by
    result = AnalysisData(table=table, texts=texts, groups=groups, labels=labels, methods=methods,
                          text_column=text_col, source=source, skipped=len(errors) - len(keep), runs=runs)
    result.require(*need)
    return result


def _parse_labels(values: list, source: str) -> list[int]:
    from toxiforge.records import parse_label

    cache: dict[Any, int] = {}
    out = []
    for row, value in enumerate(values):
        key = (type(value).__name__, value)
        if key not in cache:
            if value is None:
                raise InputError(f"row {row + 1} has no label", path=source,
                                 hint="every row needs prompt_label 1 (toxic) or 0 (benign)")
            cache[key] = parse_label(value, path=source)
        out.append(cache[key])
    return out


def canonical_group(name: Any) -> str:
    """The registered group's canonical name for a name or alias ("mental_dis" -> "mental_disability"), else
    the name as given ("" for null)."""
    from toxiforge.groups import resolve_group

    if name is None:
        return ""
    try:
        return resolve_group(str(name)).name
    except InputError:
        return str(name)


def group_display(name: str) -> str:
    """The registered group's display name ("Middle Eastern people"), else ``name`` itself."""
    from toxiforge.groups import resolve_group

    try:
        return resolve_group(name).display
    except InputError:
        return name or "(none)"


def group_order(names: Iterable[str]) -> list[str]:
    """Distinct group names: registered groups in registry order (ToxiGen's 13 first), then others sorted."""
    from toxiforge.groups import all_groups, normalize_group_name, resolve_group

    rank = {g.name: i for i, g in enumerate(all_groups())}

    def key(name: str):
        try:
            return (0, rank.get(resolve_group(name).name, len(rank)), normalize_group_name(name))
        except InputError:
            return (1, 0, name)

    return sorted(set(names), key=key)


def method_order(names: Iterable[str]) -> list[str]:
    """Distinct methods: top-k, ALICE, then others sorted."""
    fixed = {"top-k": 0, "ALICE": 1}
    return sorted(set(names), key=lambda m: (fixed.get(m, 2), m))
