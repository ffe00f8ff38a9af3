"""One fingerprint of a classifier: what decides its scores, by content. Every stage that caches scores or compares
classifiers takes it from here: the audit's score cache (:mod:`toxiforge.audit.scores`), harden's resume check
(``harden.json``'s ``weights``), the validator's cache beside each attack run, the keeper ALICE records, and the
refusal of a validator or keeper that is the attacked classifier (:func:`same_classifier`).

A **local classifier** (a model folder, ``judge:FOLDER``, ``judge:FILE.gguf``) is fingerprinted by the SHA-256 of
the files that decide its scores, each read whole whatever its size (:data:`SCORING_FILES`, the folder's top level,
where transformers loads from): the weights (safetensors, ``pytorch_model*.bin``, their shard indexes, GGUF,
adapters), ``config.json`` (the architecture and ``id2label``, the label map), ``generation_config.json`` and the
tokenizer's files (``tokenizer*``, vocabularies, merges, SentencePiece models, special tokens, chat templates).
Nothing else counts: the model card ``README.md`` that ``train`` and ``audit --model-card`` write, training logs,
evaluation reports and checkpoint subfolders can change without changing the fingerprint, while a weight file
replaced by another of the same size and modification time does change it. The kind (a classification head or a
judge) is part of it, so ``DIR`` and ``judge:DIR`` differ.

**Any other classifier** (a registry name, a hub id, ``judge:openai:URL#MODEL``) has no fingerprint (None): callers
identify it by its name, as they always have (a hub model that changes under the same id is not noticed: pin a
local copy to be sure).

Reading every byte costs about a second per GB; each file's SHA-256 is kept for the process by (path, size,
modification and change times, inode), so a folder is read once per process however many stages ask. Content
decides: a file rewritten to the same size with its modification time put back still changes its change time.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from toxiforge._io import hash_file
from toxiforge.classifiers.registry import JUDGE_PREFIX

PREFIX = "sha256:"    # every fingerprint starts with it (harden.json's digests from before issue 56 do not)
WEIGHT_FILES = ("*.safetensors", "*.safetensors.index.json", "pytorch_model*.bin", "pytorch_model*.bin.index.json",
                "*.gguf", "adapter_model*", "adapter_config.json")
SCORING_FILES = (*WEIGHT_FILES, "config.json", "generation_config.json", "tokenizer*", "vocab*", "merges.txt",
                 "*.model", "*.spm", "*.tiktoken", "special_tokens_map.json", "added_tokens.json", "chat_template*")

_FILE_DIGESTS: dict[tuple[str, int, int, int, int], str] = {}   # (path, size, mtime, ctime, inode) -> SHA-256


@dataclass(frozen=True)
class LocalModel:
    """The files that decide a local classifier's scores: ``kind`` "head" or "judge", ``root`` the folder (or the
    model file itself), ``files`` sorted by name."""

    kind: str
    root: Path
    files: tuple[Path, ...]

    @classmethod
    def find(cls, spec: str | Path) -> LocalModel | None:
        """The local classifier ``spec`` names (a folder or a file, with or without ``judge:``), None for any other."""
        text = str(spec)
        kind = "judge" if text.startswith(JUDGE_PREFIX) else "head"
        root = Path(text.removeprefix(JUDGE_PREFIX)).expanduser()
        if root.is_file():
            return cls(kind, root, (root,))
        if not root.is_dir():
            return None
        files = sorted(p for p in root.iterdir() if p.is_file() and _matches(p.name, SCORING_FILES))
        return cls(kind, root, tuple(files))

    @property
    def weights(self) -> tuple[Path, ...]:
        return tuple(p for p in self.files if p == self.root or _matches(p.name, WEIGHT_FILES))

    def shape(self, files: tuple[Path, ...]) -> list[tuple[str, int]]:
        """Each file's name in the folder ("" for a model file given itself: its name is no part of it) and size."""
        return [("" if p == self.root else p.name, p.stat().st_size) for p in files]

    def digest(self, files: tuple[Path, ...] | None = None) -> str:
        """:data:`PREFIX` and the SHA-256 of the kind and each file's name, size and SHA-256 (``files``: all)."""
        files = self.files if files is None else files
        h = hashlib.sha256(f"toxiforge.classifier/1\t{self.kind}\n".encode())
        for (name, size), path in zip(self.shape(files), files):
            h.update(f"{name}\t{size}\t{file_sha256(path)}\n".encode())
        return PREFIX + h.hexdigest()


def _matches(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


def file_sha256(path: Path) -> str:
    """The SHA-256 of ``path``'s bytes, read once per process while the file is unchanged (module docstring)."""
    st = os.stat(path)
    key = (str(Path(path).resolve()), st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
    if key not in _FILE_DIGESTS:
        _FILE_DIGESTS[key] = hash_file(hashlib.sha256(), path).hexdigest()
    return _FILE_DIGESTS[key]


def fingerprint(spec: str | Path) -> str | None:
    """The content fingerprint of a local classifier (module docstring); None for a name, hub id or server."""
    model = LocalModel.find(spec)
    return None if model is None else model.digest()


def same_classifier(a: str | Path, b: str | Path) -> bool:
    """Whether two classifier specs are one classifier for self-confirmation: the same name, or local classifiers of
    one kind whose weight files have the same names and bytes (hashed only when their names and sizes agree), so
    another spelling of the path or a copy of the folder with its own README is the same."""
    if str(a) == str(b):
        return True
    ma, mb = LocalModel.find(a), LocalModel.find(b)
    if ma is None or mb is None or not ma.weights or ma.kind != mb.kind:
        return False
    return ma.shape(ma.weights) == mb.shape(mb.weights) and ma.digest(ma.weights) == mb.digest(mb.weights)
