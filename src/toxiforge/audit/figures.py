"""The audit's figures (PNG, matplotlib's Agg backend) and ``report.html``: the Markdown report rendered by
markdown-it with every figure inlined as a ``data:`` URI, so the page opens from disk and makes no request.

Figures, per dataset: ROC curves of every classifier overlaid (``roc-<dataset>.png``), reliability diagrams
(``reliability-<dataset>.png``), Borkan et al.'s three bias AUCs per group and classifier
(``groups-<dataset>.png``, with their bootstrap intervals as error bars), and for HateCheck a heat map of accuracy
as a fraction, functional test (worst first, as the report's table) × classifier (``hatecheck-<dataset>.png``).
"""

from __future__ import annotations

import base64
import html
import re
from pathlib import Path

import numpy as np

from toxiforge._io import atomic_write, atomic_write_text
from toxiforge.audit.glossary import name
from toxiforge.audit.metrics import BIAS_AUCS
from toxiforge.audit.run import AuditResult
from toxiforge.audit.summary import anchor, group_labels, tests_worst_first

FIGURES_DIR = "figures"
DPI = 110


def slug(name: str) -> str:
    return re.sub(r"[^0-9A-Za-z]+", "-", name).strip("-").lower() or "data"


def _save(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    def write(tmp: Path) -> None:
        fig.savefig(tmp, format="png", dpi=DPI)

    try:
        return atomic_write(path, write)
    finally:
        plt.close(fig)


def write_figures(result: AuditResult, out: str | Path) -> dict[str, str]:
    """Write every figure under ``out/figures``; return ``{"roc:<dataset>": "figures/roc-....png", ...}``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import roc_curve

    folder = Path(out) / FIGURES_DIR
    names = [c.name for c in result.classifiers]
    written: dict[str, str] = {}

    def keep(key: str, fig, file: str) -> None:
        _save(fig, folder / file)
        written[key] = f"{FIGURES_DIR}/{file}"

    for data in result.datasets:
        d, y = data.name, np.asarray(data.labels)
        both = len(set(y.tolist())) == 2   # a set of one label has no ROC curve and no bias AUC (its note says why)
        if both:
            fig, ax = plt.subplots(figsize=(5.5, 5))
            ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="chance")
            for c in names:
                pair = result.pair(c, d)
                fpr, tpr, _ = roc_curve(y, pair.scores)
                ax.plot(fpr, tpr, linewidth=1.5, label=f"{c} (AUC {pair.sections['accuracy']['roc_auc'].cell(3)})")
            ax.set(xlabel="false positive rate", ylabel="true positive rate", title=f"ROC: {d}"[:60])
            ax.legend(loc="lower right", fontsize=7)
            fig.tight_layout()
            keep(f"roc:{d}", fig, f"roc-{slug(d)}.png")

        fig, ax = plt.subplots(figsize=(5.5, 5))
        ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="perfect calibration")
        for c in names:
            bins = [b for b in result.pair(c, d).sections["calibration"]["bins"] if b["n"]]
            ax.plot([b["mean_score"] for b in bins], [b["share_toxic"] for b in bins], marker="o", markersize=3,
                    label=f"{c} (ECE {result.pair(c, d).sections['calibration']['ece'].cell(3)})")
        ax.set(xlabel="mean P(toxic) in bin", ylabel="share toxic in bin", xlim=(0, 1), ylim=(0, 1),
               title=f"Reliability: {d}"[:60])
        ax.legend(loc="upper left", fontsize=7)
        fig.tight_layout()
        keep(f"reliability:{d}", fig, f"reliability-{slug(d)}.png")

        groups = result.pair(names[0], d).sections["groups"]
        if both and "by_group" in groups and groups["by_group"]:
            group_names = list(groups["by_group"])
            fig, axes = plt.subplots(1, 3, figsize=(12, 0.35 * len(group_names) * len(names) + 1.8), sharey=True)
            height = 0.8 / len(names)
            for ax, metric in zip(axes, BIAS_AUCS):
                for i, c in enumerate(names):
                    stats = result.pair(c, d).sections["groups"]["by_group"]
                    est = [stats[g].metrics[metric] for g in group_names]
                    values = np.array([np.nan if e.value is None else e.value for e in est])
                    # error bars: the bootstrap interval (none where an estimate has no interval)
                    low = np.array([v - e.low if e.low is not None and e.value is not None else 0.0
                                    for v, e in zip(values, est)])
                    high = np.array([e.high - v if e.high is not None and e.value is not None else 0.0
                                     for v, e in zip(values, est)])
                    ax.barh(np.arange(len(group_names)) + i * height, values, height=height, label=c,
                            xerr=np.vstack([low, high]), error_kw={"elinewidth": 0.8, "capsize": 2})
                ax.set(title=name(metric), xlim=(0, 1))
                ax.axvline(0.5, color="grey", linestyle=":", linewidth=1)
            labels = group_labels(data)
            axes[0].set_yticks(np.arange(len(group_names)) + 0.4 - height / 2,
                               [labels.get(g, g) for g in group_names], fontsize=8)
            axes[-1].legend(fontsize=7, loc="lower right")
            fig.suptitle(f"Bias AUCs per group with 95% intervals: {d}"[:80])
            fig.tight_layout()
            keep(f"groups:{d}", fig, f"groups-{slug(d)}.png")

        if "hatecheck" in result.pair(names[0], d).sections:
            tests = tests_worst_first([result.pair(c, d).sections["hatecheck"] for c in names])
            grid = np.array([[result.pair(c, d).sections["hatecheck"]["functional_tests"][t]["accuracy"].value
                              for c in names] for t in tests], dtype=np.float64)
            fig, ax = plt.subplots(figsize=(2.2 + 1.1 * len(names), 0.28 * len(tests) + 1.5))
            image = ax.imshow(grid, cmap="RdYlGn", vmin=0, vmax=1, aspect="auto")
            ax.set_xticks(range(len(names)), names, rotation=30, ha="right", fontsize=8)
            ax.set_yticks(range(len(tests)), tests, fontsize=7)
            for (i, j), v in np.ndenumerate(grid):
                ax.text(j, i, "n/a" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=6)
            fig.colorbar(image, ax=ax, label="accuracy")
            ax.set_title(f"HateCheck accuracy, worst first: {d}"[:60], fontsize=9)
            fig.tight_layout()
            keep(f"hatecheck:{d}", fig, f"hatecheck-{slug(d)}.png")
    return written


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<style>
body {{ font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1em; font-size: 0.85em; }}
th, td {{ border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
img {{ max-width: 100%; }}
.card {{ background: #f6f8fa; border: 1px solid #d0d7de; border-radius: 6px; padding: 0 1em 0.2em; }}
.card h2 {{ margin-top: 0.5em; }}
</style></head><body>
{body}
</body></html>
"""


def render_html(markdown: str, out: str | Path) -> str:
    """The Markdown report as one self-contained page: figures (relative PNG paths under ``out``) inlined, raw
    HTML in the Markdown (from dataset or classifier names) escaped, no script and no external request."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)

    def inline(match: re.Match) -> str:
        path = Path(out) / html.unescape(match.group(1))
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        return f'src="data:image/png;base64,{data}"'

    body = re.sub(r'src="((?:figures/)[^"]+\.png)"', inline, body)
    seen: dict[str, int] = {}

    def heading_id(match: re.Match) -> str:   # the ids report.md's contents link to (GitHub's, in page order)
        text = html.unescape(re.sub(r"<[^>]+>", "", match.group(2)))
        return f'<h{match.group(1)} id="{html.escape(anchor(text, seen))}">{match.group(2)}</h{match.group(1)}>'

    body = re.sub(r"<h([1-3])>(.*?)</h\1>", heading_id, body)
    # the gate's verdict and each summary card (a "Gate" or "Summary" heading up to the next h2) in a box
    body = re.sub(r'(<h2 id="(?:gate|summary)[^"]*">.*?)(?=<h2 )', r'<section class="card">\1</section>\n', body,
                  flags=re.S)
    title = html.escape(markdown.splitlines()[0].lstrip("# ") if markdown else "audit")
    return PAGE.format(title=title, body=body)


def write_html(markdown: str, out: str | Path, name: str = "report.html") -> Path:
    return atomic_write_text(Path(out) / name, render_html(markdown, out))
