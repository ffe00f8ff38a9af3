"""Scores cached per (classifier, dataset) content digest under ``OUT/scores/``, so an audit that adds a
classifier scores only it and a stopped audit finishes the rest with ``--resume``.

File names: ``scores/<classifier digest>-<dataset digest>.npy`` (float64 P(toxic) per row, in the data's order)
and a ``.json`` beside it saying what the digests stand for (the ``-c`` spec among them), written when the pair's
scoring starts; the ``.npy`` is written atomically when the pair is finished. While a pair is being scored, its
finished chunks go to ``.partial.npy`` after every chunk, so a crash or Ctrl-C on row 90,000 of 250,000 resumes at
the chunk it stopped in.

* **Dataset digest**: SHA-256 of every row's text and label, in order (the content, not the file name).
* **Classifier digest**: SHA-256 of the ``-c`` spec, the options that change scores (judge template and policy,
  toxic label) and, for a local model folder or file, its content fingerprint
  (:func:`toxiforge.classifiers.fingerprint.fingerprint`: weights, config and tokenizer files read whole, whatever
  their size; not the README a model card writes, nor logs): the one harden records. Registry names, hub ids and
  servers are digested by name, as before (a hub model that changes under the same id is not noticed: pin a local
  copy to be sure). Caches written before issue 56 digested a folder by every file's size and modification time:
  their folder classifiers are scored once more.
* **Stale scores**: when a classifier's digest changes (its folder retrained, another template), the scores
  recorded for its ``-c`` spec under another digest are removed (:meth:`ScoreCache.remove_stale`), and the count
  of finished pairs an interrupted audit reports counts this audit's pairs only (:attr:`ScoreCache.pairs`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge._io import atomic_write, atomic_write_text
from toxiforge.classifiers.fingerprint import fingerprint
from toxiforge.classifiers.registry import JUDGE_PREFIX, scoring_options
from toxiforge.data.examples import LabeledData

SCORES_DIR = "scores"
DIGEST_CHARS = 16
CHUNK = 1024           # rows scored between two partial saves


def dataset_digest(data: LabeledData) -> str:
    h = hashlib.sha256()
    for e in data.examples:
        h.update(f"{e.label}\t{len(e.text)}\t".encode())
        h.update(e.text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:DIGEST_CHARS]


def classifier_digest(spec: str, options: Mapping[str, Any]) -> str:
    """The digest of a ``-c`` spec with its scoring options (module docstring)."""
    what: dict[str, Any] = {"spec": spec, "options": dict(sorted(scoring_options(options).items()))}
    content = fingerprint(spec)
    if content is not None:   # names are digested as before issue 56, so their cached scores stay valid
        what["content"] = content
    return hashlib.sha256(json.dumps(what, default=str).encode()).hexdigest()[:DIGEST_CHARS]


def _where(spec: str) -> str:
    """``spec`` with a local path resolved (``./m`` and ``m`` are one classifier), for matching recorded specs."""
    judge = spec.startswith(JUDGE_PREFIX)
    path = Path(spec.removeprefix(JUDGE_PREFIX)).expanduser()
    return (JUDGE_PREFIX if judge else "") + str(path.resolve()) if path.exists() else spec


class ScoreCache:
    """The ``scores/`` folder of an audit output; ``pairs`` the (classifier digest, dataset digest) pairs of the
    audit at hand, once known (:meth:`finished` counts those; empty: every finished pair in the folder)."""

    def __init__(self, out: str | Path, pairs: Iterable[tuple[str, str]] = ()):
        self.folder = Path(out) / SCORES_DIR
        self.pairs = list(pairs)

    def path(self, clf: str, data: str, suffix: str = ".npy") -> Path:
        return self.folder / f"{clf}-{data}{suffix}"

    def get(self, clf: str, data: str, n: int) -> np.ndarray | None:
        """The finished scores of a pair, or None (absent, or of another length: scored again)."""
        path = self.path(clf, data)
        if not path.exists():
            return None
        scores = np.load(path)
        return scores if scores.shape == (n,) else None

    def info(self, clf: str, data: str) -> dict[str, Any]:
        """What a finished pair's ``.json`` says (the classifier's spec, digest and ``describe()``, the dataset);
        empty when absent or unreadable."""
        try:
            found = json.loads(self.path(clf, data, ".json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def partial(self, clf: str, data: str) -> np.ndarray:
        path = self.path(clf, data, ".partial.npy")
        return np.load(path) if path.exists() else np.empty(0)

    def _save(self, path: Path, scores: np.ndarray) -> None:
        def write(tmp: Path) -> None:
            with open(tmp, "wb") as fh:
                np.save(fh, scores)

        atomic_write(path, write)

    def score(self, clf: str, data: str, texts: list[str], predict: Callable[[list[str]], np.ndarray],
              info: Mapping[str, Any], on_progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Score ``texts`` from where an earlier try stopped, saving after each chunk; ``info`` is written beside
        the pair first (so the scores of a classifier whose digest changes can be found and removed), the finished
        scores last, and the partial file removed."""
        done = self.partial(clf, data)
        done = done if len(done) <= len(texts) else np.empty(0)
        atomic_write_text(self.path(clf, data, ".json"), json.dumps(dict(info), indent=2, default=str) + "\n")
        parts = [done]
        if on_progress is not None and len(done):
            on_progress(len(done))
        for start in range(len(done), len(texts), CHUNK):
            chunk = texts[start:start + CHUNK]
            parts.append(np.asarray(predict(chunk), dtype=np.float64).reshape(len(chunk)))
            self._save(self.path(clf, data, ".partial.npy"), np.concatenate(parts))
            if on_progress is not None:
                on_progress(len(chunk))
        scores = np.concatenate(parts)
        self._save(self.path(clf, data), scores)
        self.path(clf, data, ".partial.npy").unlink(missing_ok=True)
        return scores

    def remove_stale(self, spec: str, keep: Collection[str]) -> list[Path]:
        """Remove every file of the pairs recorded for the ``-c`` ``spec`` (or another spelling of its path) under a
        digest not in ``keep`` (the audit's own: ``spec``'s folder retrained, other options): scores that will not
        be read again. The paths removed."""
        if not self.folder.is_dir():
            return []
        stale = set()
        for record in self.folder.glob("*.json"):
            key = record.name.split("-", 1)[0]
            try:
                recorded = json.loads(record.read_text(encoding="utf-8")).get("spec")
            except (OSError, ValueError, AttributeError):
                continue
            if key not in keep and isinstance(recorded, str) and _where(recorded) == _where(spec):
                stale.add(key)
        removed = sorted(p for key in stale for p in self.folder.glob(f"{key}-*"))
        for path in removed:
            path.unlink(missing_ok=True)
        return removed

    def finished(self) -> int:
        """How many of :attr:`pairs` have their scores (every finished pair in the folder when none are set)."""
        if self.pairs:
            return sum(self.path(clf, data).exists() for clf, data in set(self.pairs))
        return sum(not p.name.endswith(".partial.npy") for p in self.folder.glob("*.npy"))
