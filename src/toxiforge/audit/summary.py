"""What a reader sees first: a card per classifier pair (each ``-c`` against the first: the verdict per section and
dataset, the three largest paired differences with their intervals, the weakest functional tests and groups), or
with one classifier a card of its headline numbers, and then the contents, linked to every section's heading.

Anchors are GitHub's (lowercase, punctuation dropped, spaces as ``-``, ``-1``, ``-2`` for repeats), so the links
work in ``report.md`` on a forge and in ``report.html``, whose headings get the same ids
(:func:`toxiforge.audit.figures.render_html`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from toxiforge.audit.compare import NO_DIFFERENCE, headline
from toxiforge.audit.glossary import SECTIONS, name
from toxiforge.audit.metrics import BIAS_AUCS
from toxiforge.audit.run import AuditResult
from toxiforge.data.examples import LabeledData
from toxiforge.intervals import SMALL_N, Estimate

WORST = 3   # functional tests, groups and differences a card names
CARD_METRICS = ("accuracy.roc_auc", "accuracy.f1", "accuracy.fpr_at_95_tpr", "groups.final_score",
                "hatecheck.overall", "hatecheck.over_blocking", "calibration.ece")


def table(header: list[str], rows: list[list[str]], *, text: bool = False) -> list[str]:
    """A Markdown table; ``text``: its cells are words, aligned left (numbers are aligned right by the page)."""
    rule = ":---|" if text else "---|"
    return ["| " + " | ".join(header) + " |", "|" + rule * len(header)] + ["| " + " | ".join(r) + " |"
                                                                         for r in rows]


def signed(diff: Estimate, digits: int = 3) -> str:
    """A difference in words: ``+0.141 [0.117, 0.167]``."""
    if diff.value is None:
        return "n/a"
    interval = "" if diff.low is None or diff.high is None else f" [{diff.low:.{digits}f}, {diff.high:.{digits}f}]"
    return f"{diff.value:+.{digits}f}{interval}"


def group_labels(data: LabeledData) -> dict[str, str]:
    """toxiforge's group -> its name for a reader: the dataset's own name beside it where they differ
    (HateCheck's ``target_ident``: ``gay people (lgbtq)``); other groups as they are."""
    from toxiforge.data.hatecheck import TARGET_COLUMN

    own: dict[str, set[str]] = {}
    for e in data.examples:
        raw = str((e.meta or {}).get(TARGET_COLUMN) or "").strip()
        if e.group and raw and raw.lower() != e.group:
            own.setdefault(e.group, set()).add(raw)
    return {g: f"{', '.join(sorted(names))} ({g})" for g, names in own.items()}


def _value(e: Estimate | None) -> float:
    return float("inf") if e is None or e.value is None else e.value


def point(e: Estimate | None, digits: int = 2) -> str:
    """The point value alone (``n/a`` when undefined)."""
    return "n/a" if e is None or e.value is None else f"{e.value:.{digits}f}"


def worst_tests(hatecheck: Mapping[str, Any], k: int | None = WORST) -> list[str]:
    """HateCheck's functional tests, lowest accuracy first (undefined last)."""
    tests = hatecheck["functional_tests"]
    return sorted(tests, key=lambda t: (_value(tests[t]["accuracy"]), t))[:k]


def tests_worst_first(hatechecks: list[Mapping[str, Any]]) -> list[str]:
    """HateCheck's functional tests by mean accuracy over the classifiers, worst first (undefined last)."""
    tests = hatechecks[0]["functional_tests"]

    def mean(t: str) -> float:
        values = [h["functional_tests"][t]["accuracy"].value for h in hatechecks]
        known = [v for v in values if v is not None]
        return sum(known) / len(known) if known else float("inf")

    return sorted(tests, key=lambda t: (mean(t), t))


def weakest_auc(stats: Any) -> tuple[str, float] | None:
    """A group's lowest bias AUC and its name (None when none is defined)."""
    found = [(m, stats.metrics[m].value) for m in BIAS_AUCS if stats.metrics[m].value is not None]
    return min(found, key=lambda x: x[1]) if found else None


def worst_groups(by_group: Mapping[str, Any], k: int = WORST) -> list[tuple[str, str, float]]:
    """``(group, bias AUC name, value)`` of the groups whose lowest bias AUC is lowest."""
    found = [(g, *w) for g, s in by_group.items() if (w := weakest_auc(s)) is not None]
    return sorted(found, key=lambda x: (x[2], x[0]))[:k]


def _weakest(result: AuditResult, c: str, other: str | None) -> list[str]:
    """The ``WORST`` weakest functional tests and groups of classifier ``c`` over every dataset (``other``'s value
    beside each)."""
    tests: list[tuple[float, str]] = []
    groups: list[tuple[float, str]] = []
    for data in result.datasets:
        d, sections = data.name, result.pair(c, data.name).sections
        beside = result.pair(other, d).sections if other else None
        where = f" on {d}" if len(result.datasets) > 1 else ""
        if "hatecheck" in sections:
            ft = sections["hatecheck"]["functional_tests"]
            theirs = beside["hatecheck"]["functional_tests"] if beside else {}
            tests += [(_value(ft[t]["accuracy"]), f"{t} {point(ft[t]['accuracy'])}"
                       + (f" ({other} {point(theirs[t]['accuracy'])})" if beside else ""))
                      for t in worst_tests(sections["hatecheck"])]
        if "by_group" in sections["groups"]:
            labels = group_labels(data)
            for g, metric, value in worst_groups(sections["groups"]["by_group"]):
                theirs = f" ({other} {point(beside['groups']['by_group'][g].metrics[metric])})" if beside else ""
                groups.append((value, f"{labels.get(g, g)}{where}: {name(metric)} {value:.2f}{theirs}"))
    return ["; ".join(text for _, text in sorted(tests, key=lambda x: x[0])[:WORST]) or "no HateCheck data",
            "; ".join(text for _, text in sorted(groups, key=lambda x: x[0])[:WORST]) or "no groups"]


def _largest(result: AuditResult, c: str) -> list[str]:
    """The ``WORST`` largest shown differences (interval excluding 0) of ``c`` against the first classifier, in
    words, ranked by the end of the interval nearest 0 (a large difference measured loosely ranks below a
    smaller, certain one); a proportion of fewer than ``SMALL_N`` rows on either side is left out (one row's FNR
    differs by 1 in every resample)."""
    base = result.classifiers[0].name
    found = []
    for d, per in result.comparison.items():
        for section, v in per[c].items():
            for metric, r in v["metrics"].items():
                behind = [headline(result.pair(x, d).sections, section, metric) for x in (base, c)]
                if not r["shown"] or any(e is not None and e.small_n for e in behind):
                    continue
                diff = r["difference"]
                found.append((min(abs(diff.low), abs(diff.high)), f"{name(f'{section}.{metric}')} on {d} "
                              f"{signed(diff)}: {'better' if r['better'] else '**worse**'}"))
    found.sort(key=lambda x: -x[0])
    lines = [f"* {text}" for _, text in found[:WORST]]
    return lines or [f"* {NO_DIFFERENCE}: every paired interval crosses 0 (or rests on fewer than {SMALL_N} rows)"]


def trained_on(result: AuditResult, names: Iterable[str]) -> list[str]:
    """One line per (classifier, dataset) whose data the classifier is known to have been trained on: a card's
    verdicts and differences on that dataset compare a held-out number with a flattered one."""
    found = [(c, d.name) for d in result.datasets for c in names
             if result.pair(c, d.name).sections.get("contaminated")]
    return [f"**Caveat:** {c} was trained on {d} (its known training data; see {d}), so its numbers there are "
            "not held-out numbers." for c, d in found] + ([""] if found else [])


def pair_card(result: AuditResult, c: str) -> list[str]:
    base = result.classifiers[0].name
    datasets = list(result.comparison)
    sections = [s for s in SECTIONS if any(s in result.comparison[d][c] for d in datasets)]

    def word(d: str, s: str) -> str:
        v = result.comparison[d][c].get(s)
        return "" if v is None else f"**{v['verdict']}**" if v["verdict"] in ("worse", "mixed") else v["verdict"]

    lines = [f"## Summary: {c} against {base}", "",
             "Verdict per section: **better** or **worse** when every shown difference (paired 95% interval "
             "excluding 0) points that way, **mixed** when they disagree.", ""]
    lines += table(["section", *datasets], [[SECTIONS[s], *(word(d, s) for d in datasets)] for s in sections])
    lines += ["", *trained_on(result, (base, c))]
    lines += [f"Largest differences ({c} minus {base}, paired 95% interval; ranked by the end nearest 0):", ""]
    lines += _largest(result, c)
    lines += ["", *table(["weakest", "HateCheck functional tests (accuracy)", "groups (lowest bias AUC)"],
                         [[c, *_weakest(result, c, base)], [base, *_weakest(result, base, c)]], text=True), ""]
    return lines


def single_card(result: AuditResult) -> list[str]:
    c = result.classifiers[0].name
    datasets = [d.name for d in result.datasets]

    def cell(d: str, key: str) -> str:
        section, _, metric = key.partition(".")
        value = result.pair(c, d).sections.get(section, {}).get(metric)
        return value.cell(3) if isinstance(value, Estimate) else ""

    keys = [k for k in CARD_METRICS if any(cell(d, k) for d in datasets)]
    lines = [f"## Summary: {c}", ""] + table(["", *datasets], [[name(k), *(cell(d, k) for d in datasets)]
                                                                for k in keys])
    lines += ["", *trained_on(result, (c,))]
    lines += [*table(["weakest", "HateCheck functional tests (accuracy)", "groups (lowest bias AUC)"],
                         [[c, *_weakest(result, c, None)]], text=True), ""]
    return lines


def cards(result: AuditResult) -> list[str]:
    names = [c.name for c in result.classifiers]
    if len(names) == 1:
        return single_card(result)
    return [line for c in names[1:] for line in pair_card(result, c)]


def anchor(text: str, seen: dict[str, int]) -> str:
    """GitHub's heading id: lowercase, punctuation dropped, spaces as ``-``; repeats get ``-1``, ``-2``."""
    base = re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")
    n = seen.get(base, 0)
    seen[base] = n + 1
    return base if n == 0 else f"{base}-{n}"


HEADING = re.compile(r"^(#{1,3}) (.+)$")


def contents(lines: Iterable[str]) -> list[str]:
    """The table of contents of the whole report ``lines`` (its ``## Contents`` heading included, so the anchors
    count it as the page does): one bullet per ``##`` heading, its ``###`` headings after it on the same line."""
    seen: dict[str, int] = {}
    entries: list[list[str]] = []
    for line in lines:
        m = HEADING.match(line)
        if not m:
            continue
        level, text = len(m.group(1)), m.group(2)
        link = f"[{text}](#{anchor(text, seen)})"
        if level == 2 and not text.startswith(("Gate", "Summary", "Contents")):
            entries.append([link])
        elif level == 3 and entries:
            entries[-1].append(link)
    return ["## Contents", ""] + [f"* {e[0]}" + (": " + " · ".join(e[1:]) if e[1:] else "") for e in entries] + [""]
