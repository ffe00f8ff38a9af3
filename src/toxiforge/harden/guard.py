"""What keeps ``toxiforge harden`` from making a classifier worse unnoticed (issue 34, item 0).

* **One recipe** (:func:`round_recipe`): each round trains the way C_0 was trained, so that round r against round 0
  changes the data and nothing else. When toxiforge trained C_0 its ``training_log.json`` records the recipe, and the
  rounds use it; training options given to harden must agree with it (else :class:`InputError`). Where C_0's recipe
  is unknown (a judge, a directory without the log) the rounds use the options given, or ``train``'s defaults, and the
  report says so and why. Found on held-out data: a MiniLM trained at lr 5e-5, batch 16, retrained by every round at
  harden's old fixed defaults (lr 2e-5, batch 32: about a third of the updates) fell from AUC 0.934 to 0.66 and called
  every benign text toxic; round 1 had compared another recipe with C_0, not other data.
* **A round check** (:func:`round_problems`): after each round, a classifier that calls one class for at least
  :data:`DEGENERATE_SHARE` of an eval set (where round 0 did not, and the set's own labels are not that lopsided), or
  whose AUC lies below round 0's beyond its 95% bootstrap interval, stops the loop (:class:`HardenStopped`, with the
  numbers and the fix) or, with ``keep_going``, is warned about and marked in the report.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toxiforge.errors import InputError, ToxiforgeError
from toxiforge.training.training_log import LOG_FILE

if TYPE_CHECKING:
    from toxiforge.training.trainer import TrainConfig

# The TrainConfig fields that make a recipe (not the seed, which --seed draws, nor devices or logging).
RECIPE_FIELDS: tuple[str, ...] = ("base_model", "tokenizer", "epochs", "max_steps", "batch_size", "learning_rate",
                                  "weight_decay", "warmup", "max_length", "eval_fraction", "early_stopping", "bf16",
                                  "gradient_accumulation")
FLAGS = {"base_model": "--base-model", "epochs": "--epochs", "max_steps": "--max-steps",
         "batch_size": "--train-batch-size", "learning_rate": "--lr", "max_length": "--max-length"}
SETTINGS_FILE = "harden.json"
# One class for this share of an eval set's texts or more is a degenerate classifier (the rule).
DEGENERATE_SHARE = 0.95


@dataclass(frozen=True)
class Recipe:
    """How every round trains (``train``), where that came from, and a note when it may differ from C_0's."""

    train: Any
    source: str
    note: str | None = None

    def describe(self) -> str:
        t = self.train
        steps = f"max {t.max_steps} steps" if t.max_steps > 0 else f"{t.epochs:g} epochs"
        return (f"{t.base_model}, lr {t.learning_rate:g}, batch {t.batch_size}, {steps}, max length {t.max_length}, "
                f"{t.eval_fraction:g} held out")

    def to_dict(self) -> dict[str, Any]:
        return {"train": {k: asdict(self.train)[k] for k in RECIPE_FIELDS}, "source": self.source, "note": self.note}


def _same(field: str, a: Any, b: Any) -> bool:
    if field in ("base_model", "tokenizer") and a is not None and b is not None and Path(str(a)).exists():
        return Path(str(a)).resolve() == Path(str(b)).expanduser().resolve()
    return bool(a == b)


def start_recipe(classifier: str | None) -> tuple[dict[str, Any], Path] | None:
    """C_0's recipe from its ``training_log.json`` (and the log's path), or None when there is none."""
    if classifier is None or classifier.startswith("judge:"):
        return None
    log = Path(classifier).expanduser() / LOG_FILE
    if not log.is_file():
        return None
    config = json.loads(log.read_text(encoding="utf-8")).get("config") or {}
    recipe = {k: config[k] for k in RECIPE_FIELDS if k in config}
    return (recipe, log) if recipe else None


def round_recipe(classifier: str | None, train: Any, options: Mapping[str, Any]) -> Recipe:
    """The recipe of every round: ``train`` (seed, device and the fallback recipe) with C_0's recipe when known,
    then the explicitly given ``options`` (TrainConfig field names), which must agree with C_0's."""
    given = replace(train, **options)
    if classifier is None:
        return Recipe(given, "the training options (C_0 is trained here with the same recipe)")
    found = start_recipe(classifier)
    if found is None:
        why = "a judge is not trained" if classifier.startswith("judge:") else f"it has no {LOG_FILE}"
        used = "the options given" if options else "train's defaults"
        return Recipe(given, used, f"C_0's recipe is unknown ({why}), so every round trains with {used}: round 1 "
                                   "then differs from C_0 in recipe as well as data. The ALICE arm against the control "
                                   "changes only the data; to compare with round 0, train C_0 with `toxiforge train` "
                                   "and this recipe, and pass that as -c")
    recipe, log = found
    differ = [k for k, v in options.items() if k in recipe and not _same(k, recipe[k], v)]
    if differ:
        said = ", ".join(f"{FLAGS.get(k, k)} {options[k]}" for k in differ)
        logged = ", ".join(f"{k} {recipe[k]}" for k in differ)
        raise InputError(f"{said} differ from the recipe C_0 was trained with ({logged}, in {log}): round 1 would "
                         "compare another recipe with C_0, not other data",
                         hint="drop those options (every round then trains as C_0 was trained), or train C_0 with "
                              "them (`toxiforge train`) and pass that as -c")
    return Recipe(replace(given, **recipe), f"C_0's {LOG_FILE}")


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
    if "sets" not in old:
        raise InputError("--resume: this run was made before harden kept its prompts and statements apart and "
                         "trained every round with C_0's recipe (issue 34), so its numbers can leak", path=saved,
                         hint="start it again in a new -o")
    differences = sorted(k for k in settings if old.get(k) != settings[k])
    if differences:
        raise InputError(f"--resume: this run's {', '.join(differences)} differ from the run in -o", path=saved,
                         hint="resume with the same options (only --rounds may grow), or write to a new -o")


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
               f"--eval-fraction {config.eval_fraction:g}", f"--warmup-ratio {config.warmup:g}",
               f"--weight-decay {config.weight_decay:g}", "--overwrite"]
    options += [f"--tokenizer {shlex.quote(config.tokenizer)}"] if config.tokenizer else []
    options += [f"--early-stopping {config.early_stopping}"] if config.early_stopping is not None else []
    options += ["--bf16"] if config.bf16 else []
    return "toxiforge train " + " ".join(options)


class HardenStopped(ToxiforgeError):
    """A round's classifier is degenerate or worse than round 0 (:func:`round_problems`); ``problems`` say how."""

    def __init__(self, r: int, problems: list[str], recipe: Recipe):
        self.problems = problems
        lines = "; ".join(problems)
        super().__init__(f"round {r} made the classifier worse than round 0, so harden stopped: {lines}. Fix: the "
                         f"rounds train with {recipe.describe()} ({recipe.source}); check that this is how C_0 was "
                         f"trained and look at round-{r}/*/added.jsonl (what joined the training data); "
                         "the numbers are in report.md. Pass --keep-going (with --resume) to go on anyway")


def round_problems(r: int, start: Mapping[str, Any], metrics: Mapping[str, Any]) -> list[str]:
    """What is wrong with round ``r``'s classifiers (``metrics``, by arm) against round 0's (``start``): one line
    per arm and eval set that is degenerate or whose AUC fell beyond its interval."""
    problems = []
    for arm in ("alice", "control"):
        for name, e in metrics[arm]["eval"].items():
            s = start["eval"].get(name, {})
            if "called_toxic" in e and "called_toxic" in s:
                called, true, before = e["called_toxic"], e["true_toxic"], s["called_toxic"]
                one = max(called, 1 - called)
                if one >= DEGENERATE_SHARE and max(before, 1 - before) < DEGENERATE_SHARE \
                        and max(true, 1 - true) < DEGENERATE_SHARE:
                    word = "toxic" if called >= 0.5 else "benign"
                    share = called if called >= 0.5 else 1 - called
                    problems.append(f"the {arm} arm calls {100 * share:.1f}% of {name}'s {e['texts']} texts {word} "
                                    f"(round 0: {100 * before:.1f}% toxic; the labels: {100 * true:.1f}%)")
            interval, auc = e.get("auc_interval"), s.get("auc")
            if interval and auc is not None and interval[1] < auc:
                problems.append(f"the {arm} arm's AUC on {name} is {e['auc']:.3f} [{interval[0]:.3f}, "
                                f"{interval[1]:.3f}], below round 0's {auc:.3f}")
    return problems
