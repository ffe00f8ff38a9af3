"""Dataset specs for the command line: ``[NAME=][KIND:]PATH`` or ``KIND:hub``.

``KIND`` is one of :data:`KINDS` (aliases in :data:`ALIASES`): ``toxigen-annotated`` (alias ``humanval``),
``toxigen-train``, ``toxiforge``, ``sbf``, ``ihc``, ``dynahate``, ``table``. ``KIND:hub`` (or a bare ``KIND``)
loads the data from its usual online source. A bare ``PATH`` is read once and its layout told from its columns
(:func:`detect_layout`). ``NAME=`` renames the dataset in reports, e.g. ``"SBF=sbf:SBIC.v2.tst.csv"``.

Examples: ``humanval:annotated_test.parquet``, ``sbf:SBIC.v2.tst.csv``, ``ihc:implicit_hate_v1_stg1_posts.tsv``,
``dynahate:hub``, ``runs/alice`` (a toxiforge generation directory), ``table:mine.csv``,
``demonstrations:toxigen-upstream`` (demonstration sentence files, hate_* = 1; a folder holding
``demonstrations/`` is detected).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from toxiforge.data.benchmarks import load_dynahate, load_ihc, load_sbf
from toxiforge.data.examples import LabeledData, read_any_table
from toxiforge.data.tables import load_table
from toxiforge.data.toxigen import (
    is_demonstration_folder,
    load_demonstration_data,
    load_generated,
    load_toxigen_annotated,
)
from toxiforge.errors import InputError

KINDS: tuple[str, ...] = ("toxigen-annotated", "toxigen-train", "toxiforge", "sbf", "ihc", "dynahate", "table",
                          "demonstrations")
ALIASES: dict[str, str] = {
    "humanval": "toxigen-annotated", "toxigen-humanval": "toxigen-annotated", "toxigen-val": "toxigen-annotated",
    "annotated": "toxigen-annotated", "toxigen": "toxigen-train", "socialbiasframes": "sbf",
    "implicit-hate": "ihc", "implicithate": "ihc",
}


def _kind(text: str) -> str | None:
    key = text.strip().lower().replace("_", "-")
    key = ALIASES.get(key, key)
    return key if key in KINDS else None


def detect_layout(columns: Sequence[str]) -> str:
    """The :data:`KINDS` entry whose published columns ``columns`` has; ``table`` when none matches."""
    cols = set(columns)
    if {"text", "toxicity_ai", "toxicity_human"} <= cols:
        return "toxigen-annotated"
    if {"generation", "prompt_label"} <= cols:
        return "toxiforge" if "machine_generated" in cols else "toxigen-train"
    if {"post", "offensiveYN"} <= cols:
        return "sbf"
    if {"post", "class"} <= cols:
        return "ihc"
    if {"text", "label", "split"} <= cols and ("acl.id" in cols or "round.base" in cols):
        return "dynahate"
    return "table"


def parse_spec(spec: str) -> tuple[str | None, str | None, str | None]:
    """``(name, kind, path)`` of a spec; ``path`` None means the online source, ``kind`` None auto-detection."""
    name = None
    text = spec.strip()
    if "=" in text and not Path(text).exists():
        name, text = (part.strip() for part in text.split("=", 1))
        if not name:
            raise InputError(f"empty dataset name in {spec!r}", hint="write NAME=[KIND:]PATH, e.g. SBF=sbf:file.csv")
    if ":" in text:
        head, rest = text.split(":", 1)
        kind = _kind(head)
        if kind is not None and not Path(text).exists():
            return name, kind, (None if rest.strip().lower() in ("", "hub") else rest.strip())
    kind = _kind(text)
    if kind is not None and not Path(text).exists():
        return name, kind, None
    return name, None, text


def load_spec(spec: str, *, label_rule: str = "sum", text_column: str | None = None,
              label_column: str | None = None, split: str | None = None) -> LabeledData:
    """Load one dataset spec (see the module docstring).

    ``label_rule`` applies to ToxiGen annotated data; ``label_column`` to tables and to ToxiGen train/toxiforge
    data (default ``prompt_label``); ``text_column`` to tables; ``split`` to hub sources and DynaHate.
    """
    name, kind, path = parse_spec(spec)
    if path is not None and not Path(path).expanduser().exists():
        raise InputError("no such file or directory", path=path,
                         hint=f"check the path; known kinds for KIND:PATH or KIND:hub are {', '.join(KINDS)}")
    if kind is None and path is not None and is_demonstration_folder(path):
        kind = "demonstrations"
    if kind is None:
        assert path is not None, "parse_spec gives a path whenever it gives no kind"
        kind = detect_layout(read_any_table(path).column_names)
    loaders: dict[str, Callable[[], Any]] = {
        "toxigen-annotated": lambda: load_toxigen_annotated(path, split=split or "test", rule=label_rule,
                                                            name=name),
        "toxigen-train": lambda: load_generated(path, label_column=label_column or "prompt_label", name=name),
        "toxiforge": lambda: load_generated(path, label_column=label_column or "prompt_label", name=name),
        "sbf": lambda: load_sbf(path, split=split or "test", name=name),
        "ihc": lambda: load_ihc(path, name=name),
        "dynahate": lambda: load_dynahate(path, split=split or "test", name=name),
        "table": lambda: _table(path, text_column, label_column, name),
        "demonstrations": lambda: _demonstrations(path, name),
    }
    return loaders[kind]()


def _table(path: str | None, text_column: str | None, label_column: str | None, name: str | None) -> LabeledData:
    if path is None:
        raise InputError("table: needs a file", hint="write table:PATH")
    return load_table(path, text_column=text_column, label_column=label_column, name=name)


def _demonstrations(path: str | None, name: str | None) -> LabeledData:
    if path is None:
        raise InputError("demonstrations: needs a folder or file",
                         hint="write demonstrations:PATH (fetch upstream's with `toxiforge demonstrations fetch`)")
    return load_demonstration_data(path, name=name)


def load_specs(specs: Sequence[str], **kwargs: Any) -> list[LabeledData]:
    """:func:`load_spec` for each spec; names made unique (``x``, ``x (2)``) so reports keep them apart."""
    out: list[LabeledData] = []
    seen: dict[str, int] = {}
    for spec in specs:
        data = load_spec(spec, **kwargs)
        seen[data.name] = seen.get(data.name, 0) + 1
        if seen[data.name] > 1:
            data.name = f"{data.name} ({seen[data.name]})"
        out.append(data)
    return out
