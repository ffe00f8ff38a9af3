"""``report.json`` (schema in docs/audit.md) and ``report.md`` of an audit."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge.audit.compare import NO_DIFFERENCE
from toxiforge.audit.gate import Verdict
from toxiforge.audit.glossary import definitions, name
from toxiforge.audit.headlines import in_section
from toxiforge.audit.metrics import BIAS_AUCS, ECE_BINS, POWER, GroupStats
from toxiforge.audit.run import AuditResult
from toxiforge.audit.summary import cards, contents, group_labels, signed, table, tests_worst_first, worst_groups
from toxiforge.data.examples import LabeledData
from toxiforge.intervals import LEVEL, SMALL_N_NOTE, Estimate

SCHEMA = "toxiforge.audit/1"


def plain(value: Any) -> Any:
    """JSON-ready: estimates as ``{value, low, high}``, NaN as null."""
    if isinstance(value, (Estimate, GroupStats)):
        return plain(value.to_dict())
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return None if not np.isfinite(value) else float(value)
    if isinstance(value, np.integer):
        return int(value)
    return value


def to_json(result: AuditResult, gate: Verdict | None = None) -> dict[str, Any]:
    s = result.settings
    return {
        "schema": SCHEMA,
        **({"gate": gate.to_dict()} if gate is not None else {}),
        "settings": {"bootstrap": s.n_boot, "seed": s.seed, "level": LEVEL, "threshold": s.threshold,
                     "ece_bins": ECE_BINS, "power": POWER, "dialect": result.lexical_note},
        "classifiers": [{"name": c.name, **result.info[c.name]} for c in result.classifiers],
        "datasets": [d.describe() for d in result.datasets],
        "results": {c.name: {d.name: result.pair(c.name, d.name).sections for d in result.datasets}
                    for c in result.classifiers},
        "comparison": {d: {c: {sec: {"verdict": v["verdict"],
                                     "metrics": {m: {**r["difference"].to_dict(), "shown": r["shown"],
                                                     "better": r["better"]} for m, r in v["metrics"].items()}}
                               for sec, v in by_clf.items()} for c, by_clf in per_data.items()}
                       for d, per_data in result.comparison.items()},
        "prompt_attacks": result.prompt_attacks,
        "seconds": {k: round(v, 3) for k, v in result.seconds.items()},
    }


def write_json(result: AuditResult, gate: Verdict | None = None) -> str:
    return json.dumps(plain(to_json(result, gate)), indent=2, allow_nan=False) + "\n"


def _cell(value: Any, digits: int = 3) -> str:
    if isinstance(value, Estimate):
        return value.cell(digits)
    return "n/a" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def render_markdown(result: AuditResult, figures: Mapping[str, str] | None = None,
                    gate: Verdict | None = None) -> str:
    """The report as Markdown: the gate's verdict (with ``--gate``), the summary cards
    (:mod:`toxiforge.audit.summary`), the contents, one section per dataset, the definitions of every number;
    ``figures`` (name -> relative PNG path) are linked where they belong."""
    figures = figures or {}
    names = [c.name for c in result.classifiers]
    head = [f"# Audit: {', '.join(names)}", "", *(gate.markdown() if gate is not None else []),
            f"Numbers are point values with {LEVEL:.0%} intervals [low, high]: Wilson score intervals for proportions "
            f"(accuracy, FPR, FNR, rates), bootstrap percentile intervals for the rest and for every difference "
            f"({result.settings.n_boot} resamples, seed {result.settings.seed}); decision rule P(toxic) > "
            f"{result.settings.threshold}. Every name is defined under [Definitions](#definitions). {SMALL_N_NOTE}",
            ""]
    body: list[str] = []
    if result.prompt_attacks:
        body += _prompt_attacks(result.prompt_attacks)
    for data in result.datasets:
        body += _dataset(result, data, names, figures)
    body += ["## Definitions", "", *definitions(), ""]
    card = cards(result)
    lines = head + card + contents([*head, *card, "## Contents", *body]) + body
    return "\n".join(lines).rstrip() + "\n"


def _dataset(result: AuditResult, data: LabeledData, names: list[str], figures: Mapping[str, str]) -> list[str]:
    d = data.name
    counts = data.counts()
    lines = [f"## {d}", "", f"{counts['n']} rows ({counts['toxic']} toxic, {counts['benign']} benign); "
             f"{data.layout} from {data.source}.", ""]
    notes = [*data.notes, *result.pair(names[0], d).sections.get("notes", [])]   # label rule, #sample=N, one label
    lines += [f"* {note}" for note in notes] + ([""] if notes else [])
    trained = {c: found for c in names if (found := result.pair(c, d).sections.get("contaminated"))}
    lines += [f"**Caveat: {c} was trained on this data** ({'; '.join(found)}), so its numbers on {d} are not "
              "held-out numbers." for c, found in trained.items()] + ([""] if trained else [])
    accuracy = list(in_section("accuracy"))
    lines += ["### Accuracy", ""] + table(["classifier", *(name(f"accuracy.{m}") for m in accuracy)], [
        [c + (" (trained on this data)" if c in trained else ""),
         *(_cell(result.pair(c, d).sections["accuracy"][m]) for m in accuracy)] for c in names])
    if f"roc:{d}" in figures:
        lines += ["", f"![ROC curves]({figures[f'roc:{d}']})"]
    lines += ["", "### Groups", ""] + _groups(result, data, names, figures)
    if "hatecheck" in result.pair(names[0], d).sections:
        lines += _hatecheck(result, data, names, figures)
    lines += _lexical(result, d, names)
    if "attacks" in result.pair(names[0], d).sections:
        lines += _attacks(result, d, names)
    lines += ["### Calibration", ""] + table(["classifier", *(name(f"calibration.{m}") for m in ("ece", "brier"))], [
        [c, *(_cell(result.pair(c, d).sections["calibration"][m]) for m in ("ece", "brier"))] for c in names])
    if f"reliability:{d}" in figures:
        lines += ["", f"![reliability]({figures[f'reliability:{d}']})"]
    lines += [""]
    if len(names) > 1:
        lines += _differences(result, d, names)
    return lines


GROUP_COLUMNS = (*BIAS_AUCS, "fpr", "fnr")   # "auc" is subgroup_auc under its old name: shown once


def _groups(result: AuditResult, data: LabeledData, names: list[str], figures: Mapping[str, str]) -> list[str]:
    d = data.name
    first = result.pair(names[0], d).sections["groups"]
    if "note" in first:
        return [first["note"] + ": no group section.", ""]
    labels = group_labels(data)
    lines = table(["classifier", name("groups.final_score")], [
        [c, _cell(result.pair(c, d).sections["groups"]["final_score"])] for c in names]) + [""]
    for c in names:
        by_group = result.pair(c, d).sections["groups"]["by_group"]
        order = [g for g, _, _ in worst_groups(by_group, k=len(by_group))]
        order += [g for g in by_group if g not in order]
        lines += [f"{c}, weakest group first:", ""] + table(
            ["group", "rows", "toxic", *(name(m) for m in GROUP_COLUMNS)],
            [[labels.get(g, g), str(by_group[g].n), str(by_group[g].toxic),
              *(_cell(by_group[g].metrics[m]) for m in GROUP_COLUMNS)] for g in order]) + [""]
    if f"groups:{d}" in figures:
        lines += [f"![bias AUCs]({figures[f'groups:{d}']})", ""]
    return lines


def _hatecheck(result: AuditResult, data: LabeledData, names: list[str], figures: Mapping[str, str]) -> list[str]:
    d = data.name
    hc = [result.pair(c, d).sections["hatecheck"] for c in names]
    keys = list(in_section("hatecheck"))
    lines = ["### HateCheck functional tests", ""] + table(
        ["classifier", *(name(f"hatecheck.{m}") for m in keys)], [[c, *(_cell(h[m]) for m in keys)]
                                                                  for c, h in zip(names, hc)])
    tests = tests_worst_first(hc)
    lines += ["", "Accuracy per functional test, worst first (mean over the classifiers):", ""] + table(
        ["functional test", "gold", "cases", *names], [
            [t, "hateful" if hc[0]["functional_tests"][t]["label"] else "non-hateful",
             str(hc[0]["functional_tests"][t]["n"]), *(_cell(h["functional_tests"][t]["accuracy"], 2) for h in hc)]
            for t in tests])
    labels = group_labels(data)
    lines += ["", "Accuracy per target identity (HateCheck's name, toxiforge's group):", ""] + table(
        ["target", "cases", *names], [[labels.get(t, t), str(hc[0]["targets"][t]["n"]),
                                       *(_cell(h["targets"][t]["accuracy"], 2) for h in hc)]
                                      for t in hc[0]["targets"]])
    if f"hatecheck:{d}" in figures:
        lines += ["", f"![HateCheck]({figures[f'hatecheck:{d}']})"]
    return lines + [""]


def _lexical(result: AuditResult, d: str, names: list[str]) -> list[str]:
    lex = [result.pair(c, d).sections["lexical"] for c in names]
    slices = list(lex[0]["fpr"])

    def rows(k: str) -> str:
        n, benign = lex[0]["n"][k], lex[0]["n_benign"][k]
        return "n/a" if n is None or benign is None else f"{benign} / {n - benign}"

    lines = ["### Lexical and dialect bias", "",
             "Zhou et al.'s slices: FPR on each slice's benign rows (does the word or dialect alone trigger the "
             "classifier?) and FNR on its toxic rows (read together: flagging nothing gives FPR 0 and FNR 1).", ""]
    lines += table(["slice", "benign / toxic rows", *(f"{c} {r}" for c in names for r in ("FPR", "FNR"))],
                   [[name(f"slice.{k}"), rows(k), *(_cell(x[r].get(k)) for x in lex for r in ("fpr", "fnr"))]
                    for k in slices])
    return lines + [""] + [f"* {n}" for n in lex[0]["notes"]] + [""]


def _attacks(result: AuditResult, d: str, names: list[str]) -> list[str]:
    rows = []
    for c in names:
        for family, r in result.pair(c, d).sections["attacks"].items():
            rows.append([c, family, f"{r['attacked']} of {r['flagged_toxic']}", _cell(r["success_rate"]),
                         _cell(r["queries_per_success"], 1), _cell(r["edits_per_success"], 1)])
    return ["### Attacks", "", "Each classifier's flagged toxic rows (a seeded sample), attacked against that "
            "classifier; success: no longer flagged.", ""] + table(
        ["classifier", "family", "attacked", "success rate", "queries per success", "edits per success"],
        rows) + [""]


def _share(share: Mapping[str, Any] | None) -> str:
    """A flip share (``{value, low, high, n}``, :func:`~toxiforge.attacks.validation.flip_shares`) as
    ``value [low, high]``."""
    if not share or share.get("value") is None:
        return "n/a"
    return Estimate(share["value"], share.get("low"), share.get("high"), n=share.get("n")).cell(3)


def _prompt_attacks(sections: Mapping[str, Any]) -> list[str]:
    validated = any(s.get("validate_with") for s in sections.values())
    kinds = [("all", "flip rate"), ("toxic_prompts", "toxic prompts"), ("benign_prompts", "benign prompts")]
    header = ["classifier", "decoder", "statements", *(k for _, k in kinds)]
    if validated:
        header += ["validated flip rate", "confirmed flip rate", "validator agrees"]
    rows = []
    for c, s in sections.items():
        for decoder in ("alice", "top-k"):
            r = s[decoder]
            row = [c, decoder, str(r["statements"]), *(_share(r.get(k)) for k, _ in kinds)]
            if validated:
                row += [_share((r.get(k) or {}).get("all")) for k in ("validated", "confirmed", "validator_agrees")]
            rows.append(row)
    keepers = sorted({s["keep_label_with"] for s in sections.values() if s.get("keep_label_with")})
    validators = sorted({s["validate_with"] for s in sections.values() if s.get("validate_with")})
    who = ((f" ALICE kept each statement's prompt label in the view of the keeper {', '.join(keepers)} "
            "(--keep-label-with; its agreement was searched for, so it confirms nothing)." if keepers else "")
           + (f" Validator: {', '.join(validators)} (never seen by the search)." if validators else ""))
    lines = ["## ALICE vs top-k from prompts", "",
             "The same prompts decoded with top-k and with ALICE attacking each classifier; a statement flips when the "
             "classifier's label is not its prompt's (toxic prompts scored benign, benign prompts scored toxic)."
             + (" Validated: among the statements the validator gives their prompt label; confirmed: flipped and "
                "validated, as a share of all." if validated else "") + who, ""] + table(header, rows)
    diff = [[c, str(s["alice_minus_topk"]["flip_rate"]["prompts"]), _cell(s["alice_minus_topk"]["flip_rate"]
                                                                           ["difference"])]
            + ([_cell(s["alice_minus_topk"]["confirmed"]["difference"])] if validated else [])
            for c, s in sections.items()]
    lines += ["", "ALICE minus top-k, paired by prompt (the same resampled prompts for both):", ""] + table(
        ["classifier", "prompts", "flip rate", *(["confirmed flip rate"] if validated else [])], diff)
    return lines + [""]


def _differences(result: AuditResult, d: str, names: list[str]) -> list[str]:
    rows = []
    for c in names[1:]:
        for sec, v in result.comparison[d][c].items():
            for m, r in v["metrics"].items():
                word = NO_DIFFERENCE if not r["shown"] else ("better" if r["better"] else "worse")
                rows.append([c, name(f"{sec}.{m}"), signed(r["difference"]), word])
    return [f"### Differences from {names[0]}", "", "Each number minus the first classifier's, paired 95% interval "
            f"('{NO_DIFFERENCE}': it crosses 0).", ""] + table(["classifier", "metric", "difference", "reading"],
                                                                 rows) + [""]


REPORT_JSON, REPORT_MD, REPORT_HTML = "report.json", "report.md", "report.html"


def clear_report(out: str | Path, others: Sequence[str | Path] = ()) -> None:
    """Remove the report files and the figures a previous audit left in ``out``, and ``others`` (the gate's JUnit
    file) wherever they are (:func:`~toxiforge.audit.run.run_audit` calls it before scoring: a stopped audit leaves
    no old report or gate verdict looking current, and no figure of a dataset no longer audited stays)."""
    import shutil

    from toxiforge.audit.figures import FIGURES_DIR

    for file in (*(Path(out) / f for f in (REPORT_JSON, REPORT_MD, REPORT_HTML)), *map(Path, others)):
        file.unlink(missing_ok=True)
    shutil.rmtree(Path(out) / FIGURES_DIR, ignore_errors=True)


def write_report(result: AuditResult, out: str | Path, gate: Verdict | None = None) -> dict[str, Path]:
    """Write the figures, ``report.json``, ``report.md`` and ``report.html`` under ``out`` (the gate's verdict at the
    top of each, when given); return their paths."""
    from toxiforge._io import atomic_write_text
    from toxiforge.audit.figures import write_figures, write_html

    out = Path(out)
    figures = write_figures(result, out)
    markdown = render_markdown(result, figures, gate)
    return {"json": atomic_write_text(out / REPORT_JSON, write_json(result, gate)),
            "markdown": atomic_write_text(out / REPORT_MD, markdown),
            "html": write_html(markdown, out, REPORT_HTML)}
