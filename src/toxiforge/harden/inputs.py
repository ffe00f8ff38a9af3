"""What a ``toxiforge harden`` run trains and measures on, read and checked before any work (issue 48, item 4).

* ``--data``: the training rows, both labels needed.
* ``--eval``: the labelled sets measured every round. They are **kept apart** from training: a ``--data`` row whose
  text (case and whitespace folded, :func:`~toxiforge.data.examples.fold_text`) is an ``--eval`` row's is left out
  of every round's training set (:attr:`Inputs.train`), and generated statements equal to an eval row are left
  out of every set (the run's :class:`~toxiforge.harden.sets.StatementLedger` holds the eval texts). The overlap of
  ``--data`` with ``--eval`` is reported (:attr:`Inputs.overlap`: rows and share) and refused above ``max_overlap`` of
  ``--data`` (``--max-eval-overlap``), with the numbers: C_0 was usually trained on those rows, so its eval numbers
  are flattered by them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toxiforge.data.examples import Example, LabeledData, fold_text
from toxiforge.errors import InputError

DEFAULT_MAX_EVAL_OVERLAP = 0.05  # --max-eval-overlap: the share of --data rows that may be --eval rows


@dataclass(frozen=True)
class Inputs:
    """``data``: the ``--data`` rows as given; ``train``: those every round trains on (no ``--eval`` row);
    ``eval_sets``; ``overlap``: the ``--data`` rows that are ``--eval`` rows (``rows``, ``share``, per eval set)."""

    data: list[Example]
    train: list[Example]
    eval_sets: list[LabeledData]
    overlap: dict[str, Any]


def check_max_overlap(share: float) -> None:
    if not 0.0 <= share <= 1.0:
        raise InputError(f"--max-eval-overlap {share} is not a share", hint="use a value in [0, 1], e.g. 0.05")


def load_inputs(data: Sequence[str], eval_specs: Sequence[str], label_rule: str, max_overlap: float) -> Inputs:
    """Read ``--data`` and ``--eval``; :class:`InputError` for data without both labels or an overlap above
    ``max_overlap``."""
    from toxiforge.data import load_specs

    rows = [e for d in load_specs(list(data)) for e in d.examples]
    if {e.label for e in rows} != {0, 1}:
        raise InputError(f"--data has {len(rows)} usable rows, not both labels", hint="give data with toxic and "
                                                                                      "benign rows")
    eval_sets = load_specs(list(eval_specs), label_rule=label_rule)
    train, overlap = apart_from_eval(rows, eval_sets)
    if overlap["share"] > max_overlap:
        per_set = ", ".join(f"{name} {n}" for name, n in overlap["per_set"].items() if n)
        raise InputError(f"{overlap['rows']} of the {len(rows)} --data rows ({overlap['share']:.1%}) are --eval rows "
                         f"(texts case and whitespace folded; {per_set}), above --max-eval-overlap "
                         f"{max_overlap:.1%}: C_0 was likely trained on them, so its --eval numbers are flattered",
                         hint="evaluate on a set apart from the training data, or remove those rows from --data; "
                              "--max-eval-overlap 1 goes on (those rows are still left out of every round's "
                              "training)")
    return Inputs(rows, train, list(eval_sets), overlap)


def apart_from_eval(rows: Sequence[Example], eval_sets: Sequence[LabeledData]) -> tuple[list[Example],
                                                                                         dict[str, Any]]:
    """``rows`` less those whose folded text is an eval row's, and the overlap's counts."""
    keys = {d.name: {fold_text(e.text) for e in d.examples} for d in eval_sets}
    every = set().union(*keys.values()) if keys else set()
    train = [e for e in rows if fold_text(e.text) not in every]
    n = len(rows) - len(train)
    return train, {"rows": n, "data_rows": len(rows), "share": n / len(rows) if rows else 0.0,
                   "per_set": {name: sum(fold_text(e.text) in k for e in rows) for name, k in keys.items()}}


def data_specs(specs: Sequence[str], train: Sequence[Example], overlap: dict[str, Any], out: Path) -> list[str]:
    """The ``--data`` specs that ``toxiforge train`` commands (``--external-training``) train on: ``specs``, or,
    when some of their rows are ``--eval`` rows, the rows less those (``train``), written once to
    ``OUT/data-apart-from-eval.jsonl``."""
    if not overlap.get("rows"):
        return list(specs)
    from toxiforge.harden.data import write_examples

    path = out / "data-apart-from-eval.jsonl"
    if not path.exists():
        write_examples(path, train)
    return [f"table:{path}"]


def overlap_markdown(overlap: dict[str, Any] | None) -> list[str]:
    """The report's line on ``--data`` against ``--eval`` (none without --eval)."""
    if not overlap or not overlap.get("per_set"):
        return []
    return ["", f"--data and --eval: {overlap['rows']} of the {overlap['data_rows']} --data rows "
                f"({100 * overlap['share']:.1f}%) are --eval rows (texts case and whitespace folded); they are left "
                "out of every round's training, and no generated statement equal to an --eval row joins training "
                "or counts in a flip rate."]
