"""Attacked statements read back with their flips, and their validation by a second classifier, for every stage
that attacks (``attack --validate-with``, the audit's ALICE vs top-k section, ``harden``).

A statement *flips* when the attacked classifier's label is not its (prompt) label. ``--validate-with
CLASSIFIER`` stands in for the annotators who validated the paper's ALICE statements: a classifier other than the
attacked one scores every statement of a run (:class:`Validation`, cached beside the run), and a statement counts
as *validated* when that classifier gives it its prompt label (:func:`agrees`). ``harden --validate-with people``
has annotators label the statements instead (:mod:`toxiforge.harden.people`): their majority labels (1.0, 0.0, NaN
for none) take the scores' place. :func:`flip_shares` gives the flip rates with and without the validation.

No self-confirmation: ALICE with a keeper (``--keep-label-with K``, :mod:`toxiforge.decoding.alice`) searched for
statements K gives their prompt's label, so K's agreement is what the search optimised, not evidence. A validator
that is K, or a copy of its weights, is refused (:meth:`Validation.check`): the confirmed rate must come from a
classifier the search never saw, or from people. :func:`check_keeper` refuses a keeper that is the attacked
classifier (the two terms would pull one classifier both ways).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text
from toxiforge.classifiers.fingerprint import fingerprint, same_classifier
from toxiforge.data.examples import Example
from toxiforge.errors import InputError
from toxiforge.intervals import proportion
from toxiforge.records import METHOD_ALICE, is_toxic

VALIDATION_SUFFIX = ".validation.json"  # RUN.validation.json beside a run folder RUN/


def run_rows(run_dir: Path, method: str) -> list[tuple[Example, bool | None]]:
    """The usable statements of a generation run as ``(Example with its prompt label, fooled)``."""
    from dataclasses import replace

    from toxiforge.data.examples import column, read_any_table
    from toxiforge.data.toxigen import load_generated

    data = load_generated(run_dir)
    fooled = column(read_any_table(run_dir), "fooled")
    return [(replace(e, method=method), None if fooled[e.row] is None else bool(fooled[e.row]))
            for e in data.examples if e.row is not None]


def agrees(example: Example, score: float) -> bool:
    """Whether a validator's P(toxic) ``score`` gives ``example`` its (prompt) label. People's labels are 1.0 or 0.0,
    and NaN where they gave none (a tie, too few annotations: see :mod:`toxiforge.harden.people`), which never
    agrees."""
    return score == score and bool(is_toxic(score)) == bool(example.label)


def labelled(score: float) -> bool:
    """Whether a validator's score is a verdict (NaN: people gave the statement no label)."""
    return score == score


def _shares(rows: Sequence[tuple[int, bool]]) -> dict[str, Any]:
    """Share of True outcomes overall and per prompt label, each with its 95% Wilson interval."""
    out = {"all": proportion([f for _, f in rows]).to_dict()}
    for label, word in ((1, "toxic_prompts"), (0, "benign_prompts")):
        out[word] = proportion([f for lab, f in rows if lab == label]).to_dict()
    return out


def flip_shares(examples: Sequence[Example], flipped: Sequence[bool | None],
                validated: Sequence[float] | None = None) -> dict[str, Any]:
    """Share of the scored statements whose label flipped (toxic prompts scored benign, benign prompts scored
    toxic), overall and per prompt label. With a validator's scores (``validated``): ``validated``, the same among
    the statements it gives their prompt label; ``confirmed``, the share of all scored statements that flipped
    *and* keep their prompt label in its view (the attack's yield of real failures, as the paper counts ALICE's
    success after validation); and ``validator_agrees``, the share of statements it gives their prompt label."""
    out = _shares([(e.label, f) for e, f in zip(examples, flipped) if f is not None])
    if validated is not None:  # statements people gave no label (NaN) count in none of these
        rows = [(e, f, agrees(e, v)) for e, f, v in zip(examples, flipped, validated) if labelled(v)]
        out["validated"] = _shares([(e.label, f) for e, f, k in rows if k and f is not None])
        out["confirmed"] = _shares([(e.label, f and k) for e, f, k in rows if f is not None])
        out["validator_agrees"] = _shares([(e.label, k) for e, _, k in rows])
    return out


@dataclass
class Validation:
    """The validator ``spec`` (anything :func:`~toxiforge.classifiers.load_classifier` loads, or None: no
    validation) and its scores of runs, loaded once and cached in ``RUN.validation.json`` beside each run. The cache
    is keyed by the validator's content (its :func:`~toxiforge.classifiers.fingerprint.fingerprint`; the name for a
    registry name, hub id or server), so a validator retrained at the same path scores again instead of keeping its
    old scores."""

    spec: str | None
    device: str = "auto"
    _classifier: Any = field(default=None, repr=False)
    _digest: str | None = field(default=None, repr=False)

    def check(self, attacked: str | Path | None, keeper: str | Path | None = None) -> None:
        """Refuse a validator that is the attacked classifier (it would reject every flip by definition) or ALICE's
        keeper (it would confirm what the search steered it to confirm: module docstring). Compared by content
        (:func:`~toxiforge.classifiers.fingerprint.same_classifier`), so another spelling of the path or a copy of the
        directory is refused."""
        if self.spec is not None and attacked is not None and same_classifier(self.spec, attacked):
            raise InputError(f"--validate-with {self.spec} is the attacked classifier (-c {attacked}, the same "
                             "weights): it disagrees with every statement that fooled it, so nothing would join",
                             hint="validate with another classifier (e.g. one trained on human-written text, or a "
                                  "judge:MODEL)")
        if self.spec is not None and keeper is not None and same_classifier(self.spec, keeper):
            raise InputError(f"--validate-with {self.spec} is the keeper (--keep-label-with {keeper}, the same "
                             "weights): ALICE searched for statements it gives their prompt's label, so its "
                             "agreement is what the search optimised, not a confirmation; the confirmed rate must "
                             "come from a classifier the search never saw, or from people",
                             hint="validate with a classifier trained on other data (ideally another family: a "
                                  "judge:MODEL, a TF-IDF model), or with people (harden --validate-with people)")


    def load(self) -> None:
        """Load the validator now (a bad spec fails here, before any work); no-op without one."""
        if self.spec is not None and self._classifier is None:
            from toxiforge.classifiers import load_classifier

            self._classifier = load_classifier(self.spec, device=self.device, name="validator")

    def scores(self, run_dir: Path, scored: Callable[[Path], None] = lambda cache: None) -> list[float] | None:
        """The validator's P(toxic) for each statement of ``run_rows(run_dir)``, in order (None: no validator);
        ``scored(cache)`` is called when they were computed rather than read from the cache."""
        if self.spec is None:
            return None
        cache = run_dir.with_name(run_dir.name + VALIDATION_SUFFIX)
        texts = [e.text for e, _ in run_rows(run_dir, METHOD_ALICE)]
        if self._digest is None:
            self._digest = fingerprint(self.spec) or f"name:{self.spec}"
        if cache.exists():
            saved = json.loads(cache.read_text(encoding="utf-8"))
            if saved.get("weights") == self._digest and saved["texts"] == texts:
                return [float(s) for s in saved["scores"]]
        self.load()
        scores = [float(s) for s in self._classifier.predict_proba(texts)] if texts else []
        atomic_write_text(cache, json.dumps({"validator": self.spec, "weights": self._digest, "texts": texts,
                                             "scores": scores}) + "\n")
        scored(cache)
        return scores


def check_keeper(keeper: str | Path | None, attacked: str | Path | None) -> None:
    """Refuse ALICE's keeper when it is the attacked classifier (:func:`same_classifier`): the classifier term pulls
    it toward the other class and the keeper term back, so the search would steer nowhere."""
    if keeper is not None and attacked is not None and same_classifier(keeper, attacked):
        raise InputError(f"--keep-label-with {keeper} is the attacked classifier (-c {attacked}, the same weights): "
                         "the keeper term would pull it back exactly as the classifier term pushes it",
                         hint="keep labels with a classifier trained on other data than -c's")
