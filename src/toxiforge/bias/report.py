"""A :class:`~toxiforge.bias.metrics.BiasReport` as Markdown tables in Zhou et al.'s layouts, and one PNG.

Tables: dataset bias (Table 1: R per category, plus n and % toxic per category), classifier bias (Table 2:
accuracy and F1 on the whole data, then F1 and FPR per TOXTRIG category with its n in the header), dialect bias
(Table 4: R_AAE, F1, FPR_AAE) and the same F1/FPR per target group. Percentages like the paper (Acc., F1 and FPR
x 100, two decimals), R with four. An empty cell is written as an em dash and explained under the tables.
The PNG: bars of FPR per category and per group.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from toxiforge.analysis._tables import Table
from toxiforge.bias.metrics import BiasReport

EMPTY = "—"
LABELS = {"noi": "NOI", "oi": "OI", "oni": "ONI", "toxtrig": "TOXTRIG", "aae": "AAE"}


def _r(value: float | None) -> str:
    return EMPTY if value is None else f"{value:.4f}"


def _pct(value: float | None) -> str:
    return EMPTY if value is None else f"{100 * value:.2f}"


def _n(report: BiasReport, key: str) -> str:
    return str(report.slices[key].n) if report.available.get(key, True) else EMPTY


def tables(report: BiasReport, *, name: str, model: str | None = None) -> list[Table]:
    """The report's tables (classifier tables only when it has predictions; groups only when the data has)."""
    keys = ("noi", "oi", "oni", "toxtrig", "aae")
    out = [Table("Dataset bias (Zhou et al. 2021, Table 1): Pearson R between the gold label and each category",
                 ["Data"] + [f"R_{LABELS[k]}" for k in keys], [[name] + [_r(report.pearson.get(k)) for k in keys]],
                 note="R_AAE uses p(AAE) itself; the lexical R use presence (0/1)."),
           Table("Categories", ["Category", "n", "% toxic", "n benign"],
                 [["all", str(report.n), f"{100 * report.toxic / report.n:.2f}", str(report.n - report.toxic)]]
                 + [[LABELS[k], _n(report, k),
                     EMPTY if report.slices[k].pct_toxic is None or not report.available.get(k, True)
                     else f"{report.slices[k].pct_toxic:.2f}",
                     str(report.slices[k].benign) if report.available.get(k, True) else EMPTY] for k in keys])]
    if report.has_predictions:
        model = model or "classifier"
        s = report.slices
        out.append(Table(
            "Classifier bias (Zhou et al. 2021, Table 2): accuracy, F1 (toxic class) and FPR on each category's "
            "benign examples",
            ["Model", f"Test ({report.n}) Acc.", "F1"]
            + [h for k in ("noi", "oi", "oni") for h in (f"{LABELS[k]} ({_n(report, k)}) F1", f"FPR_{LABELS[k]}")],
            [[model, _pct(report.accuracy), _pct(report.f1)]
             + [v for k in ("noi", "oi", "oni") for v in (_pct(s[k].f1), _pct(s[k].fpr))]]))
        out.append(Table("Dialect bias (the F1 and FPR_AAE columns of Zhou et al. 2021, Table 4)",
                         ["Model", "F1", f"AAE ({_n(report, 'aae')}) F1", "FPR_AAE"],
                         [[model, _pct(report.f1), _pct(s["aae"].f1), _pct(s["aae"].fpr)]],
                         note="Table 4's R_AAE is the training set's: measure the training data (without a "
                              "classifier) for it. R_AAE above is this data's."))
    if report.groups:
        out.append(Table("Per target group", ["Group", "n", "% toxic", "F1", "FPR"],
                         [[g, str(v.n), f"{v.pct_toxic:.2f}", _pct(v.f1), _pct(v.fpr)]
                          for g, v in report.groups.items()]))
    return out


def render_markdown(report: BiasReport, *, name: str, model: str | None = None, png: str | None = None,
                    details: dict[str, Any] | None = None) -> str:
    lines = [f"## Bias measurement: {name}", ""]
    for key, value in (details or {}).items():
        lines.append(f"- {key}: {value}")
    if details:
        lines.append("")
    for table in tables(report, name=name, model=model):
        lines.append(table.markdown())
    notes = list(report.notes) + [f"{EMPTY} = empty cell: undefined (no such example, or a single class) or "
                                  "unavailable (its source was not fetched)."]
    lines += ["Notes:", ""] + [f"- {n}" for n in notes]
    if png:
        lines += ["", f"![FPR per category and per group]({png})"]
    return "\n".join(lines) + "\n"


def plot_fpr(report: BiasReport, path: str | Path, *, title: str = "") -> Path:
    """Bar chart of FPR per category (NOI, OI, ONI, AAE) and per group; empty cells are marked 'n/a'."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    panels = [("per category", [(LABELS[k], report.slices[k].fpr) for k in ("noi", "oi", "oni", "aae")])]
    if report.groups:
        panels.append(("per target group", [(g, v.fpr) for g, v in report.groups.items()]))
    fig = Figure(figsize=(4 + 0.45 * sum(len(p[1]) for p in panels), 4.2))
    FigureCanvasAgg(fig)
    widths = [max(len(p[1]), 2) for p in panels]
    axes = fig.subplots(1, len(panels), squeeze=False, gridspec_kw={"width_ratios": widths})[0]
    for ax, (label, bars) in zip(axes, panels):
        names = [b[0] for b in bars]
        values = [100 * b[1] if b[1] is not None else 0.0 for b in bars]
        ax.bar(range(len(bars)), values, color=["#c44e52" if b[1] is not None else "#dddddd" for b in bars])
        for i, (_, v) in enumerate(bars):
            ax.text(i, (100 * v if v is not None else 0) + 1, "n/a" if v is None else f"{100 * v:.1f}",
                    ha="center", va="bottom", fontsize=8)
        ax.set_xticks(range(len(bars)), names, rotation=30 if len(bars) > 4 else 0, ha="right" if len(bars) > 4
                      else "center", fontsize=8)
        ax.set_ylim(0, 105)
        ax.set_title(f"FPR {label}", fontsize=10)
        ax.set_ylabel("false-positive rate (%)")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, format="png", dpi=100)
    return path
