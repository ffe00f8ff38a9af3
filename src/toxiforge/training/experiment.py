"""The paper's Table 4 (and Table 7) as one run: zero-shot plus three fine-tuned variants, every eval set.

``run_table4(train_data, eval_sets, out_dir, config)``:

1. selects the three training variants from the pooled training rows (:mod:`toxiforge.training.subsets`):
   ALICE, top-k downsampled to the ALICE part's size, and their union -- all three before any training, so an
   empty variant fails at once;
2. evaluates the zero-shot classifier (``zero_shot``: a registry name, directory or hub id; default the base model
   itself when it already is a classifier, else the column is ``n/a`` with the reason);
3. fine-tunes the base model on each variant (``OUT/<variant>/``, each with its ``training_log.json``) and
   evaluates it on every eval set (``OUT/<variant>/eval/``: JSON, Markdown, ROC PNG);
4. writes ``OUT/table4.json`` and ``OUT/table4.md``: one row per eval set -- plus, as in Table 7, one row per
   generation method for eval sets that have both ALICE and top-k rows -- and the columns
   None | ALICE | top-k | ALICE + top-k, best value per row in bold.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text
from toxiforge.data.examples import Example, LabeledData
from toxiforge.errors import InputError
from toxiforge.training.evaluate import EvalReport, evaluate, write_report
from toxiforge.training.metrics import AUC
from toxiforge.training.subsets import select_subset
from toxiforge.training.trainer import TrainConfig, train_classifier

VARIANTS: tuple[tuple[str, str], ...] = (("alice", "ALICE"), ("top-k", "top-k"), ("both", "ALICE + top-k"))
ZERO_SHOT = "None"
COLUMNS: tuple[str, ...] = (ZERO_SHOT,) + tuple(title for _, title in VARIANTS)


@dataclass
class Table4:
    """Rows ``(eval row name, {column: AUC or None})``; ``reports`` per column; ``notes`` explain n/a cells."""

    model: str
    rows: list[tuple[str, dict[str, AUC | None]]]
    reports: dict[str, EvalReport]
    train_counts: dict[str, dict[str, int]]
    seconds: dict[str, float]
    notes: list[str] = field(default_factory=list)

    def best(self, cells: dict[str, AUC | None]) -> float | None:
        values = [c.value for c in cells.values() if c is not None and c.value is not None]
        return max(values) if values else None

    def markdown(self) -> str:
        head = "| Model | Test data | " + " | ".join(COLUMNS) + " |"
        lines = [head, "|---|---|" + "---:|" * len(COLUMNS)]
        for i, (name, cells) in enumerate(self.rows):
            best = self.best(cells)
            out = []
            for col in COLUMNS:
                cell = cells.get(col)
                text = cell.cell(2) if cell is not None else "n/a"
                if cell is not None and cell.value is not None and best is not None and \
                        round(cell.value, 2) == round(best, 2):
                    text = f"**{text}**"
                out.append(text)
            lines.append(f"| {self.model if i == 0 else ''} | {name} | " + " | ".join(out) + " |")
        lines += ["", "ROC AUC. Columns: the fine-tuning data (None = zero-shot). "
                      "Training rows per variant: " + ", ".join(f"{k} {v['n']}" for k, v in self.train_counts.items())
                  + "."]
        if self.notes:
            lines += [""] + [f"* {n}" for n in self.notes]
        return "\n".join(lines) + "\n"

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "columns": list(COLUMNS),
                "rows": [{"test_data": name, **{c: (cell.to_dict() if (cell := cells.get(c)) is not None else None)
                                                for c in COLUMNS}} for name, cells in self.rows],
                "train_counts": self.train_counts, "seconds": self.seconds, "notes": self.notes}


def _rows(eval_sets: Sequence[LabeledData], reports: dict[str, EvalReport | None]
          ) -> list[tuple[str, dict[str, AUC | None]]]:
    rows: list[tuple[str, dict[str, AUC | None]]] = []
    for data in eval_sets:
        cells = {col: (rep.result(data.name).auc if rep is not None else None) for col, rep in reports.items()}
        rows.append((data.name, cells))
        methods = [m for m in ("ALICE", "top-k") if m in data.values("method")]
        if len(methods) == 2:
            for method in methods:
                rows.append((f"{data.name} {method} subset",
                             {col: (rep.result(data.name).by_method.get(method) if rep is not None else None)
                              for col, rep in reports.items()}))
    return rows


def _zero_shot(zero_shot: str | None, base_source: str, load: Callable[[str], Any]) -> tuple[Any, str | None]:
    """The zero-shot classifier, or None and why the column is empty."""
    target = zero_shot or base_source
    try:
        return load(target), None
    except InputError as exc:
        if zero_shot is not None:
            raise
        return None, (f"zero-shot column empty: the base model {target!r} is not a classifier ({exc.message}); pass "
                      "--zero-shot with a classifier (e.g. toxigen-hatebert, toxdect-roberta, profanity-check)")


def run_table4(train_data: Sequence[LabeledData], eval_sets: Sequence[LabeledData], out_dir: str | Path,
               config: TrainConfig | None = None, *, zero_shot: str | None = None, progress: bool = True,
               overwrite: bool = False, console: Any = None, device: str = "auto",
               on_stage: Callable[[str], None] | None = None) -> Table4:
    """Run the experiment (see the module docstring) and write its files into ``out_dir``."""
    from toxiforge._io import require_empty_dir
    from toxiforge.classifiers import load_classifier
    from toxiforge.training.trainer import resolve_base_model

    config = config or TrainConfig()
    out = Path(out_dir)
    require_empty_dir(out, overwrite)
    if not eval_sets:
        raise InputError("no evaluation sets", hint="pass --eval with at least one dataset")
    pooled: list[Example] = [e for d in train_data for e in d.examples]
    subsets = {key: select_subset(pooled, key, seed=config.seed) for key, _ in VARIANTS}
    stage = on_stage or (lambda _msg: None)
    base_source, _ = resolve_base_model(config.base_model, config.tokenizer)

    def load(target: str):
        return load_classifier(target, device=device, batch_size=config.eval_batch_size)

    reports: dict[str, EvalReport | None] = {}
    seconds: dict[str, float] = {}
    notes: list[str] = []
    started = time.perf_counter()
    stage(f"zero-shot: {zero_shot or config.base_model}")
    clf, why = _zero_shot(zero_shot, base_source, load)
    if clf is not None:
        reports[ZERO_SHOT] = zero = evaluate(clf, eval_sets)
        write_report(zero, out / "zero-shot")
        notes.append(f"zero-shot classifier: {clf.name}")
    else:
        reports[ZERO_SHOT] = None
        notes.append(why or "zero-shot column empty")
    seconds["zero-shot"] = round(time.perf_counter() - started, 3)
    for key, title in VARIANTS:
        started = time.perf_counter()
        stage(f"fine-tuning on {title} ({len(subsets[key])} rows)")
        result = train_classifier(subsets[key], out / key, replace(config), progress=progress, overwrite=overwrite,
                                  console=console, data_sources=[d.source for d in train_data])
        report = evaluate(load(str(result.output_dir)), eval_sets)
        write_report(report, out / key / "eval")
        reports[title] = report
        seconds[key] = round(time.perf_counter() - started, 3)
    for data in eval_sets:
        if data.values("method") and len(data.values("method")) < 2:
            notes.append(f"{data.name}: only {data.values('method')[0]} rows, so no per-method rows")
    counts = {key: {"n": len(rows), "toxic": sum(e.label for e in rows)} for key, rows in subsets.items()}
    table = Table4(model=config.base_model, rows=_rows(eval_sets, reports), reports={k: v for k, v in reports.items()
                                                                                   if v is not None},
                   train_counts=counts, seconds=seconds, notes=notes)
    for name, cells in table.rows:
        for col, cell in cells.items():
            if cell is not None and not cell.defined:
                notes.append(f"{name} / {col}: AUC {cell.reason}")
    atomic_write_text(out / "table4.json", json.dumps(table.to_dict(), indent=2, default=str) + "\n")
    atomic_write_text(out / "table4.md", table.markdown())
    return table
