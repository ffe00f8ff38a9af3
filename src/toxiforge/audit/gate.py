"""``toxiforge audit --gate``: a release check. Each classifier after the first (a candidate) is checked against the
first (production) on every gated metric of every dataset where the metric was measured; a check **fails** when the
candidate's paired 95% interval of the difference lies wholly beyond the tolerance on the worse side (for a metric
where higher is better: ``high < -tolerance``; lower is better: ``low > +tolerance``). A difference whose interval
reaches into the tolerance passes: the gate blocks what the data show to be worse, not noise.

Gated metrics: ``--gate-metric NAME[:TOLERANCE]`` (repeatable), NAME a comparison metric (``accuracy.roc_auc``,
``lexical.fpr.aae``, ...), the unique end of one (``roc_auc``, ``fpr.aae``, ``ece``) or a section (``lexical``:
each of its metrics); TOLERANCE in the metric's own units, :data:`DEFAULT_TOLERANCE` when left out. Without
``--gate-metric`` every metric of the comparison is gated at :data:`DEFAULT_TOLERANCE`.

``--junit FILE`` writes the checks as JUnit XML (one ``testcase`` per candidate × dataset × metric, a ``failure`` for
each worse one, ``skipped`` where a metric named by ``--gate-metric`` was not measured), which CI systems show as
a test report.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from toxiforge.audit.compare import HEADLINES
from toxiforge.audit.glossary import name
from toxiforge.audit.run import AuditResult
from toxiforge.audit.summary import signed
from toxiforge.errors import InputError
from toxiforge.intervals import Estimate

DEFAULT_TOLERANCE = 0.01
METRICS: dict[str, bool] = {f"{s}.{m}": higher for s, ms in HEADLINES.items() for m, higher in ms.items()}


@dataclass(frozen=True)
class GateRule:
    """A gated metric (a :data:`METRICS` key) and its tolerance; ``named``: given by ``--gate-metric`` (then a
    dataset where it was not measured is reported as skipped)."""

    metric: str
    tolerance: float = DEFAULT_TOLERANCE
    named: bool = False


def resolve(text: str) -> list[str]:
    """The :data:`METRICS` keys that ``text`` names: a key, a section, or the unique end of one key."""
    if text in METRICS:
        return [text]
    if text in HEADLINES:
        return [k for k in METRICS if k.startswith(text + ".")]
    ends = [k for k in METRICS if k.endswith("." + text)]
    if len(ends) == 1:
        return ends
    names = [*METRICS, *HEADLINES]
    close = difflib.get_close_matches(text, names + [k.split(".", 1)[1] for k in METRICS], n=3)
    raise InputError(f"--gate-metric {text!r} is {'ambiguous: ' + ', '.join(ends) if ends else 'no metric'}",
                     hint=(f"did you mean {', '.join(close)}? " if close else "")
                     + f"gated metrics are {', '.join(METRICS)}, or a section: {', '.join(HEADLINES)}")


def parse_rules(specs: Sequence[str]) -> list[GateRule]:
    """``NAME[:TOLERANCE]`` values of ``--gate-metric``; none: every metric at the default tolerance."""
    if not specs:
        return [GateRule(m) for m in METRICS]
    rules: dict[str, GateRule] = {}
    for spec in specs:
        text, sep, tol = spec.strip().partition(":")
        try:
            tolerance = float(tol) if sep else DEFAULT_TOLERANCE
        except ValueError:
            raise InputError(f"--gate-metric {spec!r}: tolerance {tol!r} is not a number",
                             hint="write NAME:TOLERANCE, e.g. --gate-metric roc_auc:0.01") from None
        if not 0 <= tolerance < 1:
            raise InputError(f"--gate-metric {spec!r}: tolerance {tolerance} is outside [0, 1)",
                             hint="a tolerance is in the metric's units, e.g. 0.01 of ROC AUC")
        for metric in resolve(text):
            rules[metric] = GateRule(metric, tolerance, named=True)
    return list(rules.values())


def check_gate(n_classifiers: int, n_boot: int) -> None:
    """Errors found before any scoring."""
    if n_classifiers < 2:
        raise InputError("--gate compares each classifier with the first, and there is one",
                         hint="pass the production classifier first and the candidate after: "
                              "-c prod=SPEC -c candidate=SPEC")
    if n_boot < 1:
        raise InputError("--gate needs paired intervals, and --bootstrap 0 gives none",
                         hint="leave --bootstrap at its default (1000) or pass a positive number")


@dataclass(frozen=True)
class Check:
    candidate: str
    baseline: str
    dataset: str
    rule: GateRule
    difference: Estimate | None   # None: not measured on this dataset (or undefined there)

    @property
    def higher_is_better(self) -> bool:
        return METRICS[self.rule.metric]

    @property
    def failed(self) -> bool:
        d = self.difference
        return d is not None and d.worse_beyond(self.rule.tolerance, self.higher_is_better)

    @property
    def title(self) -> str:
        return f"{self.candidate} vs {self.baseline} on {self.dataset}: {name(self.rule.metric)}"

    def line(self) -> str:
        side = "lower" if self.higher_is_better else "higher"
        return (f"gate failed: {self.title} ({self.rule.metric}) {signed(self.difference) if self.difference else ''}"
                f" is worse beyond the tolerance {self.rule.tolerance:g} (interval wholly {side} than "
                f"{'-' if self.higher_is_better else '+'}{self.rule.tolerance:g})")


def run_gate(result: AuditResult, rules: Sequence[GateRule]) -> list[Check]:
    """One check per candidate × dataset × rule where the metric was compared (and, for a rule named by
    ``--gate-metric``, also where it was not: a check without a difference, reported as skipped)."""
    base = result.classifiers[0].name
    checks = []
    for c in result.classifiers[1:]:
        for d, per in result.comparison.items():
            for rule in rules:
                section, _, metric = rule.metric.partition(".")
                row = per[c.name].get(section, {}).get("metrics", {}).get(metric)
                diff = row["difference"] if row is not None and row["difference"].defined else None
                if diff is not None or rule.named:
                    checks.append(Check(c.name, base, d, rule, diff))
    return checks


def summary_line(checks: Sequence[Check]) -> str:
    failed = sum(c.failed for c in checks)
    measured = sum(c.difference is not None for c in checks)
    return (f"gate: {failed} of {measured} checks failed" if failed else f"gate passed: {measured} checks, no "
            "candidate worse than the first classifier beyond its tolerance")


def junit_xml(checks: Sequence[Check], suite: str = "toxiforge audit gate") -> str:
    """The checks as JUnit XML: a testsuite, one testcase per check (classname: candidate.dataset)."""
    import xml.etree.ElementTree as ET

    root = ET.Element("testsuites", name=suite)
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(checks)),
                         failures=str(sum(c.failed for c in checks)), errors="0",
                         skipped=str(sum(c.difference is None for c in checks)))
    for check in checks:
        case = ET.SubElement(node, "testcase", classname=f"{check.candidate}.{check.dataset}",
                             name=f"{check.rule.metric} (tolerance {check.rule.tolerance:g})")
        if check.difference is None:
            ET.SubElement(case, "skipped", message=f"{name(check.rule.metric)} was not measured on {check.dataset}")
        elif check.failed:
            ET.SubElement(case, "failure", message=check.line(), type="worse")
        else:
            ET.SubElement(case, "system-out").text = (f"{check.title} {signed(check.difference)}: not worse beyond "
                                                      f"{check.rule.tolerance:g}")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(checks: Sequence[Check], path: str | Path) -> Path:
    from toxiforge._io import atomic_write_text

    return atomic_write_text(Path(path), junit_xml(checks))
