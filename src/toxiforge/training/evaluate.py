"""Evaluate a toxicity classifier the paper's way: ROC AUC per dataset, per target group, and per generation
method (ALICE vs top-k, the paper's Table 7), written as JSON, a Markdown table and an ROC-curve PNG.

``evaluate(classifier, datasets)`` scores every text with ``classifier.predict_proba`` (P(toxic)) and computes
scikit-learn's ROC AUC. A set (or slice) with one class only has no AUC: the result says so
(``auc: null`` with an ``auc_note``), the Markdown shows ``n/a`` and the reason, and nothing crashes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge._io import atomic_write, atomic_write_text
from toxiforge.classifiers.base import ToxicityClassifier
from toxiforge.data.examples import LabeledData
from toxiforge.training.metrics import AUC, auc_or_reason

JSON_FILE, MARKDOWN_FILE, PNG_FILE = "evaluation.json", "evaluation.md", "roc.png"


@dataclass
class DatasetResult:
    """AUC of one dataset, with per-group and per-method slices (empty when the data has no groups/methods)."""

    data: LabeledData
    auc: AUC
    scores: np.ndarray
    by_group: dict[str, AUC] = field(default_factory=dict)
    by_method: dict[str, AUC] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**self.data.describe(), **self.auc.to_dict(),
                "by_method": {k: v.to_dict() for k, v in self.by_method.items()},
                "by_group": {k: v.to_dict() for k, v in self.by_group.items()}}


@dataclass
class EvalReport:
    classifier: str
    classifier_info: dict[str, Any]
    results: list[DatasetResult]
    seconds: float

    def result(self, name: str) -> DatasetResult:
        return next(r for r in self.results if r.data.name == name)

    def to_dict(self) -> dict[str, Any]:
        return {"classifier": self.classifier, "classifier_info": self.classifier_info,
                "seconds": round(self.seconds, 3), "datasets": [r.to_dict() for r in self.results]}

    def undefined(self) -> list[tuple[str, str]]:
        """``(slice, reason)`` for every dataset or slice whose AUC is undefined."""
        out = []
        for r in self.results:
            for label, auc in [(r.data.name, r.auc)] + [(f"{r.data.name} / {k}", v) for k, v in
                                                         {**r.by_method, **r.by_group}.items()]:
                if not auc.defined:
                    out.append((label, auc.reason or "undefined"))
        return out

    def markdown(self) -> str:
        lines = [f"# Evaluation of {self.classifier}", "", "| dataset | n | toxic | benign | ROC AUC |",
                 "|---|---:|---:|---:|---:|"]
        for r in self.results:
            lines.append(f"| {r.data.name} | {r.auc.n} | {r.auc.toxic} | {r.auc.n - r.auc.toxic} | {r.auc.cell(3)} |")
        for r in self.results:
            for title, slices, key in (("generation method (Table 7)", r.by_method, "method"),
                                       ("target group", r.by_group, "group")):
                if not slices:
                    continue
                lines += ["", f"## {r.data.name} by {title}", "", f"| {key} | n | toxic | benign | ROC AUC |",
                          "|---|---:|---:|---:|---:|"]
                lines += [f"| {k} | {v.n} | {v.toxic} | {v.n - v.toxic} | {v.cell(3)} |" for k, v in slices.items()]
        notes = [f"* {label}: AUC {reason}" for label, reason in self.undefined()]
        notes += [f"* {r.data.name}: rows left out: {', '.join(f'{n} {why}' for why, n in r.data.skipped.items())}"
                  for r in self.results if r.data.skipped]
        notes += [f"* {r.data.name}: {note}" for r in self.results for note in r.data.notes]
        if notes:
            lines += ["", "Notes:", ""] + notes
        return "\n".join(lines) + "\n"


def _slices(data: LabeledData, scores: np.ndarray, attribute: str) -> dict[str, AUC]:
    values = data.values(attribute)
    if attribute == "method" and len(values) < 2:
        return {}
    out = {}
    for value in values:
        index = [i for i, e in enumerate(data.examples) if getattr(e, attribute) == value]
        out[value] = auc_or_reason([data.examples[i].label for i in index], scores[index])
    return out


def evaluate(classifier: ToxicityClassifier, datasets: Sequence[LabeledData], *,
             on_progress: Callable[[int], None] | None = None) -> EvalReport:
    """Score every dataset with ``classifier`` and compute AUC overall, per method and per group."""
    from toxiforge.classifiers.scoring import score_texts

    started = time.perf_counter()
    results = []
    for data in datasets:
        scores = score_texts(classifier, data.texts, on_progress=on_progress)
        results.append(DatasetResult(data=data, auc=auc_or_reason(data.labels, scores), scores=scores,
                                     by_group=_slices(data, scores, "group"),
                                     by_method=_slices(data, scores, "method")))
    info = classifier.describe()
    return EvalReport(classifier=classifier.name, classifier_info=info, results=results,
                      seconds=time.perf_counter() - started)


def plot_roc(report: EvalReport, path: str | Path) -> Path:
    """One ROC curve per dataset with a defined AUC (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import roc_curve

    fig, ax = plt.subplots(figsize=(5.5, 5))
    ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1, label="chance")
    drawn = 0
    for r in report.results:
        if r.auc.defined:
            fpr, tpr, _ = roc_curve(r.data.labels, r.scores)
            ax.plot(fpr, tpr, linewidth=1.5, label=f"{r.data.name} (AUC {r.auc.value:.3f})")
            drawn += 1
    if not drawn:
        ax.text(0.5, 0.5, "no dataset has both classes:\nROC undefined", ha="center", va="center")
    ax.set(xlabel="false positive rate", ylabel="true positive rate", xlim=(0, 1), ylim=(0, 1.01),
           title=f"ROC: {report.classifier}"[:60])
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()

    def write(tmp: Path) -> None:
        fig.savefig(tmp, format="png", dpi=120)

    try:
        return atomic_write(Path(path), write)
    finally:
        plt.close(fig)


def write_report(report: EvalReport, out_dir: str | Path) -> dict[str, Path]:
    """Write ``evaluation.json``, ``evaluation.md`` and ``roc.png`` into ``out_dir``; return their paths."""
    out = Path(out_dir)
    paths = {"json": out / JSON_FILE, "markdown": out / MARKDOWN_FILE, "png": out / PNG_FILE}
    atomic_write_text(paths["json"], json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    atomic_write_text(paths["markdown"], report.markdown())
    plot_roc(report, paths["png"])
    return paths
