"""``toxiforge harden``: attack a classifier with ALICE, retrain on what fooled it, repeat (issues 24, 34).

Round 0 measures the starting classifier C_0 (``-c DIR``, ``-c judge:MODEL``, or one trained on ``--data``).
Round r >= 1, per arm:

* **alice**: the statements of the ALICE attack on C_{r-1} that flipped its label (``add="all"``: every
  statement) join the training data with their prompt label, as the paper trains on ALICE data;
* **control**: as many top-k statements (same count per prompt label) join instead, so a gain is ALICE's and not
  just more data (the paper's Table 4 comparison);

then C_r is trained on the base data plus every addition so far, with C_0's recipe (recipe.py), from the base
model (``init="base"``) or continued from C_{r-1} (``init="continue"``), and measured: ROC AUC on each eval set
(bootstrap interval), FPR_NOI on its benign texts that name a group, and the flip rate of a **new** ALICE attack on
C_r (both arms' attacks of a round share their prompts). A round that the paired check on the eval sets and the
guard slice of --data (never trained on) finds worse than round 0 (guardset.py: the one rule for worse) stops the
loop (``keep_going``: a warning); the report names the classifier to ship and the closing audit compares it with C_0
(ship.py). With ``transfer``, one more attack on C_0 is scored by every C_r. With ``validate_with``, a classifier
other than the attacked one validates statements (data.py), or (``validate_with="people"``) the run's annotators do,
in a study per round (people.py).
Prompts and statements never repeat across the run's generated sets (sets.py), and no ``--eval`` text is trained on
(inputs.py).

The steps (generate, admit, select, train, measure), each skipped when its output is complete, and the run
folder's layout: :mod:`toxiforge.harden.steps`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text
from toxiforge.attacks.validation import Validation
from toxiforge.classifiers.registry import is_judge
from toxiforge.data.examples import Example, LabeledData
from toxiforge.errors import InputError
from toxiforge.harden import families as fam
from toxiforge.harden import mix
from toxiforge.harden.arms import VERSUS, paired_arms
from toxiforge.harden.calibration import calibrate
from toxiforge.harden.config import ADDED_FILE, METRICS_FILE
from toxiforge.harden.data import ALICE_ARM, ARMS, CONTROL_ARM, Statements, select_added, select_control
from toxiforge.harden.decide import check_decision_sets
from toxiforge.harden.families import ALICE, HELD_OUT_DIR
from toxiforge.harden.guard import (
    SETTINGS_FILE,
    HardenStopped,
    check_measured_extension,
    check_out_dir,
    check_sequence_classifier,
)
from toxiforge.harden.guardset import START, GuardCheck, keep_apart, make_check, slice_reference, split_guard
from toxiforge.harden.inputs import load_inputs
from toxiforge.harden.people import People, people_report
from toxiforge.harden.recipe import round_recipe
from toxiforge.harden.report import measure, write_harden_report
from toxiforge.harden.sets import EVAL_SET, MEASURE, StatementLedger, draw_sets, measure_sets, run_sets
from toxiforge.harden.ship import closing
from toxiforge.harden.steps import RunSteps
from toxiforge.records import METHOD_TOPK


@dataclass
class Harden(RunSteps):
    """One harden run in ``out`` (module docstring); :meth:`run` does (or resumes) every round, with the steps of
    :class:`~toxiforge.harden.steps.RunSteps`."""

    # keep_going: a round the paired check finds worse than round 0 is warned about instead of stopping the loop
    keep_going: bool = False
    problems: dict[int, list[str]] = field(default_factory=dict)  # round -> what the paired check found
    # validate_with="people": poll a study every this many seconds until it is labelled, instead of stopping
    wait: float | None = None
    accept_partial: bool = False  # validate_with="people": go on with the answers in (people.py)
    # issue 48: the guard slice of --data (guardset.py; None with --eval and guard_slice=False), the paired check
    guard_slice: LabeledData | None = None
    guard_note: str | None = None
    guard: GuardCheck | None = None
    _transfer: Statements | None = field(default=None, repr=False)

    def prepare(self, resume: bool) -> tuple[list[Example], list[LabeledData]]:
        """Every check that can fail on bad input, before any work: -o, -c, the recipe, data, eval sets, prompts
        (each set's drawn now, so a run that would run out of unused prompts is refused here)."""
        self.out = Path(self.out)
        check_out_dir(self.out, self.config.fingerprint(), resume)
        if self.config.classifier is not None and not is_judge(self.config.classifier):
            check_sequence_classifier(self.config.classifier)  # a judge is only attacked and measured
        self.recipe = round_recipe(self.config.classifier, self.config.train, self.config.train_options)
        config = self.config
        inputs = load_inputs(config.data, config.eval, config.label_rule, config.max_eval_overlap)
        base, eval_sets, self.eval_overlap = inputs.train, inputs.eval_sets, inputs.overlap  # base: no eval row
        self._validation = Validation(None if config.people else config.validate_with, config.device)
        self._validation.load()  # a bad --validate-with fails here
        if self.accept_partial and not config.people:
            raise InputError("--accept-partial applies to --validate-with people", hint="drop --accept-partial")
        if config.people:
            self.people = People(config.annotation_db or str(self.out / "annotation.db"), self.out,
                                 config.annotation_form, config.min_annotators, config.attack.seed, self.wait,
                                 self.accept_partial, say=self.say)
        # every set's prompts, drawn now: a bad --groups/-d/--prompts, or a run that would run out, fails here
        self._prompts = draw_sets(run_sets(self.config.attack, self.config.rounds, self.config.transfer))
        self._prompts |= measure_sets(self._prompts, config.rounds, config.measure_per_cell)
        if resume and config.measure_per_cell is not None:
            check_measured_extension(self.out, config.rounds, config.measure_per_cell)
        if fam.measured(config.attacks, config.eval_attacks):
            self._held_out = fam.held_out_sources(eval_sets, inputs.data, config.eval_attack_n, config.attack.seed)
            if not self._held_out and config.eval_attacks:
                raise InputError(f"--eval {', '.join(config.eval)} has no toxic row outside --data for "
                                 "--eval-attacks to attack", hint="add an --eval set with toxic rows")
        mix.check_objective(config.added_weight, self.recipe.objective)
        if mix.continues_from_start(config):  # the slice is rows C_0 never trained on, and no round does (mix.py)
            base, self.guard_slice = mix.continue_slice(config, inputs.data, base, eval_sets)
        elif config.keeps_guard_slice:  # no round trains on it
            base, self.guard_slice, self.guard_note = split_guard(base, config.attack.seed, config.guard_slice_size)
        self._inputs = base, eval_sets
        return self._inputs

    def run(self, resume: bool = False) -> dict[str, Any]:
        base, eval_sets = self._inputs or self.prepare(resume)
        assert self.recipe is not None
        self._ledger, self._sets, self.leaks = StatementLedger(), {}, []
        self._ledger.train_on(e.text for e in base)  # statements of the training data are left out of every set
        self._ledger.train_on((s.text for s in self._held_out), fam.HELD_OUT_SET)  # and the held-out attack set's
        self._ledger.train_on((e.text for d in eval_sets for e in d.examples), EVAL_SET)  # and the eval sets'
        if self.recipe.note:
            self.say(f"note: {self.recipe.note}")
        self.out.mkdir(parents=True, exist_ok=True)
        self._data_specs = keep_apart(self.out, self.guard_slice, self.guard_note, base, self.config, self._ledger,
                                      self.say)
        atomic_write_text(self.out / SETTINGS_FILE, json.dumps(
            {"settings": self.config.fingerprint(), "rounds": self.config.rounds}, indent=2) + "\n")
        start, options = self._start_classifier(base), self.config.start_options()  # options: C_0's only
        self.guard = guard = self._guard(start, base, eval_sets)
        r0 = self.out / "round-0"
        self._attack(r0 / "attack", start, "round-0", "round-0/attack", options)
        self._admit("round-0/attack", r0 / "attack")
        transfer = None
        if self.config.transfer:  # one more attack on C_0, never trained on: every round's classifier scores it
            self._generate(r0 / "transfer", "round-0/transfer", self.config.alice, start, "round-0",
                           "round-0: the fixed transfer attack", options)
            transfer = self._admit("round-0/transfer", r0 / "transfer")[0]
        self._transfer = transfer
        first = self._metrics(r0 / METRICS_FILE, lambda: dict.fromkeys(ARMS, {**measure(  # both arms start at C_0
            start, "round-0", guard.sections(START, start, eval_sets), self._sets[r0 / "attack"],
            self.config.device, self.config.threshold, options, transfer), "train_rows": len(base),
            "attacks": self._families(r0 / HELD_OUT_DIR, start, "round-0", base, options)}))
        rounds = [first]
        previous = {arm: start for arm in ARMS}
        added: dict[str, list[Example]] = {arm: [] for arm in ARMS}
        for r in range(1, self.config.rounds + 1):
            rounds.append(self._round(r, base, eval_sets, previous, added))
            self._check(r, rounds, eval_sets)
        last = self.config.rounds
        self._ask_people(f"after-round-{last}", f"after round {last}: its attacks",
                         [self.out / f"round-{last}" / arm / "attack" for arm in ARMS])
        return self._report(rounds)

    def _report(self, rounds: list[dict[str, Any]]) -> dict[str, Any]:
        assert self.recipe is not None
        extra: dict[str, Any] = {"recipe": self.recipe.to_dict(), "sets": self.leaks, "eval_overlap": self.eval_overlap,
                                 "problems": {str(r): p for r, p in sorted(self.problems.items())}}
        if self.guard is not None and self._inputs is not None:  # the classifier to ship, the closing audit
            extra |= closing(self.guard, len(rounds) - 1, ARMS, self._inputs[1], self.guard_slice, self.guard_note,
                             self.say)
        if self.people is not None:
            extra["people"] = people_report(self.out, len(rounds) - 1, self._sets)
        report = write_harden_report(self.out, self.config, rounds, extra)
        self.say(f"wrote {self.out / 'report.md'}, report.json and report.png")
        return report

    def _check(self, r: int, rounds: list[dict[str, Any]], eval_sets: list[LabeledData]) -> None:
        """Stop (or, with keep_going, warn) when the paired check finds round r worse than round 0 (guardset.py:
        the one rule for worse)."""
        import warnings

        from toxiforge.errors import ToxiforgeWarning

        assert self.recipe is not None and self.guard is not None
        problems = self.guard.check(r, {arm: self.out / f"round-{r}" / arm / "model" for arm in ARMS}, eval_sets,
                                    self.guard_slice)
        if not problems:
            return
        self.problems[r] = problems
        stop = HardenStopped(r, problems, self.recipe)
        if not self.keep_going:
            self._report(rounds)
            raise stop
        warnings.warn(ToxiforgeWarning(f"{stop} (going on: --keep-going)"), stacklevel=2)

    def _round(self, r: int, base: list[Example], eval_sets: list[LabeledData], previous: dict[str, str | Path],
               added: dict[str, list[Example]]) -> dict[str, Any]:
        folder = self.out / f"round-{r}"
        before = self.out / f"round-{r - 1}"
        fed_by = before / "attack" if r == 1 else before / ALICE_ARM / "attack"
        topk = folder / CONTROL_ARM / "topk"
        self._generate(topk, f"round-{r}/control/topk", self.config.topk, None, None,
                       f"round {r}: top-k control statements")
        self._admit(f"round-{r}/control/topk", topk, method=METHOD_TOPK)
        # people label what the round selects from (and the previous round's control attack, measured only)
        self._ask_people(f"round-{r}", f"round {r}", [fed_by, *([before / CONTROL_ARM / "attack"] if r > 1 else []),
                                                     topk])
        trained = self._train_attacks(r, fed_by, previous[ALICE], base)
        sources = ([self._sets[fed_by]] if ALICE in self.config.attacks else []) + trained
        alice_new = self._added(folder / ALICE_ARM / ADDED_FILE, lambda: select_added(
            sources, self.config.add, self.config.attack.seed + r))
        control_new = self._added(folder / CONTROL_ARM / ADDED_FILE, lambda: select_control(
            self._sets[topk], alice_new, self.config.attack.seed + r, by_group=self.config.add == "balanced"))
        models = {}
        for arm, new in ((ALICE_ARM, alice_new), (CONTROL_ARM, control_new)):
            added[arm] += new
            models[arm] = self._train(folder / arm / "model", base + added[arm], previous[arm], f"round {r} {arm}",
                                      [f"table:{self.out / f'round-{i}' / arm / ADDED_FILE}" for i in range(1, r + 1)])
        self._stop_for_training()
        calibrated: dict[str, Any] = {}
        if self.config.calibrate:  # round 0's over-blocking on the decision data (calibration.py)
            assert self.guard is not None
            calibrated = {arm: calibrate(Path(models[arm]), self.guard, eval_sets, self.guard_slice,
                                         self.config.threshold, self.config.device, self.say) for arm in ARMS}
        prompts = [self._attack_prompts(r, arm) for arm in ARMS]
        for arm, drawn in zip(ARMS, prompts, strict=True):
            self._attack(folder / arm / "attack", models[arm], f"round-{r}-{arm}", drawn)
            previous[arm] = models[arm]
        # the arms' attacks share their prompts, and neither arm trains on the other's: each is checked against the
        # earlier sets only, then both are admitted
        self._admit(prompts, *(folder / arm / "attack" for arm in ARMS))
        path = folder / METRICS_FILE

        def compute() -> dict[str, Any]:
            out, guard = {}, self.guard
            assert guard is not None
            for arm in ARMS:
                name = f"round-{r}-{arm}"
                out[arm] = measure(previous[arm], name, guard.sections(name, previous[arm], eval_sets),
                                   self._sets[folder / arm / "attack"], self.config.device, self.config.threshold,
                                   transfer=self._transfer)
                new = alice_new if arm == ALICE_ARM else control_new
                out[arm].update({"calibration": calibrated[arm]} if arm in calibrated else {})
                out[arm].update(added_this_round=len(new), added_total=len(added[arm]),
                                train_rows=len(base) + len(added[arm]), added_by_method=fam.count_methods(new),
                                attacks=self._families(folder / arm / HELD_OUT_DIR, previous[arm],
                                                       f"round-{r}-{arm}", base + added[arm]))
            out[CONTROL_ARM]["control_shortfall"] = len(alice_new) - len(control_new)
            versus = paired_arms(self._sets[folder / ALICE_ARM / "attack"], self._sets[folder / CONTROL_ARM / "attack"],
                                 self.config.attack.seed + r)
            out[ALICE_ARM] |= {} if versus is None else {VERSUS: versus}
            return out

        return self._metrics(path, compute)

    def _attack_prompts(self, r: int, arm: str) -> str:
        """Round r's attack prompts on ``arm``: the round's; with --measure-n the first M of them where the attack
        only measures (the control arm's, and the ALICE arm's in the last round, which feeds no round)."""
        measure = f"round-{r}/{MEASURE}"
        only_measures = arm != ALICE or r == self.config.rounds
        return measure if only_measures and measure in self._prompts else f"round-{r}/attack"

    def _start_classifier(self, base: list[Example]) -> str | Path:
        if is_judge(self.config.classifier):
            return self.config.classifier
        if self.config.classifier is not None:
            return Path(self.config.classifier).expanduser()
        model = self._train(self.out / "round-0" / "model", base, None, "round 0: the starting classifier", [])
        self._stop_for_training()
        return model

    def _guard(self, start: str | Path, base: list[Example], eval_sets: list[LabeledData]) -> GuardCheck:
        """The paired check (guardset.py), with the guard slice's reference: C_0's recipe retrained on ``base``
        (--data less the slice) where C_0's recipe is its log's, else C_0 itself; the slice sized (decide.py)."""
        assert self.recipe is not None
        note, reference = slice_reference(self.config, self.recipe.source) if self.guard_slice else None, start
        if self.guard_slice is not None and note is None:
            reference = self._train(self.out / "round-0" / "reference" / "model", base, None,
                                    "round 0: C_0's recipe on --data less the guard slice (the slice's reference)", [])
            self._stop_for_training()
        from rich import get_console

        console = get_console() if self.progress else None  # the scoring's progress lines
        return check_decision_sets(make_check(self.out, self.config, start, reference, note, self.say, console),
                                   self.guard_slice, eval_sets)
