"""Dataset statistics as in ToxiGen's Tables 1 and 2, plus duplicate counts.

``compute_stats(data)`` gives, per group × label: count, mean characters ± standard deviation (sample std,
ddof=1, 0 for a single row) and % implicit (:mod:`toxiforge.analysis.implicit`); totals per generation method
and overall; the Table 1 row (size, % implicit, % hate class = share of rows with a toxic prompt label); and
duplicates: *exact* (a row whose text equals an earlier row's) and *near* (equal to an earlier row only after
:func:`normalize_text`: Unicode NFKC, case-folded, punctuation dropped, whitespace collapsed).

``DatasetStats.to_markdown()`` and ``to_json()`` render it; :func:`write_stats` writes both atomically.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge.analysis._tables import Table, num, pct
from toxiforge.analysis.dataset import AnalysisData, group_display, group_order, load_data, method_order
from toxiforge.analysis.implicit import Lexicon, default_lexicon

_NON_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalize_text(text: str) -> str:
    """Text folded for near-duplicate detection: NFKC, casefold, punctuation to spaces, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _NON_WORD.sub(" ", folded).strip()


@dataclass(frozen=True)
class CellStats:
    """Count, mean and sample std of characters, and share of implicit rows, of one cell."""

    count: int
    mean_chars: float
    std_chars: float
    implicit: float          # share in [0, 1]

    @classmethod
    def of(cls, lengths: np.ndarray, implicit: np.ndarray) -> CellStats:
        n = int(lengths.size)
        if n == 0:
            return cls(0, 0.0, 0.0, 0.0)
        std = float(lengths.std(ddof=1)) if n > 1 else 0.0
        return cls(n, float(lengths.mean()), std, float(implicit.mean()))

    def chars(self) -> str:
        return f"{self.mean_chars:.2f} ± {self.std_chars:.2f}"


@dataclass
class DuplicateStats:
    rows: int
    exact: int               # rows identical to an earlier row
    near: int                # rows equal to an earlier row only after normalization
    duplicate_sets: int      # normalized texts that occur more than once

    @property
    def unique(self) -> int:
        return self.rows - self.exact - self.near


def duplicate_stats(texts: list[str]) -> DuplicateStats:
    exact = len(texts) - len(set(texts))
    counts: dict[str, int] = {}
    for t in texts:
        key = normalize_text(t)
        counts[key] = counts.get(key, 0) + 1
    normalized_dups = len(texts) - len(counts)
    return DuplicateStats(rows=len(texts), exact=exact, near=normalized_dups - exact,
                          duplicate_sets=sum(c > 1 for c in counts.values()))


@dataclass
class DatasetStats:
    """Everything ``toxiforge stats`` reports. Cell keys: (group, label) with label 1 toxic / 0 benign."""

    source: str
    rows: int
    skipped: int
    by_group: dict[tuple[str, int], CellStats]
    by_method: dict[str, CellStats]
    total: CellStats
    hate_share: float
    duplicates: DuplicateStats
    lexicon: dict[str, Any]
    explicit: int = 0          # rows with a lexicon entry
    # several paths read as one: name -> (its rows' stats, its % hate class), in the order given
    by_run: dict[str, tuple[CellStats, float]] = field(default_factory=dict)

    # --- Table 1 -------------------------------------------------------------------------------------------
    def table1(self) -> Table:
        """One row per path read (each run its own rows) and, for several, their total; one row for one source."""
        total = [num(self.total.count), pct(self.total.implicit), pct(self.hate_share)]
        if not self.by_run:
            return Table("Table 1 row", ["Source", "Size", "% Implicit", "% Hate Class"],
                         [[Path(self.source).name or self.source, *total]])
        rows = [[name, num(cell.count), pct(cell.implicit), pct(hate)] for name, (cell, hate) in self.by_run.items()]
        return Table("Table 1 rows", ["Source", "Size", "% Implicit", "% Hate Class"], rows + [["Total", *total]])

    def table2(self) -> Table:
        rows = []
        for group in group_order(g for g, _ in self.by_group):
            for label in (0, 1):
                cell = self.by_group.get((group, label))
                if cell is not None:
                    rows.append([group_display(group), "Toxic" if label else "Benign", num(cell.count),
                                 cell.chars(), pct(cell.implicit)])
        for method in method_order(self.by_method):
            cell = self.by_method[method]
            rows.append([f"{method} (all)", "", num(cell.count), cell.chars(), pct(cell.implicit)])
        rows.append(["Total", "", num(self.total.count), self.total.chars(), pct(self.total.implicit)])
        return Table("Table 2: statistics per group", ["Group", "Label", "Count", "Avg. characters (± std.)",
                                                       "% Implicit"], rows, align=["l", "l", "r", "r", "r"],
                     note=f"% Implicit: no entry of {self.lexicon['source']} ({self.lexicon['terms']} entries, "
                          f"{self.lexicon['excluded']} ambiguous or identity terms excluded).")

    def duplicates_table(self) -> Table:
        d = self.duplicates

        def share(n: int) -> str:
            return pct(n / d.rows if d.rows else 0.0)

        return Table("Duplicates", ["Kind", "Rows", "% of rows"], [
            ["exact (same text as an earlier row)", num(d.exact), share(d.exact)],
            ["near (same after normalization only)", num(d.near), share(d.near)],
            ["unique after normalization", num(d.unique), share(d.unique)],
            ["texts occurring more than once", num(d.duplicate_sets), ""],
        ])

    def tables(self) -> list[Table]:
        return [self.table1(), self.table2(), self.duplicates_table()]

    def to_markdown(self) -> str:
        head = f"## Statistics of {self.source}\n\n{num(self.rows)} statements"
        if self.skipped:
            head += f" ({num(self.skipped)} row{'s' * (self.skipped != 1)} without a statement left out)"
        return head + "\n\n" + "\n".join(t.markdown() for t in self.tables())

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source, "rows": self.rows, "skipped": self.skipped,
            "table1": {"size": self.total.count, "implicit": self.total.implicit, "hate_class": self.hate_share},
            "by_run": [{"source": name, "size": cell.count, "implicit": cell.implicit, "hate_class": hate}
                       for name, (cell, hate) in self.by_run.items()],
            "by_group": [{"group": g, "label": "toxic" if lab else "benign", **asdict(c)}
                         for (g, lab), c in self.by_group.items()],
            "by_method": {m: asdict(c) for m, c in self.by_method.items()},
            "total": {**asdict(self.total), "explicit": self.explicit},
            "duplicates": {**asdict(self.duplicates), "unique": self.duplicates.unique},
            "lexicon": self.lexicon,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)


def compute_stats(data: Any, *, lexicon: Lexicon | None = None, text_column: str | None = None) -> DatasetStats:
    """Table 1/2 statistics and duplicate counts of ``data`` (path, table, rows or :class:`AnalysisData`);
    ``text_column`` names the statements' column when it is not ``generation`` or ``text``."""
    d: AnalysisData = load_data(data, need=("groups", "labels"), text_column=text_column)
    lex = lexicon or default_lexicon()
    lengths = np.fromiter((len(t) for t in d.texts), dtype=np.float64, count=len(d))
    implicit = np.fromiter((lex.is_implicit(t) for t in d.texts), dtype=np.float64, count=len(d))
    groups = np.asarray(d.groups, dtype=object)
    labels = np.asarray(d.labels, dtype=np.int64)
    by_group = {}
    for group in group_order(d.groups or []):
        for label in (0, 1):
            mask = (groups == group) & (labels == label)
            if mask.any():
                by_group[(group, label)] = CellStats.of(lengths[mask], implicit[mask])
    by_method = {}
    if d.methods is not None:
        methods = np.asarray(d.methods, dtype=object)
        for method in method_order(d.methods):
            mask = methods == method
            by_method[method] = CellStats.of(lengths[mask], implicit[mask])
    by_run = {}
    if d.runs is not None:
        runs = np.asarray(d.runs, dtype=object)
        for path, name in zip(dict.fromkeys(d.runs), d.run_names):
            mask = runs == path
            if mask.any():  # a path whose rows all lack a statement has none left
                by_run[name] = (CellStats.of(lengths[mask], implicit[mask]), float((labels[mask] == 1).mean()))
    return DatasetStats(source=d.source, rows=len(d), skipped=d.skipped, by_group=by_group, by_method=by_method,
                        total=CellStats.of(lengths, implicit), hate_share=float((labels == 1).mean()),
                        duplicates=duplicate_stats(d.texts), lexicon=lex.describe(),
                        explicit=int(len(d) - implicit.sum()), by_run=by_run)


def write_stats(stats: DatasetStats, *, markdown: str | Path | None = None, json_path: str | Path | None = None
                ) -> list[Path]:
    """Write the Markdown and/or JSON renderings atomically; returns the paths written."""
    from toxiforge._io import atomic_write_text

    written = []
    if markdown is not None:
        written.append(atomic_write_text(markdown, stats.to_markdown()))
    if json_path is not None:
        written.append(atomic_write_text(json_path, stats.to_json() + "\n"))
    return written
