"""``toxiforge harden``: attack a classifier with ALICE, retrain on what fooled it, repeat (issue 24).

Round 0 measures the starting classifier C_0 (``-c DIR``, ``-c judge:MODEL``, or one trained on ``--data``).
Round r >= 1, per arm:

* **alice**: the statements of the ALICE attack on C_{r-1} that flipped its label (``add="all"``: every
  statement) join the training data with their prompt label, as the paper trains on ALICE data;
* **control**: as many top-k statements (same count per prompt label, fresh seeds) join instead, so a gain is
  ALICE's and not just more data (the paper's Table 4 comparison);

then C_r is trained on the base data plus every addition so far, from the base model (``init="base"``, the
default) or continued from C_{r-1} (``init="continue"``), and measured: ROC AUC on each eval set (with a
bootstrap interval), FPR on the benign eval texts that name a group (``bias measure``'s FPR_NOI), and the flip
rate of a **new** ALICE attack against C_r (seed ``seed + r``: statements it never saw). That attack is also the
one whose flipped statements feed round r + 1 of the alice arm; both arms' attacks of a round share their prompts
(the same plan), so the arms are compared on the same prompts. With ``transfer`` (the default), one more attack on
C_0 (seed + 20,000, never trained on) is scored by every C_r: the flip rate of a fixed attack set. With
``validate_with``, a classifier other than the attacked one validates statements (harden_data.py): only those it
gives their prompt label join either arm, and flip rates are also reported among them.

Everything is the existing pieces called as the CLI calls them: :func:`~toxiforge.pipeline.run_generation` (or
:func:`~toxiforge.pipeline.ray_runner.run_generation_ray`) with :func:`~toxiforge.decoding.make_decoder`,
:func:`~toxiforge.training.trainer.train_classifier`, :func:`~toxiforge.training.evaluate.evaluate` and
:func:`~toxiforge.bias.measure.measure_data`. Layout of ``DIR`` (each run a normal toxiforge run)::

    harden.json                      the settings (a resumed run must match them; --rounds may grow)
    round-0/model/                   C_0 when trained from --data
    round-0/attack/  metrics.json    the attack on C_0, its metrics
    round-0/transfer/                the fixed transfer attack on C_0 (transfer=True)
    round-N/.../RUN.validation.json  the validator's scores of RUN's statements (validate_with)
    round-N/{alice,control}/added.jsonl   the statements that joined the training data this round
    round-N/control/topk/            the top-k run the control statements come from
    round-N/{alice,control}/model/   C_N of each arm
    round-N/{alice,control}/attack/  the new attack on it
    round-N/metrics.json             {"alice": ..., "control": ...}
    report.md  report.json  report.png

Every step is skipped when its output is complete (a run's manifest says ``complete``, a model has its
``training_log.json``, a JSON file exists), so ``resume=True`` continues at the first unfinished step; a
half-written generation run resumes shard by shard.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text
from toxiforge.classifiers.registry import check_classifier_options, is_judge, option_flags
from toxiforge.data.examples import Example, LabeledData
from toxiforge.errors import InputError, check_choice
from toxiforge.pipeline.generator import Generator
from toxiforge.pipeline.plan import GenerationPlan
from toxiforge.records import TOXIC_THRESHOLD
from toxiforge.training.harden_data import (
    Validation,
    read_examples,
    select_alice,
    select_control,
    write_examples,
)
from toxiforge.training.harden_report import ARMS, Statements, measure, write_harden_report
from toxiforge.training.trainer import LOG_FILE, TrainConfig

SETTINGS_FILE, METRICS_FILE, ADDED_FILE = "harden.json", "metrics.json", "added.jsonl"
ADD_CHOICES: tuple[str, ...] = ("flipped", "all")
INIT_CHOICES: tuple[str, ...] = ("base", "continue")
CONTROL_SEED_OFFSET = 10_000  # top-k control runs use seed + 10,000 + r: never an attack's prompts
TRANSFER_SEED_OFFSET = 20_000  # the fixed transfer attack on C_0 uses seed + 20,000: never a round's prompts
# The top-k pool is this many times an attack's size, so that after empty or unparsable statements it still has
# as many statements of each label as the ALICE arm adds (a shortfall is recorded in the metrics).
CONTROL_POOL = 2


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
    """The loop's settings (module docstring). ``alice`` is an :class:`~toxiforge.decoding.AliceConfig`;
    ``topk`` the control arm's :class:`~toxiforge.decoding.TopKConfig`. ``classifier_options`` are
    :func:`~toxiforge.classifiers.load_classifier`'s for ``classifier`` (a judge's ``template`` and ``policy``, a
    head's ``toxic_label``): C_0 only, as the classifiers trained here have toxiforge's labels."""

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

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise InputError(f"--rounds {self.rounds} runs no hardening round", hint="use --rounds 1 or more")
        check_choice(self.add, ADD_CHOICES, what="--add", hint="use flipped (the default) or all")
        check_choice(self.init, INIT_CHOICES, what="--init", hint="use base (the default) or continue")
        if not self.data:
            raise InputError("harden needs the training data (--data)", hint="pass --data with the classifier's "
                                                                           "training set")
        if self.alice.method != "alice" or self.topk.method != "top-k":
            raise InputError("the attack must be ALICE and the control top-k", hint="use decoder_config('alice')")
        options = self.start_options()
        if options and self.classifier is None:
            flags = option_flags(options)
            raise InputError(f"{flags} apply to -c, and without -c the starting classifier is trained here",
                             hint=f"pass -c with the classifier they are for, or drop {flags}")
        if self.classifier is not None:
            check_classifier_options(self.classifier, options)
            Validation(self.validate_with).check(self.classifier)
            if is_judge(self.classifier) and self.init == "continue":
                raise InputError("--init continue trains each round on from the previous classifier, and a judge "
                                 f"({self.classifier}) cannot be trained", hint="use --init base (the default)")

    def start_options(self) -> dict[str, Any]:
        """``classifier_options`` without the unset (None) ones."""
        return {k: v for k, v in self.classifier_options.items() if v is not None}

    def fingerprint(self) -> dict[str, Any]:
        """What a resumed run must share with the original (not --rounds: a run can be extended; not devices)."""
        train = {k: v for k, v in asdict(self.train).items() if k not in ("device", "eval_batch_size")}
        settings = {"attack": asdict(self.attack), "alice": asdict(self.alice), "topk": asdict(self.topk),
                    "train": train, "data": self.data, "eval": self.eval, "classifier": self.classifier,
                    "add": self.add, "init": self.init, "label_rule": self.label_rule, "threshold": self.threshold,
                    # None when unset, as in the harden.json of runs from before these options (they resume)
                    "classifier_options": self.start_options() or None,
                    # likewise: runs from before --validate-with and the transfer attack resume with --no-transfer
                    "validate_with": self.validate_with, "transfer": self.transfer or None}
        return json.loads(json.dumps(settings))  # as harden.json holds them (tuples as lists)


# --- checks before any work ------------------------------------------------------------------------------------


def check_sequence_classifier(path: str | Path) -> Path:
    """``path`` must be a transformers sequence-classifier directory (it is retrained); else a clear error."""
    folder = Path(path).expanduser()
    hint = "pass a directory written by `toxiforge train` (or save_pretrained of a *ForSequenceClassification)"
    if not folder.is_dir() or not (folder / "config.json").is_file():
        raise InputError("-c must be a classifier directory with a config.json", path=folder, hint=hint)
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    archs = config.get("architectures") or []
    if not any(str(a).endswith("ForSequenceClassification") for a in archs):
        raise InputError(f"not a sequence classifier (architectures {archs or 'missing'}), so it can be neither "
                         "attacked nor retrained", path=folder, hint=hint)
    return folder


def check_out_dir(out: Path, settings: dict[str, Any], resume: bool) -> None:
    """A new run needs an empty or missing ``out``; ``resume`` needs this run's settings file, matching."""
    saved = out / SETTINGS_FILE
    rounds = sorted(p.name for p in out.glob("round-*")) if out.is_dir() else []
    if not resume:
        if saved.exists() or rounds:
            raise InputError(f"-o holds another harden run's rounds ({', '.join(rounds) or SETTINGS_FILE})",
                             path=out, hint="pass --resume to continue it, or choose a new -o")
        if out.exists() and (not out.is_dir() or any(out.iterdir())):
            raise InputError("-o is not an empty directory", path=out, hint="choose a new or empty -o")
        return
    if not saved.exists():
        if rounds or (out.exists() and any(out.iterdir())):
            raise InputError(f"--resume: no {SETTINGS_FILE}, so this is not a harden run", path=out,
                             hint="choose the directory of the run to resume")
        return
    old = json.loads(saved.read_text(encoding="utf-8"))["settings"]
    differences = sorted(k for k in settings if old.get(k) != settings[k])
    if differences:
        raise InputError(f"--resume: this run's {', '.join(differences)} differ from the run in -o", path=saved,
                         hint="resume with the same options (only --rounds may grow), or write to a new -o")


# --- the steps -------------------------------------------------------------------------------------------------


def _complete_run(path: Path) -> bool:
    manifest = path / "manifest.json"
    return manifest.exists() and json.loads(manifest.read_text(encoding="utf-8")).get("status") == "complete"


class TrainingPending(Exception):
    """Raised with ``external_training`` where models are to be trained: ``commands`` train them."""

    def __init__(self, commands: list[str]):
        super().__init__(f"{len(commands)} model(s) to train")
        self.commands = commands


def train_command(config: TrainConfig, specs: Sequence[str], out: Path) -> str:
    """The ``toxiforge train`` command line that trains what :func:`train_classifier` would with ``config`` on
    the data of ``specs`` (in order: the same rows) into ``out``."""
    import shlex

    options = [*(f"--data {shlex.quote(s)}" for s in specs), f"-o {shlex.quote(str(out))}",
               f"--base-model {shlex.quote(config.base_model)}", f"--epochs {config.epochs:g}",
               f"--max-steps {config.max_steps}", f"--batch-size {config.batch_size}",
               f"--lr {config.learning_rate:g}", f"--max-length {config.max_length}", f"--seed {config.seed}",
               f"--eval-fraction {config.eval_fraction:g}", "--overwrite"]
    return "toxiforge train " + " ".join(options)


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
    _validation: Validation = field(default_factory=lambda: Validation(None), repr=False)
    _transfer: Statements | None = field(default=None, repr=False)

    def prepare(self, resume: bool) -> tuple[list[Example], list[LabeledData]]:
        """Every check that can fail on bad input, before any work: -o, -c, data, eval sets, prompts."""
        from toxiforge.data import load_specs

        self.out = Path(self.out)
        check_out_dir(self.out, self.config.fingerprint(), resume)
        if self.config.classifier is not None and not is_judge(self.config.classifier):
            check_sequence_classifier(self.config.classifier)  # a judge is only attacked and measured
        base = [e for d in load_specs(list(self.config.data)) for e in d.examples]
        if {e.label for e in base} != {0, 1}:
            raise InputError(f"--data has {len(base)} usable rows, not both labels", hint="give data with toxic "
                                                                                          "and benign rows")
        eval_sets = load_specs(list(self.config.eval), label_rule=self.config.label_rule)
        self._validation = Validation(self.config.validate_with, self.config.device)
        self._validation.load()  # a bad --validate-with fails here
        for offset in (0, CONTROL_SEED_OFFSET, TRANSFER_SEED_OFFSET):
            self.config.attack.plan(offset).expand()  # a bad --groups/-d/--prompts fails here
        self._inputs = base, eval_sets
        return self._inputs

    def run(self, resume: bool = False) -> dict[str, Any]:
        base, eval_sets = self._inputs or self.prepare(resume)
        self.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(self.out / SETTINGS_FILE, json.dumps(
            {"settings": self.config.fingerprint(), "rounds": self.config.rounds}, indent=2) + "\n")
        start, options = self._start_classifier(base), self.config.start_options()  # options: C_0's only
        r0 = self.out / "round-0"
        self._attack(r0 / "attack", start, "round-0", 0, options)
        transfer = None
        if self.config.transfer:  # one more attack on C_0, never trained on: every round's classifier scores it
            self._generate(r0 / "transfer", self.config.attack.plan(TRANSFER_SEED_OFFSET), self.config.alice, start,
                           "round-0", "round-0: the fixed transfer attack", options)
            transfer = self._statements(r0 / "transfer")
        self._transfer = transfer
        first = self._metrics(r0 / METRICS_FILE, lambda: dict.fromkeys(ARMS, {**measure(  # both arms start at C_0
            start, "round-0", eval_sets, self._statements(r0 / "attack"), self.config.device, self.config.threshold,
            options, transfer), "train_rows": len(base)}))
        rounds = [first]
        previous = {arm: start for arm in ARMS}
        added: dict[str, list[Example]] = {arm: [] for arm in ARMS}
        for r in range(1, self.config.rounds + 1):
            rounds.append(self._round(r, base, eval_sets, previous, added))
        report = write_harden_report(self.out, self.config, rounds)
        self.say(f"wrote {self.out / 'report.md'}, report.json and report.png")
        return report

    def _round(self, r: int, base: list[Example], eval_sets: list[LabeledData], previous: dict[str, str | Path],
               added: dict[str, list[Example]]) -> dict[str, Any]:
        folder = self.out / f"round-{r}"
        before = self.out / f"round-{r - 1}"
        fed_by = before / "attack" if r == 1 else before / "alice" / "attack"
        alice_new = self._added(folder / "alice" / ADDED_FILE, lambda: select_alice(
            fed_by, self.config.add, self._statements(fed_by).validated))
        pool = self.config.attack.plan(CONTROL_SEED_OFFSET + r - 1, CONTROL_POOL)
        self._generate(folder / "control" / "topk", pool, self.config.topk, None, None,
                       f"round {r}: top-k control statements")
        topk = folder / "control" / "topk"
        control_new = self._added(folder / "control" / ADDED_FILE, lambda: select_control(
            topk, alice_new, self.config.attack.seed + r, self._statements(topk).validated))
        models = {}
        for arm, new in (("alice", alice_new), ("control", control_new)):
            added[arm] += new
            models[arm] = self._train(folder / arm / "model", base + added[arm], previous[arm], f"round {r} {arm}",
                                      [f"table:{self.out / f'round-{i}' / arm / ADDED_FILE}" for i in range(1, r + 1)])
        self._stop_for_training()
        for arm in ARMS:
            self._attack(folder / arm / "attack", models[arm], f"round-{r}-{arm}", r)
            previous[arm] = models[arm]
        path = folder / METRICS_FILE

        def compute() -> dict[str, Any]:
            out = {}
            for arm in ARMS:
                out[arm] = measure(previous[arm], f"round-{r}-{arm}", eval_sets,
                                   self._statements(folder / arm / "attack"), self.config.device,
                                   self.config.threshold, transfer=self._transfer)
                out[arm].update(added_this_round=len(alice_new if arm == "alice" else control_new),
                                added_total=len(added[arm]), train_rows=len(base) + len(added[arm]))
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

    def _train(self, folder: Path, rows: list[Example], previous: str | Path | None, what: str,
               additions: list[str]) -> Path:
        if (folder / LOG_FILE).exists():
            return folder
        from toxiforge.training.trainer import train_classifier

        start = str(previous) if self.config.init == "continue" and previous is not None else None
        config = replace(self.config.train, base_model=start or self.config.train.base_model)
        if self.external_training:
            self.pending.append(train_command(config, [*self.config.data, *additions], folder))
            return folder
        self.say(f"{what}: training {config.base_model} on {len(rows)} rows")
        train_classifier(rows, folder, config, progress=self.progress, overwrite=True,
                         data_sources=list(self.config.data))
        self.steps.append(f"train {folder.relative_to(self.out)}")
        return folder

    def _stop_for_training(self) -> None:
        if self.pending:
            raise TrainingPending(self.pending)

    def _attack(self, folder: Path, classifier: str | Path, name: str, r: int,
                options: dict[str, Any] | None = None) -> None:
        self._generate(folder, self.config.attack.plan(r), self.config.alice, classifier, name,
                       f"{name}: ALICE attack", options)

    def _generate(self, folder: Path, plan: GenerationPlan, decoding: Any, classifier: str | Path | None,
                  name: str | None, what: str, options: dict[str, Any] | None = None) -> None:
        if _complete_run(folder):
            return
        self.say(f"{what}: {plan.total} statements into {folder.relative_to(self.out)}")
        self.generator.run(plan, decoding, folder, classifier=classifier, classifier_name=name,
                           classifier_options=options)
        self.steps.append(f"generate {folder.relative_to(self.out)}")

    def _statements(self, run_dir: Path) -> Statements:
        """A run's statements with the validator's scores (computed once, then read from beside the run)."""
        return Statements(run_dir, self._validation.scores(
            run_dir, lambda cache: self.steps.append(f"validate {run_dir.relative_to(self.out)}")))

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
