"""C_0's whole recipe, repeated by every round of ``toxiforge harden`` (issue 34, item 0; issue 48, item 3).

Round r against round 0 should change the data and nothing else, so each round trains the way C_0 was trained. When
toxiforge trained C_0 its ``training_log.json`` records the recipe: the training settings (``config``: base model,
epochs or steps, batch size, learning rate, ...), the **objective** (``objective``: cross-entropy, or LEARNED-MIXIN
(+H) with its bias-only model and entropy weight, :mod:`toxiforge.training.debias`) and the **held-out share** the
run actually used (``held_out``; a ``train --eval X`` run holds out nothing from its rows, whatever its
``eval_fraction``). :func:`round_recipe` reads them; options given to harden must agree with what the log records
and fill what it lacks. A C_0 directory whose recipe is still incomplete, or cannot be repeated (a bias-only
``column:NAME`` that harden's added statements do not have), is refused before any work, naming what is missing and
the options that give it (:data:`NEEDED`). A judge C_0 is not trained: the rounds use the options given, and the
report says so. Without ``-c``, C_0 is trained here with the same recipe.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from toxiforge.errors import InputError
from toxiforge.training.training_log import LOG_FILE

# The TrainConfig fields that make a recipe (not the seed, which --seed draws, nor devices or logging).
RECIPE_FIELDS: tuple[str, ...] = ("base_model", "tokenizer", "epochs", "max_steps", "batch_size", "learning_rate",
                                  "weight_decay", "warmup", "max_length", "eval_fraction", "early_stopping", "bf16",
                                  "gradient_accumulation")
OBJECTIVE_FIELDS: tuple[str, ...] = ("debias", "bias_only", "entropy_weight")  # harden's options for the objective
FLAGS = {"base_model": "--base-model", "epochs": "--epochs", "max_steps": "--max-steps",
         "batch_size": "--train-batch-size", "learning_rate": "--lr", "max_length": "--max-length",
         "eval_fraction": "--eval-fraction", "debias": "--debias", "bias_only": "--bias-only",
         "entropy_weight": "--entropy-weight"}
# What a C_0 directory's recipe must say (its log, else the options) for harden to repeat it; the rest of the
# settings default to train's. "epochs" is also said by --max-steps.
NEEDED: tuple[str, ...] = ("base_model", "epochs", "batch_size", "learning_rate", "eval_fraction", "debias")
CROSS_ENTROPY = "cross-entropy"
NONE = "none"  # --debias none: plain cross-entropy, said outright


@dataclass(frozen=True)
class Objective:
    """The training loss: cross-entropy, or ``learned-mixin`` / ``learned-mixin+h`` against the bias-only model
    ``bias_only`` (a :func:`~toxiforge.bias.bias_only.bias_only_probabilities` spec, refitted on each round's rows
    as ``train --bias-only`` fits it on its own) with ``entropy_weight``."""

    loss: str = CROSS_ENTROPY
    bias_only: str | None = None
    entropy_weight: float = 0.0

    @property
    def debiased(self) -> bool:
        return self.loss != CROSS_ENTROPY

    def describe(self) -> str:
        if not self.debiased:
            return CROSS_ENTROPY
        weight = f", entropy weight {self.entropy_weight:g}" if self.loss.endswith("+h") else ""
        return f"{self.loss} against bias-only {self.bias_only}{weight}"

    def flags(self) -> list[str]:
        """``toxiforge train``'s options for this objective."""
        import shlex

        if not self.debiased:
            return []
        out = [f"--debias {self.loss}", f"--bias-only {shlex.quote(str(self.bias_only))}"]
        return out + ([f"--entropy-weight {self.entropy_weight:g}"] if self.loss.endswith("+h") else [])


def objective_from(debias: str, bias_only: str | None, entropy_weight: float | None) -> Objective:
    """The :class:`Objective` of ``--debias``/``--bias-only``/``--entropy-weight`` (``none`` or ``cross-entropy``:
    plain), checked as ``train`` checks them, and refused when harden cannot repeat it."""
    from toxiforge.training.debias import entropy_weight_for, normalize_method

    if debias in (NONE, CROSS_ENTROPY):
        if bias_only is not None or entropy_weight:
            raise InputError("--bias-only and --entropy-weight go with --debias learned-mixin(+h)",
                             hint="drop them, or pass --debias")
        return Objective()
    method = normalize_method(debias)
    if bias_only is None:
        raise InputError(f"--debias {method} needs its bias-only model", hint="pass --bias-only (e.g. toxtrig), as "
                                                                             "C_0 was trained")
    if bias_only.partition(":")[0] == "column":
        raise InputError(f"the bias-only model {bias_only} reads p(toxic) from a column of the training files, "
                         "which the statements harden adds do not have, so the rounds cannot repeat C_0's recipe",
                         hint="train C_0 with a bias-only model harden can refit (noi, toxtrig, dialect, terms:FILE)")
    return Objective(method, bias_only, entropy_weight_for(method, entropy_weight))


@dataclass(frozen=True)
class Recipe:
    """How every round trains (``train``, ``objective``), where that came from, and a note when it may differ from
    C_0's."""

    train: Any
    source: str
    note: str | None = None
    objective: Objective = field(default_factory=Objective)

    def __post_init__(self) -> None:
        """Refuse, before any attack, a recipe every round's training would refuse (``train_classifier``'s checks
        that do not depend on the rows)."""
        t = self.train
        if t.early_stopping and not t.eval_fraction:
            raise InputError(f"the rounds' recipe ({self.source}) stops early after {t.early_stopping} epoch(s) "
                             "without a better eval AUC but holds out none of the rows (C_0 was trained with `train "
                             "--eval X --early-stopping N`, and the rounds have no X of their own), so every round's "
                             "training would fail after round 0's attacks: early stopping needs an evaluation set",
                             hint="train C_0 with --eval-fraction (e.g. 0.1) instead of --eval, or without "
                                  "--early-stopping, and pass that as -c")
        if t.gradient_accumulation < 1:
            raise InputError(f"the rounds' recipe ({self.source}) has gradient_accumulation "
                             f"{t.gradient_accumulation}", hint="train C_0 with --gradient-accumulation 1 or more")

    def describe(self) -> str:
        t = self.train
        steps = f"max {t.max_steps} steps" if t.max_steps > 0 else f"{t.epochs:g} epochs"
        return (f"{t.base_model}, lr {t.learning_rate:g}, batch {t.batch_size}, {steps}, max length {t.max_length}, "
                f"{t.eval_fraction:g} held out, {self.objective.describe()}")

    def to_dict(self) -> dict[str, Any]:
        return {"train": {k: asdict(self.train)[k] for k in RECIPE_FIELDS}, "source": self.source, "note": self.note,
                "objective": asdict(self.objective)}


def held_out_share(log: Mapping[str, Any]) -> float | None:
    """The share of its rows C_0's training held out: the log's ``held_out`` (issue 48), else, for older logs, its
    ``eval_fraction`` when the held-out counts are what that share gives (else a given ``--eval`` set: 0)."""
    if "held_out" in log:
        return float(log["held_out"]["share"])
    fraction = (log.get("config") or {}).get("eval_fraction")
    train, held = log.get("train"), log.get("eval")
    if fraction is None or not train or not held:
        return None
    if not fraction:
        return 0.0
    for key in ("toxic", "benign"):
        total = train[key] + held[key]
        if held[key] != (min(total - 1, math.ceil(total * fraction)) if total else 0):  # split_heldout_indices
            return 0.0
    return float(fraction)


def start_recipe(classifier: str | None) -> tuple[dict[str, Any], Path] | None:
    """C_0's recipe from its ``training_log.json`` (TrainConfig fields, with the held-out share it used, and
    ``debias``/``bias_only``/``entropy_weight`` when the log records the objective) and the log's path, or None."""
    if classifier is None or classifier.startswith("judge:"):
        return None
    path = Path(classifier).expanduser() / LOG_FILE
    if not path.is_file():
        return None
    log = json.loads(path.read_text(encoding="utf-8"))
    config = log.get("config") or {}
    recipe = {k: config[k] for k in RECIPE_FIELDS if k in config}
    share = held_out_share(log)
    recipe.pop("eval_fraction", None)
    if share is not None:
        recipe["eval_fraction"] = share
    objective = log.get("objective")
    if objective and objective.get("loss"):
        debiased = objective["loss"] != CROSS_ENTROPY
        recipe.update(debias=objective["loss"] if debiased else NONE, bias_only=objective.get("bias_only")
                      if debiased else None, entropy_weight=objective.get("entropy_weight") if debiased else None)
    return recipe, path


def _same(field: str, a: Any, b: Any) -> bool:
    if field in ("base_model", "tokenizer") and a is not None and b is not None and Path(str(a)).exists():
        return Path(str(a)).resolve() == Path(str(b)).expanduser().resolve()
    if field == "debias":
        return {a, b} <= {NONE, CROSS_ENTROPY} or a == b
    return bool(a == b)


def _missing(settings: Mapping[str, Any]) -> list[str]:
    said = {k for k, v in settings.items() if v is not None}
    if settings.get("max_steps") not in (None, -1):
        said.add("epochs")
    return [k for k in NEEDED if k not in said]


def round_recipe(classifier: str | None, train: Any, options: Mapping[str, Any]) -> Recipe:
    """The recipe of every round: ``train`` (seed, device, train's defaults) with C_0's recipe (its log) and the
    explicitly given ``options`` (TrainConfig field names and :data:`OBJECTIVE_FIELDS`), which must agree with the
    log and fill what it lacks; :class:`InputError` when a C_0 directory's recipe stays incomplete."""
    settings = {k: v for k, v in options.items() if k in RECIPE_FIELDS}
    objective = {k: options.get(k) for k in OBJECTIVE_FIELDS}

    def recipe(source: str, note: str | None = None, logged: Mapping[str, Any] | None = None) -> Recipe:
        logged = logged or {}
        said = {**logged, **{k: v for k, v in objective.items() if v is not None}}
        made = objective_from(said.get("debias") or NONE, said.get("bias_only"), said.get("entropy_weight"))
        fields = {k: v for k, v in {**logged, **settings}.items() if k in RECIPE_FIELDS}
        return Recipe(replace(train, **fields), source, note, made)

    if classifier is None:
        return recipe("the training options (C_0 is trained here with the same recipe)")
    if classifier.startswith("judge:"):
        used = "the options given" if options else "train's defaults"
        return recipe(used, f"C_0's recipe is unknown (a judge is not trained), so every round trains with {used}: "
                            "round 1 then differs from C_0 in recipe as well as data. The ALICE arm against the "
                            "control changes only the data")
    found = start_recipe(classifier)
    logged, log = found if found is not None else ({}, None)
    differ = [k for k, v in options.items() if v is not None and logged.get(k) is not None
              and not _same(k, logged[k], v)]
    if differ:
        said = ", ".join(f"{FLAGS.get(k, k)} {options[k]}" for k in differ)
        was = ", ".join(f"{k} {logged[k]}" for k in differ)
        raise InputError(f"{said} differ from the recipe C_0 was trained with ({was}, in {log}): round 1 would "
                         "compare another recipe with C_0, not other data",
                         hint="drop those options (every round then trains as C_0 was trained), or train C_0 with "
                              "them (`toxiforge train`) and pass that as -c")
    missing = _missing({**logged, **options})
    if missing:
        where = f"its {LOG_FILE} ({log}) does not record" if log else f"it has no {LOG_FILE}, so nothing records"
        flags = ", ".join(FLAGS[k] + (" (or --max-steps)" if k == "epochs" else "") for k in missing)
        raise InputError(f"harden cannot repeat how C_0 ({classifier}) was trained: {where} its {', '.join(missing)}",
                         hint=f"give {flags} as C_0 was trained (--debias none: plain cross-entropy), or train C_0 "
                              "with `toxiforge train` and pass that as -c")
    filled = sorted(k for k in options if options[k] is not None and logged.get(k) is None)
    if log is None:
        return recipe("the options given", f"C_0 has no {LOG_FILE}, so every round trains with the options given "
                                           f"({', '.join(FLAGS.get(k, k) for k in filled)}); if C_0 was trained "
                                           "otherwise, round 1 differs from it in recipe as well as data (the checks "
                                           "after each round are what guard against that)")
    source = f"C_0's {LOG_FILE}" + (f", with {', '.join(FLAGS.get(k, k) for k in filled)} given" if filled else "")
    return recipe(source, logged=logged)


def train_round(rows: Sequence[Any], folder: Path, config: Any, objective: Objective, sources: Sequence[str],
                progress: bool, command: str | None = None, label: str = "training") -> None:
    """Train one round's classifier on ``rows`` with ``config`` and ``objective`` (LEARNED-MIXIN(+H): the bias-only
    model fitted on these rows, as ``train --debias`` does); ``command``, the ``toxiforge train`` line that trains it
    again, goes into its model card; ``label`` names its progress line."""
    from toxiforge.training.card import CardFacts
    from toxiforge.training.progress import RichProgressCallback
    from toxiforge.training.trainer import train_classifier

    common: dict[str, Any] = {"progress": False, "callbacks": [RichProgressCallback(label=label)] if progress else [],
                              "overwrite": True, "data_sources": list(sources), "card": CardFacts(command)}
    if not objective.debiased:
        train_classifier(rows, folder, config, **common)
        return
    from toxiforge.bias.bias_only import bias_only_probabilities
    from toxiforge.training.debias import train_debiased

    assert objective.bias_only is not None
    probs = bias_only_probabilities(objective.bias_only, rows, sources=list(sources))
    train_debiased(rows, folder, config, bias_probs=probs, method=objective.loss,
                   entropy_weight=objective.entropy_weight if objective.loss.endswith("+h") else None,
                   bias_only=objective.bias_only, **common)
