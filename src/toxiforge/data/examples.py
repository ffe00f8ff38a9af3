"""Plain labelled rows shared by every loader: :class:`Example` and the :class:`LabeledData` that holds them.

An :class:`Example` is ``(text, label, group, method)``: ``label`` 1 = toxic/hateful/offensive, 0 = benign;
``group`` the target group where the data names one (canonical toxiforge name when it resolves, else the raw
value); ``method`` ``"top-k"`` or ``"ALICE"`` for machine-generated rows; ``meta`` the dataset's own per-row
fields that have no place above (HateCheck's functional test, Davidson et al.'s annotator votes), read back with
:meth:`LabeledData.meta_column`. Helpers here read tables (CSV/TSV with
quoted newlines, JSONL, Parquet, generation directories), check columns and turn label values into 0/1 with
errors that name the file, the column and the values found.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toxiforge.errors import InputError, ToxiforgeError
from toxiforge.records import METHOD_ALICE, METHOD_TOPK

_TRUE_WORDS = {"1", "true", "yes", "toxic", "hate", "hateful", "offensive", "abusive"}
_FALSE_WORDS = {"0", "false", "no", "benign", "neutral", "nothate", "not_hate", "not hate", "non-toxic",
                "non_toxic", "nontoxic", "none", "not_offensive", "normal",
                "non-hateful", "non_hateful", "nonhateful", "not hateful", "not_hateful"}  # HateCheck's label_gold


@dataclass(frozen=True)
class Example:
    """One labelled text: ``label`` 1 = toxic, 0 = benign; ``group`` and ``method`` when the data has them;
    ``row`` the 0-based row of the source table it came from (loaders that read one table row per example set
    it, so other columns of that table can be lined up with the examples; not part of equality); ``meta`` the
    dataset's own per-row fields by name (None when the loader keeps none; not part of equality); ``weight`` the
    row's loss weight in training (:mod:`toxiforge.training.weighted`: 1 unless ``train --weight-column`` or
    ``harden --added-weight`` sets it; not part of equality)."""

    text: str
    label: int
    group: str | None = None
    method: str | None = None
    row: int | None = field(default=None, compare=False)
    meta: Mapping[str, Any] | None = field(default=None, compare=False)
    weight: float = field(default=1.0, compare=False)


@dataclass
class LabeledData:
    """A named list of :class:`Example` plus where it came from.

    ``layout`` is the loader that read it (``toxigen-annotated``, ``sbf``, ...); ``skipped`` counts rows left
    out, by reason (e.g. ``{"empty text": 3}``); ``notes`` are one-line remarks for reports (label rule, split).
    """

    name: str
    examples: list[Example]
    layout: str
    source: str
    skipped: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.examples)

    @property
    def texts(self) -> list[str]:
        return [e.text for e in self.examples]

    @property
    def labels(self) -> list[int]:
        return [e.label for e in self.examples]

    def counts(self) -> dict[str, int]:
        """``{"n", "toxic", "benign"}``."""
        toxic = sum(self.labels)
        return {"n": len(self.examples), "toxic": toxic, "benign": len(self.examples) - toxic}

    def values(self, attribute: str) -> list[str]:
        """The distinct non-null ``group`` or ``method`` values, sorted."""
        return sorted({v for v in (getattr(e, attribute) for e in self.examples) if v is not None})

    def meta_column(self, key: str) -> list[Any]:
        """``Example.meta[key]`` of every example, in order (None where an example lacks it); an InputError when
        no example has ``key``, naming the keys this data has."""
        if not any(e.meta and key in e.meta for e in self.examples):
            keys = sorted({k for e in self.examples if e.meta for k in e.meta})
            raise InputError(f"no per-row field {key!r} in the {self.layout} data; its fields are {keys or 'none'}",
                             path=self.source, hint="use one of those fields (HateCheck and Davidson loaders keep "
                                                    "theirs; other layouts keep none)")
        return [e.meta.get(key) if e.meta else None for e in self.examples]

    def describe(self) -> dict[str, Any]:
        """Name, layout, source, counts, methods and groups, skipped rows and notes (for JSON reports)."""
        methods = Counter(e.method for e in self.examples if e.method is not None)
        return {"name": self.name, "layout": self.layout, "source": self.source, **self.counts(),
                "methods": dict(sorted(methods.items())), "groups": len(self.values("group")),
                "skipped": dict(self.skipped), "notes": list(self.notes)}


def fold_text(text: str) -> str:
    """``text`` with case and whitespace folded: the key two texts are the same by (harden's sets, the held-out
    rows a training records)."""
    return " ".join(text.casefold().split())


def normalize_method(value: Any) -> str | None:
    """``"top-k"`` for top-k spellings (``topk``, ``top_k``, ``Top-K``), ``"ALICE"`` for ``alice``/``CBS``
    (ToxiGen's annotated data calls ALICE "CBS", constrained beam search); None for empty values; other values
    are kept as they are."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    key = text.lower().replace("_", "").replace("-", "").replace(" ", "")
    if not key:
        return None
    if key == "topk":
        return METHOD_TOPK
    if key in ("alice", "cbs"):
        return METHOD_ALICE
    return text


def normalize_group(value: Any) -> str | None:
    """The canonical toxiforge group name when ``value`` resolves (``mental_dis`` -> ``mental_disability``),
    else the value stripped; None for empty values."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value).strip()
    if not text:
        return None
    from toxiforge.groups import resolve_group

    try:
        return resolve_group(text).name
    except InputError:
        return text


def to_float(value: Any) -> float | None:
    """A number, or None for a missing, NaN or non-numeric value (annotation scores, ratings)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def to_binary(value: Any) -> int | None:
    """0/1 for a binary label value (ints, bools, 0.0/1.0, words such as hate/nothate/toxic/benign); None for
    null/empty; ValueError for anything else."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and math.isnan(value):
            return None
        if value in (0, 1):
            return int(value)
        raise ValueError(value)
    text = str(value).strip().lower()
    if not text:
        return None
    if text in _TRUE_WORDS:
        return 1
    if text in _FALSE_WORDS:
        return 0
    try:
        number = float(text)
    except ValueError:
        raise ValueError(value) from None
    if number in (0.0, 1.0):
        return int(number)
    raise ValueError(value)


def binary_labels(values: Sequence[Any], *, column: str, path: str | Path | None) -> list[int | None]:
    """:func:`to_binary` over a column; non-binary values raise an InputError listing them (and the first row)."""
    out: list[int | None] = []
    bad: dict[str, int] = {}
    for i, v in enumerate(values):
        try:
            out.append(to_binary(v))
        except ValueError:
            bad.setdefault(repr(v), i + 1)
            out.append(None)
    if bad:
        shown = ", ".join(list(bad)[:6]) + (", ..." if len(bad) > 6 else "")
        first = min(bad.values())
        raise InputError(f"label column {column!r} is not binary: found {shown} (first at data row {first})",
                         path=path, hint="map the labels to 0/1 (or hate/nothate, toxic/benign, hateful/non-hateful) "
                                         "first, or choose another label column")
    return out


def read_any_table(path: str | Path):
    """A pyarrow Table from any dataset file or folder: the one table reader of every command.

    CSV and TSV (``.tsv``/``.tab``: tab-separated) are read with quoted newlines allowed (many published
    datasets have multi-line posts); a demonstrations folder (upstream's layout) becomes rows of toxiforge's
    schema; Parquet, JSONL and generation directories go through :func:`toxiforge.records.read_table`.
    """
    from toxiforge.records import conform_table, read_table, shard_files

    path = Path(path).expanduser()
    if path.is_dir() and not shard_files(path):
        from toxiforge.data.toxigen import demonstration_table, is_demonstration_folder

        if is_demonstration_folder(path):
            return demonstration_table(path)
    suffix = path.suffix.lower()
    if path.is_file() and suffix in (".csv", ".tsv", ".tab"):
        import pyarrow as pa
        import pyarrow.csv as pcsv

        try:
            return conform_table(pcsv.read_csv(path, parse_options=pcsv.ParseOptions(
                delimiter="\t" if suffix in (".tsv", ".tab") else ",", newlines_in_values=True)))
        except (OSError, pa.ArrowInvalid) as exc:
            raise InputError(f"cannot read {'TSV' if suffix != '.csv' else 'CSV'} file ({exc})", path=path,
                             hint="check that the file is complete, with a header row") from exc
    return read_table(path)


def require_columns(columns: Iterable[str], needed: Sequence[str], *, layout: str,
                    path: str | Path | None, hint: str | None = None) -> None:
    """InputError naming the missing columns and the columns found; ``hint`` (e.g. which published file has the
    layout) replaces the generic advice."""
    found = list(columns)
    missing = [c for c in needed if c not in found]
    if missing:
        raise InputError(f"missing column(s) {missing} for the {layout} layout; the columns found are {found}",
                         path=path, hint=hint or "check the file, or name its columns (--text-column/--label-column)")


def column(table: Any, name: str) -> list[Any]:
    return table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows


def clean_text(value: Any) -> str | None:
    """The text as str, or None when it is null or blank."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    text = str(value)
    return text if text.strip() else None


def finish(name: str, examples: list[Example], *, layout: str, source: str | Path, skipped: Counter,
           notes: Sequence[str] = ()) -> LabeledData:
    """Build the :class:`LabeledData`; an InputError when no example is left."""
    if not examples:
        why = f" (left out: {dict(skipped)})" if skipped else ""
        raise InputError(f"no usable rows in the {layout} data{why}", path=str(source),
                         hint="check that the file has rows with a text and a label")
    return LabeledData(name=name, examples=examples, layout=layout, source=str(source),
                       skipped={k: v for k, v in skipped.items() if v}, notes=list(notes))


def load_hub_table(hub_id: str, config: str | None = None, split: str | None = None, **kwargs: Any):
    """A hub dataset split as a pyarrow Table via ``datasets.load_dataset`` (needs internet; gated datasets need
    ``huggingface-cli login``). Failures become a :class:`ToxiforgeError` that says to pass a local file."""
    import pyarrow as pa

    try:
        import datasets

        ds = datasets.load_dataset(hub_id, config, split=split, **kwargs)
        return pa.Table.from_pandas(ds.to_pandas(), preserve_index=False)
    except ToxiforgeError:
        raise
    except Exception as exc:
        reason = " ".join(str(exc).split())[:300]
        raise ToxiforgeError(
            f"could not load {hub_id}{'/' + config if config else ''} ({split or 'all splits'}) from the hub: "
            f"{reason}. Fix: download the data once and pass the local file instead (offline machines always "
            "need a local file)") from exc


def read_local_or_pinned(path: str | Path | None, url: str, local: str):
    """``(table, source)``: the local file at ``path``, or the CSV at ``url`` (a file pinned to a repository commit)
    when ``path`` is None; offline, the error says to pass ``local`` (what the local copy is and where it comes
    from)."""
    if path is not None:
        return read_any_table(path), str(path)
    try:
        return load_hub_table("csv", data_files=url, split="train"), url
    except ToxiforgeError as exc:
        raise ToxiforgeError(f"{exc}; pass a local copy instead: {local}") from exc


def labeled_table(data: LabeledData, *, machine_generated: bool | None = None):
    """``data`` as a pyarrow table in toxiforge's row schema (:func:`toxiforge.records.arrow_schema`): text in
    ``generation``, the label in ``prompt_label``, ``group`` and ``generation_method`` where the data has them,
    ``row_id`` ``<group>/<label>/<n>``. ``machine_generated`` defaults to true for toxiforge/ToxiGen-train data and
    false for everything else (human-written demonstrations, annotated sets, benchmarks). Every stage reads it:
    this is what ``toxiforge export`` writes and how a demonstrations folder reads as rows."""
    import pyarrow as pa

    from toxiforge.records import COLUMNS, Row, arrow_schema, label_word

    generated = data.layout in ("toxiforge", "toxigen-train") if machine_generated is None else machine_generated
    counters: Counter = Counter()
    rows = []
    for e in data.examples:
        key = f"{e.group or 'none'}/{label_word(e.label)}"
        rows.append(Row(prompt="", generation=e.text, generation_method=e.method or "", group=e.group or "",
                        prompt_label=e.label, machine_generated=generated, row_id=f"{key}/{counters[key]:06d}"
                        ).to_dict())
        counters[key] += 1
    return pa.Table.from_pylist([{c: r[c] for c in COLUMNS} for r in rows], schema=arrow_schema())
