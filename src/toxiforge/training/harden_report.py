"""The numbers and outputs of ``toxiforge harden``: the statements of a run with their flips, a classifier's
metrics (:func:`measure`), and ``report.json`` (settings and every round's metrics), ``report.md`` (one table row
per round and arm) and ``report.png`` (flip rate, eval AUC and FPR_NOI per round, ALICE vs control)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge._io import atomic_write, atomic_write_text
from toxiforge.bench.stats import Share
from toxiforge.data.examples import Example, LabeledData
from toxiforge.records import METHOD_ALICE, TOXIC_THRESHOLD

REPORT_JSON, REPORT_MD, REPORT_PNG = "report.json", "report.md", "report.png"
ARM_STYLE = {"alice": ("ALICE arm", "#b4543a", "-"), "control": ("top-k control", "#3a6db4", "--")}


def run_rows(run_dir: Path, method: str) -> list[tuple[Example, bool | None]]:
    """The usable statements of a generation run as ``(Example with its prompt label, fooled)``."""
    from toxiforge.data.examples import column, read_any_table
    from toxiforge.data.toxigen import load_generated

    data = load_generated(run_dir)
    fooled = column(read_any_table(run_dir), "fooled")
    return [(replace(e, method=method), None if fooled[e.row] is None else bool(fooled[e.row]))
            for e in data.examples if e.row is not None]


def flip_rates(attack_dir: Path) -> dict[str, Any]:
    """Share of the attack's scored statements whose label flipped: overall and per prompt label (toxic prompts
    scored benign, benign prompts scored toxic), each with a 95% bootstrap interval."""
    from toxiforge.bench.stats import bootstrap_share

    rows = [(e.label, fooled) for e, fooled in run_rows(attack_dir, METHOD_ALICE) if fooled is not None]
    out = {"all": bootstrap_share([f for _, f in rows]).to_dict()}
    for label, word in ((1, "toxic_prompts"), (0, "benign_prompts")):
        out[word] = bootstrap_share([f for lab, f in rows if lab == label]).to_dict()
    return out


def auc_interval(labels: Sequence[int], scores: np.ndarray, n_boot: int = 200, seed: int = 0) -> list[float] | None:
    """95% percentile-bootstrap interval of ROC AUC (resamples with one class only are skipped)."""
    from sklearn.metrics import roc_auc_score

    y, s = np.asarray(labels), np.asarray(scores)
    if len(set(y.tolist())) < 2:
        return None
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(n_boot):
        index = rng.integers(0, len(y), len(y))
        if 0 < y[index].sum() < len(index):
            values.append(roc_auc_score(y[index], s[index]))
    return [float(v) for v in np.percentile(values, [2.5, 97.5])] if values else None


def measure(classifier: str | Path, name: str, eval_sets: Sequence[LabeledData], attack_dir: Path,
            device: str = "auto", threshold: float = TOXIC_THRESHOLD,
            options: dict[str, Any] | None = None) -> dict[str, Any]:
    """The round's three numbers for one classifier (loaded with ``options``, e.g. a judge's template): AUC and
    FPR_NOI per eval set, the attack's flip rate."""
    from toxiforge.bias.lexicon import default_bias_lexicon
    from toxiforge.bias.measure import measure_data
    from toxiforge.classifiers import load_classifier
    from toxiforge.training.evaluate import evaluate

    out: dict[str, Any] = {"classifier": str(classifier), "flip_rate": flip_rates(attack_dir), "eval": {}}
    if eval_sets:
        report = evaluate(load_classifier(classifier, device=device, name=name, **(options or {})), eval_sets)
        lexicon = default_bias_lexicon()
        for r in report.results:
            bias = measure_data(r.data, lexicon=lexicon, scores=r.scores, model=name,
                                threshold=threshold).report.to_json()
            out["eval"][r.data.name] = {**r.auc.to_dict(), "auc_interval": auc_interval(r.data.labels, r.scores),
                                        "fpr_noi": bias["fpr"]["noi"], "noi_benign": bias["n_benign"]["noi"]}
    return out


# --- outputs ---------------------------------------------------------------------------------------------------


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
