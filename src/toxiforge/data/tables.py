"""Any CSV/TSV/JSONL/Parquet table with named text and label columns.

``load_table("mine.csv", text_column="sentence", label_column="is_toxic")``. Without names, the text column is
the first of :data:`TEXT_CANDIDATES` present and the label column the first of :data:`LABEL_CANDIDATES`; if none
is present the error lists the columns found. Labels must be binary: 0/1, true/false, 0.0/1.0 or words
(hate/nothate, toxic/benign, HateCheck's hateful/non-hateful, ...); anything else is an error naming the values.
Optional ``group_column`` and ``method_column`` (default: ``group``/``target_group`` and
``generation_method``/``method`` when present) fill :attr:`Example.group` and :attr:`Example.method`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from toxiforge.data.examples import (
    Example,
    LabeledData,
    binary_labels,
    clean_text,
    column,
    finish,
    normalize_group,
    normalize_method,
    read_any_table,
)
from toxiforge.errors import InputError

TEXT_CANDIDATES: tuple[str, ...] = ("text", "generation", "post", "statement", "sentence", "comment_text",
                                    "comment", "content")
LABEL_CANDIDATES: tuple[str, ...] = ("label", "labels", "toxic", "is_toxic", "toxicity", "hate", "prompt_label")
GROUP_CANDIDATES: tuple[str, ...] = ("group", "target_group")
METHOD_CANDIDATES: tuple[str, ...] = ("generation_method", "method")


def _pick(columns: list[str], given: str | None, candidates: tuple[str, ...], what: str, option: str,
          path: str) -> str:
    if given is not None:
        if given not in columns:
            raise InputError(f"no {what} column {given!r}; the columns found are {columns}", path=path,
                             hint=f"pass {option} with one of them")
        return given
    for name in candidates:
        if name in columns:
            return name
    raise InputError(f"no {what} column (looked for {', '.join(candidates)}); the columns found are {columns}",
                     path=path, hint=f"pass {option} with the column that holds the {what}")


def load_table(path: str | Path, *, text_column: str | None = None, label_column: str | None = None,
               group_column: str | None = None, method_column: str | None = None,
               name: str | None = None) -> LabeledData:
    """A labelled table (see the module docstring)."""
    table, source = read_any_table(path), str(path)
    columns = list(table.column_names)
    text_name = _pick(columns, text_column, TEXT_CANDIDATES, "text", "--text-column", source)
    label_name = _pick(columns, label_column, LABEL_CANDIDATES, "label", "--label-column", source)
    group_name = group_column or next((c for c in GROUP_CANDIDATES if c in columns), None)
    method_name = method_column or next((c for c in METHOD_CANDIDATES if c in columns), None)
    for given, option in ((group_column, "--group-column"), (method_column, "--method-column")):
        if given is not None and given not in columns:
            raise InputError(f"no column {given!r}; the columns found are {columns}", path=source,
                             hint=f"pass {option} with one of them")
    labels = binary_labels(column(table, label_name), column=label_name, path=source)
    groups = column(table, group_name) if group_name else [None] * table.num_rows
    methods = column(table, method_name) if method_name else [None] * table.num_rows
    skipped: Counter = Counter()
    examples = []
    for i, raw in enumerate(column(table, text_name)):
        text = clean_text(raw)
        if text is None:
            skipped["empty text"] += 1
        elif (label := labels[i]) is None:
            skipped["missing label"] += 1
        else:
            examples.append(Example(text, label, normalize_group(groups[i]), normalize_method(methods[i]), row=i))
    p = Path(path)
    return finish(name or (p.name if p.is_dir() else p.stem), examples, layout="table", source=source,
                  skipped=skipped, notes=[f"text = {text_name}, label = {label_name}"])
