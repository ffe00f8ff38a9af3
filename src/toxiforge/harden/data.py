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
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from toxiforge._io import atomic_write_text
from toxiforge.attacks.validation import agrees, run_rows
from toxiforge.data.examples import Example
from toxiforge.records import METHOD_ALICE

# The two arms of every round, also their folders (round-N/alice, round-N/control) and their records' keys. Round 0
# measures C_0 once; its record is stored under both, and read under ALICE_ARM.
ALICE_ARM, CONTROL_ARM = "alice", "control"
ARMS: tuple[str, ...] = (ALICE_ARM, CONTROL_ARM)


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


def balance_groups(chosen: Sequence[Example], sources: Sequence[Statements], seed: int) -> list[Example]:
    """``--add balanced``: ``chosen`` (the flipped statements) topped up, group by group, with the sources' other
    statements of the label the group has fewer of (those the validator gives their prompt label; every one without
    a validator), a seeded sample, until both labels match or the sources run out. The flipped statements of an
    attack are mostly of toxic prompts (the proof's round 1: 62 toxic to 1 benign for mental_disability), so a round
    trained on them alone learns that naming the group is toxic; ToxiGen balances each group's statements for this
    reason (docs/harden.md, *How the added statements enter training*)."""
    taken = {e.text for e in chosen}
    pool: dict[tuple[str | None, int], list[Example]] = {}
    for source in sources:
        for e, _, score in source.rows():
            if (score is None or agrees(e, score)) and e.text not in taken:
                taken.add(e.text)
                pool.setdefault((e.group, e.label), []).append(e)
    counts = Counter((e.group, e.label) for e in chosen)
    rng = random.Random(seed)
    out = list(chosen)
    for group in sorted({e.group for e in chosen}, key=str):
        gap = counts[(group, 1)] - counts[(group, 0)]
        have = pool.get((group, 0 if gap > 0 else 1), [])
        out += rng.sample(have, min(abs(gap), len(have)))
    return out


def select_added(sources: Sequence[Statements], add: str, seed: int) -> list[Example]:
    """The ALICE arm's additions from a round's attack statements (``--add``): the flipped ones, every one
    (``all``), or the flipped ones balanced per group (``balanced``: :func:`balance_groups`)."""
    chosen = [e for s in sources for e in select_alice(s, "all" if add == "all" else "flipped")]
    return balance_groups(chosen, sources, seed) if add == "balanced" else chosen


def select_control(topk: Statements, like: Sequence[Example], seed: int, by_group: bool = False) -> list[Example]:
    """As many top-k statements as ``like`` has, label by label (``by_group``: group by group and label by label,
    as ``--add balanced`` needs), a seeded sample (all of a kind when short); with a validator, drawn only from the
    statements it gives their prompt label."""
    pool = [e for e, _, s in topk.rows() if s is None or agrees(e, s)]

    def kind(e: Example) -> tuple[str | None, int]:
        return (e.group if by_group else None, e.label)

    rng = random.Random(seed)
    out: list[Example] = []
    for key, want in sorted(Counter(kind(e) for e in like).items(), key=lambda item: (str(item[0][0]), item[0][1])):
        have = [e for e in pool if kind(e) == key]
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
