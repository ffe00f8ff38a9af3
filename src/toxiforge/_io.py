"""File helpers shared by every stage: atomic writes (temporary file beside the target, fsync, rename), the
output-folder check, a file's bytes into a hash, and toxiforge's cache folder."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any


def atomic_write(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` to fill a temporary file in ``path``'s folder, then move it onto ``path``.

    A failure at any point leaves ``path`` untouched and no temporary file behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
    return path


def atomic_write_text(path: str | Path, text: str) -> Path:
    """:func:`atomic_write` of UTF-8 text with '\\n' line endings."""

    def write(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)

    return atomic_write(path, write)


def hash_file(digest: Any, path: str | Path) -> Any:
    """Feed ``path``'s bytes into ``digest`` (a :mod:`hashlib` object) 1 MiB at a time, and return it (Python
    3.10 has no ``hashlib.file_digest``)."""
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest


def require_empty_dir(path: str | Path, overwrite: bool, *, option: str = "-o", error: type | None = None,
                      flag: str = "--overwrite") -> Path:
    """Refuse an output folder that is a file, or a non-empty folder unless ``overwrite``; return it as a Path.

    The one output-folder check of every stage. ``option`` names the command-line option in the hint, ``flag`` the
    option that allows a non-empty folder (``--overwrite``; a generation job's ``--resume``); ``error`` is the
    :class:`InputError` subclass to raise.
    """
    from toxiforge.errors import InputError

    error = error or InputError
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise error("output path exists and is not a folder", path=path, hint=f"choose a folder path for {option}")
    if path.is_dir() and any(path.iterdir()) and not overwrite:
        raise error("output folder exists and is not empty", path=path,
                    hint=f"choose a new or empty folder for {option}, or pass {flag}")
    return path


def require_new_files(*paths: str | Path | None, overwrite: bool, flag: str = "--overwrite") -> None:
    """Refuse output files that exist unless ``overwrite`` (None entries are outputs not asked for): the file
    side of :func:`require_empty_dir`, the one rule of every command that writes outputs."""
    from toxiforge.errors import InputError

    for path in paths:
        if path is not None and Path(path).exists() and not overwrite:
            raise InputError("output file exists", path=path, hint=f"choose another path, or pass {flag}")


def cache_dir() -> Path:
    """toxiforge's cache folder (converted weights, fetched word lists and models): $TOXIFORGE_CACHE, else the
    platform's user cache dir."""
    env = os.environ.get("TOXIFORGE_CACHE")
    if env:
        return Path(env)
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("toxiforge"))
