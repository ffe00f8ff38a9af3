"""The guard set of ``toxiforge harden`` and the paired check of every round against round 0 (issue 48, items 1-2).

* **A guard slice always** (:func:`split_guard`): a stratified, seeded slice of ``--data`` (:data:`GUARD_SHARE` of
  its rows, at least :data:`GUARD_MIN_ROWS` where that is at most a quarter of them) that no round trains on (texts
  case- and whitespace-folded: a row whose text is in the slice leaves training too). Without ``--eval`` it is the
  only set the rounds are measured on; with ``--eval`` it is kept too unless ``guard_slice=False``
  (``--no-guard-slice``). C_0 was usually trained on ``--data``, slice included, so on the slice the rounds are
  compared with a round-0 classifier retrained by C_0's recipe on ``--data`` less the slice (the loop trains it
  when C_0's recipe is its own ``training_log.json``'s); where no such classifier can be made (C_0 a judge, trained
  here, or its recipe unknown) the reference on the slice is C_0 itself, and the report says so.
* **A paired check** (:class:`GuardCheck`): per round and arm, on every eval set (against C_0) and on the guard slice
  (against the reference), the paired bootstrap difference on the same rows, by ``toxiforge audit``'s own code
  (:func:`~toxiforge.audit.run.run_audit`'s sections, :func:`~toxiforge.intervals.paired_difference`), of ROC AUC,
  FPR on benign rows, FPR_NOI (benign rows naming a group, tagged as ``bias measure`` tags them) and, on a HateCheck
  set, over-blocking (its non-hateful functional tests predicted hateful). A round is *worse* when one of these
  intervals lies wholly on the worse side of its tolerance (:class:`Tolerance`: ROC AUC -0.01, the rates +2
  points); the loop stops there.

The paired check is the one rule for *worse* (issue 56). The scores are cached by classifier and data content in
``OUT/audit/scores/`` (the audit's :class:`~toxiforge.audit.scores.ScoreCache`) and each classifier's sections kept
(:meth:`GuardCheck.sections`): a round's metrics (report.measure), its check and the closing audit (ship.py) read the
same scores, so no eval set is scored twice by one classifier.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text
from toxiforge.data.examples import Example, LabeledData, fold_text
from toxiforge.errors import InputError

GUARD_SET = "guard-slice"    # the slice's name in reports, and its set in the statement ledger
GUARD_SHARE = 0.15
GUARD_MIN_ROWS = 100
GUARD_FILE = "guard-slice.jsonl"            # OUT/: the slice's rows
TRAIN_FILE = "data-less-guard-slice.jsonl"  # OUT/: --data less the slice (what --external-training trains on)
AUDIT_DIR = "audit"
CHECK_FILE = "guard.json"    # round-N/: the round's paired check
START, REFERENCE = "C_0", "round-0-retrained"
# the audit's headline numbers the check reads (keys of toxiforge.audit.headlines.HEADLINES, which says what each
# is called and which way is better: the audit's gate decides with the same entries)
CHECKS: tuple[str, ...] = (
    "accuracy.roc_auc",
    "accuracy.fpr",
    # both error directions: a round that calls everything benign lowers FPR and raises FNR (seen on toxigen-dev:
    # a collapsed round, FPR -0.13, was not found worse while only FPR was checked)
    "accuracy.fnr",
    "lexical.fpr.noi",
    "hatecheck.over_blocking",
)
# the benign errors (what --calibrate holds at round 0's, calibration.py), read from the same rows
BENIGN_CHECKS: tuple[str, ...] = ("accuracy.fpr", "lexical.fpr.noi", "hatecheck.over_blocking")
# the error rates a round must be shown not to raise beyond the rate tolerance to be shipped (decide.py): the benign
# errors, so that a round that trades benign speech for recall never ships, and FNR, so that neither does one that
# trades recall for benign speech (a round held to round 0's benign calls on the cases naming a group pays in FNR)
SHIP_RATE_CHECKS: tuple[str, ...] = (*BENIGN_CHECKS, "accuracy.fnr")


@dataclass(frozen=True)
class Tolerance:
    """How far a round may move from round 0 before its paired interval can call it worse: ROC AUC down by
    ``auc``, an error rate (FPR, FNR, FPR_NOI, over-blocking) up by ``rate`` (a share: 0.02 is 2 points); and
    ``margin``, the ROC AUC gain a round must show, with its simultaneous lower end, to be shipped (decide.py; 1:
    never ship a round)."""

    auc: float = 0.01
    rate: float = 0.02
    margin: float = 0.0  # decide.DEFAULT_SHIP_MARGIN (decide imports this module)

    def __post_init__(self) -> None:
        for name, value in (("--auc-tolerance", self.auc), ("--fpr-tolerance", self.rate),
                            ("--ship-margin", self.margin)):
            if not 0.0 <= value <= 1.0:  # 1: no difference is beyond it (the check is off)
                raise InputError(f"{name} {value} is outside [0, 1]", hint=f"e.g. {name} 0.01")

    def worse(self, difference: Any, higher_is_better: bool) -> bool:
        """Whether a paired difference's interval lies wholly on the worse side of the tolerance."""
        return bool(difference.worse_beyond(self.auc if higher_is_better else self.rate, higher_is_better))


def guard_size(n: int, size: int | None = None) -> int:
    """Rows in the slice of ``n`` rows: ``size`` (``--guard-slice-size``) when given, at most half of them; else
    :data:`GUARD_SHARE`, at least :data:`GUARD_MIN_ROWS` where they are a quarter of ``n`` at most."""
    if size is not None:
        if not 2 <= size <= n // 2:
            raise InputError(f"--guard-slice-size {size} is outside [2, {n // 2}]: --data has {n} distinct texts "
                             "and at least half of them must stay to train on",
                             hint=f"use --guard-slice-size {n // 2} or fewer, or give --data with more rows")
        return size
    share = math.ceil(GUARD_SHARE * n)
    return GUARD_MIN_ROWS if share < GUARD_MIN_ROWS <= n // 4 else share


def split_guard(rows: Sequence[Example], seed: int, size: int | None = None
                ) -> tuple[list[Example], LabeledData, str | None]:
    """``rows`` less the guard slice (``size`` rows: :func:`guard_size`), the slice, and a note when it is small.
    Stratified by label (each label's share kept, at least one row of each), seeded; rows of one folded text go to
    the same side."""
    by_text: dict[str, list[Example]] = {}
    for e in rows:
        by_text.setdefault(fold_text(e.text), []).append(e)
    explicit = size is not None  # --guard-slice-size: no note on its size
    size = guard_size(len(by_text), size)
    labels = {k: round(sum(e.label for e in v) / len(v)) for k, v in by_text.items()}
    chosen: set[str] = set()
    rng = random.Random(seed)
    for label in (0, 1):
        texts = sorted(k for k, v in labels.items() if v == label)
        if len(texts) < 2:
            raise InputError(f"--data has {len(texts)} distinct text(s) of label {label}: too few to keep a guard "
                             "slice apart and still train", hint="give --data with more rows of both labels")
        rng.shuffle(texts)
        take = min(len(texts) - 1, max(1, round(size * len(texts) / len(labels))))
        chosen.update(texts[:take])
    guard = [by_text[k][0] for k in sorted(chosen)]
    note = None if len(guard) >= GUARD_MIN_ROWS or explicit else (
        f"--data has {len(by_text)} distinct texts, so the guard slice is {len(guard)} rows (about "
        f"{100 * GUARD_SHARE:.0f}%), not {GUARD_MIN_ROWS}: its intervals are wide and only large damage shows; add "
        "--eval sets or --data rows")
    train = [e for e in rows if fold_text(e.text) not in chosen]
    data = LabeledData(GUARD_SET, guard, "harden-guard-slice", f"{len(guard)} rows of --data, seed {seed}",
                       notes=["a stratified slice of --data that no round trained on"])
    return train, data, note


def keep_apart(out: Path, guard: LabeledData | None, note: str | None, train: Sequence[Example], config: Any,
               ledger: Any, say: Callable[[str], None]) -> list[str]:
    """With a guard slice: its texts join ``ledger`` (no generated statement equal to one is kept), the slice and
    ``train`` (--data less it) are written to ``out``, and the run says so. The data specs the rounds train on
    (none without a slice)."""
    if guard is None:
        return []
    from toxiforge.harden.data import write_examples

    ledger.train_on(guard.texts)  # rows of --data: a statement equal to one counts as one of the training data
    write_examples(out / TRAIN_FILE, train)
    write_examples(out / GUARD_FILE, guard.examples)
    alone = " (no --eval: the rounds are checked on it alone, even with --no-guard-slice)" if not config.eval else ""
    say(f"guard slice: {len(guard)} rows of --data kept apart, never trained on{alone}"
        + (f"; note: {note}" if note else ""))
    return [f"table:{out / TRAIN_FILE}"]


def slice_reference(config: Any, recipe_source: str) -> str | None:
    """None when the slice's reference is to be trained (C_0's recipe is its own log's), else why it is C_0."""
    from toxiforge.classifiers.registry import is_judge

    if config.classifier is None:
        return "C_0 was trained here, on --data less the slice"
    if is_judge(config.classifier):
        return "a judge is not trained on --data"
    if config.init == "continue":  # the slice is rows C_0 never trained on (mix.continue_slice)
        from toxiforge.harden.mix import CONTINUE_REFERENCE

        return CONTINUE_REFERENCE
    if not recipe_source.startswith("C_0's"):
        return ("C_0's recipe is unknown, so no classifier trained as C_0 was can be made; C_0's scores on the slice "
                "are flattered if it was trained on those rows, so a round may be found worse for losing what C_0 "
                "learnt of them")
    return None


def make_check(out: Path, config: Any, start: str | Path, reference: str | Path, note: str | None,
               log: Callable[[str], None] = lambda line: None, console: Any = None) -> GuardCheck:
    """The run's :class:`GuardCheck`: the audit's settings (harden's seed and threshold; cached scores reused);
    ``console``: where the scoring's progress lines go (None: a line with the rate after each set)."""
    from toxiforge.audit.run import AuditSettings

    settings = AuditSettings(seed=config.attack.seed, threshold=config.threshold, resume=True)
    return GuardCheck(out, Tolerance(config.auc_tolerance, config.fpr_tolerance, config.ship_margin), settings,
                      audit_loader(str(start), config.start_options(), config.device), str(start), str(reference),
                      note, log, console)


@dataclass
class GuardCheck:
    """Each round's paired check against round 0 (module docstring); ``results[r]`` is round r's ``guard.json``:
    ``{"sets": {set: {"reference", "auc": {arm: AUC}, "arms": {arm: {metric: {"difference", "worse"}}}}},
    "problems": [...], "specs": {arm: classifier}}``."""

    out: Path
    tolerance: Tolerance
    settings: Any                              # the audit's AuditSettings
    loader: Callable[..., Any]                 # loads a classifier spec (C_0 with its options)
    start: str = ""                            # C_0's spec
    reference: str = ""                        # the slice's reference (module docstring)
    reference_note: str | None = None
    log: Callable[[str], None] = lambda line: None
    console: Any = None                        # a rich Console for the scoring's progress (run_audit's progress)
    results: dict[int, dict[str, Any]] = field(default_factory=dict)
    _sections: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict, repr=False)

    def sections(self, name: str, spec: str | Path, sets: Sequence[LabeledData]) -> dict[str, dict[str, Any]]:
        """The audit's sections of classifier ``spec`` on each of ``sets`` (by set name): scored once per classifier
        and set (the scores cached in ``OUT/audit/scores/``, the sections kept here), so a round's metrics
        (report.measure) and its paired check read the same numbers. The resamples depend on the set only: sections
        of two classifiers on one set are paired."""
        from toxiforge.audit.run import ClassifierSpec, run_audit

        missing = [d for d in sets if (str(spec), d.name) not in self._sections]
        if missing:
            result = run_audit([ClassifierSpec(name, str(spec))], missing, self.out / AUDIT_DIR, self.settings,
                               loader=self.loader, log=self.log, progress=self.console)
            for d in missing:
                self._sections[(str(spec), d.name)] = result.pair(name, d.name).sections
        return {d.name: self._sections[(str(spec), d.name)] for d in sets}

    def check(self, r: int, arms: Mapping[str, str | Path], eval_sets: Sequence[LabeledData],
              guard: LabeledData | None) -> list[str]:
        """Round ``r``'s check (read from its ``guard.json`` when made); the problems found."""
        path = self.out / f"round-{r}" / CHECK_FILE
        if path.exists():
            self.results[r] = json.loads(path.read_text(encoding="utf-8"))
            return list(self.results[r]["problems"])
        from toxiforge.audit.run import ClassifierSpec

        others = [ClassifierSpec(f"round-{r}-{arm}", str(spec)) for arm, spec in arms.items()]
        pairs = [(ClassifierSpec(START, self.start), list(eval_sets))]
        if guard is not None:
            name = START if self.reference == self.start else REFERENCE
            pairs.append((ClassifierSpec(name, self.reference), [guard]))
        found: dict[str, Any] = {"sets": {}, "problems": [], "specs": {c.name: c.spec for c in others}}
        for reference, sets in pairs:
            if sets:
                self._compare(reference, others, sets, found)
        self.results[r] = found
        atomic_write_text(path, json.dumps(found, indent=2) + "\n")
        return list(found["problems"])

    def _compare(self, reference: Any, others: Sequence[Any], sets: list[LabeledData], found: dict[str, Any]) -> None:
        from toxiforge.audit.compare import headline
        from toxiforge.audit.glossary import name
        from toxiforge.audit.headlines import HEADLINES, section_of
        from toxiforge.intervals import paired_difference

        measured = {c.name: self.sections(c.name, c.spec, sets) for c in (reference, *others)}
        for data in sets:
            auc = {name: by_set[data.name]["accuracy"]["roc_auc"].value for name, by_set in measured.items()}
            entry: dict[str, Any] = {"reference": reference.name, "auc": auc, "arms": {}}
            base = measured[reference.name][data.name]
            for other in others:
                sections = measured[other.name][data.name]
                rows = entry["arms"][other.name] = {}
                for key in CHECKS:
                    (section, metric), higher = section_of(key), HEADLINES[key].higher_is_better
                    a, b = headline(base, section, metric), headline(sections, section, metric)
                    diff = paired_difference(a, b) if a is not None and b is not None else None
                    if diff is None or diff.value is None:
                        continue
                    worse = self.tolerance.worse(diff, higher)
                    rows[metric] = {"difference": diff.to_dict(), "worse": worse}
                    if worse:
                        limit = f"-{self.tolerance.auc:g}" if higher else f"+{self.tolerance.rate:g}"
                        found["problems"].append(
                            f"{other.name}'s {name(key)} ({key}) on {data.name} moved {diff.value:+.3f} "
                            f"[{diff.low:+.3f}, {diff.high:+.3f}] from {reference.name}'s (paired, {len(data)} "
                            f"rows), wholly beyond the tolerance {limit}")
            found["sets"][data.name] = entry

    def to_dict(self) -> dict[str, Any]:
        return {"tolerance": {"auc": self.tolerance.auc, "rate": self.tolerance.rate,
                              "ship_margin": self.tolerance.margin}, "start": self.start,
                "reference": self.reference, "reference_note": self.reference_note,
                "rounds": {str(r): v for r, v in sorted(self.results.items())}}


def audit_loader(start: str, options: Mapping[str, Any], device: str) -> Callable[..., Any]:
    """The audit's classifier loader: C_0 with its options (a judge's template, a head's toxic label), every other
    classifier (trained here, with toxiforge's labels) without."""

    def load(spec: str, **kwargs: Any) -> Any:
        from toxiforge.classifiers import load_classifier

        return load_classifier(spec, device=device, **{**kwargs, **(options if spec == start else {})})

    return load
