"""Move a trained classifier's operating point: how many benign texts it calls toxic (issue 55).

A classifier retrained on a few hundred generated statements can rank better and still call far more benign texts
toxic at the 0.5 threshold it was trained for (docs/harden.md, the proof's seed 0: ROC AUC up on HateCheck's
decision half, over-blocking from 35% to 90%). Choosing the threshold on decision data, so that the classifier
calls as many of its benign rows toxic as a reference does, turns a better ranking into fewer missed toxic texts at
the reference's over-blocking: a classifier's operating point picked on held-out data, as a moderation team picks
one (and as logit adjustment moves it, Menon et al., 2021).

The new threshold is written into the model itself, as a shift of the toxic logit's bias: the folder stays a plain
``transformers`` model whose P(toxic) > the threshold for exactly the texts whose old P(toxic) was above the
chosen one, so every tool (audit, attacks, ONNX export, other code) reads the moved operating point without a
setting of its own.

* :func:`matched_shift`: the logit shift under which the classifier calls ``positives`` of ``benign`` scores toxic.
* :func:`shift_toxic_logit`: the shift, applied to a saved 2-class (softmax) or 1-logit (sigmoid) head.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge._io import atomic_write_text
from toxiforge.errors import InputError

EPS = 1e-12  # P(toxic) clipped to [EPS, 1 - EPS] before its logit


def logit(p: Any) -> Any:
    """log(p / (1 - p)), with p clipped away from 0 and 1."""
    p = np.clip(np.asarray(p, dtype=np.float64), EPS, 1 - EPS)
    return np.log(p) - np.log1p(-p)


def matched_shift(benign: Sequence[float], positives: int, threshold: float = 0.5) -> float:
    """The shift ``s`` of the toxic logit (new logit = old - s) under which exactly ``positives`` of the ``benign``
    scores (P(toxic) of benign rows) stay above ``threshold``: the midpoint, in logit space, between the
    ``positives``-th and the next highest score (ties keep or drop together, so the count can differ by them).
    ``positives`` 0: just above the highest; every row: just below the lowest."""
    scores = np.sort(logit(benign))[::-1]
    if not len(scores):
        raise InputError("no benign row to set the threshold on", hint="give decision data with benign rows")
    k = int(positives)
    if not 0 <= k <= len(scores):
        raise InputError(f"{k} benign rows called toxic, of {len(scores)}", hint="a count from 0 to the rows")
    if k == 0:
        cut = scores[0] + 1e-3
    elif k == len(scores):
        cut = scores[-1] - 1e-3
    else:
        cut = (scores[k - 1] + scores[k]) / 2
    return float(cut - logit(threshold))


def _head(model: Any) -> Any:
    """The last linear layer that writes the model's label logits."""
    import torch

    heads = [m for m in model.modules() if isinstance(m, torch.nn.Linear) and m.out_features == model.num_labels]
    if not heads:
        raise InputError(f"{type(model).__name__} has no linear layer writing its {model.num_labels} label logits",
                         hint="calibrate a sequence classifier with a linear head, or pass --no-calibrate")
    return heads[-1]


STAGING = ".calibrating"  # the moved model is written here whole, then moved into the folder file by file


def shift_toxic_logit(folder: str | Path, shift: float, record_as: str | None = None,
                      record: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Subtract ``shift`` from the toxic logit's bias of the model saved in ``folder`` (written back in place, each
    file replaced whole); what was done, for a record. A 2-class softmax head (P(toxic) = sigmoid of the toxic minus
    the benign logit) or a 1-logit sigmoid head; :class:`InputError` for others.

    With ``record_as``, ``record`` plus what was done is written as JSON to that file name in the folder, as the
    last file moved: the record is there only once the moved model is, and a run killed while moving files finishes
    with :func:`finish_shift` (never shifting twice)."""
    import torch
    from transformers import AutoModelForSequenceClassification

    from toxiforge._hf import quiet_transformers
    from toxiforge.classifiers.hf import infer_toxic_index, is_multi_label

    folder = Path(folder)
    quiet_transformers()
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    n = model.num_labels
    if n > 2 or (n == 2 and is_multi_label(model.config)):
        raise InputError(f"{folder} has a {n}-label head; the threshold is moved on 2-class or 1-logit heads only",
                         path=folder, hint="pass --no-calibrate")
    toxic = 0 if n == 1 else infer_toxic_index(model.config.id2label, n)
    head = _head(model)
    if head.bias is None:
        raise InputError(f"{folder}'s classification head has no bias to move", path=folder,
                         hint="pass --no-calibrate")
    with torch.no_grad():
        before = float(head.bias[toxic])
        head.bias[toxic] -= float(shift)
    done = {"shift": float(shift), "toxic_index": toxic, "bias_before": before, "bias_after": before - float(shift)}
    staging = folder / STAGING
    if staging.exists():
        shutil.rmtree(staging)
    model.save_pretrained(staging)
    if record_as is not None:
        atomic_write_text(staging / record_as, json.dumps({**(record or {}), **done}, indent=2) + "\n")
    finish_shift(folder, record_as)
    return done


def finish_shift(folder: str | Path, record_as: str | None = None) -> bool:
    """Finish a shift that :func:`shift_toxic_logit` staged in ``folder`` and a kill interrupted: with its record
    (``record_as``) staged, the moved model is whole, so its files are moved in (the record last); without it the
    staging is left from before any file moved and is removed (the folder holds the model as it was). Without
    ``record_as`` nothing marks a staging whole, so only :func:`shift_toxic_logit` (right after saving it) calls it
    so. Whether a staged shift was finished."""
    folder = Path(folder)
    staging = folder / STAGING
    if not staging.is_dir():
        return False
    if record_as is not None and not (staging / record_as).exists():
        shutil.rmtree(staging)
        return False
    for written in sorted(staging.iterdir(), key=lambda f: f.name == record_as):  # the record last
        os.replace(written, folder / written.name)
    staging.rmdir()
    return True

