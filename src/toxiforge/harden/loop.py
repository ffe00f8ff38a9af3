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

Everything is the existing pieces called as the CLI calls them (:class:`~toxiforge.pipeline.Generator`,
:func:`~toxiforge.training.trainer.train_classifier`, the audit's :func:`~toxiforge.audit.run.run_audit` for the eval
sets' numbers: scored once per classifier, for the metrics and the paired check alike). Layout of ``DIR`` (each run a
normal toxiforge run)::

    harden.json                      the settings (a resumed run must match them; --rounds may grow)
    data-apart-from-eval.jsonl       --external-training: --data less its --eval rows, when it has some
    guard-slice.jsonl  data-less-guard-slice.jsonl   the guard slice of --data, and the rest (guardset.py)
    round-0/reference/model/         C_0's recipe on --data less the slice: the rounds' reference on the slice
    round-0/model/                   C_0 when trained from --data
    round-0/attack/  metrics.json    the attack on C_0, its metrics
    round-0/transfer/                the fixed transfer attack on C_0 (transfer=True)
    round-N/SET.prompts/             the prompts a set (attack, transfer, control/topk) was drawn, as prompt files
    round-N/.../RUN.validation.json  the validator's scores of RUN's statements (validate_with)
    round-N/.../RUN.people.json      people's labels of RUN's statements (validate_with="people")
    people/STEP.json  STEP.labels.json   each study: its statements; the labels' counts and agreement
    annotation.db                    the studies (validate_with="people", unless annotation_db is given)
    round-N/{alice,control}/added.jsonl   the statements that joined the training data this round
    round-N/control/topk/            the top-k run the control statements come from
    round-N/{alice,control}/model/   C_N of each arm
    round-N/{alice,control}/attack/  the new attack on it
    round-N/metrics.json             {"alice": ..., "control": ...}
    round-N/guard.json               the paired check of round N against round 0 (guardset.py)
    audit/                           the closing audit, toxiforge audit's report (ship.py); audit/scores/ its cache
    round-N/alice/train-FAMILY/      --attacks FAMILY (not alice): its attack on C_{N-1} (families.py)
    round-0/attacks/FAMILY/  round-N/{alice,control}/attacks/FAMILY/   each family's attack on the held-out set
    report.md  report.json  report.png

Every step is skipped when its output is complete, so ``resume=True`` continues at the first unfinished step.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text
from toxiforge.attacks.validation import Validation, run_rows
from toxiforge.classifiers.registry import is_judge
from toxiforge.data.examples import Example, LabeledData
from toxiforge.errors import InputError
from toxiforge.harden import families as fam
from toxiforge.harden.config import ADDED_FILE, METRICS_FILE, HardenConfig
from toxiforge.harden.data import Statements, read_examples, select_alice, select_control, write_examples
from toxiforge.harden.decide import check_slice
from toxiforge.harden.families import ALICE, HELD_OUT_DIR
from toxiforge.harden.guard import (
    SETTINGS_FILE,
    HardenStopped,
    TrainingPending,
    check_out_dir,
    check_sequence_classifier,
    train_command,
)
from toxiforge.harden.guardset import START, GuardCheck, keep_apart, make_check, slice_reference, split_guard
from toxiforge.harden.inputs import data_specs, load_inputs
from toxiforge.harden.people import People, people_report, read_labels
from toxiforge.harden.recipe import Recipe, round_recipe, train_round
from toxiforge.harden.report import ARMS, flip_rates, measure, write_harden_report
from toxiforge.harden.sets import EVAL_SET, PROMPTS_SUFFIX, DrawnSet, StatementLedger, draw_sets, run_sets
from toxiforge.harden.ship import closing
from toxiforge.pipeline.generator import Generator
from toxiforge.records import METHOD_ALICE, METHOD_TOPK, run_complete
from toxiforge.training.trainer import LOG_FILE

# --- the loop --------------------------------------------------------------------------------------------------


@dataclass
class Harden:
    """One harden run in ``out`` (module docstring); :meth:`run` does (or resumes) every step."""

    config: HardenConfig
    out: Path
    generator: Generator
    progress: bool = False
    say: Callable[[str], None] = lambda message: None
    steps: list[str] = field(default_factory=list)  # the steps this call did (skipped ones are not listed)
    _inputs: tuple[list[Example], list[LabeledData]] | None = field(default=None, repr=False)
    # external_training: stop (TrainingPending) where a model is to be trained, with the `toxiforge train` command
    # lines that train it (e.g. under torchrun); --resume then goes on with the models they wrote
    external_training: bool = False
    pending: list[str] = field(default_factory=list)
    # keep_going: a round the paired check finds worse than round 0 is warned about instead of stopping the loop
    keep_going: bool = False
    problems: dict[int, list[str]] = field(default_factory=dict)  # round -> what the paired check found
    recipe: Recipe | None = None  # how every round trains (recipe.round_recipe), set by prepare
    _validation: Validation = field(default_factory=lambda: Validation(None), repr=False)
    _transfer: Statements | None = field(default=None, repr=False)
    _prompts: dict[str, DrawnSet] = field(default_factory=dict, repr=False)  # set name -> its drawn prompts
    _ledger: StatementLedger = field(default_factory=StatementLedger, repr=False)
    _sets: dict[Path, Statements] = field(default_factory=dict, repr=False)
    leaks: list[dict[str, Any]] = field(default_factory=list)  # per set: prompts re-drawn, statements left out
    # validate_with="people": poll a study every this many seconds until it is labelled, instead of stopping
    wait: float | None = None
    accept_partial: bool = False  # validate_with="people": go on with the answers in (people.py)
    people: People | None = None  # set by prepare with validate_with="people"
    _held_out: list[Any] = field(default_factory=list, repr=False)  # the held-out attack set's sources (families.py)
    eval_overlap: dict[str, Any] = field(default_factory=dict)  # --data rows that are --eval rows (inputs.py)
    # issue 48: the guard slice of --data (guardset.py; None with --eval and guard_slice=False), the paired check
    guard_slice: LabeledData | None = None
    guard_note: str | None = None
    guard: GuardCheck | None = None
    _data_specs: list[str] = field(default_factory=list, repr=False)  # what the rounds train on, as data specs

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
        if fam.measured(config.attacks, config.eval_attacks):
            self._held_out = fam.held_out_sources(eval_sets, inputs.data, config.eval_attack_n, config.attack.seed)
            if not self._held_out and config.eval_attacks:
                raise InputError(f"--eval {', '.join(config.eval)} has no toxic row outside --data for "
                                 "--eval-attacks to attack", hint="add an --eval set with toxic rows")
        if config.keeps_guard_slice:  # no round trains on it
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
        self.guard = guard = self._guard(start, base)
        r0 = self.out / "round-0"
        self._attack(r0 / "attack", start, "round-0", 0, options)
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
        fed_by = before / "attack" if r == 1 else before / "alice" / "attack"
        topk = folder / "control" / "topk"
        self._generate(topk, f"round-{r}/control/topk", self.config.topk, None, None,
                       f"round {r}: top-k control statements")
        self._admit(f"round-{r}/control/topk", topk, method=METHOD_TOPK)
        # people label what the round selects from (and the previous round's control attack, measured only)
        self._ask_people(f"round-{r}", f"round {r}", [fed_by, *([before / "control" / "attack"] if r > 1 else []),
                                                     topk])
        trained = self._train_attacks(r, fed_by, previous[ALICE], base)
        alice_new = self._added(folder / "alice" / ADDED_FILE, lambda: [
            e for s in ([self._sets[fed_by]] if ALICE in self.config.attacks else []) + trained
            for e in select_alice(s, self.config.add)])
        control_new = self._added(folder / "control" / ADDED_FILE, lambda: select_control(
            self._sets[topk], alice_new, self.config.attack.seed + r))
        models = {}
        for arm, new in (("alice", alice_new), ("control", control_new)):
            added[arm] += new
            models[arm] = self._train(folder / arm / "model", base + added[arm], previous[arm], f"round {r} {arm}",
                                      [f"table:{self.out / f'round-{i}' / arm / ADDED_FILE}" for i in range(1, r + 1)])
        self._stop_for_training()
        for arm in ARMS:
            self._attack(folder / arm / "attack", models[arm], f"round-{r}-{arm}", r)
            previous[arm] = models[arm]
        # the arms' attacks share their prompts, and neither arm trains on the other's: each is checked against the
        # earlier sets only, then both are admitted
        self._admit(f"round-{r}/attack", *(folder / arm / "attack" for arm in ARMS))
        path = folder / METRICS_FILE

        def compute() -> dict[str, Any]:
            out, guard = {}, self.guard
            assert guard is not None
            for arm in ARMS:
                name = f"round-{r}-{arm}"
                out[arm] = measure(previous[arm], name, guard.sections(name, previous[arm], eval_sets),
                                   self._sets[folder / arm / "attack"], self.config.device, self.config.threshold,
                                   transfer=self._transfer)
                new = alice_new if arm == "alice" else control_new
                out[arm].update(added_this_round=len(new), added_total=len(added[arm]),
                                train_rows=len(base) + len(added[arm]), added_by_method=fam.count_methods(new),
                                attacks=self._families(folder / arm / HELD_OUT_DIR, previous[arm],
                                                       f"round-{r}-{arm}", base + added[arm]))
            out["control"]["control_shortfall"] = len(alice_new) - len(control_new)
            return out

        return self._metrics(path, compute)

    # each step: skipped when its output is complete, recorded in self.steps when done

    def _start_classifier(self, base: list[Example]) -> str | Path:
        if is_judge(self.config.classifier):
            return self.config.classifier
        if self.config.classifier is not None:
            return Path(self.config.classifier).expanduser()
        model = self._train(self.out / "round-0" / "model", base, None, "round 0: the starting classifier", [])
        self._stop_for_training()
        return model

    def _guard(self, start: str | Path, base: list[Example]) -> GuardCheck:
        """The paired check (guardset.py), with the guard slice's reference: C_0's recipe retrained on ``base``
        (--data less the slice) where C_0's recipe is its log's, else C_0 itself; the slice sized (decide.py)."""
        assert self.recipe is not None
        note, reference = slice_reference(self.config, self.recipe.source) if self.guard_slice else None, start
        if self.guard_slice is not None and note is None:
            reference = self._train(self.out / "round-0" / "reference" / "model", base, None,
                                    "round 0: C_0's recipe on --data less the guard slice (the slice's reference)", [])
            self._stop_for_training()
        return check_slice(make_check(self.out, self.config, start, reference, note, self.say), self.guard_slice)

    def _train(self, folder: Path, rows: list[Example], previous: str | Path | None, what: str,
               additions: list[str]) -> Path:
        if (folder / LOG_FILE).exists():
            return folder
        assert self.recipe is not None and self._inputs is not None
        start = str(previous) if self.config.init == "continue" and previous is not None else None
        config = replace(self.recipe.train, base_model=start or self.recipe.train.base_model)
        data = self._data_specs or data_specs(self.config.data, self._inputs[0], self.eval_overlap, self.out)
        command = train_command(config, [*data, *additions], folder, self.recipe.objective)
        if self.external_training:
            self.pending.append(command)
            return folder
        self.say(f"{what}: training {config.base_model} on {len(rows)} rows ({self.recipe.objective.describe()})")
        train_round(rows, folder, config, self.recipe.objective, [*data, *additions], self.progress, command)
        self.steps.append(f"train {folder.relative_to(self.out)}")
        return folder

    def _stop_for_training(self) -> None:
        if self.pending:
            raise TrainingPending(self.pending)

    def _attack(self, folder: Path, classifier: str | Path, name: str, r: int,
                options: dict[str, Any] | None = None) -> None:
        self._generate(folder, f"round-{r}/attack", self.config.alice, classifier, name, f"{name}: ALICE attack",
                       options)

    def _generate(self, folder: Path, prompts: str, decoding: Any, classifier: str | Path | None,
                  name: str | None, what: str, options: dict[str, Any] | None = None) -> None:
        """Generate the set named ``prompts`` (its drawn prompts, written to ``round-N/SET.prompts/``)."""
        drawn = self._prompts[prompts]
        plan = drawn.write(self.out / (prompts + PROMPTS_SUFFIX))
        if run_complete(folder):
            return
        self.say(f"{what}: {plan.total} statements into {folder.relative_to(self.out)} ({drawn.redrawn} prompt(s) "
                 "re-drawn: used by an earlier set or twice)")
        self.generator.run(plan, decoding, folder, classifier=classifier, classifier_name=name,
                           classifier_options=options)
        self.steps.append(f"generate {folder.relative_to(self.out)}")

    def _admit(self, prompts: str, *run_dirs: Path, method: str = METHOD_ALICE) -> list[Statements]:
        """The runs' statements (with the validator's scores), less those of the training data or an earlier set
        or twice in one (sets.py); then they count as seen. Recorded once per run in :attr:`leaks`."""
        found = []
        for run_dir in run_dirs:
            texts = [e.text for e, _ in run_rows(run_dir, method)]
            keep, counts = self._ledger.check(texts)
            name = str(run_dir.relative_to(self.out))
            drawn = self._prompts.get(prompts)  # an attack family's run has no prompts of its own
            self.leaks.append({"set": name, **(drawn.counts() if drawn else {"prompts": 0, "prompts_redrawn": 0}),
                               **counts})
            scores = self._validation.scores(run_dir, partial(self._validated, name))
            if self.people is not None:
                scores = read_labels(run_dir)  # None until people labelled the run (_ask_people)
            self._sets[run_dir] = Statements(run_dir, scores, keep, method)
            found.append((run_dir, texts, keep))
        for run_dir, texts, keep in found:
            self._ledger.admit(texts, keep, str(run_dir.relative_to(self.out)))
        return [self._sets[d] for d in run_dirs]

    def _train_attacks(self, r: int, fed_by: Path, classifier: str | Path, base: list[Example]) -> list[Statements]:
        """Round r's attacks by the trained families other than ALICE (families.py) on C_{r-1} of the ALICE arm,
        on toxic rows of ``base`` (--data), admitted as the generated sets are."""
        families = [f for f in self.config.attacks if f != ALICE]
        sources = fam.train_sources(base, self._sets[fed_by], self.config.attack.seed + r)
        options = self.config.start_options() if r == 1 else None
        runs = fam.run_families(self.out / f"round-{r}" / ALICE, families, sources, classifier,
                                f"round-{r - 1}-{ALICE}", self.config.device, options, self.progress, fam.TRAIN_PREFIX)
        return [self._admit(f"round-{r}/{run_dir.name}", run_dir, method=fam.method_of(run_dir))[0]
                for run_dir in runs.values()]

    def _families(self, folder: Path, classifier: str | Path, name: str, trained: list[Example],
                  options: dict[str, Any] | None = None) -> dict[str, Any]:
        """Every measured family's flip rate on the held-out set against ``classifier`` (families.py)."""
        config = self.config
        runs = fam.run_families(folder, fam.measured(config.attacks, config.eval_attacks), self._held_out, classifier,
                                name, config.device, options, self.progress)
        out = {}
        for family, run_dir in runs.items():
            where = str(run_dir.relative_to(self.out))
            statements = fam.held_out_statements(run_dir, trained, self._validation.scores(
                run_dir, partial(self._validated, where)))
            out[family] = {"held_out": family in config.eval_attacks, "sources": len(self._held_out),
                           "left_out": sum(not k for k in statements.keep or ()), "flip_rate": flip_rates(statements)}
            self.steps.append(f"attack {where}")
        return out

    def _ask_people(self, step: str, what: str, run_dirs: list[Path]) -> None:
        """With people validating: their labels of the runs' statements (people.py; stops with
        :class:`AnnotationPending` until they are in)."""
        if self.people is None:
            return
        for run_dir, labels in self.people.collect(step, [self._sets[d] for d in run_dirs], what).items():
            if self._sets[run_dir].validated is None:
                self.steps.append(f"people {run_dir.relative_to(self.out)}")
            self._sets[run_dir] = replace(self._sets[run_dir], validated=labels)

    def _validated(self, name: str, cache: Path) -> None:
        self.steps.append(f"validate {name}")

    def _added(self, path: Path, select: Callable[[], list[Example]]) -> list[Example]:
        if path.exists():
            return read_examples(path)
        rows = select()
        write_examples(path, rows)
        self.steps.append(f"select {path.relative_to(self.out)}")
        return rows

    def _metrics(self, path: Path, compute: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        if path.exists():
            return json.loads(path.read_text(encoding="utf-8"))
        metrics = compute()
        atomic_write_text(path, json.dumps(metrics, indent=2, default=str) + "\n")
        self.steps.append(f"measure {path.relative_to(self.out)}")
        return metrics

