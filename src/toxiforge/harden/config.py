"""``toxiforge harden``'s settings: what every attack generates (:class:`AttackPlan`) and the loop's options
(:class:`HardenConfig`), checked when built; the loop itself is :mod:`toxiforge.harden.loop`."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

from toxiforge.attacks.validation import Validation, check_keeper
from toxiforge.classifiers.fingerprint import fingerprint
from toxiforge.classifiers.registry import check_classifier_options, is_judge, option_flags, scoring_options
from toxiforge.errors import InputError, check_choice
from toxiforge.harden import mix
from toxiforge.harden.decide import DEFAULT_SHIP_MARGIN
from toxiforge.harden.families import DEFAULT_ATTACKS, DEFAULT_EVAL_ATTACK_N, check_families
from toxiforge.harden.guardset import Tolerance
from toxiforge.harden.inputs import DEFAULT_MAX_EVAL_OVERLAP, check_max_overlap
from toxiforge.harden.people import DEFAULT_FORM, PEOPLE, check_people
from toxiforge.harden.recipe import OBJECTIVE_FIELDS, RECIPE_FIELDS
from toxiforge.pipeline.plan import GenerationPlan
from toxiforge.records import TOXIC_THRESHOLD
from toxiforge.training.trainer import TrainConfig

METRICS_FILE, ADDED_FILE = "metrics.json", "added.jsonl"
ADD_CHOICES: tuple[str, ...] = ("flipped", "all", "balanced")
INIT_CHOICES: tuple[str, ...] = ("base", "continue")


@dataclass(frozen=True)
class AttackPlan:
    """What every attack (and control run) generates: ``generate``'s --groups/--labels/-n/-d/--prompts/-k."""

    groups: tuple[str, ...]
    labels: tuple[str, ...] = ("toxic", "benign")
    per_cell: int = 10
    source: str | None = None
    prompt_source: str = "demonstrations"
    k: int = 5
    seed: int = 0

    def plan(self, offset: int, scale: int = 1) -> GenerationPlan:
        """The plan with seed ``seed + offset`` (new prompts and samples for every round), ``scale`` × the size."""
        return GenerationPlan.grid(self.groups, self.labels, self.per_cell * scale, source=self.source,
                                   prompt_source=self.prompt_source, k=self.k, seed=self.seed + offset)


@dataclass(frozen=True)
class HardenConfig:
    """The loop's settings (:mod:`toxiforge.harden.loop`). ``alice`` is an :class:`~toxiforge.decoding.AliceConfig`;
    ``topk`` the control arm's :class:`~toxiforge.decoding.TopKConfig`. ``classifier_options`` are
    :func:`~toxiforge.classifiers.load_classifier`'s for ``classifier`` (a judge's ``template`` and ``policy``, a
    head's ``toxic_label``): C_0 only, as the classifiers trained here have toxiforge's labels. ``train`` gives the
    seed and device and the recipe where C_0's is unknown; ``train_options`` are the training settings given
    explicitly (TrainConfig field names, and recipe.py's ``debias``/``bias_only``/``entropy_weight``), which must agree
    with C_0's recipe and fill what its log lacks (recipe.py)."""

    rounds: int
    attack: AttackPlan
    alice: Any
    topk: Any
    train: TrainConfig = field(default_factory=TrainConfig)
    data: tuple[str, ...] = ()
    eval: tuple[str, ...] = ()
    classifier: str | None = None
    add: str = "flipped"
    init: str = "base"
    label_rule: str = "sum"
    threshold: float = TOXIC_THRESHOLD
    device: str = "auto"
    classifier_options: dict[str, Any] = field(default_factory=dict)
    validate_with: str | None = None
    transfer: bool = True
    train_options: dict[str, Any] = field(default_factory=dict)
    # validate_with="people" (harden/people.py): the study form, the annotations a statement needs, the database
    # (default: DIR/annotation.db)
    annotation_form: str = DEFAULT_FORM
    min_annotators: int = 3
    annotation_db: str | None = None
    # issue 36 (harden/families.py): the families whose fooling statements join training, those only measured on
    # the held-out set (toxic rows of --eval), and that set's size
    attacks: tuple[str, ...] = DEFAULT_ATTACKS
    eval_attacks: tuple[str, ...] = ()
    eval_attack_n: int = DEFAULT_EVAL_ATTACK_N
    # issue 48 (harden/inputs.py): the share of --data rows that may be --eval rows (they are left out of training)
    max_eval_overlap: float = DEFAULT_MAX_EVAL_OVERLAP
    # issue 48 (guardset.py): a slice of --data no round trains on (always without --eval), and the paired check's
    # tolerances (ROC AUC down, a rate up)
    guard_slice: bool = True
    auc_tolerance: float = 0.01
    fpr_tolerance: float = 0.02
    # issue 55 (decide.py): the ROC AUC gain a round must show to ship, and the slice's rows (None: guardset's share)
    ship_margin: float = DEFAULT_SHIP_MARGIN
    guard_slice_size: int | None = None
    # issue 55 item 3 (mix.py): the added statements' loss weight; a continued round's share of C_0's learning rate
    # (None: mix.CONTINUE_LR_SCALE)
    added_weight: float = 1.0
    continue_lr_scale: float | None = None
    # issue 55 (calibration.py): each round's classifier at round 0's benign calls (all, and those naming a group)
    calibrate: bool = True
    # --measure-n (sets.measure_sets): prompts per cell of the attacks that only measure (None: -n)
    measure_per_cell: int | None = None

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise InputError(f"--rounds {self.rounds} runs no hardening round", hint="use --rounds 1 or more")
        check_choice(self.add, ADD_CHOICES, what="--add", hint="use flipped (the default), all or balanced")
        check_choice(self.init, INIT_CHOICES, what="--init", hint="use base (the default) or continue")
        if not self.data:
            raise InputError("harden needs the training data (--data)", hint="pass --data with the classifier's "
                                                                           "training set")
        if self.alice.method != "alice" or self.topk.method != "top-k":
            raise InputError("the attack must be ALICE and the control top-k", hint="use decoder_config('alice')")
        attacks, eval_attacks = check_families(self.attacks, self.eval_attacks, bool(self.eval), self.people,
                                               self.eval_attack_n)
        object.__setattr__(self, "attacks", attacks)
        object.__setattr__(self, "eval_attacks", eval_attacks)
        check_max_overlap(self.max_eval_overlap)
        mix.check_mix(self.added_weight, self.continue_lr_scale, self.init)
        Tolerance(self.auc_tolerance, self.fpr_tolerance, self.ship_margin)  # in range, else InputError
        if self.measure_per_cell is not None and not 1 <= self.measure_per_cell <= self.attack.per_cell:
            raise InputError(f"--measure-n {self.measure_per_cell} must be from 1 to -n ({self.attack.per_cell}): "
                             "the attacks that only measure use the first M of a round's attack prompts",
                             hint=f"use --measure-n between 1 and {self.attack.per_cell}, or drop it")
        if self.guard_slice_size is not None and not self.keeps_guard_slice:
            raise InputError("--guard-slice-size sizes the guard slice, and --no-guard-slice keeps none",
                             hint="drop one of them")
        unknown = sorted(set(self.train_options) - set(RECIPE_FIELDS) - set(OBJECTIVE_FIELDS))
        if unknown:
            raise InputError(f"train_options {unknown} are not recipe settings",
                             hint=f"use {', '.join(RECIPE_FIELDS + OBJECTIVE_FIELDS)}")
        options = self.start_options()
        if options and self.classifier is None:
            flags = option_flags(options)
            raise InputError(f"{flags} apply to -c, and without -c the starting classifier is trained here",
                             hint=f"pass -c with the classifier they are for, or drop {flags}")
        if self.people:
            check_people(self.min_annotators, self.annotation_form)
        elif self.annotation_db is not None:
            raise InputError("--annotation-db is where people's studies go, and they apply only with "
                             "--validate-with people", hint="add --validate-with people, or drop --annotation-db")
        if self.classifier is not None:
            check_classifier_options(self.classifier, options)
            if not self.people:
                Validation(self.validate_with).check(self.classifier)
            if is_judge(self.classifier) and self.init == "continue":
                raise InputError("--init continue trains each round on from the previous classifier, and a judge "
                                 f"({self.classifier}) cannot be trained", hint="use --init base (the default)")
        keeper = getattr(self.alice, "keep_label_with", None)  # ALICE's keeper (issue 50): every attack, transfer too
        check_keeper(keeper, self.classifier)
        if keeper is not None and not self.people:
            Validation(self.validate_with).check(None, keeper)

    @property
    def people(self) -> bool:
        """Whether people validate the statements (``--validate-with people``)."""
        return self.validate_with == PEOPLE

    @property
    def keeps_guard_slice(self) -> bool:
        """Whether a guard slice of --data is kept apart: always without --eval (guardset.py)."""
        return self.guard_slice or not self.eval

    def start_options(self) -> dict[str, Any]:
        """``classifier_options`` without the unset (None) ones."""
        return {k: v for k, v in self.classifier_options.items() if v is not None}

    def fingerprint(self) -> dict[str, Any]:
        """What a resumed run must share with the original (not --rounds: a run can be extended; not devices)."""
        train = {k: v for k, v in asdict(self.train).items() if k not in ("device", "eval_batch_size")}
        settings = {"attack": asdict(self.attack), "alice": self.alice.fields(), "topk": asdict(self.topk),
                    "train": train, "data": self.data, "eval": self.eval, "classifier": self.classifier,
                    "add": self.add, "init": self.init, "label_rule": self.label_rule, "threshold": self.threshold,
                    # None when unset, as in the harden.json of runs from before these options (they resume)
                    "classifier_options": scoring_options(self.start_options()) or None,
                    # likewise: runs from before --validate-with and the transfer attack resume with --no-transfer
                    "validate_with": self.validate_with, "transfer": self.transfer or None,
                    # issue 34: unique prompts and statements per set, rounds with C_0's recipe (older runs refused)
                    "sets": "unique", "train_options": self.train_options,
                    # None without people, as in the harden.json of runs from before --validate-with people
                    "people": {"form": self.annotation_form, "min_annotators": self.min_annotators,
                               "db": self.annotation_db} if self.people else None,
                    # None with the default (ALICE only, nothing held out), as in the harden.json of older runs
                    "families": None if self.attacks == DEFAULT_ATTACKS and not self.eval_attacks else {
                        "attacks": self.attacks, "eval_attacks": self.eval_attacks,
                        "eval_attack_n": self.eval_attack_n},
                    # issue 48: the content of -c and --validate-with (their fingerprint, issue 56: weights, config
                    # and tokenizer; None for a name), so that a classifier retrained at the same path does not
                    # resume with stale attacks and scores
                    "weights": {"classifier": fingerprint(self.classifier) if self.classifier else None,
                                "validate_with": None if self.people or not self.validate_with
                                else fingerprint(self.validate_with)},
                    # issue 48: the guard slice (older runs, without it, are refused: their rounds trained on it)
                    "guard": {"slice": self.keeps_guard_slice, "auc_tolerance": self.auc_tolerance,
                              "fpr_tolerance": self.fpr_tolerance,
                              # issue 55: only when given, as in the harden.json of runs from before it
                              **({"slice_size": self.guard_slice_size} if self.guard_slice_size else {}),
                              # issue 55 item 3: continued from -c, the slice is C_0's held-out rows (mix.py)
                              **({"from": mix.CONTINUE_SLICE} if self.keeps_guard_slice
                                 and mix.continues_from_start(self) else {})},
                    "mix": mix.fingerprint(self),  # None at the defaults, as in the harden.json of older runs
                    "measure_per_cell": self.measure_per_cell}  # likewise
        return json.loads(json.dumps(settings))  # as harden.json holds them (tuples as lists)


