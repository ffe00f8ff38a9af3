"""Score a dataset with a classifier: add a P(toxic) column to a table and write it atomically.

This is what ``toxiforge classify`` calls. Tables stay pyarrow tables, so every other column (provenance,
extra user columns) survives unchanged; null texts get a null score.

Default output (:func:`default_output_path`): a file ``DATA.ext`` -> ``DATA.scored.ext`` beside it (same
format); a generation output directory (shards in ``DATA/data/``) -> ``DATA/scored.parquet``, outside the shard
folder so it is not read back as a shard; a directory of bare shards -> ``DATA.scored.parquet`` beside it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge.classifiers.base import ToxicityClassifier
from toxiforge.errors import InputError
from toxiforge.records import TEXT_COLUMNS, TOXIC_THRESHOLD, is_toxic

CHUNK = 4096


@dataclass
class ScoreSummary:
    """What a scoring run did: rows, rows with a score, mean score, share scored toxic (P(toxic) > 0.5,
    :func:`~toxiforge.records.is_toxic`), and how many non-null values of an existing ``score_column`` were
    overwritten (``replaced``)."""

    rows: int
    scored: int
    mean: float | None
    share_toxic: float | None
    text_column: str
    score_column: str
    replaced: int

    def line(self) -> str:
        """One line for the terminal."""
        if not self.scored or self.mean is None or self.share_toxic is None:  # all None exactly when none scored
            return f"{self.rows} rows, none with a text to score"
        nulls = f", {self.rows - self.scored} null texts left unscored" if self.rows != self.scored else ""
        return (f"{self.scored} rows scored ({self.text_column} -> {self.score_column}): mean P(toxic) "
                f"{self.mean:.3f}, {100 * self.share_toxic:.1f}% toxic (P > {TOXIC_THRESHOLD}){nulls}")


def pick_text_column(column_names: Sequence[str], text_column: str | None = None,
                     path: str | Path | None = None) -> str:
    """``text_column`` if given, else ``generation`` when present, else ``text``; InputError naming the columns."""
    names = list(column_names)
    if text_column is not None:
        if text_column not in names:
            raise InputError(f"no column {text_column!r}; the columns are {names}", path=path,
                             hint="pass --text-column with one of them")
        return text_column
    for name in TEXT_COLUMNS:
        if name in names:
            return name
    raise InputError(f"no text column ('generation' or 'text'); the columns are {names}", path=path,
                     hint="pass --text-column with the column that holds the statements")


def score_texts(classifier: ToxicityClassifier, texts: Sequence[str], *, chunk_size: int = CHUNK,
                on_progress: Callable[[int], None] | None = None) -> np.ndarray:
    """P(toxic) per text, float64, computed ``chunk_size`` texts at a time; ``on_progress(n)`` after each chunk."""
    texts = list(texts)
    out = np.empty(len(texts), dtype=np.float64)
    for start in range(0, len(texts), chunk_size):
        chunk = texts[start:start + chunk_size]
        probs = classifier.predict_proba(chunk)
        if hasattr(probs, "detach"):  # a third-party classifier that returns a (CUDA) tensor
            probs = probs.detach().float().cpu().numpy()
        out[start:start + len(chunk)] = np.asarray(probs, dtype=np.float64)
        if on_progress is not None:
            on_progress(len(chunk))
    return out


def score_table(table: Any, classifier: ToxicityClassifier, *, score_column: str, text_column: str | None = None,
                chunk_size: int = CHUNK, on_progress: Callable[[int], None] | None = None,
                path: str | Path | None = None) -> tuple[Any, ScoreSummary]:
    """Return ``table`` with ``score_column`` = P(toxic) of ``text_column`` (replaced in place if it exists)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text_column = pick_text_column(table.column_names, text_column, path=path)
    column = table.column(text_column)
    if not pa.types.is_string(column.type) and not pa.types.is_large_string(column.type):
        try:
            column = pc.cast(column, pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            raise InputError(f"column {text_column!r} has type {column.type}, not text", path=path,
                             hint="pass --text-column with a text column") from exc
    values = column.to_pylist()
    keep = [i for i, v in enumerate(values) if v is not None]
    scores = score_texts(classifier, [values[i] for i in keep], chunk_size=chunk_size, on_progress=on_progress)
    full: list[float | None] = [None] * len(values)
    for i, s in zip(keep, scores):
        full[i] = float(s)
    array = pa.array(full, type=pa.float64())
    replaced = 0
    if score_column in table.column_names:
        old = table.column(score_column)
        replaced = len(old) - old.null_count
        table = table.set_column(table.column_names.index(score_column), score_column, array)
    else:
        table = table.append_column(score_column, array)
    summary = ScoreSummary(rows=len(values), scored=len(keep),
                           mean=float(scores.mean()) if len(keep) else None,
                           share_toxic=float(is_toxic(scores).mean()) if len(keep) else None,
                           text_column=text_column, score_column=score_column, replaced=replaced)
    return table, summary


def default_output_path(data: str | Path) -> Path:
    """Where ``toxiforge classify DATA`` writes by default (rules in the module docstring)."""
    data = Path(data)
    if data.is_dir():
        if (data / "data").is_dir():
            return data / "scored.parquet"
        return data.with_name(data.name.rstrip("/") + ".scored.parquet")
    return data.with_name(f"{data.stem}.scored{data.suffix}")
