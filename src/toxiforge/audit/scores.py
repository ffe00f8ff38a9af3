"""Scores cached per (classifier, dataset) content digest under ``OUT/scores/``, so an audit that adds a
classifier scores only it and a stopped audit finishes the rest with ``--resume``.

File names: ``scores/<classifier digest>-<dataset digest>.npy`` (float64 P(toxic) per row, in the data's order)
and a ``.json`` beside it saying what the digests stand for. Both are written atomically when a pair is finished.
While a pair is being scored, its finished chunks go to ``.partial.npy`` after every chunk, so a crash or
Ctrl-C on row 90,000 of 250,000 resumes at the chunk it stopped in.

* **Dataset digest**: SHA-256 of every row's text and label, in order (the content, not the file name).
* **Classifier digest**: SHA-256 of the ``-c`` spec, the options that change scores (judge template and policy,
  toxic label), and, for a local model directory or file, the name, size and modification time of every file in
  it plus the contents of its files up to 1 MiB (configs, tokenizers): retraining into the same folder changes
  it, while multi-GB weights are not read. Registry names and hub ids are digested by name (a hub model that
  changes under the same id is not noticed: pin a local copy to be sure).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge._io import atomic_write, atomic_write_text
from toxiforge.classifiers.registry import scoring_options
from toxiforge.data.examples import LabeledData

SCORES_DIR = "scores"
SMALL_FILE = 1 << 20   # files up to 1 MiB of a model folder are digested by content
DIGEST_CHARS = 16
CHUNK = 1024           # rows scored between two partial saves


def dataset_digest(data: LabeledData) -> str:
    h = hashlib.sha256()
    for e in data.examples:
        h.update(f"{e.label}\t{len(e.text)}\t".encode())
        h.update(e.text.encode("utf-8", "surrogatepass"))
    return h.hexdigest()[:DIGEST_CHARS]


def classifier_digest(spec: str, options: Mapping[str, Any]) -> str:
    h = hashlib.sha256(json.dumps({"spec": spec, "options": dict(sorted(scoring_options(options).items()))},
                                  default=str).encode())
    path = Path(spec.split(":", 1)[1] if spec.startswith("judge:") else spec).expanduser()
    if path.exists():
        files = sorted(p for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file())
        for p in files:
            st = p.stat()
            h.update(f"{p.relative_to(path) if p != path else p.name}\t{st.st_size}\t{st.st_mtime_ns}\n".encode())
            if st.st_size <= SMALL_FILE:
                h.update(p.read_bytes())
    return h.hexdigest()[:DIGEST_CHARS]


class ScoreCache:
    """The ``scores/`` folder of an audit output."""

    def __init__(self, out: str | Path):
        self.folder = Path(out) / SCORES_DIR

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
        """Score ``texts`` from where an earlier try stopped, saving after each chunk; the finished pair is
        written with ``info`` beside it and the partial file removed."""
        done = self.partial(clf, data)
        done = done if len(done) <= len(texts) else np.empty(0)
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
        atomic_write_text(self.path(clf, data, ".json"), json.dumps(dict(info), indent=2, default=str) + "\n")
        self.path(clf, data, ".partial.npy").unlink(missing_ok=True)
        return scores

    def finished(self) -> int:
        return len(list(self.folder.glob("*.json"))) if self.folder.is_dir() else 0
