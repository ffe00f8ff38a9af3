"""Each round's classifier at round 0's over-blocking (issue 55): ``--calibrate``, the default.

Right after a round's classifier is trained (both arms alike), its threshold is moved so that on the decision data,
the benign rows of the ``--eval`` sets and of the guard slice, it calls as many toxic as round 0 does there (C_0 on
the eval sets, the slice's reference on the slice: the classifiers the paired check compares it with), and the move
is written into the model (:func:`~toxiforge.training.calibrate.shift_toxic_logit`), so the round's attacks, its
measurements, the ship rule and the shipped folder all use the moved operating point. Its ranking (ROC AUC) is
unchanged; what moves is which texts it calls toxic. Why: in the proof's seed 0 (docs/harden.md) both arms' round-2
classifiers ranked HateCheck's decision half better than C_0 (ROC AUC +0.08 / +0.07, beyond noise) but called 90%
or more of its benign cases toxic at 0.5, so nothing could be shipped; at C_0's over-blocking there, they miss fewer
hateful cases (FNR 0.50 against 0.58). ``--no-calibrate`` keeps the threshold training left.

The record, ``round-N/ARM/model/calibration.json``: the decision sets, how many benign rows round 0 calls toxic on
each, the classifier's count before and after, and the logit shift; it is moved into the folder last, with the moved
model (:func:`~toxiforge.training.calibrate.shift_toxic_logit`). A resumed run reads it (the step is done), finishes
a move a kill interrupted, and redoes a step killed before any file moved: never shifting twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text
from toxiforge.data.examples import LabeledData

CALIBRATION_FILE = "calibration.json"  # round-N/ARM/model/


def calibrate(folder: Path, guard: Any, eval_sets: Sequence[LabeledData], guard_slice: LabeledData | None,
              threshold: float, device: str, say: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Move the threshold of the classifier in ``folder`` (module docstring) and return the record; the saved record
    when the step is done. ``guard``: the run's :class:`~toxiforge.harden.guardset.GuardCheck` (round 0's sections
    on each set, scored once)."""
    from toxiforge.training.calibrate import finish_shift, logit, matched_shift, shift_toxic_logit

    path = folder / CALIBRATION_FILE
    finish_shift(folder, CALIBRATION_FILE)  # a kill while the moved model's files were moved in: finished, not redone
    if path.exists():
        return dict(json.loads(path.read_text(encoding="utf-8")))
    from toxiforge.audit.compare import headline
    from toxiforge.classifiers import load_classifier
    from toxiforge.harden.guardset import REFERENCE, START

    references = [(START, guard.start, list(eval_sets))]
    if guard_slice is not None:
        references.append((START if guard.reference == guard.start else REFERENCE, guard.reference, [guard_slice]))
    texts: list[str] = []
    target, sets = 0, {}
    for name, spec, data_sets in references:
        for data in data_sets:
            benign = [e.text for e in data.examples if e.label == 0]
            fpr = headline(guard.sections(name, spec, [data])[data.name], "accuracy", "fpr") if benign else None
            if fpr is None or fpr.value is None:
                continue
            called = round(fpr.value * len(benign))
            sets[data.name] = {"reference": name, "benign_rows": len(benign), "reference_calls_toxic": called}
            target += called
            texts += benign
    record: dict[str, Any] = {"sets": sets, "threshold": threshold}
    if not texts:
        record["note"] = "no benign decision row: the threshold training left is kept"
        atomic_write_text(path, json.dumps(record, indent=2) + "\n")
        return record
    scores = load_classifier(str(folder), device=device).predict_proba(texts)  # the one extra scoring
    shift = matched_shift(scores, target, threshold)
    record |= {"benign_rows": len(texts), "reference_calls_toxic": target,
               "calls_toxic_before": int((scores > threshold).sum()),
               # the moved scores, sigmoid(logit - shift), are not scored again (the tests score the folder)
               "calls_toxic_after": int((logit(scores) - shift > logit(threshold)).sum())}
    record |= shift_toxic_logit(folder, shift, CALIBRATION_FILE, record)  # the record lands with the moved model
    say(f"{folder.parent.parent.name} {folder.parent.name}: threshold moved (logit shift {shift:+.2f}): calls "
        f"{record['calls_toxic_after']} of {len(texts)} benign decision rows toxic, round 0 {target} (it called "
        f"{record['calls_toxic_before']})")
    return record


def calibration_markdown(records: dict[str, dict[str, Any]]) -> list[str]:
    """The report's lines on the moved thresholds: per round and arm, benign decision rows called toxic."""
    if not records:
        return []
    lines = ["", "Operating point (--calibrate): each round's classifier calls as many benign decision rows toxic as "
             "round 0 does (its threshold moved after training; ROC AUC unchanged):", "",
             "| classifier | benign decision rows | round 0 calls toxic | before | after | logit shift |",
             "|---|---:|---:|---:|---:|---:|"]
    for name, rec in records.items():
        if "shift" not in rec:
            lines.append(f"| {name} | 0 | | | | {rec.get('note', '')} |")
            continue
        lines.append(f"| {name} | {rec['benign_rows']} | {rec['reference_calls_toxic']} | {rec['calls_toxic_before']}"
                     f" | {rec['calls_toxic_after']} | {rec['shift']:+.2f} |")
    return lines
