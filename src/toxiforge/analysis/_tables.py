"""Small table helpers shared by the analyses: one (headers, rows) table renders as Markdown or HTML."""

from __future__ import annotations

import html
from dataclasses import dataclass, field


@dataclass
class Table:
    """A titled table of strings; ``align`` is "l" or "r" per column (default: first left, the rest right)."""

    title: str
    headers: list[str]
    rows: list[list[str]] = field(default_factory=list)
    align: list[str] | None = None
    note: str = ""

    def _align(self) -> list[str]:
        return self.align or ["l"] + ["r"] * (len(self.headers) - 1)

    def markdown(self) -> str:
        def cell(value: str) -> str:
            return str(value).replace("|", "\\|").replace("\n", " ")

        rule = ["---:" if a == "r" else ":---" for a in self._align()]
        lines = [f"### {self.title}", "", "| " + " | ".join(map(cell, self.headers)) + " |",
                 "| " + " | ".join(rule) + " |"]
        lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in self.rows]
        if self.note:
            lines += ["", self.note]
        return "\n".join(lines) + "\n"

    def html(self) -> str:
        align = self._align()

        def cells(values, tag):
            return "".join(f'<{tag} class="{"num" if a == "r" else "txt"}">{html.escape(str(v))}</{tag}>'
                           for v, a in zip(values, align))

        body = "\n".join(f"<tr>{cells(r, 'td')}</tr>" for r in self.rows)
        note = f'<p class="note">{html.escape(self.note)}</p>' if self.note else ""
        return (f"<h3>{html.escape(self.title)}</h3>\n<table>\n<thead><tr>{cells(self.headers, 'th')}</tr></thead>\n"
                f"<tbody>\n{body}\n</tbody>\n</table>\n{note}\n")


def pct(value: float | None, digits: int = 1) -> str:
    """A share in [0, 1] as a percentage string ("98.2"), or "-"."""
    return "-" if value is None else f"{100 * value:.{digits}f}"


def num(value: int) -> str:
    return f"{value:,}"
