"""``toxiforge audit --gate``: a release check. Each classifier after the first (a candidate) is checked against the
first (production) on every gated metric of every dataset where the metric was measured; a check **fails** when the
candidate's paired 95% interval of the difference lies wholly beyond the tolerance on the worse side (for a metric
where higher is better: ``high < -tolerance``; lower is better: ``low > +tolerance``). A difference whose interval
reaches into the tolerance passes: the gate blocks what the data show to be worse, not noise.

Gated metrics: ``--gate-metric NAME[:TOLERANCE]`` (repeatable), NAME a headline number
(:data:`~toxiforge.audit.headlines.HEADLINES`: ``accuracy.roc_auc``, ``accuracy.fnr``, ``lexical.fpr.aae``, ...),
the unique end of one (``roc_auc``, ``fnr``, ``fpr.aae``, ``ece``) or a section (``lexical``: each of its metrics);
TOLERANCE in the metric's own units, :data:`DEFAULT_TOLERANCE` when left out. Without ``--gate-metric`` every
headline number is gated at :data:`DEFAULT_TOLERANCE`.

**A gate fails closed.** It passes only when something was measured: a ``--gate-metric`` measured on no dataset
(over-blocking on a set that is not HateCheck's, the lexical rates of a set without those slices), or a gate of no
measured check at all, is no pass but an error of its own exit code (:data:`EXIT_UNMEASURED`) and a JUnit
``error``, with one line saying what could not be measured and why. A metric named by ``--gate-metric`` and
measured on some datasets only is ``skipped`` on the others. The bootstrap behind the intervals must hold at least
:data:`MIN_TAIL` resamples in each tail of the 95% interval (:data:`MIN_BOOT`).

``--junit FILE`` writes the checks as JUnit XML (one ``testcase`` per candidate × dataset × metric, a ``failure`` for
each worse one, an ``error`` for each metric measured nowhere, ``skipped`` where a named metric was not measured on
one dataset), which CI systems show as a test report. The file is checked before scoring (:func:`check_junit`) and
removed with the report a previous audit left, so a stopped audit leaves no old verdict looking current.

The verdict (:class:`Verdict`) is also written at the top of ``report.md``, ``report.html`` and ``report.json``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toxiforge.audit.glossary import name
from toxiforge.audit.headlines import HEADLINES, SLICES, section_of, sections
from toxiforge.audit.run import AuditResult
from toxiforge.audit.summary import signed
from toxiforge.errors import InputError
from toxiforge.intervals import LEVEL, Estimate

DEFAULT_TOLERANCE = 0.01
METRICS: dict[str, bool] = {k: h.higher_is_better for k, h in HEADLINES.items()}   # the gateable keys
EXIT_FAILED = 1       # a candidate shown worse (2 is an input error, 130 Ctrl-C)
EXIT_UNMEASURED = 3   # the gate measured nothing it was asked to: no pass, and not a regression either
# Each end of a percentile interval is a quantile of the replicates; below 10 replicates in a tail it is little more
# than the most extreme one (at --bootstrap 50, 1 or 2), and its Monte Carlo error is about 0.13 of the
# difference's standard error at 400 resamples against 0.38 at 50: a gate would pass or fail by the draw.
MIN_TAIL = 10
MIN_BOOT = math.ceil(MIN_TAIL / ((1 - LEVEL) / 2))   # 400 at 95%


@dataclass(frozen=True)
class GateRule:
    """A gated metric (a :data:`METRICS` key) and its tolerance; ``asked``: the ``--gate-metric`` NAME it came
    from ("" for the default gate). A dataset where an asked metric was not measured is reported as skipped, and
    an asked NAME measured on no dataset fails the gate (:data:`EXIT_UNMEASURED`)."""

    metric: str
    tolerance: float = DEFAULT_TOLERANCE
    asked: str = ""


def resolve(text: str) -> list[str]:
    """The :data:`METRICS` keys that ``text`` names: a key, a section, or the unique end of one key."""
    if text in METRICS:
        return [text]
    if text in sections():
        return [k for k in METRICS if section_of(k)[0] == text]
    ends = [k for k in METRICS if k.endswith("." + text)]
    if len(ends) == 1:
        return ends
    names = [*METRICS, *sections()]
    close = difflib.get_close_matches(text, names + [section_of(k)[1] for k in METRICS], n=3)
    raise InputError(f"--gate-metric {text!r} is {'ambiguous: ' + ', '.join(ends) if ends else 'no metric'}",
                     hint=(f"did you mean {', '.join(close)}? " if close else "")
                     + f"gated metrics are {', '.join(METRICS)}, or a section: {', '.join(sections())}")


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
            rules[metric] = GateRule(metric, tolerance, asked=text)
    return list(rules.values())


def check_gate(n_classifiers: int, n_boot: int) -> None:
    """Errors found before any scoring."""
    if n_classifiers < 2:
        raise InputError("--gate compares each classifier with the first, and there is one",
                         hint="pass the production classifier first and the candidate after: "
                              "-c prod=SPEC -c candidate=SPEC")
    if n_boot < MIN_BOOT:
        raise InputError(f"--gate needs paired {LEVEL:.0%} intervals, and --bootstrap {n_boot} is too few resamples "
                         f"for them: each end of the interval needs at least {MIN_TAIL} resamples beyond it",
                         hint=f"leave --bootstrap at its default (1000) or pass at least {MIN_BOOT}")


def check_junit(path: str | Path) -> Path:
    """``--junit PATH``, refused before scoring when it cannot be written: a folder, or a path under a file."""
    path = Path(path)
    if path.is_dir():
        raise InputError("--junit is a folder", path=path, hint=f"pass a file path, e.g. --junit {path / 'gate.xml'}")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise InputError(f"--junit: {parent} is a file, so nothing can be written under it", path=path,
                                 hint="pass a path in a folder, e.g. --junit gate.xml")
            break
    return path


@dataclass(frozen=True)
class Check:
    candidate: str
    baseline: str
    dataset: str
    rule: GateRule
    difference: Estimate | None   # None: not measured on this dataset (or undefined there)
    why: str = ""                 # when not measured: why (what the dataset lacks)

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


def why_unmeasured(sections: Mapping[str, Any], key: str) -> str:
    """Why headline ``key`` has no value on a dataset (whose pair's ``sections`` are given), in a few words."""
    section, metric = section_of(key)
    found = sections.get(section)
    if section == "hatecheck" and found is None:
        return "not a HateCheck set, no functional tests"
    if isinstance(found, Mapping) and "note" in found:
        return "no target groups" if section == "groups" else str(found["note"])
    if section == "lexical" and isinstance(found, Mapping):
        rate, _, piece = metric.partition(".")
        if piece in SLICES and not found.get("available", {}).get(piece, True):
            return {"oi": "no OI word list was given (--oi-list)",
                    "aae": "no dialect model was found (--dialect-model)"}.get(piece, f"no {piece.upper()} slice")
        return f"no {'benign' if rate == 'fpr' else 'toxic'} rows in the {piece.upper()} slice"
    for note in sections.get("notes", []):   # a set of one label
        if note.startswith("every row"):
            return "every row is " + ("toxic" if note.split(":")[0].endswith("toxic") else "benign")
    return f"{name(key)} is undefined there"


@dataclass(frozen=True)
class Unmeasured:
    """A ``--gate-metric`` NAME (``asked``) measured on no dataset for ``candidate`` (both "" when the whole gate
    measured nothing), and the line saying why."""

    asked: str
    candidate: str
    line: str


@dataclass
class Verdict:
    """The gate's result: every check, and one line per ``--gate-metric`` (or the gate as a whole) that measured
    nothing, saying why. ``status``: passed, failed (a candidate shown worse: :data:`EXIT_FAILED`), or measured
    nothing (:data:`EXIT_UNMEASURED`); a gate with both failures and unmeasured metrics is failed."""

    checks: list[Check]
    unmeasured: list[Unmeasured] = field(default_factory=list)

    @property
    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.failed]

    @property
    def measured(self) -> int:
        return sum(c.difference is not None for c in self.checks)

    @property
    def status(self) -> str:
        return "failed" if self.failed else "measured nothing" if self.unmeasured else "passed"

    @property
    def exit_code(self) -> int:
        return EXIT_FAILED if self.failed else EXIT_UNMEASURED if self.unmeasured else 0

    def summary(self) -> str:
        if self.failed:
            return f"gate: {len(self.failed)} of {self.measured} checks failed"
        if self.unmeasured:
            k, m = len(self.unmeasured), self.measured
            return (f"gate: no pass, {k} gated metric{'s' * (k != 1)} measured on no dataset; {m} other "
                    f"check{'s' * (m != 1)} measured, none failed (exit status {EXIT_UNMEASURED})")
        return (f"gate passed: {self.measured} checks, no candidate worse than the first classifier beyond its "
                "tolerance")

    def lines(self) -> list[str]:
        """What the terminal and the report say: each failed check, each metric measured nowhere, the summary."""
        return [*(c.line() for c in self.failed), *(u.line for u in self.unmeasured), self.summary()]

    def markdown(self) -> list[str]:
        """The block at the top of report.md (and so report.html)."""
        return [f"## Gate: {self.status}", "", f"**{self.summary()}**", "",
                *(f"* {line}" for line in self.lines()[:-1]), ""]

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "passed": self.status == "passed", "exit_status": self.exit_code,
                "summary": self.summary(), "measured": self.measured,
                "failed": [{"candidate": c.candidate, "dataset": c.dataset, "metric": c.rule.metric,
                            "tolerance": c.rule.tolerance, "difference": c.difference.to_dict()
                            if c.difference else None, "line": c.line()} for c in self.failed],
                "unmeasured": [u.line for u in self.unmeasured]}


def run_gate(result: AuditResult, rules: Sequence[GateRule]) -> Verdict:
    """One check per candidate × dataset × rule where the metric was compared (and, for a rule asked for by
    ``--gate-metric``, also where it was not: a check without a difference, saying why); then what measured
    nothing."""
    base = result.classifiers[0].name
    checks = []
    for c in result.classifiers[1:]:
        for d, per in result.comparison.items():
            for rule in rules:
                section, metric = section_of(rule.metric)
                row = per[c.name].get(section, {}).get("metrics", {}).get(metric)
                diff = row["difference"] if row is not None and row["difference"].defined else None
                if diff is not None:
                    checks.append(Check(c.name, base, d, rule, diff))
                elif rule.asked:
                    why = why_unmeasured(result.pair(c.name, d).sections, rule.metric)
                    checks.append(Check(c.name, base, d, rule, None, why))
    return Verdict(checks, unmeasured(checks))


def unmeasured(checks: Sequence[Check]) -> list[Unmeasured]:
    """Each ``--gate-metric`` NAME that no check measured (for some candidate), or the whole gate when nothing at
    all was measured."""
    asked: dict[tuple[str, str], list[Check]] = {}
    for c in checks:
        if c.rule.asked:
            asked.setdefault((c.rule.asked, c.candidate), []).append(c)
    found: list[Unmeasured] = []
    for (text, candidate), own in asked.items():
        if not any(c.difference is not None for c in own):
            whys: dict[str, dict[str, None]] = {}
            for c in own:
                whys.setdefault(c.dataset, {})[c.why] = None
            metrics = list(dict.fromkeys(c.rule.metric for c in own))
            what = name(metrics[0]) if len(metrics) == 1 else f"its {len(metrics)} metrics"
            reasons = "; ".join(f"{d}: {', '.join(w)}" for d, w in whys.items())
            found.append(Unmeasured(text, candidate, f"gate measured nothing: --gate-metric {text} ({what}) was "
                                                     f"measured on no dataset for {candidate} ({reasons})"))
    if not found and not any(c.difference is not None for c in checks):
        found.append(Unmeasured("", "", "gate measured nothing: no gated metric has a paired difference on any "
                                        "dataset, so there is nothing to pass"))
    return found


def junit_xml(verdict: Verdict, suite: str = "toxiforge audit gate") -> str:
    """The checks as JUnit XML: a testsuite, one testcase per check (classname: candidate.dataset); a check of a
    metric measured nowhere is an ``error``, and a gate that measured nothing at all one errored testcase."""
    import xml.etree.ElementTree as ET

    nowhere = {(u.asked, u.candidate) for u in verdict.unmeasured if u.asked}
    general = [u.line for u in verdict.unmeasured if not u.asked]
    root = ET.Element("testsuites", name=suite)
    errored = [c for c in verdict.checks if (c.rule.asked, c.candidate) in nowhere]
    node = ET.SubElement(root, "testsuite", name=suite, tests=str(len(verdict.checks) + len(general)),
                         failures=str(len(verdict.failed)), errors=str(len(errored) + len(general)),
                         skipped=str(sum(c.difference is None for c in verdict.checks) - len(errored)))
    for check in verdict.checks:
        case = ET.SubElement(node, "testcase", classname=f"{check.candidate}.{check.dataset}",
                             name=f"{check.rule.metric} (tolerance {check.rule.tolerance:g})")
        if check.difference is None:
            message = f"{name(check.rule.metric)} was not measured on {check.dataset}: {check.why}"
            if check in errored:
                ET.SubElement(case, "error", message=message + f" (nor on any other dataset: --gate-metric "
                                                               f"{check.rule.asked} measured nothing)",
                              type="unmeasured")
            else:
                ET.SubElement(case, "skipped", message=message)
        elif check.failed:
            ET.SubElement(case, "failure", message=check.line(), type="worse")
        else:
            ET.SubElement(case, "system-out").text = (f"{check.title} {signed(check.difference)}: not worse beyond "
                                                      f"{check.rule.tolerance:g}")
    for line in general:
        ET.SubElement(ET.SubElement(node, "testcase", classname="gate", name="gate measured something"), "error",
                      message=line, type="unmeasured")
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def write_junit(verdict: Verdict, path: str | Path) -> Path:
    from toxiforge._io import atomic_write_text

    return atomic_write_text(Path(path), junit_xml(verdict))
