"""Each round's classifier at round 0's benign errors (issue 55): ``--calibrate``, the default.

Right after a round's classifier is trained (both arms alike), its threshold is moved so that on each decision set
(the ``--eval`` sets and the guard slice) it calls no more benign rows toxic than round 0 does there (C_0 on the eval
sets, the slice's reference on the slice: the classifiers the paired check compares it with), counted twice: over
all benign rows (FPR) and over the benign rows that name a group (FPR_NOI, the rows the audit's lexicon tags NOI):
the benign errors the ship rule checks (decide.py). The move is the largest of the shifts that match each count, so
the count that binds is met (up to ties) and the others are at or below round 0's. It is written into the model
(:func:`~toxiforge.training.calibrate.shift_toxic_logit`), so the round's attacks, its measurements, the ship rule
and the shipped folder all use the moved operating point. Its ranking (ROC AUC) is unchanged; what moves is which
texts it calls toxic. ``--no-calibrate`` keeps the threshold training left.

Why both counts: in the proof's seed 0 (docs/harden.md) both arms' round-2 classifiers ranked HateCheck's decision
half better than C_0 (ROC AUC +0.08 / +0.07) but called 90% or more of its benign cases toxic at 0.5. Matched to
C_0's FPR alone (harden before this), the eight round-1/2 classifiers of seeds 0 and 1 all moved their false
positives onto benign cases naming a group: FPR_NOI +0.05 to +0.19 at equal FPR, seven of eight wholly beyond the
tolerance, so none could ship. Matched to both on the same decision half, FPR_NOI equals C_0's and FPR falls
0.06-0.19; the price is recall (FNR +0.05 to +0.19 but one; docs/harden.md).

The record, ``round-N/ARM/model/calibration.json``: per decision set, round 0's toxic calls on its benign rows and on
those naming a group; per count, the classifier's before and after; which count bound; the logit shift. It is moved
into the folder last, with the moved model (:func:`~toxiforge.training.calibrate.shift_toxic_logit`). A resumed run
reads it (the step is done), finishes a move a kill interrupted, and redoes a step killed before any file moved: never
shifting twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge._io import atomic_write_text
from toxiforge.data.examples import LabeledData
from toxiforge.harden.decide import RATE_ROWS

CALIBRATION_FILE = "calibration.json"  # round-N/ARM/model/
COUNTS = {"fpr": "accuracy.fpr", "fpr.noi": "lexical.fpr.noi"}  # the record's count: its headline (decide.RATE_ROWS)


def _counts(guard: Any, eval_sets: Sequence[LabeledData], guard_slice: LabeledData | None) -> tuple[
        dict[str, Any], list[tuple[str, str, list[str], int]]]:
    """Round 0's toxic calls on each decision set's benign rows and on those naming a group: the record's ``sets``
    and, per count, (set, count key, its rows' texts, round 0's calls)."""
    from toxiforge.audit.compare import headline
    from toxiforge.audit.headlines import section_of
    from toxiforge.audit.sections import LexicalContext
    from toxiforge.harden.guardset import REFERENCE, START

    references = [(START, guard.start, list(eval_sets))]
    if guard_slice is not None:
        references.append((START if guard.reference == guard.start else REFERENCE, guard.reference, [guard_slice]))
    lexicon = LexicalContext.load_lexicon(guard.settings.lexicon, guard.settings.oi_list)  # the audit's slices
    sets: dict[str, Any] = {}
    counts: list[tuple[str, str, list[str], int]] = []
    for name, spec, data_sets in references:
        for data in data_sets:
            benign = [e.text for e in data.examples if e.label == 0]
            if not benign:
                continue
            found = guard.sections(name, spec, [data])[data.name]
            rows = {"fpr": benign, "fpr.noi": [t for t, noi in zip(benign, lexicon.tag(benign)["noi"], strict=True)
                                               if noi]}
            entry: dict[str, Any] = {"reference": name}
            for key, headline_key in COUNTS.items():
                rate = headline(found, *section_of(headline_key))
                if not rows[key] or rate is None or rate.value is None:
                    continue
                called = round(rate.value * len(rows[key]))
                entry[key] = {"rows": len(rows[key]), "reference_calls_toxic": called}
                counts.append((data.name, key, rows[key], called))
            if len(entry) > 1:
                sets[data.name] = entry
    return sets, counts


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
    from toxiforge.classifiers import load_classifier

    sets, counts = _counts(guard, eval_sets, guard_slice)
    record: dict[str, Any] = {"sets": sets, "threshold": threshold}
    if not counts:
        record["note"] = "no benign decision row: the threshold training left is kept"
        atomic_write_text(path, json.dumps(record, indent=2) + "\n")
        return record
    texts = sorted({t for _, _, rows, _ in counts for t in rows})
    score_of = dict(zip(texts, load_classifier(str(folder), device=device).predict_proba(texts).tolist(),
                        strict=True))  # the one extra scoring
    shifts = [matched_shift([score_of[t] for t in rows], called, threshold) for _, _, rows, called in counts]
    shift = max(shifts)
    binding = counts[int(np.argmax(shifts))]
    for (set_name, key, rows, _), own in zip(counts, shifts, strict=True):
        scores = np.array([score_of[t] for t in rows])
        # the moved scores, sigmoid(logit - shift), are not scored again (the tests score the folder)
        sets[set_name][key] |= {"calls_toxic_before": int((scores > threshold).sum()),
                                "calls_toxic_after": int((logit(scores) - shift > logit(threshold)).sum()),
                                "own_shift": own}
    record |= {"binding": {"set": binding[0], "count": binding[1]}}
    record |= shift_toxic_logit(folder, shift, CALIBRATION_FILE, record)  # the record lands with the moved model
    bound = sets[binding[0]][binding[1]]
    say(f"{folder.parent.parent.name} {folder.parent.name}: threshold moved (logit shift {shift:+.2f}): calls "
        f"{bound['calls_toxic_after']} of {bound['rows']} {RATE_ROWS[COUNTS[binding[1]]]} of {binding[0]} toxic, "
        f"round 0 {bound['reference_calls_toxic']} (it called {bound['calls_toxic_before']}); the other counts at or "
        "below round 0's")
    return record


def calibration_markdown(records: dict[str, dict[str, Any]]) -> list[str]:
    """The report's lines on the moved thresholds: per round, arm and decision set, the benign rows and those naming
    a group that round 0 and the classifier (before and after the move) call toxic; which count bound."""
    if not records:
        return []
    lines = ["", "Operating point (--calibrate): each round's classifier calls no more benign decision rows toxic "
             "than round 0 does, over all benign rows and over those naming a group (its threshold moved after "
             "training, by the largest shift any count needs; ROC AUC unchanged):", "",
             "| classifier | set | rows | round 0 calls toxic | before | after | logit shift |",
             "|---|---|---|---:|---:|---:|---:|"]
    for name, rec in records.items():
        if "shift" not in rec:
            lines.append(f"| {name} | | | | | | {rec.get('note', '')} |")
            continue
        binding = rec.get("binding", {})
        for set_name, entry in rec["sets"].items():
            for key, headline_key in COUNTS.items():
                if key not in entry:
                    continue
                c = entry[key]
                binds = binding.get("set") == set_name and binding.get("count") == key
                lines.append(f"| {name} | {set_name} | {c['rows']} {RATE_ROWS[headline_key]}"
                             f"{' (binds)' if binds else ''} | "
                             f"{c['reference_calls_toxic']} | {c['calls_toxic_before']} | {c['calls_toxic_after']} | "
                             f"{rec['shift']:+.2f} |")
    return lines
