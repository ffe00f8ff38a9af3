"""Comparison of two or more classifiers on the same rows: every headline number's difference from the first
classifier (:data:`~toxiforge.audit.headlines.HEADLINES`) with a paired bootstrap interval
(:func:`~toxiforge.intervals.paired_difference`), and a verdict per section: ``better``/``worse`` when every
difference whose interval excludes 0 points that way, ``mixed`` when they disagree, ``no difference shown`` when
every interval crosses 0."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toxiforge.audit.headlines import in_section, sections
from toxiforge.intervals import Estimate, paired_difference

NO_DIFFERENCE = "no difference shown"


def headline(sections: Mapping[str, Any], section: str, metric: str) -> Estimate | None:
    """``sections[section][metric]``, a dotted metric going deeper (``fpr.noi``); None unless an Estimate."""
    value: Any = sections.get(section)
    for key in metric.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, Estimate) else None


def compare(base: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{section: {"metrics": {metric: {"difference": Estimate, "shown": bool, "better": bool | None}},
    "verdict": str}}`` for ``other`` against ``base`` (the sections of one dataset)."""
    out: dict[str, dict[str, Any]] = {}
    for section in sections():
        rows: dict[str, Any] = {}
        for metric, h in in_section(section).items():
            a, b = headline(base, section, metric), headline(other, section, metric)
            if a is None or b is None:
                continue
            diff = paired_difference(a, b)
            shown = diff.excludes_zero()
            better = None if not shown or diff.value is None else (diff.value > 0) == h.higher_is_better
            rows[metric] = {"difference": diff, "shown": shown, "better": better}
        if rows:
            out[section] = {"metrics": rows, "verdict": verdict([r["better"] for r in rows.values()])}
    return out


def verdict(better: list[bool | None]) -> str:
    shown = {b for b in better if b is not None}
    if not shown:
        return NO_DIFFERENCE
    if len(shown) == 2:
        return "mixed"
    return "better" if shown == {True} else "worse"
