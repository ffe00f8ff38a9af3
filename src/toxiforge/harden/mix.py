"""How the added statements enter each round's training (issue 55, item 3): the training mix.

* **retrain** (``--init base``, the default): every round trains C_0's recipe from the base model on ``--data``
  (less the guard slice) plus every statement added so far, as C_0 was trained.
* **up-weighted** (``--added-weight K``): as retrain, with every added statement (both arms alike, so the arms
  still differ in their data only) of loss weight K: a weight-K row counts as K copies of itself in its batch's
  loss (:mod:`toxiforge.training.weighted`). K = 1 (the default) is retrain, bit for bit: the same rows, files and
  loss. The added tables (``round-N/ARM/added.jsonl``) then carry the weight in column :data:`WEIGHT_COLUMN`, which
  ``--external-training``'s ``toxiforge train --weight-column`` commands read. Cross-entropy only: refused with a
  ``--debias`` recipe.
* **continue** (``--init continue``): each round trains on from the previous round's classifier (round 1: from
  C_0), replaying ``--data`` (less the slice) plus every statement added so far, at C_0's learning rate times
  ``--continue-lr-scale`` (default :data:`CONTINUE_LR_SCALE`, a common choice for further fine-tuning, not yet
  measured here). A round continued from a given ``-c`` has learnt from every row C_0 trained on, so it is compared
  only on rows C_0 never trained on (:func:`continue_slice`): the guard slice is the rows C_0's training held out
  (its ``training_log.json`` names them by digest, :func:`~toxiforge.training.training_log.held_out_record`), and
  the slice's reference is C_0 itself; an ``--eval`` row that is a ``--data`` row C_0 trained on is refused. When
  harden trains C_0 (no ``-c``), C_0 never saw the slice, as for retrain.

Measured at size (docs/harden.md, issue 55 item 3: round 1 of the proof's seed 0, HateCheck's decision half, at
``--calibrate``'s operating point): against retrain, balanced raised one arm's accuracy only (-0.002, +0.019), and
up-weighted (K = 3) and continue lowered both arms', so retrain with ``--add flipped`` stays the default.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from toxiforge.data.examples import Example, LabeledData, fold_text
from toxiforge.errors import InputError

WEIGHT_COLUMN = "loss_weight"  # the column of round-N/ARM/added.jsonl that holds each statement's loss weight
CONTINUE_LR_SCALE = 0.1  # --continue-lr-scale's default: a tenth of C_0's learning rate (not yet measured here)
# harden.json's mix.operating_point with --calibrate (calibration.py); runs that matched all benign rows only recorded
# CALIBRATED_FPR (before the rows naming a group were matched too)
CALIBRATED = "round 0's benign calls, all and naming a group"
CALIBRATED_FPR = "round 0's benign calls"
CONTINUE_SLICE = "C_0's held-out rows"  # harden.json's guard "from" for a run that continues from -c
CONTINUE_REFERENCE = ("C_0 never trained on the slice: it is the rows C_0's training held out (its training_log.json "
                      "names them), and every round continues from C_0")


def check_mix(added_weight: float, continue_lr_scale: float | None, init: str) -> None:
    """``--added-weight`` above 0 and finite; ``--continue-lr-scale`` in (0, 1] and only with ``--init continue``."""
    if not (math.isfinite(added_weight) and added_weight > 0):
        raise InputError(f"--added-weight {added_weight} is not a weight above 0",
                         hint="use 1 (the default: added rows count as any other) or more, e.g. --added-weight 3")
    if continue_lr_scale is None:
        return
    if init != "continue":
        raise InputError("--continue-lr-scale sets the learning rate of rounds that continue from the previous "
                         "classifier, and --init base trains each round from the base model",
                         hint="add --init continue, or drop --continue-lr-scale")
    if not 0 < continue_lr_scale <= 1:
        raise InputError(f"--continue-lr-scale {continue_lr_scale} is outside (0, 1]",
                         hint=f"use a share of C_0's learning rate, e.g. {CONTINUE_LR_SCALE:g} (the default)")


def lr_scale(config: Any) -> float:
    """The share of C_0's learning rate a continued round trains at (``--continue-lr-scale``, else the default)."""
    return CONTINUE_LR_SCALE if config.continue_lr_scale is None else float(config.continue_lr_scale)


def continues_from_start(config: Any) -> bool:
    """Whether round 1 continues from a given ``-c`` (whose training rows harden cannot keep out of the rounds)."""
    return config.init == "continue" and config.classifier is not None


def fingerprint(config: Any) -> dict[str, Any] | None:
    """harden.json's ``mix``: the added weight when not 1, the continued rounds' learning-rate share when not 1, the
    operating point with ``--calibrate``; None for retrain at weight 1 without it, as in the harden.json of runs from
    before (they resume with ``--no-calibrate``). A continue run from before the share resumes with
    ``--continue-lr-scale 1`` (it trained at C_0's rate)."""
    mix: dict[str, Any] = {}
    if config.added_weight != 1:
        mix["added_weight"] = float(config.added_weight)
    if config.init == "continue" and lr_scale(config) != 1:
        mix["continue_lr_scale"] = lr_scale(config)
    if config.calibrate:  # runs from before --calibrate (none recorded) kept training's threshold
        mix["operating_point"] = CALIBRATED
    return mix or None


def mix_markdown(mix: dict[str, Any] | None, learning_rate: float) -> list[str]:
    """The report's line on the training mix (none at the defaults: retrain, weight 1)."""
    said = []
    if mix and "added_weight" in mix:
        said.append(f"every added statement (both arms) weighs {mix['added_weight']:g} in the loss (--added-weight)")
    if mix and "continue_lr_scale" in mix:
        scale = mix["continue_lr_scale"]
        said.append(f"a continued round trains at {scale:g} × that learning rate, {scale * learning_rate:g} "
                    "(--continue-lr-scale)")
    return ["", f"Training mix: {'; '.join(said)}."] if said else []  # --calibrate: calibration.calibration_markdown


def check_objective(added_weight: float, objective: Any) -> None:
    """Refuse ``--added-weight`` other than 1 with a LEARNED-MIXIN recipe (weights weigh the cross-entropy)."""
    if added_weight != 1 and objective.debiased:
        raise InputError(f"--added-weight {added_weight:g} weighs the cross-entropy loss, and the rounds train with "
                         f"{objective.describe()} (C_0's recipe)",
                         hint="drop --added-weight, or harden a classifier trained with cross-entropy")


def weigh(rows: list[Example], weight: float) -> list[Example]:
    """``rows`` with loss weight ``weight`` (the same list at weight 1)."""
    return rows if weight == 1 else [replace(e, weight=float(weight)) for e in rows]


def continued_config(train: Any, config: Any) -> Any:
    """The training settings of a round that continues from the previous classifier: C_0's learning rate scaled."""
    return replace(train, learning_rate=train.learning_rate * lr_scale(config))


def continue_slice(config: Any, data: Sequence[Example], base: list[Example], eval_sets: Sequence[LabeledData]
                   ) -> tuple[list[Example], LabeledData | None]:
    """For a run that continues from a given ``-c`` (:func:`continues_from_start`): ``base`` less the guard slice,
    and the slice, which is the rows of ``base`` C_0's training held out and never trained on (None without a slice);
    ``data`` (all of ``--data``) and ``eval_sets`` to refuse an ``--eval`` row that is a ``--data`` row C_0 trained
    on. :class:`InputError` when C_0's log does not say which rows it never trained on, or they are not --data's."""
    unseen, why = held_out_digests(config.classifier)
    if eval_sets:
        _check_eval(data, eval_sets, unseen, why)
    if not config.keeps_guard_slice:
        return base, None
    if unseen is None:
        raise InputError(f"--init continue from -c compares every round with C_0 on a guard slice of --data that C_0 "
                         f"never trained on, and {why}",
                         hint="retrain C_0 with `toxiforge train --eval-fraction 0.15` (its log then names the rows it "
                              "held out), or pass --no-guard-slice with --eval sets apart from C_0's training data, "
                              "or use --init base")
    if config.guard_slice_size is not None:
        raise InputError(f"--init continue from -c draws the guard slice from the rows C_0's training held out "
                         f"({len(unseen)} texts), so --guard-slice-size cannot size it",
                         hint="drop --guard-slice-size (retrain C_0 with a larger --eval-fraction for a larger slice)")
    from toxiforge.harden.guardset import GUARD_SET
    from toxiforge.training.training_log import text_digest

    chosen = {fold_text(e.text) for e in base if text_digest(e.text) in unseen}
    by_text: dict[str, Example] = {}
    for e in base:
        by_text.setdefault(fold_text(e.text), e)
    guard = [by_text[k] for k in sorted(chosen)]
    labels = {e.label for e in guard}
    if labels != {0, 1}:
        raise InputError(f"only {len(guard)} of the {len(unseen)} texts C_0's training held out are --data rows "
                         f"(labels: {sorted(labels) or 'none'}), too few to compare rounds on: --data is not the data "
                         f"C_0 was trained on", path=config.classifier,
                         hint="pass as --data the data C_0 was trained on, or use --init base")
    data_set = LabeledData(GUARD_SET, guard, "harden-guard-slice", f"the {len(guard)} rows of --data C_0 held out",
                           notes=["the rows of --data that C_0's training held out: no classifier trained on them"])
    return [e for e in base if fold_text(e.text) not in chosen], data_set


def held_out_digests(classifier: str) -> tuple[set[str] | None, str]:
    """The digests of the texts C_0's training held out and never trained on, from its ``training_log.json``; or
    None and why they are unknown."""
    from toxiforge.training.training_log import LOG_FILE

    path = Path(classifier).expanduser() / LOG_FILE
    if not path.is_file():
        return None, f"C_0 ({classifier}) has no {LOG_FILE}, so which rows it trained on is unknown"
    held = json.loads(path.read_text(encoding="utf-8")).get("held_out") or {}
    if "digests" in held:
        return set(held["digests"]), ""
    if held.get("share") == 0:
        return None, (f"C_0's {LOG_FILE} ({path}) says it held none of its rows out (trained with --eval or "
                      "--eval-fraction 0), so it trained on every --data row")
    return None, (f"C_0's {LOG_FILE} ({path}) does not name the rows it held out (written before toxiforge "
                  "recorded them)")


def _check_eval(data: Sequence[Example], eval_sets: Sequence[LabeledData], unseen: set[str] | None,
                why: str) -> None:
    """Refuse --eval rows that are --data rows C_0 trained on (a continued round has learnt them too)."""
    from toxiforge.training.training_log import text_digest

    in_data = {fold_text(e.text): e.text for e in data}
    shared = [in_data[k] for k in {fold_text(e.text) for d in eval_sets for e in d.examples} if k in in_data]
    trained = [t for t in shared if unseen is None or text_digest(t) not in unseen]
    if trained:
        known = "" if unseen is not None else f" ({why}, so every such row counts)"
        raise InputError(f"{len(trained)} --eval rows are --data rows C_0 trained on{known}: with --init continue "
                         "every round has learnt them from C_0, so the rounds would be compared on rows they trained "
                         "on", hint="remove those rows from --eval or --data, or use --init base")
