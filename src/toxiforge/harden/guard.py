"""What keeps ``toxiforge harden`` from making a classifier worse unnoticed (issue 34, item 0).

* **One recipe** (:mod:`toxiforge.harden.recipe`): each round trains the way C_0 was trained, so that round r
  against round 0 changes the data and nothing else. Found on held-out data: a MiniLM trained at lr 5e-5, batch 16,
  retrained by every round at harden's old fixed defaults (lr 2e-5, batch 32: about a third of the updates) fell from
  AUC 0.934 to 0.66 and called every benign text toxic; round 1 had compared another recipe with C_0, not other data.
* **"Worse" has one rule**, the paired check of :mod:`toxiforge.harden.guardset`: a round whose paired difference
  to round 0 lies wholly beyond ``--auc-tolerance``/``--fpr-tolerance`` on an eval set or the guard slice stops the
  loop (:class:`HardenStopped`, with the numbers and the fix) or, with ``keep_going``, is warned about and marked in
  the report. (A second rule, each round's own AUC interval against round 0's point value with no tolerance, flagged
  an AUC drop of 0.004 whatever ``--auc-tolerance`` said; it is gone, issue 56.)
* **Checks before any work**: ``-c`` is a sequence classifier, ``-o`` is new or this run's (:func:`check_out_dir`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toxiforge.classifiers.fingerprint import PREFIX as FINGERPRINT_PREFIX
from toxiforge.errors import InputError, ToxiforgeError
from toxiforge.harden.data import ALICE_ARM
from toxiforge.harden.mix import CALIBRATED, CALIBRATED_FPR

if TYPE_CHECKING:
    from toxiforge.harden.recipe import Objective, Recipe
    from toxiforge.training.trainer import TrainConfig

SETTINGS_FILE = "harden.json"
FLAGS_WEIGHTS = {"classifier": "-c", "validate_with": "--validate-with"}  # harden.json's "weights", by option


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


def check_measured_extension(out: Path, rounds: int, measure_per_cell: int) -> None:
    """A run with --measure-n made its last round's ALICE-arm attack on the first M prompts per cell only (it fed no
    round): refuse to extend it past that round, whose attack would then feed the next with too few statements."""
    saved = out / SETTINGS_FILE
    if not saved.exists():
        return
    last = json.loads(saved.read_text(encoding="utf-8"))["rounds"]
    if rounds > last and (out / f"round-{last}" / ALICE_ARM / "attack").exists():
        raise InputError(f"--resume --rounds {rounds}: round {last} was this run's last, so its ALICE arm was "
                         f"attacked on --measure-n {measure_per_cell} prompts per group x label only, too few to "
                         f"feed round {last + 1}", path=out,
                         hint=f"start a new -o with --rounds {rounds}, or give --rounds {rounds} from the start")


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
    if "weights" not in old:  # a run from before issue 48 recorded no weights: not compared
        settings = {k: v for k, v in settings.items() if k != "weights"}
    differences = sorted(k for k in settings if old.get(k) != settings[k])
    if differences == ["weights"]:
        changed = [FLAGS_WEIGHTS[k] for k in settings["weights"] if old["weights"].get(k) != settings["weights"][k]]
        if any(v and not str(v).startswith(FINGERPRINT_PREFIX) for v in old["weights"].values()):
            raise InputError(f"--resume: this run recorded {' and '.join(changed)} by their weight files alone, the "
                             "digest harden used before issue 56 (now weights, config and tokenizer, as the audit's "
                             "score cache), so whether they changed since cannot be told", path=saved,
                             hint="start the run again in a new -o")
        raise InputError(f"--resume: the weights of {' and '.join(changed)} changed since this run began (a "
                         "classifier retrained at the same path), so its attacks and cached scores are stale",
                         path=saved, hint="write to a new -o, or restore the classifier this run started with")
    if differences == ["mix"] and "operating_point" in (settings["mix"] or {}) \
            and "operating_point" not in (old.get("mix") or {}):
        raise InputError("--resume: this run's rounds kept the threshold their training left (it began before "
                         "--calibrate, issue 55)", path=saved, hint="resume with --no-calibrate")
    if differences == ["mix"] and (old.get("mix") or {}).get("operating_point") == CALIBRATED_FPR \
            and (settings["mix"] or {}).get("operating_point") == CALIBRATED:
        raise InputError("--resume: this run's rounds were calibrated on all benign decision rows only (it began "
                         "before --calibrate matched the benign rows naming a group too, issue 55); its later rounds "
                         "would be calibrated otherwise", path=saved,
                         hint="finish it with the toxiforge commit it began with (a git worktree of it), or start "
                              "again in a new -o")
    if differences == ["mix"] and old.get("mix") is None and settings["init"] == "continue":
        raise InputError("--resume: this run's continued rounds trained at C_0's learning rate (it began before "
                         "--continue-lr-scale, issue 55)", path=saved, hint="resume with --continue-lr-scale 1")
    if differences:
        raise InputError(f"--resume: this run's {', '.join(differences)} differ from the run in -o", path=saved,
                         hint="resume with the same options (only --rounds may grow), or write to a new -o")


class TrainingPending(Exception):
    """Raised with ``external_training`` where models are to be trained: ``commands`` train them."""

    def __init__(self, commands: list[str]):
        super().__init__(f"{len(commands)} model(s) to train")
        self.commands = commands


def train_command(config: TrainConfig, specs: Sequence[str], out: Path, objective: Objective | None = None,
                  weight_column: str | None = None) -> str:
    """The ``toxiforge train`` command line that trains what :func:`~toxiforge.harden.recipe.train_round` would with
    ``config`` and ``objective`` on the data of ``specs`` (in order: the same rows) into ``out``; ``weight_column``:
    the column of their tables that holds the rows' loss weights (``--added-weight``)."""
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
    options += [f"--gradient-accumulation {config.gradient_accumulation}"] if config.gradient_accumulation != 1 else []
    options += objective.flags() if objective is not None else []
    options += [f"--weight-column {weight_column}"] if weight_column else []
    return "toxiforge train " + " ".join(options)


class HardenStopped(ToxiforgeError):
    """The paired check found a round worse than round 0 (guardset.py); ``problems`` say how."""

    def __init__(self, r: int, problems: list[str], recipe: Recipe):
        self.problems = problems
        lines = "; ".join(problems)
        super().__init__(f"round {r} made the classifier worse than round 0, so harden stopped: {lines}. Fix: the "
                         f"rounds train with {recipe.describe()} ({recipe.source}); check that this is how C_0 was "
                         f"trained and look at round-{r}/*/added.jsonl (what joined the training data); "
                         "the numbers are in report.md. Pass --keep-going (with --resume) to go on anyway")
