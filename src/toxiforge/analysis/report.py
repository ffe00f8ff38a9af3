"""One self-contained HTML page describing a dataset: the statistics tables and matplotlib plots.

``build_report(data, out_dir)`` computes the Table 1/2 statistics and duplicates (:mod:`.stats`), group
mentions (:mod:`.mentions`) and, unless ``lm=None``, perplexity (:mod:`.perplexity`), then writes
``report.html`` (tables + plots as base64 PNGs, so the page opens offline and can be mailed as one file) and
``report.json`` (all numbers) into ``out_dir``, each atomically. Plots: statements per group by label,
statement length by method, perplexity box plots per group and method, mention rates per group and method.
Statements themselves are not shown. Long steps show rich progress bars (``progress=True``).
"""

from __future__ import annotations

import base64
import html
import io
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge.analysis.dataset import AnalysisData, group_display, load_data, method_order
from toxiforge.models.embedded import DEFAULT_LM

COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]

CSS = """
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1100px;
       color: #222; line-height: 1.4; padding: 0 1rem; }
h1 { font-size: 1.6rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; } h3 { font-size: 1.05rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.9rem; }
th, td { padding: 0.25rem 0.7rem; border-bottom: 1px solid #eee; }
th { background: #f5f5f5; } td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
td.txt, th.txt { text-align: left; } .note { color: #555; font-size: 0.85rem; max-width: 60rem; }
img { max-width: 100%; border: 1px solid #eee; margin: 0.5rem 0; } .meta { color: #666; font-size: 0.9rem; }
"""


@dataclass
class Report:
    html_path: Path
    json_path: Path
    stats: Any
    mentions: Any
    perplexity: Any | None
    images: dict[str, bytes]


def _png(fig) -> bytes:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _figure(width: float = 9.0, height: float = 4.2):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height))
    return fig, fig.add_subplot(1, 1, 1)


def plot_counts(stats) -> bytes:
    """Grouped bars: statements per group, benign and toxic."""
    groups = list(dict.fromkeys(g for g, _ in stats.by_group))
    x = np.arange(len(groups))
    fig, ax = _figure()
    for i, (label, name) in enumerate(((0, "benign"), (1, "toxic"))):
        counts = [stats.by_group[(g, label)].count if (g, label) in stats.by_group else 0 for g in groups]
        ax.bar(x + (i - 0.5) * 0.4, counts, width=0.4, label=name, color=COLORS[i])
    ax.set_xticks(x, [group_display(g) for g in groups], rotation=35, ha="right")
    ax.set_ylabel("statements")
    ax.set_title("Statements per group by prompt label")
    ax.legend()
    return _png(fig)


def plot_lengths(data: AnalysisData) -> bytes:
    """Histograms of statement length (characters) per generation method."""
    lengths = np.fromiter((len(t) for t in data.texts), dtype=np.int64, count=len(data))
    methods = data.methods or ["all"] * len(data)
    m = np.asarray(methods, dtype=object)
    fig, ax = _figure()
    bins = np.linspace(0, max(int(lengths.max()), 1), 41)
    for i, method in enumerate(method_order(methods)):
        ax.hist(lengths[m == method], bins=bins, alpha=0.55, density=True, color=COLORS[i % len(COLORS)],
                label=f"{method} (n={int((m == method).sum()):,})")
    ax.set_xlabel("characters per statement")
    ax.set_ylabel("density")
    ax.set_title("Statement length by generation method")
    ax.legend()
    return _png(fig)


def plot_perplexity(result) -> bytes:
    """Box plots of kept perplexities, per group, one box per method."""
    groups = list(dict.fromkeys(c["group"] for c in result.cells if c["group"] != "__total__"))
    methods = method_order(result.methods)
    g, m = np.asarray(result.groups, dtype=object), np.asarray(result.methods, dtype=object)
    kept = result.kept
    fig, ax = _figure(10.0, 4.6)
    width = 0.8 / max(len(methods), 1)
    handles = []
    for j, method in enumerate(methods):
        series = [result.values[kept & (g == group) & (m == method)] for group in groups]
        positions = np.arange(len(groups)) + (j - (len(methods) - 1) / 2) * width
        present = [(p, s) for p, s in zip(positions, series) if s.size]
        if not present:
            continue
        box = ax.boxplot([s for _, s in present], positions=[p for p, _ in present], widths=width * 0.9,
                         patch_artist=True, showfliers=False)
        for patch in box["boxes"]:
            patch.set_facecolor(COLORS[j % len(COLORS)])
            patch.set_alpha(0.7)
        handles.append((box["boxes"][0], method))
    ax.set_xticks(np.arange(len(groups)), [group_display(x) for x in groups], rotation=35, ha="right")
    ax.set_ylabel("perplexity")
    ax.set_title(f"Perplexity under {result.model} (≤ {result.max_ppl:g})")
    if handles:
        ax.legend([h for h, _ in handles], [n for _, n in handles])
    return _png(fig)


def plot_mentions(mentions) -> bytes:
    """Grouped bars: share of statements naming their target group, per group and method."""
    groups, methods = mentions.groups(), mentions.methods()
    x = np.arange(len(groups))
    width = 0.8 / max(len(methods), 1)
    fig, ax = _figure()
    for j, method in enumerate(methods):
        shares = [100 * (mentions.share(gr, method) or 0.0) for gr in groups]
        ax.bar(x + (j - (len(methods) - 1) / 2) * width, shares, width=width, label=method,
               color=COLORS[j % len(COLORS)])
    ax.set_xticks(x, [group_display(gr) for gr in groups], rotation=35, ha="right")
    ax.set_ylim(0, 105)
    ax.set_ylabel("% naming the target group")
    ax.set_title("Target-group mention rate")
    ax.legend()
    return _png(fig)


def _img(png: bytes, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}">'


def render_html(title: str, meta: str, sections: list[tuple[str, list[str]]]) -> str:
    body = "\n".join(f"<h2>{html.escape(name)}</h2>\n" + "\n".join(parts) for name, parts in sections)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n<title>{html.escape(title)}</title>\n'
            f"<style>{CSS}</style>\n</head>\n<body>\n<h1>{html.escape(title)}</h1>\n"
            f'<p class="meta">{html.escape(meta)}</p>\n{body}\n</body>\n</html>\n')


def build_report(data: Any, out_dir: str | Path, *, lm: Any = DEFAULT_LM, max_ppl: float = 500.0,
                 lexicon=None, batch_size: int = 16, device: str = "auto", dtype: str = "auto",
                 progress: bool = True, console=None) -> Report:
    """Compute the analyses of ``data`` and write ``report.html`` and ``report.json`` into ``out_dir``.

    ``lm=None`` skips perplexity; otherwise ``lm`` is a name for ``load_language_model``, a LanguageModel
    or a ``(model, tokenizer)`` pair. Everything is computed before anything is written.
    """
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from toxiforge._io import atomic_write_text
    from toxiforge.analysis.mentions import mention_stats
    from toxiforge.analysis.stats import compute_stats

    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        from toxiforge.errors import InputError

        raise InputError("output path exists and is not a directory", path=out, hint="choose a directory for -o")
    d = load_data(data, need=("groups", "labels"))
    columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn()]
    with Progress(*columns, console=console, transient=True, disable=not progress) as bar:
        task = bar.add_task("statistics", total=1)
        stats = compute_stats(d, lexicon=lexicon)
        bar.advance(task)
        task = bar.add_task("group mentions", total=len(d))
        mentions = mention_stats(d, on_progress=lambda n: bar.advance(task, n))
        ppl = None
        if lm is not None:
            from toxiforge.analysis.perplexity import dataset_perplexity

            task = bar.add_task("perplexity", total=len(d))
            ppl = dataset_perplexity(d, lm, max_ppl=max_ppl, batch_size=batch_size, device=device, dtype=dtype,
                                     on_progress=lambda n: bar.advance(task, n))
        task = bar.add_task("plots", total=4 if ppl is not None else 3)
        images = {"counts": plot_counts(stats)}
        bar.advance(task)
        images["lengths"] = plot_lengths(d)
        bar.advance(task)
        images["mentions"] = plot_mentions(mentions)
        bar.advance(task)
        if ppl is not None:
            images["perplexity"] = plot_perplexity(ppl)
            bar.advance(task)

    sections = [
        ("Size and implicitness (Tables 1 and 2)",
         [t.html() for t in stats.tables()] + [_img(images["counts"], "statements per group by label"),
                                               _img(images["lengths"], "statement length by method")]),
        ("Target-group mentions (Table 6)",
         [t.html() for t in mentions.tables()] + [_img(images["mentions"], "mention rates")]),
    ]
    if ppl is not None:
        sections.append(("Perplexity (Table 5)", [ppl.table().html(), _img(images["perplexity"], "perplexity")]))
    from toxiforge import __version__ as version

    skipped = f"; {d.skipped:,} rows without a statement left out" if d.skipped else ""
    meta = (f"{d.source}: {len(d):,} statements{skipped}. Made by toxiforge {version} on "
            f"{datetime.now(timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}.")
    page = render_html(f"Dataset report: {' + '.join(d.run_names)}", meta, sections)
    numbers = {"stats": stats.to_dict(), "mentions": mentions.to_dict(),
               "perplexity": ppl.to_dict() if ppl is not None else None}
    html_path = atomic_write_text(out / "report.html", page)
    json_path = atomic_write_text(out / "report.json", json.dumps(numbers, indent=2, ensure_ascii=False) + "\n")
    return Report(html_path=html_path, json_path=json_path, stats=stats, mentions=mentions, perplexity=ppl,
                  images=images)
