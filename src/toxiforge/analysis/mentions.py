"""Do statements mention their target group? (ToxiGen Appendix D, Table 6.)

For each row, its group is resolved with :func:`toxiforge.groups.resolve_group` (names and aliases, so
ToxiGen's ``mental_dis`` works) and the statement is checked with that group's identity-term patterns
(``Group.mentions``). The share of statements that mention their target group is reported per group × method
and for all groups; :func:`toxiforge.groups.groups_mentioned` gives the *other* registered groups a statement
names. These patterns measure explicit mention only: a statement can target a group without naming it.

Rows whose group is not registered are counted in ``unknown_groups`` and left out (register such groups with
:func:`toxiforge.groups.define_group` first).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from toxiforge.analysis._tables import Table, num, pct
from toxiforge.analysis.dataset import AnalysisData, group_display, group_order, load_data, method_order
from toxiforge.errors import InputError

ALL = "__all__"


@dataclass
class MentionStats:
    """Cells keyed (group, method) -> [rows, mentioning rows]; ``others[group]`` counts other groups named."""

    cells: dict[tuple[str, str], list[int]]
    others: dict[str, Counter]
    any_other: dict[str, int]
    rows_by_group: dict[str, int]
    unknown_groups: dict[str, int] = field(default_factory=dict)
    source: str = ""
    flags: list[bool | None] = field(default_factory=list, repr=False)   # per usable row (None: unknown group)

    def share(self, group: str, method: str) -> float | None:
        n, hit = self.cells.get((group, method), (0, 0))
        return hit / n if n else None

    def groups(self) -> list[str]:
        return group_order(g for g, _ in self.cells if g != ALL)

    def methods(self) -> list[str]:
        return method_order(m for _, m in self.cells)

    def table(self) -> Table:
        methods = self.methods()
        rows = [[group_display(g)] + [pct(self.share(g, m), 0) for m in methods] for g in self.groups()]
        rows.append(["All groups"] + [pct(self.share(ALL, m), 1) for m in methods])
        note = ("% of statements that name their target group (identity-term patterns of toxiforge.groups); "
                + "; ".join(f"{m}: {num(self.cells[(ALL, m)][0])} statements" for m in methods) + ".")
        if self.unknown_groups:
            note += " Left out (group not registered): " + ", ".join(
                f"{g} ({n})" for g, n in sorted(self.unknown_groups.items())) + "."
        return Table("Statements that mention their target group (%)", ["Group"] + methods, rows, note=note)

    def others_table(self, top: int = 3) -> Table:
        rows = []
        for g in self.groups():
            n = self.rows_by_group[g]
            common = ", ".join(f"{group_display(o)} ({c})" for o, c in self.others[g].most_common(top)) or "-"
            rows.append([group_display(g), num(n), pct(self.any_other[g] / n if n else None), common])
        return Table("Other groups mentioned", ["Target group", "Statements", "% naming another group",
                                                f"Most named (top {top})"], rows, align=["l", "r", "r", "l"])

    def tables(self) -> list[Table]:
        return [self.table(), self.others_table()]

    def to_markdown(self) -> str:
        return "\n".join(t.markdown() for t in self.tables())

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "cells": [{"group": g, "method": m, "rows": n, "mentioning": hit, "share": hit / n if n else None}
                      for (g, m), (n, hit) in self.cells.items()],
            "other_groups": {g: {"statements": self.rows_by_group[g], "naming_another": self.any_other[g],
                                 "counts": dict(self.others[g].most_common())} for g in self.groups()},
            "unknown_groups": self.unknown_groups,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, ensure_ascii=False)


ALL_STATEMENTS = "all statements"


def mention_stats(data: Any, *, on_progress: Callable[[int], None] | None = None,
                  text_column: str | None = None) -> MentionStats:
    """Mention shares per group × method and other groups named, for ``data`` (path, table, rows, ...)."""
    from toxiforge.groups import groups_mentioned, resolve_group

    d: AnalysisData = load_data(data, need=("groups",), text_column=text_column)
    assert d.groups is not None, "load_data(need=('groups',)) raises when there is no group column"
    methods = d.methods or [ALL_STATEMENTS] * len(d)  # no generation method: one column for every statement
    resolved: dict[str, Any] = {}
    cells: dict[tuple[str, str], list[int]] = {}
    others: dict[str, Counter] = {}
    any_other: Counter = Counter()
    rows_by_group: Counter = Counter()
    unknown: Counter = Counter()
    flags: list[bool | None] = []
    for i, (text, group, method) in enumerate(zip(d.texts, d.groups, methods)):
        if group not in resolved:
            try:
                resolved[group] = resolve_group(group)
            except InputError:
                resolved[group] = None
        target = resolved[group]
        if target is None:
            unknown[group] += 1
            flags.append(None)
            continue
        hit = target.mentions(text)
        flags.append(hit)
        group = target.name  # aliases of one group share a row
        for key in ((group, method), (ALL, method)):
            cell = cells.setdefault(key, [0, 0])
            cell[0] += 1
            cell[1] += hit
        named = [g for g in groups_mentioned(text) if g != target.name]
        others.setdefault(group, Counter()).update(named)
        any_other[group] += bool(named)
        rows_by_group[group] += 1
        if on_progress is not None and (i + 1) % 1000 == 0:
            on_progress(1000)
    if on_progress is not None:
        on_progress(len(d) % 1000)
    if not cells:
        raise InputError(f"none of the groups in the data is registered: {sorted(unknown)}", path=d.source,
                         hint="use ToxiGen's group names (see `toxiforge groups`) or register yours with "
                              "toxiforge.groups.define_group")
    return MentionStats(cells=cells, others=others, any_other=dict(any_other), rows_by_group=dict(rows_by_group),
                        unknown_groups=dict(unknown), source=d.source, flags=flags)
