"""A quick per-group summary of a dataset: rows, mean statement length, parse errors, label flips, two examples.

The ``fooled`` column of a row (kept under that name for compatibility) compares the classifier with the *prompt*
label; the table calls its rate "label flip" so it is not read as the paper's fool rate, which compares the
classifier with *human* labels (``toxiforge summary RUN --human FILE``, :mod:`.human_validation`).

``summarize(rows)`` returns plain dicts (one per group × label × method); ``render_summary`` prints them as a
rich table. This is what ``make demo`` and ``toxiforge summary DATA`` show.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from statistics import mean
from typing import TYPE_CHECKING

from toxiforge.records import Row, label_word

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


def render_summary(summaries: list[GroupSummary], console=None, title: str = "Generated statements") -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title, show_lines=True)
    columns: list[tuple[str, JustifyMethod]] = [
        ("group", "left"), ("label", "left"), ("method", "left"), ("count", "right"), ("mean chars", "right"),
        ("flagged", "right"), ("label flip", "right")]
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
