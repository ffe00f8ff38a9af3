"""The audit's generation attack: ALICE against top-k from the same prompts, per classifier (``--attack-prompts`` or
``-d`` with ``-n``).

The ToxiGen paper's comparison (its Table 3 "fooling" rates), run against each audited classifier: one top-k run
from the prompts (it does not depend on the classifier, so every classifier is measured on the same statements),
and one ALICE run per classifier, attacking that classifier, from the **same** prompts (same plan, same seed).
A statement *flips* when the classifier's label (P(toxic) > 0.5) is not its prompt's label (toxic prompts scored
benign, benign prompts scored toxic). Reported per classifier and decoder: the flip rate overall and per prompt
label with bootstrap intervals, and ALICE minus top-k with an interval paired by prompt (the same resampled prompts
for both decoders). With ``validate_with`` (as ``harden --validate-with``: a classifier other than the attacked
one, compared by weights), every statement is also scored by the validator: ``validated`` (flip rate among the
statements it gives their prompt label), ``confirmed`` (flipped *and* kept their label: the paper's validated
fooling rate) and ``validator_agrees``; the paired difference is then given for the confirmed rate too. ALICE's
keeper (``--keep-label-with``, :mod:`toxiforge.decoding.alice`) is named beside the validator, which may not be it
(nor a copy of it): the search optimised the keeper's agreement, so only another classifier confirms.

Layout under ``OUT/attacks/prompts/``: ``RUNS/topk/`` (a normal ``generate`` run), ``RUNS/alice-KEY/`` per
classifier (RUNS: a digest of the prompts, decoders and language model; KEY: the classifier's digest),
``RUN.validation.json`` beside a run (the validator's scores), and ``KEY-SETTINGS.json``, the row-level outcomes of
one classifier: ``--resume`` (or one more ``-c``) re-uses them, and a
stopped generation resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge.audit.attacks import JsonRecords
from toxiforge.errors import InputError
from toxiforge.intervals import Resampler
from toxiforge.pipeline.plan import GenerationPlan

PROMPTS_DIR = Path("attacks") / "prompts"
DECODERS = ("alice", "top-k")


@dataclass
class PromptAttack:
    """What the section generates: ``plan`` (prompts), ``alice`` and ``topk`` decoder configs
    (:func:`~toxiforge.decoding.decoder_config`), ``validate_with`` (a classifier spec or None) and the
    :class:`~toxiforge.pipeline.Generator` that runs them (the language model, loaded on first use)."""

    plan: GenerationPlan
    alice: Any
    topk: Any
    generator: Any
    validate_with: str | None = None
    device: str = "auto"
    _validation: Any = field(default=None, repr=False)

    def runs_key(self) -> str:
        """Digest of what the generated runs depend on (prompts, decoders, language model): their folder's name, so
        an audit with other generation settings in the same OUT makes new runs instead of resuming these."""
        what = {"plan": self.plan.to_dict(), "alice": repr(self.alice), "topk": repr(self.topk),
                "model": self.generator.model}
        return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:12]

    def fingerprint(self) -> str:
        """Digest of everything the outcomes depend on except the classifier (the cache key's second half)."""
        what = {"runs": self.runs_key(), "validate_with": self.validate_with}
        return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:12]

    def check(self, classifiers: Sequence[str]) -> None:
        """Before any scoring: the prompts can be built, the validator loads and is none of ``classifiers`` nor
        ALICE's keeper, and the keeper is none of ``classifiers``."""
        from toxiforge.attacks.validation import Validation, check_keeper

        self.plan.expand()  # a bad -d/--attack-prompts/--groups fails here
        self._validation = Validation(self.validate_with, self.device)
        keeper = getattr(self.alice, "keep_label_with", None)
        for spec in classifiers:
            check_keeper(keeper, spec)
            self._validation.check(spec, keeper)
        self._validation.load()

    def validation(self) -> Any:
        if self._validation is None:
            from toxiforge.attacks.validation import Validation

            self._validation = Validation(self.validate_with, self.device)
        return self._validation


def _rows(run_dir: Path, method: str, validation: Any) -> list[dict[str, Any]]:
    """A run's usable statements: row id (its prompt), prompt label, text, the run's ``fooled`` and the validator's
    score (None without one)."""
    from toxiforge.attacks.validation import run_rows
    from toxiforge.data.examples import column, read_any_table

    ids = column(read_any_table(run_dir), "row_id")
    rows = run_rows(run_dir, method)
    scores = validation.scores(run_dir)
    scores = [None] * len(rows) if scores is None else scores
    return [{"id": None if e.row is None else ids[e.row], "label": e.label, "text": e.text, "fooled": fooled,
             "validator": s} for (e, fooled), s in zip(rows, scores)]


def _generate(attack: PromptAttack, decoding: Any, folder: Path, classifier: Any = None, name: str | None = None
              ) -> None:
    from toxiforge.records import run_complete

    if not run_complete(folder):
        attack.generator.run(attack.plan, decoding, folder, classifier=classifier, classifier_name=name)


def attack_outcomes(attack: PromptAttack, out: Path, classifier: Any, key: str, name: str,
                    score: Callable[[list[str]], np.ndarray], log: Callable[[str], None] = lambda line: None
                    ) -> dict[str, Any]:
    """Generate (or resume) the top-k run and ``classifier``'s ALICE run and return the record the section is
    computed from: per decoder, the rows of :func:`_rows` with ``fooled`` (top-k rows are scored with ``score``,
    the classifier's P(toxic) of texts; ALICE rows were scored as they were generated)."""
    from toxiforge.records import METHOD_ALICE, METHOD_TOPK, is_toxic

    folder = Path(out) / PROMPTS_DIR / attack.runs_key()
    topk_dir, alice_dir = folder / "topk", folder / f"alice-{key}"
    log(f"top-k from the prompts: {attack.plan.total} statements into {topk_dir}")
    _generate(attack, attack.topk, topk_dir)
    log(f"ALICE against {name}: {attack.plan.total} statements into {alice_dir}")
    _generate(attack, attack.alice, alice_dir, classifier, name)
    validation = attack.validation()
    topk = _rows(topk_dir, METHOD_TOPK, validation)
    scores = score([r["text"] for r in topk]) if topk else np.zeros(0)
    for r, s in zip(topk, scores):
        r["fooled"] = bool(is_toxic(float(s))) != bool(r["label"])
    return {"alice": _rows(alice_dir, METHOD_ALICE, validation), "top-k": topk,
            "validate_with": attack.validate_with, "keep_label_with": getattr(attack.alice, "keep_label_with", None)}


def _confirmed(r: dict[str, Any]) -> bool | None:
    from toxiforge.attacks.validation import agrees, labelled
    from toxiforge.data.examples import Example

    if r["fooled"] is None or r["validator"] is None or not labelled(r["validator"]):
        return None
    return bool(r["fooled"]) and agrees(Example(r["text"], r["label"]), r["validator"])


def _paired(a: dict[str, bool | None], b: dict[str, bool | None], n_boot: int, seed: int) -> Any:
    """ALICE minus top-k over the prompts both have an outcome for, resampling prompts (paired)."""
    ids = sorted(i for i in a if i in b and a[i] is not None and b[i] is not None)
    x = np.asarray([float(bool(a[i])) for i in ids])
    y = np.asarray([float(bool(b[i])) for i in ids])

    def difference(w: np.ndarray) -> np.ndarray:
        total = w.sum(axis=1)
        return np.where(total > 0, (w @ (x - y)) / np.maximum(total, 1), np.nan)

    if not ids:
        return {"prompts": 0, "difference": None}
    return {"prompts": len(ids), "difference": Resampler(len(ids), n_boot, seed).estimates({"d": difference})["d"]}


def summarise(record: dict[str, Any], n_boot: int, seed: int) -> dict[str, Any]:
    """The section of one classifier: per decoder the flip shares (:func:`~toxiforge.attacks.validation.flip_shares`:
    overall and per prompt label, and with a validator ``validated``, ``confirmed``, ``validator_agrees``) and the
    statements; ``alice_minus_topk``: the paired differences of the flip rate (and of the confirmed rate)."""
    from toxiforge.attacks.validation import flip_shares
    from toxiforge.data.examples import Example

    out: dict[str, Any] = {"validate_with": record.get("validate_with"),
                           "keep_label_with": record.get("keep_label_with")}
    for decoder in DECODERS:
        rows = record[decoder]
        examples = [Example(r["text"], r["label"]) for r in rows]
        validated = None if record.get("validate_with") is None else [
            float("nan") if r["validator"] is None else r["validator"] for r in rows]
        out[decoder] = {"statements": len(rows), **flip_shares(examples, [r["fooled"] for r in rows], validated)}
    alice, topk = ({r["id"]: r for r in record[d]} for d in DECODERS)

    def paired(outcome: Callable[[dict[str, Any]], bool | None]) -> dict[str, Any]:
        return _paired({i: outcome(r) for i, r in alice.items()}, {i: outcome(r) for i, r in topk.items()},
                       n_boot, seed)

    out["alice_minus_topk"] = {"flip_rate": paired(lambda r: r["fooled"])}
    if record.get("validate_with") is not None:
        out["alice_minus_topk"]["confirmed"] = paired(_confirmed)
    return out


class OutcomeCache(JsonRecords):
    """Row-level outcomes per (classifier digest, attack fingerprint) under ``OUT/attacks/prompts/``."""

    def __init__(self, out: str | Path, attack: PromptAttack):
        self.folder, self.fingerprint = Path(out) / PROMPTS_DIR, attack.fingerprint()

    def path(self, key: str) -> Path:
        return self.folder / f"{key}-{self.fingerprint}.json"


def check_source(prompts: str | None, demonstrations: str | None) -> tuple[str, str] | None:
    """``(source, prompt source kind)`` of the section, None when neither is given; both is an error."""
    if prompts and demonstrations:
        raise InputError("--attack-prompts and --demonstrations were both given", hint="use one prompt source")
    if prompts:
        return prompts, "prompts"
    return (demonstrations, "demonstrations") if demonstrations else None
