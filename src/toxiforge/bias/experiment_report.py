"""``experiment debias``'s outputs: Tables 1, 2 and 4 in the paper's layout beside the paper's values, the AAE
selection rules, and the FPR_OI / FPR_AAE plot.

Each cell reads ``ours ± s.d. ⟨F x · D y⟩``: our mean and s.d. over runs, then the paper's value on Founta et al.
(Tables 1, 2, 4) and on Davidson et al. (Appendix B, Tables 7-9) where it printed one (:mod:`toxiforge.bias.paper`).
The last column says, per reference, in how many of the row's cells the paper's direction against Vanilla
(Original, in Table 1) holds here: a cell counts when the paper moved away from Vanilla (a tie in the paper is not
a direction) and both we and the paper have the value; ours holds when it moves the same way. Every table starts
with a row of the n behind each column (the FPR columns: the benign rows, the FPR's denominator). An empty cell
says why (``n = 0``: no such row in the evaluation data; ``–``: the method did not run).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from toxiforge.bias.paper import BASELINE, REFERENCES, direction, paper_direction

Column = tuple[str, str, str]  # (header, record key, sub-key)
TABLE2: tuple[Column, ...] = (("Acc.", "accuracy", ""), ("F1", "f1", "overall"),
                              ("F1 NOI", "f1", "noi"), ("FPR NOI", "fpr", "noi"),
                              ("F1 OI", "f1", "oi"), ("FPR OI", "fpr", "oi"),
                              ("F1 ONI", "f1", "oni"), ("FPR ONI", "fpr", "oni"))
TABLE4: tuple[Column, ...] = (("R AAE (train set)", "train_r", "aae"), ("Acc.", "accuracy", ""),
                              ("F1", "f1", "overall"), ("F1 AAE", "f1", "aae"), ("FPR AAE", "fpr", "aae"))
TABLE1: tuple[Column, ...] = (("train rows", "n_train", ""), ("top-ups", "top_ups", ""),
                              ("toxic ratio", "toxic_ratio", ""), ("R NOI", "train_r", "noi"),
                              ("R OI", "train_r", "oi"), ("R ONI", "train_r", "oni"),
                              ("R TOXTRIG", "train_r", "toxtrig"), ("R AAE", "train_r", "aae"))


class Table(NamedTuple):
    """One of the paper's tables: its columns and rows (methods, in the paper's order). ``on_evaluation``: its
    numbers come from the evaluation data (an n row heads it), else from each training set (Table 1, whose
    Vanilla row is the paper's Original); ``catch_all``: methods no table lists appear here."""

    title: str
    columns: tuple[Column, ...]
    order: tuple[str, ...]
    on_evaluation: bool = True
    catch_all: bool = False


TABLES: tuple[Table, ...] = (
    Table("Table 2: lexical bias (evaluation data; %)", TABLE2,
          ("Vanilla", "LMIXIN-ONI", "LMIXIN-TOXTRIG", "Random", "AFLite", "DataMaps-Ambiguous", "DataMaps-Hard",
           "DataMaps-Easy"), catch_all=True),
    Table("Table 4: dialect bias (evaluation data; %)", TABLE4,
          ("Vanilla", "LMIXIN-Dialect", "Random", "AFLite", "DataMaps-Ambiguous", "DataMaps-Hard", "DataMaps-Easy",
           "AAE-relabeled")),
    Table("Table 1: label–lexicon correlation in each training set (Pearson R)", TABLE1,
          ("Vanilla", "Random", "AFLite", "DataMaps-Ambiguous", "DataMaps-Hard", "DataMaps-Easy", "AAE-relabeled"),
          on_evaluation=False),
)
COUNTS = ("n_train", "top_ups")
RULES: tuple[tuple[str, float | None], ...] = (("argmax", None), ("p(AAE) > 0.5", 0.5), ("p(AAE) > 0.8", 0.8))


def cell_key(key: str, sub: str) -> str:
    return f"{key}.{sub}" if sub else key


def _scale(key: str) -> float:
    return 1.0 if key.startswith(("train_r", "toxic_ratio")) or key in COUNTS else 100.0


def _fmt(key: str, value: float) -> str:
    if key in COUNTS:
        return f"{value:.0f}"
    return f"{value:.4f}" if _scale(key) == 1 else f"{value:.1f}"


def _ours(stat: dict | None, key: str, n: int | None) -> str:
    if stat is None:
        return "–"
    if stat["mean"] is None:
        return "n = 0" if n == 0 else "–"
    text = _fmt(key, stat["mean"] * _scale(key))
    if stat["sd"] is None or (stat["sd"] < 1e-9 and _scale(key) == 1):  # a training set's own count or R: fixed
        return text
    return f"{text} ± {_fmt(key, stat['sd'] * _scale(key))}"


def _reported(method: str, key: str) -> str:
    parts = []
    for name, table in REFERENCES.items():
        value = table.get(method, {}).get(key)
        if value is not None:
            shown = f"{value.mean:.4f}" if _scale(key) == 1 else f"{value.mean:.2f}"
            parts.append(f"{name[0]} {shown}")
    return f" ⟨{' · '.join(parts)}⟩" if parts else ""


def direction_summary(summary: dict[str, dict[str, dict]], method: str, columns: Sequence[Column]) -> str:
    """Per reference: ``"F 3/4 (not FPR NOI)"`` -- cells where the paper's direction against Vanilla holds here."""
    if method == BASELINE:
        return "baseline"
    ours = {m: {k: v["mean"] for k, v in cells.items()} for m, cells in summary.items()}
    parts = []
    for name in REFERENCES:
        held, missed = 0, []
        for header, key, sub in columns:
            full = cell_key(key, sub)
            want, got = paper_direction(name, method, full), direction(ours, method, full)
            if not want or got is None:
                continue
            if got == want:
                held += 1
            else:
                missed.append(header)
        total = held + len(missed)
        if total:
            parts.append(f"{name[0]} {held}/{total}" + (f" (not {', '.join(missed)})" if missed else ""))
    return "; ".join(parts) or "no paper direction"


def _slice(sub: str) -> str:
    return "all" if sub in ("", "overall") else sub


def _counts_row(columns: Sequence[Column], counts: dict[str, Any]) -> str:
    cells = []
    for _, key, sub in columns:
        if key == "fpr":
            cells.append(f"benign {counts['n_benign'].get(sub, '–')}")
        elif key in ("f1", "accuracy"):
            cells.append(f"{counts['n'].get(_slice(sub), '–')} rows")
        else:
            cells.append("")
    return "| n (evaluation) | " + " | ".join(cells) + " | |"


def render_markdown(summary: dict[str, dict[str, dict]], *, runs: int, counts: dict[str, Any] | None = None,
                    notes: Sequence[str] = (), spread: str | None = None, aae_rules: dict | None = None,
                    rule_fpr: dict[str, dict[str, dict]] | None = None, plot: str | None = None) -> str:
    """The tables (rows in the paper's order, then any other method that ran), the AAE rules and the notes."""
    spread = spread or f"mean ± s.d. over {runs} run{'s' if runs > 1 else ''}"
    lines = [f"# Debiasing comparison ({spread})", "",
             "Each cell: ours (mean ± s.d.) ⟨F: the paper on Founta et al., Tables 1, 2, 4 · D: on Davidson et al., "
             "Appendix B, Tables 7-9⟩. The last column: in how many cells the paper's direction against Vanilla "
             "(Table 1: Original, Vanilla's training set) holds here.", ""]
    for title, columns, order, on_evaluation, catch_all in TABLES:
        rows = [m for m in order if m in summary] + [m for m in summary if m not in order and catch_all]
        if not rows:
            continue
        lines += [f"## {title}", "", "| model | " + " | ".join(c for c, _, _ in columns) + " | paper's direction |",
                  "|---|" + "---:|" * len(columns) + "---|"]
        if counts is not None and on_evaluation:
            lines.append(_counts_row(columns, counts))
        for method in rows:
            cells = []
            for _, key, sub in columns:
                full = cell_key(key, sub)
                n = counts["n_benign" if key == "fpr" else "n"].get(_slice(sub)) if counts and key in (
                    "fpr", "f1") else None
                cells.append(_ours(summary[method].get(full), full, n) + _reported(method, full))
            name = "Original (Vanilla's)" if not on_evaluation and method == BASELINE else method
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {direction_summary(summary, method, columns)} |")
        lines.append("")
    if aae_rules:
        lines += render_aae_rules(aae_rules, rule_fpr or {})
    if plot:
        lines += [f"![FPR OI and FPR AAE per method, one dot per run]({plot})", ""]
    if notes:
        lines += ["Notes:", ""] + [f"* {n}" for n in notes] + [""]
    return "\n".join(lines)


def render_aae_rules(aae_rules: dict, rule_fpr: dict[str, dict[str, dict]]) -> list[str]:
    """How many rows each AAE selection rule takes, and FPR_AAE per method under each."""
    names = [name for name, _ in RULES]
    lines = ["## AAE rows by selection rule", "",
             f"The tables use {aae_rules['used']}. Rows per rule (benign rows: the FPR AAE denominator):", "",
             "| rule | " + " | ".join(aae_rules["splits"]) + " |", "|---|" + "---:|" * len(aae_rules["splits"])]
    for name in names:
        cells = []
        for split in aae_rules["splits"]:
            entry = aae_rules["splits"][split][name]
            cells.append(f"{entry['n']} of {entry['of']} ({100 * entry['n'] / max(entry['of'], 1):.1f}%), benign "
                         f"{entry['n_benign']}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    if rule_fpr:
        lines += ["FPR AAE (%) by rule:", "", "| model | " + " | ".join(names) + " |", "|---|" + "---:|" * len(names)]
        for method, by_rule in rule_fpr.items():
            lines.append(f"| {method} | " + " | ".join(_ours(by_rule.get(n), "fpr", None) for n in names) + " |")
        lines.append("")
    return lines


def plot_methods(records: Sequence[dict], path: str | Path, *, title: str = "") -> Path:
    """FPR OI and FPR AAE per method: one dot per run, a bar at the mean, the paper's Founta value as an x."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from toxiforge.bias.paper import FOUNTA

    methods = list(dict.fromkeys(r["method"] for r in records))
    fig = Figure(figsize=(2.5 + 0.7 * len(methods), 7.0))
    FigureCanvasAgg(fig)
    axes = fig.subplots(2, 1, sharex=True)
    for ax, sub in zip(axes, ("oi", "aae")):
        for i, method in enumerate(methods):
            values = [100 * r["fpr"][sub] for r in records if r["method"] == method and r["fpr"].get(sub) is not None]
            if values:
                ax.bar(i, sum(values) / len(values), color="#c9d6e8", width=0.6)
                ax.scatter([i] * len(values), values, color="#1f4e79", s=14, zorder=3)
            else:
                ax.text(i, 2, "n/a", ha="center", fontsize=8)
            paper = FOUNTA.get(method, {}).get(f"fpr.{sub}")
            if paper is not None:
                ax.scatter([i], [paper.mean], marker="x", color="#c44e52", s=30, zorder=4)
        ax.set_ylabel(f"FPR {sub.upper()} (%)")
        ax.set_ylim(0, 105)
    axes[1].set_xticks(range(len(methods)), methods, rotation=35, ha="right", fontsize=8)
    axes[0].set_title(title or "dots: runs; bar: mean; x: Zhou et al. on Founta", fontsize=9)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path
