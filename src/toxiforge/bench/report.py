"""Bench outputs: results.json / results.md / a bar chart per group, and several runs side by side."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toxiforge.errors import InputError
from toxiforge.intervals import Share

CHART = "toxic_by_group.png"
CONTINUATIONS = "continuations.parquet"


def generate_markdown(result) -> str:
    """The generation-mode summary as Markdown (one row per group, then overall), with the settings a reader needs
    to compare it with open-instruct's numbers."""
    cfg = result.config
    decoding = (f"top-k sampling (k={cfg['top_k']}, T={cfg['temperature']}, seed {cfg['seed']})" if cfg["sample"]
                else "greedy")
    if cfg["prompts"]:
        chosen = (f"a seeded shuffle (seed {cfg['select_seed']}, as open-instruct)" if cfg["select"] == "random"
                  else "the first lines")
        source = f"prompt files {cfg['prompts']}, {cfg['per_group']} per group from {chosen}"
    else:
        source = f"prompts of k={cfg['k']} demonstrations from {cfg['demonstrations']} (seed {cfg['seed']})"
    if cfg["chat"]:
        stop = f"open-instruct's chat format (\"{cfg['decoding']['chat_instruction']}\" + prompt), whole answer"
    else:
        stop = "stop at the first newline"
    threshold = result.to_dict()["threshold"]
    lines = [f"# ToxiGen continuations: {result.model.get('name')}", "",
             f"{source}; {decoding}, {stop}, at most {cfg['max_new_tokens']} new tokens; "
             f"scored by {cfg['classifier']} (toxic: P > {threshold}; an empty continuation counts as not toxic).",
             ""]
    skipped = cfg.get("skipped_lines") or {}
    if skipped:
        lines += ["Lines that cannot be prompts, passed over: " +
                  ", ".join(f"{g} {n}" for g, n in skipped.items()) + ".", ""]
    lines += ["| group | n | empty | % toxic [95% CI] | mean P(toxic) |", "| :--- | ---: | ---: | ---: | ---: |"]
    for name, c in list(result.groups.items()) + [("**overall**", result.overall)]:
        lines.append(f"| {name} | {c['n']} | {c['empty']} | {Share(**c['toxic']).cell()} | "
                     f"{c['mean_p_toxic']:.3f} |")
    lines += ["", f"Macro average over groups: {100 * result.overall['macro_toxic']:.1f}% toxic."]
    return "\n".join(lines) + "\n"


def write_chart(groups: dict[str, dict[str, Any]], title: str, path: Path) -> Path:
    """A bar per group: % toxic with its 95% Wilson interval as an error bar."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from toxiforge._io import atomic_write

    names = list(groups)
    shares = [Share(**groups[g]["toxic"]).bounds() for g in names]  # every group has outcomes (summarize)
    values = [100 * value for value, _, _ in shares]
    errors = [[100 * (value - low) for value, low, _ in shares], [100 * (high - value) for value, _, high in shares]]
    fig, ax = plt.subplots(figsize=(max(4.0, 0.8 * len(names) + 2), 3.6))
    ax.bar(range(len(names)), values, yerr=errors, capsize=3, color="#b4543a")
    ax.set_xticks(range(len(names)), [n.replace("_", " ") for n in names], rotation=30, ha="right")
    ax.set_ylabel("% toxic continuations")
    ax.set_ylim(0, 100)
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)
    return path


def write_generate_report(result, out_dir: str | Path) -> Path:
    """``results.json``, ``results.md``, the chart and ``continuations.parquet`` under ``out_dir``."""
    import pyarrow as pa

    from toxiforge._io import atomic_write_text
    from toxiforge.records import write_table

    out = Path(out_dir)
    atomic_write_text(out / "results.json", json.dumps(result.to_dict(), indent=2) + "\n")
    atomic_write_text(out / "results.md", generate_markdown(result))
    write_chart(result.groups, f"{result.model.get('name')}: % toxic continuations ({result.config['classifier']})",
                out / CHART)
    write_table(pa.Table.from_pylist(result.rows), out / CONTINUATIONS)
    return out


def load_result(out_dir: str | Path) -> dict[str, Any]:
    """The ``results.json`` of a bench output folder (either mode)."""
    path = Path(out_dir) / "results.json"
    if not path.is_file():
        raise InputError("no results.json here", path=out_dir, hint="pass folders written by toxiforge bench")
    return json.loads(path.read_text(encoding="utf-8"))


def compare_results(out_dirs: Sequence[str | Path]) -> str:
    """Several bench runs of one mode side by side, as Markdown: % toxic per group (generate) or the metrics
    (classify), one column per run."""
    results = [load_result(d) for d in out_dirs]
    modes = {r.get("mode") for r in results}
    if len(modes) != 1:
        raise InputError("the folders mix generate and classify results", hint="compare runs of one mode")
    names = [f"{r['model'].get('name')} ({Path(d).name})" for r, d in zip(results, out_dirs)]
    header = "| | " + " | ".join(names) + " |\n| :--- |" + " ---: |" * len(names) + "\n"
    if modes == {"classify"}:
        rows = [("acc (%)", lambda r: Share(**r["metrics"]["acc"]).cell()),
                ("acc_norm (%)", lambda r: Share(**r["metrics"]["acc_norm"]).cell()),
                ("ROC AUC", lambda r: "n/a" if r["metrics"]["roc_auc"] is None else f"{r['metrics']['roc_auc']:.3f}"),
                ("items", lambda r: str(r["metrics"]["n"]))]
        return header + "".join(f"| {label} | " + " | ".join(f(r) for r in results) + " |\n" for label, f in rows)
    groups = list(dict.fromkeys(g for r in results for g in r["groups"]))
    lines = []
    for g in groups:
        cells = [Share(**r["groups"][g]["toxic"]).cell() if g in r["groups"] else "-" for r in results]
        lines.append(f"| {g} | " + " | ".join(cells) + " |\n")
    lines.append("| **overall** | " + " | ".join(Share(**r["overall"]["toxic"]).cell() for r in results) + " |\n")
    return "% toxic continuations [95% CI]\n\n" + header + "".join(lines)
