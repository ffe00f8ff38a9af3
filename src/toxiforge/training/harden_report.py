"""The outputs of ``toxiforge harden``: ``report.json`` (settings and every round's metrics), ``report.md`` (one
table row per round and arm) and ``report.png`` (flip rate, eval AUC and FPR_NOI per round, ALICE vs control)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write, atomic_write_text
from toxiforge.bench.stats import Share

REPORT_JSON, REPORT_MD, REPORT_PNG = "report.json", "report.md", "report.png"
ARM_STYLE = {"alice": ("ALICE arm", "#b4543a", "-"), "control": ("top-k control", "#3a6db4", "--")}


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _auc_cell(entry: dict[str, Any]) -> str:
    interval = entry.get("auc_interval")
    if entry.get("auc") is None:
        return "n/a"
    return f"{entry['auc']:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def markdown(report: dict[str, Any]) -> str:
    """One row per round and arm: additions, training rows, flip rate (both directions), AUC and FPR_NOI per set."""
    settings, rounds = report["settings"], report["rounds"]
    names = list(rounds[0]["alice"]["eval"]) if rounds else []
    lines = ["# toxiforge harden", "",
             f"{len(rounds) - 1} round(s); attack: ALICE on {settings['attack']['per_cell']} statements per group × "
             f"label ({', '.join(settings['attack']['groups'])}; {', '.join(settings['attack']['labels'])}), a new "
             f"seed every round; statements added: {settings['add']} ones; each classifier trained "
             f"{'from the base model on the union' if settings['init'] == 'base' else 'on from the previous one'}.",
             "", "Flip rate: % of a fresh attack's statements whose label the classifier got wrong (toxic prompts "
             "scored benign, benign prompts scored toxic), 95% bootstrap interval. AUC: ROC AUC with a 95% bootstrap "
             "interval. FPR_NOI: % of benign eval texts naming a group (no offensive word) scored toxic.", ""]
    header = ["round", "arm", "added", "train rows", "flip % [95% CI]", "flip % toxic→benign", "flip % benign→toxic"]
    for name in names:
        header += [f"AUC {name}", f"FPR_NOI % {name}"]
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r, entry in enumerate(rounds):
        for arm in ("alice", "control") if r else ("alice",):
            m = entry[arm]
            flips = m["flip_rate"]
            cells = [str(r), "start" if r == 0 else arm, str(m.get("added_this_round", 0)),
                     str(m.get("train_rows", "-")), Share(**flips["all"]).cell(),
                     Share(**flips["toxic_prompts"]).cell(), Share(**flips["benign_prompts"]).cell()]
            for name in names:
                e = m["eval"][name]
                cells += [_auc_cell(e), f"{_pct(e['fpr_noi'])} (n={e['noi_benign']})"]
            lines.append("| " + " | ".join(cells) + " |")
    short = [(r, e["control"].get("control_shortfall", 0)) for r, e in enumerate(rounds) if r]
    for r, missing in short:
        if missing:
            lines += ["", f"Note: round {r}'s top-k pool had {missing} usable statement(s) too few, so the control "
                          "arm added fewer than the ALICE arm."]
    lines += ["", f"![metric per round]({REPORT_PNG})"]
    return "\n".join(lines) + "\n"


def series(rounds: Sequence[dict[str, Any]], arm: str, metric: str, name: str | None = None) -> list[float | None]:
    """One value per round for ``arm``: ``flip`` (share), ``auc`` or ``fpr_noi`` of eval set ``name``."""
    out: list[float | None] = []
    for r, entry in enumerate(rounds):
        m = entry["alice" if r == 0 else arm]
        if metric == "flip":
            out.append(m["flip_rate"]["all"]["value"])
        else:
            out.append(m["eval"][name][metric] if name is not None else None)
    return out


def plot(rounds: Sequence[dict[str, Any]], path: Path) -> Path:
    """Flip rate and, per the first eval set, AUC and FPR_NOI against the round, one line per arm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rounds[0]["alice"]["eval"])
    panels = [("flip", None, "flip rate under a fresh attack (%)")]
    if names:
        panels += [("auc", names[0], f"ROC AUC, {names[0]}"), ("fpr_noi", names[0], f"FPR_NOI (%), {names[0]}")]
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    x = list(range(len(rounds)))
    for ax, (metric, name, title) in zip(axes[0], panels):
        scale = 1.0 if metric == "auc" else 100.0
        for arm, (label, color, style) in ARM_STYLE.items():
            values = [None if v is None else scale * v for v in series(rounds, arm, metric, name)]
            ax.plot(x, [float("nan") if v is None else v for v in values], style, marker="o", color=color,
                    label=label)
        ax.set(title=title, xlabel="round")
        ax.set_title(title, fontsize=9)
        ax.set_xticks(x)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    finally:
        plt.close(fig)


def write_harden_report(out: Path, config: Any, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Write ``report.json``, ``report.md`` and ``report.png`` into ``out``; return the JSON content."""
    report = {"settings": config.fingerprint(), "rounds": rounds}
    atomic_write_text(out / REPORT_JSON, json.dumps(report, indent=2, default=str) + "\n")
    atomic_write_text(out / REPORT_MD, markdown(report))
    plot(rounds, out / REPORT_PNG)
    return report
