"""Several ``toxiforge harden`` runs that differ only in ``--seed``, read as one experiment.

One harden run is one draw: its attacks sample new prompts every round and its classifiers train from a seeded
head, so a round-to-round change of a few points can be that draw's luck. Running the same command with other
``--seed`` values and reading the runs together (:func:`combine`) separates the loop's effect from the draw:

* for each round and arm, every flip measure **pooled** over the runs (all their statements, one share with a
  95% Wilson interval) and each run's own value;
* for each run, the ALICE arm's change from round 0 and its gap to the control arm in every round (the issue's
  target is read off these), with their mean over the runs and its Student t interval (:func:`~toxiforge.intervals.
  mean_over_runs`: the seed noise; a gap is shown beyond it when the interval excludes 0);
* when the runs compared the arms prompt by prompt (:mod:`toxiforge.harden.arms`, ``versus_control``), each run's
  paired difference with its interval and the same mean and t interval over the runs;
* the eval sets' AUC and FPR_NOI per run, and the ALICE-minus-control AUC difference per run;
* the attack families' flip rates and HateCheck's ``spell_*`` accuracy, when the runs measured them
  (:mod:`toxiforge.harden.seeds_families`).

The runs must have the same settings apart from the seeds (the attack's and the training's, which ``--seed`` sets
together), else :class:`~toxiforge.errors.InputError`. Rounds are read up to the fewest any run has.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toxiforge.errors import InputError
from toxiforge.harden.arms import VERSUS
from toxiforge.harden.data import ALICE_ARM, ARMS, CONTROL_ARM
from toxiforge.harden.report import (
    ARM_STYLE,
    REPORT_JSON,
    auc_limits,
    flip_columns,
    flip_measure,
    save_round_figure,
    series,
)
from toxiforge.intervals import Share, interval_cell, mean_over_runs, points_cell, pooled_share

SEEDS_JSON, SEEDS_MD, SEEDS_PNG = "harden-seeds.json", "harden-seeds.md", "harden-seeds.png"


def _seedless(settings: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(settings))
    out["attack"].pop("seed", None)
    out["train"].pop("seed", None)
    return out


def read_reports(dirs: Sequence[str | Path]) -> list[dict[str, Any]]:
    """Each run's ``report.json``; the runs must share their settings except the seeds."""
    if len(dirs) < 2:
        raise InputError(f"{len(dirs)} harden run given; reading runs together needs two or more",
                         hint="pass the -o directories of the same harden command run with different --seed")
    reports = []
    for folder in dirs:
        path = Path(folder).expanduser() / REPORT_JSON
        if not path.parent.is_dir():
            raise InputError("no such directory", path=path.parent, hint="check the path: pass harden -o directories")
        if not path.is_file():
            raise InputError(f"no {REPORT_JSON}, so this is not a finished harden run", path=path.parent,
                             hint="pass a harden -o directory whose run finished (rerun it with --resume)")
        reports.append(json.loads(path.read_text(encoding="utf-8")))
    first = _seedless(reports[0]["settings"])
    for folder, report in zip(dirs[1:], reports[1:]):
        other = _seedless(report["settings"])
        differ = sorted(k for k in set(first) | set(other) if first.get(k) != other.get(k))
        if differ:
            raise InputError(f"its {', '.join(differ)} differ from {dirs[0]}'s: these runs are not one experiment",
                             path=folder, hint="read together only runs of the same command with other --seed")
    seeds = [r["settings"]["attack"]["seed"] for r in reports]
    if len(set(seeds)) < len(seeds):
        raise InputError(f"two runs share a seed ({seeds})", hint="pass each seed's run once")
    return reports


def _summary(values: Sequence[float | None]) -> dict[str, Any]:
    known = [v for v in values if v is not None]
    return {"per_run": list(values), "mean": sum(known) / len(known) if known else None,
            "min": min(known) if known else None, "max": max(known) if known else None}


def _difference(values: Sequence[float | None]) -> dict[str, Any]:
    """A difference per run: :func:`_summary` and ``over_runs``, its mean with a t interval over the runs."""
    return {**_summary(values), "over_runs": mean_over_runs(values)}


def _paired(reports: Sequence[dict[str, Any]], r: int) -> dict[str, Any] | None:
    """Round ``r``'s ALICE-minus-control comparison on shared prompts, per kind (``flip``, ``confirmed``): each
    run's paired difference (None where a run has none) and their mean with a t interval; None when no run has it."""
    per_run = [rep["rounds"][r][ALICE_ARM].get(VERSUS) for rep in reports]
    if not any(per_run):
        return None
    kinds = [k for k in ("flip", "confirmed") if any(v and v.get(k) for v in per_run)]
    out: dict[str, Any] = {"prompts": [v["prompts"] if v else None for v in per_run]}
    for kind in kinds:
        runs = [(v or {}).get(kind) for v in per_run]
        out[kind] = {"per_run": runs, "over_runs": mean_over_runs([d["value"] if d else None for d in runs])}
    return out


def combine(dirs: Sequence[str | Path]) -> dict[str, Any]:
    """The runs in ``dirs`` read together (module docstring); what ``harden-seeds.json`` holds."""
    reports = read_reports(dirs)
    rounds = min(len(r["rounds"]) for r in reports)
    kinds = [kind for kind, key, _ in flip_columns(reports[0]["rounds"]) if key == "all" and kind != "kept"]
    headline = "confirmed" if "confirmed" in kinds else "attack"
    names = list(reports[0]["rounds"][0][ALICE_ARM]["eval"])
    table = []
    for r in range(rounds):
        for arm in ARMS if r else (ALICE_ARM,):
            ms = [rep["rounds"][r][arm] for rep in reports]
            flips = {}
            for kind in kinds:
                shares = [(flip_measure(m, kind) or {}).get("all") for m in ms]
                flips[kind] = {"pooled": pooled_share(shares),
                               **_summary([None if s is None else s["value"] for s in shares])}
            evals = {name: {"auc": _summary([m["eval"][name]["auc"] for m in ms]),
                            "fpr_noi": _summary([m["eval"][name]["fpr_noi"] for m in ms])} for name in names}
            table.append({"round": r, "arm": "start" if r == 0 else arm, "flips": flips, "eval": evals,
                          "added": _summary([m.get("added_this_round", 0) for m in ms])})

    def diff(a: float | None, b: float | None) -> float | None:
        return None if a is None or b is None else a - b

    # per run, one value per round and arm (report.series: round 0 is C_0 for both arms)
    flip = [{arm: series(rep["rounds"], arm, headline) for arm in ARMS} for rep in reports]
    auc = [{(arm, name): series(rep["rounds"], arm, "auc", name) for arm in ARMS for name in names}
           for rep in reports]
    changes = []
    for r in range(1, rounds):
        row: dict[str, Any] = {"round": r,
                               "alice_minus_round0": _difference([diff(f[ALICE_ARM][r], f[ALICE_ARM][0])
                                                                  for f in flip]),
                               "alice_minus_control": _difference([diff(f[ALICE_ARM][r], f[CONTROL_ARM][r])
                                                                   for f in flip])}
        for name in names:
            row[f"auc_alice_minus_control:{name}"] = _difference([diff(a[ALICE_ARM, name][r],
                                                                       a[CONTROL_ARM, name][r]) for a in auc])
        paired = _paired(reports, r)
        if paired is not None:
            row["paired_alice_minus_control"] = paired
        changes.append(row)
    from toxiforge.harden.seeds_families import combine_families

    return {"runs": [str(d) for d in dirs], "seeds": [r["settings"]["attack"]["seed"] for r in reports],
            "rounds": rounds, "headline": headline, "eval_sets": names, "table": table, "changes": changes,
            "families": combine_families(reports, rounds)}


def _pts(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:+.1f}"


def _spread(s: dict[str, Any], fmt: str = "pct") -> str:
    if s["mean"] is None:
        return "-"
    if fmt == "auc":
        return f"{s['mean']:.3f} ({s['min']:.3f}-{s['max']:.3f})"
    if fmt == "pts":
        return f"{points_cell(s.get('over_runs'))} ({', '.join(_pts(v) for v in s['per_run'])})"
    if fmt == "auc_diff":
        runs = ", ".join("-" if v is None else f"{v:+.3f}" for v in s["per_run"])
        return f"{interval_cell(s.get('over_runs'))} ({runs})"
    return f"{100 * s['mean']:.1f} ({100 * s['min']:.1f}-{100 * s['max']:.1f})"


def _paired_markdown(combined: dict[str, Any]) -> list[str]:
    """The table of each round's prompt-by-prompt ALICE-minus-control differences, when the runs have them."""
    rows = [(c["round"], c["paired_alice_minus_control"]) for c in combined["changes"]
            if "paired_alice_minus_control" in c]
    if not rows:
        return []
    seeds = combined["seeds"]
    lines = ["", "The ALICE arm minus the control arm on the same prompts (each round's attacks on the two arms' "
                 "classifiers, paired by prompt), in points: the mean over the runs [Student t 95% over the runs: "
                 "beyond seed noise when it excludes 0], then each run's difference [95% paired bootstrap]; below 0: "
                 "the ALICE arm's classifier was flipped less.", "",
             "| round | flip rate | mean over the runs [t 95%] | " + " | ".join(f"seed {s}" for s in seeds) + " |",
             "|---|---|---|" + "---|" * len(seeds)]
    for r, paired in rows:
        for kind in ("flip", "confirmed"):
            if kind in paired:
                lines.append(f"| {r} | {kind} | {points_cell(paired[kind]['over_runs'])} | "
                             + " | ".join(points_cell(d) for d in paired[kind]["per_run"]) + " |")
    return lines


def markdown(combined: dict[str, Any]) -> str:
    """Two tables: every measure per round and arm (flip measures pooled, with each run's range), then the
    headline flip measure's change from round 0 and gap to the control per run."""
    names, kinds = combined["eval_sets"], list(combined["table"][0]["flips"])
    headline = combined["headline"]
    lines = ["# toxiforge harden, read over seeds", "",
             f"{len(combined['runs'])} runs (seeds {', '.join(map(str, combined['seeds']))}), rounds 0-"
             f"{combined['rounds'] - 1}. Flip measures: the share pooled over every run's statements [95% Wilson "
             "interval], then the mean of the runs (their min-max). AUC and FPR_NOI: mean of the runs (min-max).", ""]
    header = ["round", "arm", "added (mean)", *(f"{k} flip % pooled [CI]; runs" for k in kinds)]
    for name in names:
        header += [f"AUC {name}", f"FPR_NOI % {name}"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in combined["table"]:
        cells = [str(row["round"]), row["arm"], f"{row['added']['mean']:.1f}"]
        for kind in kinds:
            f = row["flips"][kind]
            pooled = "-" if f["pooled"] is None else Share(**f["pooled"]).cell()
            cells.append(f"{pooled}; {_spread(f)}")
        for name in names:
            cells += [_spread(row["eval"][name]["auc"], "auc"), _spread(row["eval"][name]["fpr_noi"])]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"Change of the {headline} flip rate, in points: mean over the runs [Student t 95% over the runs: "
                  "beyond seed noise when it excludes 0] (each run's value, seeds in the order above).", ""]
    header = ["round", "ALICE arm minus round 0", "ALICE arm minus control",
              *(f"AUC ALICE minus control, {name}" for name in names)]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in combined["changes"]:
        cells = [str(row["round"]), _spread(row["alice_minus_round0"], "pts"),
                 _spread(row["alice_minus_control"], "pts")]
        for name in names:
            cells.append(_spread(row[f"auc_alice_minus_control:{name}"], "auc_diff"))
        lines.append("| " + " | ".join(cells) + " |")
    lines += _paired_markdown(combined)
    from toxiforge.harden.seeds_families import families_markdown

    lines += families_markdown(combined.get("families") or {})
    return "\n".join(lines) + "\n"


def _series(combined: dict[str, Any], arm: str, metric: str) -> tuple[list[float | None], list[list[float | None]]]:
    """Per round (round 0 is the start of both arms): the pooled (flip kinds) or mean (``auc:NAME``) value, and
    each run's values."""
    rows = [row for row in combined["table"] if row["arm"] in ("start", arm)]
    if metric.startswith("auc:"):
        parts = [row["eval"][metric[4:]]["auc"] for row in rows]
        middle = [p["mean"] for p in parts]
    else:
        parts = [row["flips"][metric] for row in rows]
        middle = [None if p["pooled"] is None else 100 * p["pooled"]["value"] for p in parts]
        parts = [{**p, "per_run": [None if v is None else 100 * v for v in p["per_run"]]} for p in parts]
    return middle, [list(run) for run in zip(*(p["per_run"] for p in parts))]


def plot(combined: dict[str, Any], path: Path) -> Path:
    """The headline flip rate, the transfer flip rate (when measured) and the first eval set's AUC per round (on an
    axis at least :data:`~toxiforge.harden.report.MIN_AUC_SPAN` wide): per arm the pooled (AUC: mean) value
    as a thick line, each run as a thin one."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = list(combined["table"][0]["flips"])
    panels = [(combined["headline"], f"{combined['headline']} flip rate, fresh attack (%, pooled)")]
    transfer = next((k for k in ("transfer-validated", "transfer") if k in kinds), None)
    if transfer:
        panels.append((transfer, f"{transfer.replace('-', ' ')} flip rate, fixed C_0 attack (%, pooled)"))
    if combined["eval_sets"]:
        name = combined["eval_sets"][0]
        panels.append((f"auc:{name}", f"ROC AUC, {name} (mean)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    x = list(range(combined["rounds"]))
    nan = float("nan")
    for ax, (metric, _) in zip(axes[0], panels):
        shown: list[float | None] = []
        for arm, (label, color, style) in ARM_STYLE.items():
            middle, runs = _series(combined, arm, metric)
            for run in runs:
                ax.plot(x, [nan if v is None else v for v in run], style, color=color, alpha=0.35, linewidth=0.8)
            ax.plot(x, [nan if v is None else v for v in middle], style, marker="o", color=color, linewidth=2,
                    label=label)
            shown += middle + [v for run in runs for v in run]
        if metric.startswith("auc:"):
            ax.set_ylim(*auc_limits(shown))  # as harden's report.png: a small change must not look steep
    return save_round_figure(fig, list(axes[0]), [title for _, title in panels], x, path)
