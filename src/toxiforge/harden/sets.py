"""The generated sets of a ``toxiforge harden`` run, kept apart by construction (issue 34).

A run generates its sets in one order: round 0's attack, the transfer attack, then for each round r the control
arm's top-k pool and the round's attack (both arms' attacks of a round share its prompts, so the arms are compared
on the same prompts; neither arm trains on the other's statements). Seeds alone do not keep the sets apart: a prompt
is an ordered pick of k demonstrations from a small set, so plans with other seeds share prompts, and ALICE is
deterministic, so a shared prompt gives a shared statement. The docs' own set-up had 9 of 300 transfer prompts equal
to a round-0 attack prompt (statements the ALICE arm trained on, scored as "never trained on"), 14 of 300 later-round
prompts repeating an earlier round's, and 5 of 300 repeating inside one attack. Here:

* **prompts** (:func:`draw_sets`): each set draws from its own seeded stream (prompt i of
  :func:`~toxiforge.demonstrations.build_prompts` with the set's seed; with ``--prompts``, the file's lines after the
  ones earlier sets took). A prompt an earlier set used, or this set already has, is passed over and the next one of
  the stream drawn: it is *re-drawn*, and counted. When a (group, label) has fewer unused prompts than the set needs
  the run is refused with the numbers, before any work. The prompts are written as upstream prompt files into
  ``SET.prompts/`` beside the set, and the set's generation run reads them as ``--prompts`` does.
* **statements** (:class:`StatementLedger`): a statement whose text (case and whitespace folded) is in the training
  data (``--data``), an ``--eval`` set, an earlier set, or earlier in its own set is *left out* of the set: it
  neither joins a training set nor counts in a flip rate. So no statement a flip rate is measured on is one the
  classifier under test was trained on, and no eval row is trained on.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text
from toxiforge.data.examples import fold_text
from toxiforge.errors import InputError
from toxiforge.pipeline.plan import GenerationPlan
from toxiforge.records import label_word

PROMPTS_SUFFIX = ".prompts"  # round-N/attack.prompts/ beside the runs that read it
PROMPTS_JSON = "prompts.json"
# A set gives up on its stream after this many draws per prompt it needs (plus a floor): the space is checked to hold
# enough unused prompts first, so this only stops a stream that keeps hitting used ones.
DRAWS_PER_PROMPT, MIN_DRAWS = 200, 10_000
Cell = tuple[str, int]
MEASURE = "measure"  # round-N/measure.prompts/: the attacks that only measure, with --measure-n
CONTROL_SEED_OFFSET = 10_000  # round r's top-k control pool is drawn with seed + 10,000 + r - 1
TRANSFER_SEED_OFFSET = 20_000  # the fixed transfer attack on C_0 with seed + 20,000 (round r's attack: seed + r)
# The top-k pool is this many times an attack's size, so that after empty or unparsable statements it still has
# as many statements of each label as the ALICE arm adds (a shortfall is recorded in the metrics).
CONTROL_POOL = 2
EVAL_SET = "--eval set"  # where the ledger says an eval row was seen (harden/inputs.py)
# Why a statement seen before is left out, by where it was seen (else "in_earlier_set"): the training data, or an
# --eval row (eval texts never join training nor count in a flip rate)
SEEN_AS = {"training data": "in_training_data", EVAL_SET: "in_eval"}


@dataclass(frozen=True)
class DrawnSet:
    """One set's prompts: per (group, label) cell its prompt texts (LM inputs), and how many were re-drawn."""

    name: str
    plan: GenerationPlan                       # the plan drawn for (cells, seed); its prompts are replaced
    prompts: dict[Cell, tuple[str, ...]]
    redrawn: int

    def write(self, folder: Path) -> GenerationPlan:
        """Write the prompts into ``folder`` as upstream prompt files (once), and return the plan that reads them."""
        from toxiforge.demonstrations.prompts import select_prompts

        if not (folder / PROMPTS_JSON).exists():
            folder.mkdir(parents=True, exist_ok=True)
            for (group, label), texts in self.prompts.items():
                lines = [t.replace("\\", "\\\\").replace("\n", "\\n") for t in texts]
                atomic_write_text(folder / _file_name(group, label), "".join(line + "\n" for line in lines))
                read = select_prompts(folder, group, label).texts
                if read != texts:
                    raise InputError(f"a {group} {label_word(label)} prompt does not survive a prompt file (a "
                                     "backslash before n?)", path=folder, hint="remove backslashes from the "
                                                                               "demonstrations or prompt lines")
            atomic_write_text(folder / PROMPTS_JSON, json.dumps(
                {"set": self.name, "redrawn": self.redrawn, "prompts": sum(map(len, self.prompts.values()))}) + "\n")
        return GenerationPlan(cells=self.plan.cells, source=str(folder), prompt_source="prompts", k=self.plan.k,
                              seed=self.plan.seed)

    def counts(self) -> dict[str, int]:
        return {"prompts": sum(len(t) for t in self.prompts.values()), "prompts_redrawn": self.redrawn}

    def first(self, n: int, name: str) -> DrawnSet:
        """The set named ``name`` of this set's first ``n`` prompts per cell (the re-draws were this set's)."""
        cells = tuple(replace(c, n=min(n, c.n)) for c in self.plan.cells)
        return DrawnSet(name, replace(self.plan, cells=cells), {c: t[:n] for c, t in self.prompts.items()}, 0)


def _file_name(group: str, label: int) -> str:
    return f"{'hate' if label else 'neutral'}_{group}.txt"


@dataclass
class _Streams:
    """Where each cell's prompts come from: seeded demonstration picks, or a prompt file's lines in order."""

    source: str | None
    prompt_source: str
    k: int
    _sets: Any = None
    _lines: dict[Cell, tuple[str, ...]] = field(default_factory=dict)
    taken: dict[Cell, int] = field(default_factory=dict)  # prompt files: lines earlier sets went through

    def space(self, cell: Cell, used: set[str]) -> tuple[int, str]:
        """How many unused prompts the cell has left, and what its prompt space is (for a refusal)."""
        if self.prompt_source == "prompts":
            lines = self._file(cell)
            rest = set(lines[self.taken.get(cell, 0):]) - used
            return len(rest), f"its prompt file has {len(lines)} usable lines ({len(set(lines))} distinct)"
        m = len(self._demonstrations(cell).sentences)
        return math.perm(m, self.k) - len(used), (f"{m} demonstrations give {math.perm(m, self.k)} ordered picks of "
                                                  f"k={self.k}")

    def stream(self, cell: Cell, seed: int) -> Iterator[str]:
        if self.prompt_source == "prompts":
            lines = self._file(cell)
            for i in range(self.taken.get(cell, 0), len(lines)):
                self.taken[cell] = i + 1
                yield lines[i]
            return
        from toxiforge.demonstrations import build_prompts

        demo_set, start, size = self._demonstrations(cell), 0, 64
        while True:  # prompt i does not depend on how many are built (build_prompts), so grow the list
            for p in build_prompts(demo_set, size, k=self.k, seed=seed)[start:]:
                yield p.text
            start, size = size, 2 * size

    def _file(self, cell: Cell) -> tuple[str, ...]:
        from toxiforge.demonstrations.prompts import select_prompts

        if cell not in self._lines:
            self._lines[cell] = select_prompts(str(self.source), *cell).texts
        return self._lines[cell]

    def _demonstrations(self, cell: Cell) -> Any:
        from toxiforge.demonstrations import load_demonstrations, load_shipped_benign
        from toxiforge.demonstrations.sets import get_set

        if self._sets is None:
            self._sets = load_shipped_benign() if self.source is None else load_demonstrations(self.source)
        return get_set(self._sets, *cell)


def run_sets(attack: Any, rounds: int, transfer: bool) -> list[tuple[str, GenerationPlan]]:
    """Every generated set of a run (``attack`` an :class:`~toxiforge.harden.config.AttackPlan`) in the order
    they are made, named by their folder."""
    plans = [("round-0/attack", attack.plan(0))]
    plans += [("round-0/transfer", attack.plan(TRANSFER_SEED_OFFSET))] if transfer else []
    for r in range(1, rounds + 1):
        plans += [(f"round-{r}/control/topk", attack.plan(CONTROL_SEED_OFFSET + r - 1, CONTROL_POOL)),
                  (f"round-{r}/attack", attack.plan(r))]
    return plans


def measure_sets(drawn: dict[str, DrawnSet], rounds: int, per_cell: int | None) -> dict[str, DrawnSet]:
    """With ``--measure-n`` (``per_cell``), round r's attacks that only measure (the control arm's every round, the
    ALICE arm's in the last round: they feed no round) use ``round-r/measure``, the first ``per_cell`` prompts per
    cell of the round's attack set, so both arms are measured on the same prompts and fewer are decoded."""
    if per_cell is None:
        return {}
    return {f"round-{r}/{MEASURE}": drawn[f"round-{r}/attack"].first(per_cell, f"round-{r}/{MEASURE}")
            for r in range(1, rounds + 1)}


def draw_sets(plans: Sequence[tuple[str, GenerationPlan]]) -> dict[str, DrawnSet]:
    """Each named plan's prompts, in order, none used by an earlier plan or twice in one (module docstring). The
    plans share their prompt source and k; :class:`InputError` when a cell's prompts run out."""
    if not plans:
        return {}
    first = plans[0][1]
    streams = _Streams(first.source, first.prompt_source, first.k)
    used: dict[Cell, set[str]] = {}
    out: dict[str, DrawnSet] = {}
    for name, plan in plans:
        prompts: dict[Cell, tuple[str, ...]] = {}
        redrawn = 0
        for c in plan.cells:
            cell = (c.group, c.label)
            seen = used.setdefault(cell, set())
            left, space = streams.space(cell, seen)
            if left < c.n:
                raise InputError(
                    f"{name} needs {c.n} {c.group} {label_word(c.label)} prompts that no earlier set of this run "
                    f"used, and only {left} are left: {space}, and the earlier sets used {len(seen)}",
                    hint="use a smaller -n or fewer --rounds, --no-transfer, more demonstrations (or a longer "
                         "prompt file), or another -k")
            chosen: list[str] = []
            for draws, text in enumerate(streams.stream(cell, plan.seed), start=1):
                if text in seen:
                    redrawn += 1
                else:
                    chosen.append(text)
                    seen.add(text)
                if len(chosen) == c.n or draws >= DRAWS_PER_PROMPT * c.n + MIN_DRAWS:
                    break
            if len(chosen) < c.n:
                raise InputError(f"{name}: {len(chosen)} of {c.n} {c.group} {label_word(c.label)} prompts found "
                                 f"unused ({space}; {len(seen)} used)", hint="use a smaller -n or fewer --rounds")
            prompts[cell] = tuple(chosen)
        out[name] = DrawnSet(name, plan, prompts, redrawn)
    return out


@dataclass
class StatementLedger:
    """Every statement text (folded) a run has admitted so far, and where it was first seen."""

    seen: dict[str, str] = field(default_factory=dict)

    def train_on(self, texts: Iterable[str], where: str = "training data") -> None:
        for text in texts:
            self.seen.setdefault(fold_text(text), where)

    def check(self, texts: Sequence[str]) -> tuple[tuple[bool, ...], dict[str, int]]:
        """Which of one set's statements to keep (in order), and the counts of those left out and why."""
        keep, inside = [], set()
        counts = {"statements": len(texts), "in_training_data": 0, "in_eval": 0, "in_earlier_set": 0,
                  "repeated_in_set": 0}
        for text in texts:
            key = fold_text(text)
            why = SEEN_AS.get(self.seen[key], "in_earlier_set") if key in self.seen \
                else "repeated_in_set" if key in inside else None
            keep.append(why is None)
            inside.add(key)
            if why:
                counts[why] += 1
        counts["kept"] = sum(keep)
        return tuple(keep), counts

    def admit(self, texts: Sequence[str], keep: Sequence[bool], where: str) -> None:
        for text, ok in zip(texts, keep):
            if ok:
                self.seen.setdefault(fold_text(text), where)
