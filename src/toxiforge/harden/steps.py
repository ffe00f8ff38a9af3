"""The steps of a ``toxiforge harden`` run (issues 24, 34): generate a set, admit its statements, select what
joins training, train, measure; each the existing pieces called as the CLI calls them
(:class:`~toxiforge.pipeline.Generator`, :func:`~toxiforge.training.trainer.train_classifier`, the audit's
:func:`~toxiforge.audit.run.run_audit` for the eval sets' numbers: scored once per classifier, for the metrics and
the paired check alike). Layout of ``DIR`` (each run a normal toxiforge run)::

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

:class:`RunSteps` holds what the steps share (the run's ledger of statements, the sets admitted, the steps done);
:class:`~toxiforge.harden.loop.Harden` strings them into rounds.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text
from toxiforge.attacks.validation import Validation, run_rows
from toxiforge.data.examples import Example
from toxiforge.harden import families as fam
from toxiforge.harden import mix
from toxiforge.harden.config import HardenConfig
from toxiforge.harden.data import Statements, read_examples, write_examples
from toxiforge.harden.families import ALICE
from toxiforge.harden.guard import TrainingPending, train_command
from toxiforge.harden.inputs import data_specs
from toxiforge.harden.people import People, read_labels
from toxiforge.harden.recipe import Recipe, train_round
from toxiforge.harden.report import flip_rates
from toxiforge.harden.sets import PROMPTS_SUFFIX, DrawnSet, StatementLedger
from toxiforge.pipeline.generator import Generator
from toxiforge.records import METHOD_ALICE, run_complete
from toxiforge.training.trainer import LOG_FILE


@dataclass
class RunSteps:
    """The steps of one harden run in ``out``; each returns at once when its output is complete (``--resume``)
    and is recorded in :attr:`steps` when it did the work."""

    config: HardenConfig
    out: Path
    generator: Generator
    progress: bool = False
    say: Callable[[str], None] = lambda message: None
    steps: list[str] = field(default_factory=list)  # the steps this call did (skipped ones are not listed)
    # external_training: stop (TrainingPending) where a model is to be trained, with the `toxiforge train` command
    # lines that train it (e.g. under torchrun); --resume then goes on with the models they wrote
    external_training: bool = False
    pending: list[str] = field(default_factory=list)
    recipe: Recipe | None = None  # how every round trains (recipe.round_recipe), set by Harden.prepare
    leaks: list[dict[str, Any]] = field(default_factory=list)  # per set: prompts re-drawn, statements left out
    eval_overlap: dict[str, Any] = field(default_factory=dict)  # --data rows that are --eval rows (inputs.py)
    people: People | None = None  # validate_with="people": the studies (people.py)
    _inputs: tuple[list[Example], list[Any]] | None = field(default=None, repr=False)  # base, eval sets
    _validation: Validation = field(default_factory=lambda: Validation(None), repr=False)
    _prompts: dict[str, DrawnSet] = field(default_factory=dict, repr=False)  # set name -> its drawn prompts
    _ledger: StatementLedger = field(default_factory=StatementLedger, repr=False)
    _sets: dict[Path, Statements] = field(default_factory=dict, repr=False)
    _held_out: list[Any] = field(default_factory=list, repr=False)  # the held-out attack set's sources (families.py)
    _data_specs: list[str] = field(default_factory=list, repr=False)  # what the rounds train on, as data specs

    def _train(self, folder: Path, rows: list[Example], previous: str | Path | None, what: str,
               additions: list[str]) -> Path:
        if (folder / LOG_FILE).exists():
            return folder
        assert self.recipe is not None and self._inputs is not None
        start = str(previous) if self.config.init == "continue" and previous is not None else None
        config = replace(self.recipe.train, base_model=start or self.recipe.train.base_model)
        config = mix.continued_config(config, self.config) if start else config  # a lower learning rate (mix.py)
        data = self._data_specs or data_specs(self.config.data, self._inputs[0], self.eval_overlap, self.out)
        weighted = any(e.weight != 1 for e in rows)  # --added-weight: added.jsonl's column (mix.py)
        command = train_command(config, [*data, *additions], folder, self.recipe.objective,
                                mix.WEIGHT_COLUMN if weighted else None)
        if self.external_training:
            self.pending.append(command)
            return folder
        self.say(f"{what}: training {config.base_model} on {len(rows)} rows ({self.recipe.objective.describe()})")
        train_round(rows, folder, config, self.recipe.objective, [*data, *additions], self.progress, command,
                    label=f"{what}: training")
        self.steps.append(f"train {folder.relative_to(self.out)}")
        return folder

    def _stop_for_training(self) -> None:
        if self.pending:
            raise TrainingPending(self.pending)

    def _attack(self, folder: Path, classifier: str | Path, name: str, prompts: str,
                options: dict[str, Any] | None = None) -> None:
        self._generate(folder, prompts, self.config.alice, classifier, name, f"{name}: ALICE attack", options)

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
                           classifier_options=options, label=what)
        self.steps.append(f"generate {folder.relative_to(self.out)}")

    def _admit(self, prompts: str | Sequence[str], *run_dirs: Path, method: str = METHOD_ALICE) -> list[Statements]:
        """The runs' statements (with the validator's scores), less those of the training data or an earlier set
        or twice in one (sets.py); then they count as seen. Recorded once per run in :attr:`leaks`. ``prompts``
        names the runs' prompt set, or one per run."""
        found = []
        names = [prompts] * len(run_dirs) if isinstance(prompts, str) else list(prompts)
        for run_dir, set_name in zip(run_dirs, names, strict=True):
            texts = [e.text for e, _ in run_rows(run_dir, method)]
            keep, counts = self._ledger.check(texts)
            name = str(run_dir.relative_to(self.out))
            drawn = self._prompts.get(set_name)  # an attack family's run has no prompts of its own
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
        rows = mix.weigh(select(), self.config.added_weight)  # --added-weight (mix.py; 1: the rows as selected)
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
