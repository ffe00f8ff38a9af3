"""A quick per-group summary of a dataset: rows, mean statement length, parse errors, label flips, two examples.

The ``fooled`` column of a row (kept under that name for compatibility) compares the classifier with the *prompt*
label; the table calls its rate "label flip" so it is not read as the paper's fool rate, which compares the
classifier with *human* labels (``toxiforge summary RUN --human FILE``, :mod:`.human_validation`).

Which scores the label flips come from: ``--score-column NAME`` when given; else the ``fooled`` column filled during
generation (``generate -c``); else a score column added later by ``toxiforge classify`` (``roberta_prediction`` or
``<classifier>_score``). A generation folder that ``classify`` scored (``DIR/scored.parquet``, its default output)
is read from that file. :func:`load_summary_rows` returns the rows and a line naming the scorer; a statement counts
as toxic when P(toxic) > 0.5 (:func:`~toxiforge.records.is_toxic`, the rule of every stage).

An attack run (``toxiforge attack``) reads as any run (its ``generation_method`` is the family), with one
difference in the label flips: they count only the statements attacked (:func:`attack_flips`). A statement the
classifier already gave the other label is skipped by the attack, left as it is, so it neither flipped nor resisted
and is not in the denominator, as in ``attack``'s own counts. :func:`attack_lines` adds, per family, that flip rate
and the queries per success (every query spent on the attacked statements over the flips).

``summarize(rows)`` returns plain dicts (one per group × label × method); ``render_summary`` prints them as a
rich table. This is what ``make demo`` and ``toxiforge summary DATA`` show.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import TYPE_CHECKING, Any

from toxiforge.errors import InputError
from toxiforge.records import TOXIC_THRESHOLD, Row, is_toxic, label_word

SCORED_FILE = "scored.parquet"  # where `toxiforge classify RUN_DIR` writes by default
# *_score columns that are not a later P(toxic) (keeper_score: ALICE's keeper, part of the search)
NOT_SCORES = ("classifier_score", "hypothesis_score", "source_score", "keeper_score")

if TYPE_CHECKING:
    from rich.console import JustifyMethod


@dataclass(frozen=True)
class GroupSummary:
    group: str
    label: str
    method: str
    count: int
    mean_chars: float
    parse_errors: int
    scored: int           # rows with a classifier score
    fooled: int           # of those, rows that fooled the classifier
    examples: tuple[str, ...]

    @property
    def fool_rate(self) -> float | None:
        return self.fooled / self.scored if self.scored else None


def score_columns(columns: Sequence[str]) -> list[str]:
    """Columns holding a classifier's P(toxic) added after generation (``roberta_prediction``, ``*_score``)."""
    return [c for c in columns if c == "roberta_prediction" or (c.endswith("_score") and c not in NOT_SCORES)]


def summary_source(path: str | Path) -> tuple[Path, str | None]:
    """The file to summarize for ``path``: a generation folder's ``scored.parquet`` when ``classify`` wrote one
    after the last shard (with a note saying so), else ``path`` itself."""
    from toxiforge.records import shard_files

    path = Path(path)
    scored = path / SCORED_FILE
    if path.is_dir() and (path / "data").is_dir() and scored.is_file():
        shards = shard_files(path)
        if all(scored.stat().st_mtime >= f.stat().st_mtime for f in shards):
            return scored, f"reading {scored} (the run with the scores `toxiforge classify` added)"
        return path, (f"{scored} is older than the run's shards, so it is not used; score the run again with "
                      f"`toxiforge classify {path} -c CLASSIFIER --overwrite`")
    return path, None


def load_summary_rows(paths: Sequence[str | Path], score_column: str | None = None
                      ) -> tuple[list[Row], list[str]]:
    """The rows of ``paths`` (read as one), with ``fooled`` set from the chosen scores (module docstring), and
    notes for the terminal, the last of which names the scorer."""
    import pyarrow as pa

    from toxiforge.data.examples import read_any_table
    from toxiforge.records import rows_from_table

    notes: list[str] = []
    tables = []
    for p in paths:
        source, note = summary_source(p)
        if note:
            notes.append(note)
        tables.append(read_any_table(source))
    table = tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")
    rows = rows_from_table(table, " + ".join(map(str, paths)))
    later = [c for c in score_columns(table.column_names) if table.column(c).null_count < table.num_rows]
    if score_column is not None:
        if score_column not in table.column_names:
            raise InputError(f"no column {score_column!r}; the score columns are {later or 'none'}",
                             hint=f"pass --score-column with one of {later}" if later else
                             f"add one with `toxiforge classify {paths[0]} -c CLASSIFIER`")
    elif any(r.fooled is not None for r in rows):
        names = sorted({r.classifier for r in rows if r.fooled is not None and r.classifier})
        skipped = attack_flips(rows, table)
        whose = ", ".join(names) or "the classifier"
        if skipped is None:
            note = f"label flips from {whose} (scored during generation)"
        else:
            note = (f"label flips from {whose}, the attacked classifier: attacked statements it now gives the other "
                    f"label; {skipped} skipped statements (already given the other label before the attack) are not "
                    "counted")
        notes.append(note + (f"; other scores: {', '.join(later)} (show them with --score-column NAME)"
                             if later else ""))
        return rows, notes
    elif later:
        score_column = later[0]
    else:
        notes.append(f"no classifier scores: add some with `toxiforge classify {paths[0]} -c profanity-check`, or "
                     "generate with -c CLASSIFIER")
        return rows, notes
    for r, score in zip(rows, table.column(score_column).to_pylist()):
        has_text = r.parse_error is None and bool(r.generation)
        r.fooled = None if score is None or not has_text else is_toxic(score) != (r.prompt_label == 1)
    others = [c for c in later if c != score_column]
    notes.append(f"label flips from column {score_column} (P(toxic) > {TOXIC_THRESHOLD} is toxic)"
                 + (f"; other scores: {', '.join(others)} (--score-column NAME)" if others else ""))
    return rows, notes


def attack_flips(rows: Sequence[Row], table: Any) -> int | None:
    """On the rows of an attack run (``table``'s ``family`` set), ``fooled`` becomes the attack's ``flipped`` for
    the statements attacked and None for those skipped (the classifier already gave the source the other label,
    :func:`~toxiforge.records.attack_counts`'s rule), so the label flips count attacked statements only; the
    number skipped, or None when no row is an attack's. Other rows are left as they are."""
    from toxiforge.records import flipped_label, is_attack_table

    if not is_attack_table(table.column_names):
        return None
    columns = (table.column(c).to_pylist() for c in ("family", "flipped", "source_score"))
    found, skipped = False, 0
    for r, family, flipped, before in zip(rows, *columns):
        if family is None:
            continue
        found = True
        if before is not None and flipped_label(before, r.prompt_label):
            r.fooled, skipped = None, skipped + 1
        else:
            r.fooled = bool(flipped)
    return skipped if found else None


def summarize(rows: Iterable[Row], examples: int = 2) -> list[GroupSummary]:
    """Per (group, label, method): count, mean characters of parsed statements, parse errors, classifier fool
    counts (rows scored by a classifier), first examples."""
    cells: dict[tuple[str, int, str], list[Row]] = {}
    for r in rows:
        cells.setdefault((r.group, r.prompt_label, r.generation_method), []).append(r)
    out = []
    for (group, label, method), members in sorted(cells.items()):
        parsed = [r.generation for r in members if r.parse_error is None and r.generation]
        out.append(GroupSummary(group=group, label=label_word(label), method=method, count=len(members),
                                mean_chars=round(mean(len(t) for t in parsed), 1) if parsed else 0.0,
                                parse_errors=len(members) - len(parsed),
                                scored=sum(r.fooled is not None for r in members),
                                fooled=sum(bool(r.fooled) for r in members), examples=tuple(parsed[:examples])))
    return out


def attack_lines(paths: Sequence[str | Path]) -> list[str]:
    """One line per attack family of the attack runs among ``paths``: flips among attacked statements, queries per
    success, skipped statements and validated flips (:func:`~toxiforge.records.attack_counts`)."""
    from toxiforge.data.examples import read_any_table
    from toxiforge.records import attack_counts, is_attack_table

    by_family: dict[str, list[dict]] = {}
    for p in paths:
        table = read_any_table(summary_source(p)[0])
        if is_attack_table(table.column_names):
            for row in table.to_pylist():
                by_family.setdefault(row["family"], []).append(row)
    lines = []
    for family, rows in sorted(by_family.items()):
        c = attack_counts(rows)
        rate = f" ({c['flip_rate']:.1%})" if c["flip_rate"] is not None else ""
        per = f", {c['queries_per_success']:.1f} queries per success" if c["queries_per_success"] else ""
        valid = f", {c['validated_flips']} validated" if c["validated_flips"] is not None else ""
        lines.append(f"attack {family}: {c['flipped']}/{c['attacked']} attacked statements flipped{rate}{per}"
                     f"{valid}; {c['skipped']} skipped (already given the other label)")
    return lines


def render_summary(summaries: list[GroupSummary], console=None, title: str = "Generated statements") -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=True)
    columns: list[tuple[str, JustifyMethod]] = [
        ("group", "left"), ("label", "left"), ("method", "left"), ("count", "right"), ("mean chars", "right"),
        ("unparsed", "right"), ("label flip", "right")]
    for name, justify in columns:
        table.add_column(name, justify=justify, no_wrap=True)
    table.add_column("examples", ratio=1, min_width=30, overflow="fold")
    for s in summaries:
        fooled = f"{s.fooled}/{s.scored} ({s.fool_rate:.0%})" if s.scored else "-"
        table.add_row(s.group, s.label, s.method, str(s.count), f"{s.mean_chars:.1f}", str(s.parse_errors), fooled,
                      "\n".join(f"• {e}" for e in s.examples))
    console = console or Console()
    # Off a terminal (a log, a pipe) rich assumes 80 columns, which truncates the examples; print wider there.
    if not console.is_terminal:
        console = Console(file=console.file, width=max(console.width, 140))
    console.print(table)
    totals: dict[str, list[int]] = {}
    for s in summaries:
        if s.scored:
            t = totals.setdefault(s.method, [0, 0])
            t[0], t[1] = t[0] + s.fooled, t[1] + s.scored
    if totals:
        console.print("label flip by method (classifier vs the prompt label; not the paper's fool rate, see --human): "
                      + ", ".join(f"{method} {fooled}/{scored} ({fooled / scored:.1%})"
                                  for method, (fooled, scored) in sorted(totals.items())))
