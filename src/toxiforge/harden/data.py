"""The statements of a ``toxiforge harden`` round: which ones join the training data, and their validation.

An ALICE statement joins with its *prompt* label, as the paper trains on ALICE data; the paper also had
annotators validate them. ``--validate-with CLASSIFIER`` stands in for that step: a classifier other than the
attacked one scores every statement of every run the loop reads (:class:`Validation`, cached beside the run), and
a statement counts as *validated* when that classifier agrees with its prompt label. Validation applies alike to
both arms (the ALICE statements that join and the top-k control pool they are matched from) and to the flip
rates (:func:`~toxiforge.harden.report.flip_rates` reports the rate among validated statements beside
the raw one). ``--validate-with people`` has annotators label the statements instead (:mod:`toxiforge.harden.people`):
their majority labels take the scores' place.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text, hash_file
from toxiforge.data.examples import Example
from toxiforge.errors import InputError
from toxiforge.records import METHOD_ALICE, is_toxic

VALIDATION_SUFFIX = ".validation.json"  # round-N/ARM/attack.validation.json beside round-N/ARM/attack/


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


@dataclass(frozen=True)
class Statements:
    """A run's statements to select from or measure flips on: ``validated``, a validator's P(toxic) for each of
    :func:`run_rows` (None: no validator); ``keep``, which of them the run kept (None: all; sets.py leaves
    out statements of the training data or of an earlier set)."""

    run_dir: Path
    validated: Sequence[float] | None = None
    keep: Sequence[bool] | None = None
    method: str = METHOD_ALICE

    def rows(self) -> list[tuple[Example, bool | None, float | None]]:
        """The kept statements as ``(Example with its prompt label, fooled, validator score or None)``."""
        rows = run_rows(self.run_dir, self.method)
        scores = self.validated if self.validated is not None else [None] * len(rows)
        keep = self.keep if self.keep is not None else [True] * len(rows)
        return [(e, fooled, s) for (e, fooled), s, ok in zip(rows, scores, keep) if ok]


def select_alice(attack: Statements, add: str) -> list[Example]:
    """The attack's statements that flipped the classifier's label (``add="all"``: all of them); with a
    validator, only those it gives their prompt label."""
    return [e for e, fooled, s in attack.rows() if (s is None or agrees(e, s)) and (add == "all" or fooled)]


def select_control(topk: Statements, like: Sequence[Example], seed: int) -> list[Example]:
    """As many top-k statements as ``like`` has, label by label (a seeded sample; all of a label when short);
    with a validator, drawn only from the statements it gives their prompt label."""
    pool = [e for e, _, s in topk.rows() if s is None or agrees(e, s)]
    rng = random.Random(seed)
    out: list[Example] = []
    for label in (0, 1):
        want = sum(e.label == label for e in like)
        have = [e for e in pool if e.label == label]
        out += rng.sample(have, min(want, len(have)))
    return out


def write_examples(path: Path, examples: Sequence[Example]) -> None:
    lines = [json.dumps({"text": e.text, "label": e.label, "group": e.group, "method": e.method},
                        ensure_ascii=False) for e in examples]
    atomic_write_text(path, "".join(line + "\n" for line in lines))


def read_examples(path: Path) -> list[Example]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Example(r["text"], int(r["label"]), r.get("group"), r.get("method")) for r in rows]


JUDGE_PREFIX = "judge:"
WEIGHT_FILES = ("*.safetensors", "pytorch_model*.bin")  # what save_pretrained writes the weights to


def _weight_files(spec: str | Path) -> tuple[str, list[Path]] | None:
    """``(kind, weight files)`` of a classifier spec naming a local directory (kind: "judge" or "head"), else
    None (a registry name or hub id: compared by name)."""
    text = str(spec)
    kind = "judge" if text.startswith(JUDGE_PREFIX) else "head"
    folder = Path(text.removeprefix(JUDGE_PREFIX)).expanduser()
    files = sorted(f for pattern in WEIGHT_FILES for f in folder.glob(pattern)) if folder.is_dir() else []
    return (kind, files) if files else None


def weights_digest(spec: str | Path) -> str | None:
    """SHA-256 of a classifier directory's weight files (names and bytes), None when ``spec`` is no such
    directory."""
    found = _weight_files(spec)
    if found is None:
        return None
    kind, files = found
    digest = hashlib.sha256(kind.encode())
    for f in files:
        digest.update(f.name.encode() + b"\0")
        hash_file(digest, f)
    return digest.hexdigest()


def same_classifier(a: str | Path, b: str | Path) -> bool:
    """Whether two classifier specs are one classifier: the same name, or directories whose weights have the same
    digest (hashed only when their weight files have the same names and sizes)."""
    if str(a) == str(b):
        return True
    fa, fb = _weight_files(a), _weight_files(b)
    if fa is None or fb is None:
        return False
    shape = [(kind, [(f.name, f.stat().st_size) for f in files]) for kind, files in (fa, fb)]
    return shape[0] == shape[1] and weights_digest(a) == weights_digest(b)


@dataclass
class Validation:
    """The validator ``spec`` (anything :func:`~toxiforge.classifiers.load_classifier` loads, or None: no
    validation) and its scores of runs, loaded once and cached in ``RUN.validation.json`` beside each run."""

    spec: str | None
    device: str = "auto"
    _classifier: Any = field(default=None, repr=False)

    def check(self, attacked: str | Path | None) -> None:
        """Refuse a validator that is the attacked classifier: it would reject every flip by definition. Compared by
        content (:func:`same_classifier`), so another spelling of the path or a copy of the directory is refused."""
        if self.spec is not None and attacked is not None and same_classifier(self.spec, attacked):
            raise InputError(f"--validate-with {self.spec} is the attacked classifier (-c {attacked}, the same "
                             "weights): it disagrees with every statement that fooled it, so nothing would join",
                             hint="validate with another classifier (e.g. one trained on human-written text, or a "
                                  "judge:MODEL)")

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
        if cache.exists():
            saved = json.loads(cache.read_text(encoding="utf-8"))
            if saved["validator"] == self.spec and saved["texts"] == texts:
                return [float(s) for s in saved["scores"]]
        self.load()
        scores = [float(s) for s in self._classifier.predict_proba(texts)] if texts else []
        atomic_write_text(cache, json.dumps({"validator": self.spec, "texts": texts, "scores": scores}) + "\n")
        scored(cache)
        return scores
