"""The statements of a ``toxiforge harden`` round: which ones join the training data.

An ALICE statement joins with its *prompt* label, as the paper trains on ALICE data; the paper also had
annotators validate them. ``--validate-with CLASSIFIER`` stands in for that step: a classifier other than the
attacked one scores every statement of every run the loop reads
(:class:`~toxiforge.attacks.validation.Validation`, cached beside the run), and a statement counts as *validated*
when that classifier agrees with its prompt label. Validation applies alike to both arms (the ALICE statements
that join and the top-k control pool they are matched from) and to the flip rates
(:func:`~toxiforge.harden.report.flip_rates` reports the rate among validated statements beside the raw one).
``--validate-with people`` has annotators label the statements instead (:mod:`toxiforge.harden.people`): their
majority labels take the scores' place.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from toxiforge._io import atomic_write_text
from toxiforge.attacks.validation import agrees, run_rows
from toxiforge.data.examples import Example
from toxiforge.records import METHOD_ALICE


@dataclass(frozen=True)
class Statements:
    """A run's statements to select from or measure flips on: ``validated``, a validator's P(toxic) for each of
    :func:`~toxiforge.attacks.validation.run_rows` (None: no validator); ``keep``, which of them the run kept
    (None: all; sets.py leaves out statements of the training data or of an earlier set)."""

    run_dir: Path
    validated: Sequence[float] | None = None
    keep: Sequence[bool] | None = None
    method: str = METHOD_ALICE

    def rows(self) -> list[tuple[Example, bool | None, float | None]]:
        """The kept statements as ``(Example with its prompt label, fooled, validator score or None)``."""
        rows = run_rows(self.run_dir, self.method)
        scores = self.validated if self.validated is not None else [None] * len(rows)
        keep = self.keep if self.keep is not None else [True] * len(rows)
        return [(e, fooled, s) for (e, fooled), s, ok in zip(rows, scores, keep) if ok]


def select_alice(attack: Statements, add: str) -> list[Example]:
    """The attack's statements that flipped the classifier's label (``add="all"``: all of them); with a
    validator, only those it gives their prompt label."""
    return [e for e, fooled, s in attack.rows() if (s is None or agrees(e, s)) and (add == "all" or fooled)]


def select_control(topk: Statements, like: Sequence[Example], seed: int) -> list[Example]:
    """As many top-k statements as ``like`` has, label by label (a seeded sample; all of a label when short);
    with a validator, drawn only from the statements it gives their prompt label."""
    pool = [e for e, _, s in topk.rows() if s is None or agrees(e, s)]
    rng = random.Random(seed)
    out: list[Example] = []
    for label in (0, 1):
        want = sum(e.label == label for e in like)
        have = [e for e in pool if e.label == label]
        out += rng.sample(have, min(want, len(have)))
    return out


def write_examples(path: Path, examples: Sequence[Example]) -> None:
    """``examples`` as JSON lines; a row's loss weight (``--added-weight``) in column
    :data:`~toxiforge.harden.mix.WEIGHT_COLUMN`, only where it is not 1 (a table of unweighted rows is as before)."""
    from toxiforge.harden.mix import WEIGHT_COLUMN

    lines = [json.dumps({"text": e.text, "label": e.label, "group": e.group, "method": e.method,
                         **({WEIGHT_COLUMN: e.weight} if e.weight != 1 else {})},
                        ensure_ascii=False) for e in examples]
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def read_examples(path: Path) -> list[Example]:
    from toxiforge.harden.mix import WEIGHT_COLUMN

    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Example(r["text"], int(r["label"]), r.get("group"), r.get("method"),
                    weight=float(r.get(WEIGHT_COLUMN, 1.0))) for r in rows]
