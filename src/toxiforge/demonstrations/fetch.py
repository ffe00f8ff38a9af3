"""Fetch upstream ToxiGen's demonstrations and prompts (microsoft/TOXIGEN, MIT licence) at a pinned commit.

toxiforge ships only benign demonstrations. :func:`fetch_upstream` downloads the source archive of
``microsoft/TOXIGEN`` from GitHub's codeload service, keeps only ``demonstrations/**`` and ``prompts/*.txt``
(not ``prompts/new/`` or anything else), and writes them with a ``SOURCE.json`` that records where they came
from. The result is a folder :func:`~toxiforge.demonstrations.sets.load_demonstrations` (and ``--demonstrations``)
accepts.

Without network access the fetch fails fast (one try, short timeout) and says how to use a local copy instead.
Everything is written to a temporary folder beside ``dest`` and moved into place at the end, so a failed
fetch leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from http.client import HTTPException
from pathlib import Path, PurePosixPath
from typing import IO, Any

from toxiforge._io import require_empty_dir
from toxiforge.errors import InputError

UPSTREAM_REPO = "microsoft/TOXIGEN"
PINNED_COMMIT = "01517e814639e0334c920a3c502036c8158aac87"
ARCHIVE_URL = "https://codeload.github.com/{repo}/tar.gz/{commit}"
# Groups that upstream has prompt files for (prompts/{hate,neutral}_<group>_1k.txt) but no demonstrations/ files, at
# PINNED_COMMIT: their sets come only from the prompt files, so a copy of demonstrations/ alone lacks them.
PROMPT_ONLY_GROUPS = ("women", "trans")

Opener = Callable[..., IO[bytes]]
"""``opener(url, timeout=seconds)`` returning a readable binary file object (default: urllib's urlopen)."""


class FetchError(InputError):
    """The upstream files could not be downloaded or unpacked."""


def archive_url(commit: str = PINNED_COMMIT, repo: str = UPSTREAM_REPO) -> str:
    return ARCHIVE_URL.format(repo=repo, commit=commit)


def local_copy_hint(commit: str) -> str:
    return (f"clone or copy {UPSTREAM_REPO} at commit {commit} elsewhere (git clone "
            f"https://github.com/{UPSTREAM_REPO} && git -C TOXIGEN checkout {commit}), then pass "
            f"--demonstrations /path/to/TOXIGEN (or its demonstrations/ or prompts/ folder)")


def _wanted(rel: PurePosixPath) -> bool:
    parts = rel.parts
    if len(parts) >= 2 and parts[0] == "demonstrations":
        return True
    return len(parts) == 2 and parts[0] == "prompts" and parts[1].endswith(".txt")


def _member_path(name: str) -> PurePosixPath | None:
    """The member's path below the archive's top folder; raises for absolute paths or '..'."""
    posix = PurePosixPath(name)
    if posix.is_absolute() or name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) \
            or ".." in posix.parts or "\\" in name:
        raise FetchError(f"archive member {name!r} has an unsafe path (absolute or '..')",
                         hint="the download is not a plain GitHub source archive; fetch again or use a local copy")
    parts = [p for p in posix.parts if p not in ("", ".")]
    return PurePosixPath(*parts[1:]) if len(parts) > 1 else None


def _extract(archive: IO[bytes], staging: Path) -> int:
    """Extract the wanted regular files of a .tar.gz into ``staging``; returns how many were written."""
    count = 0
    try:
        with tarfile.open(fileobj=archive, mode="r:gz") as tar:
            for member in tar:
                rel = _member_path(member.name)
                if rel is None or not member.isfile() or not _wanted(rel):
                    continue
                target = staging.joinpath(*rel.parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is None:
                    continue
                with source, open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
                count += 1
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise FetchError(f"the download is not a readable .tar.gz archive ({exc})",
                         hint="fetch again, or use a local copy") from exc
    return count


def _check_dest(dest: Path, overwrite: bool) -> None:
    require_empty_dir(dest, overwrite, option="--dest", error=FetchError)


def download(url: str, into: IO[bytes], *, hint: str, missing_hint: str | None = None,
             opener: Opener | None = None, timeout: float = 20, host: str = "GitHub") -> None:
    """Copy ``url`` into the binary file ``into`` with one attempt (``opener`` defaults to urllib's urlopen).

    Any failure raises :class:`FetchError`: HTTP 404 with ``missing_hint`` (else ``hint``), every other HTTP
    error or an unreachable host (offline: at once, or after ``timeout`` seconds) with ``hint``. Shared by every
    fetch command (demonstrations, the bias word list, the dialect model).
    """
    opener = opener or urllib.request.urlopen
    try:
        with opener(url, timeout=timeout) as response:
            shutil.copyfileobj(response, into)
    except urllib.error.HTTPError as exc:
        raise FetchError(f"{host} answered HTTP {exc.code} for {url}",
                         hint=(missing_hint or hint) if exc.code == 404 else hint) from exc
    except (urllib.error.URLError, TimeoutError, ConnectionError, HTTPException, OSError) as exc:
        reason = getattr(exc, "reason", None) or exc
        raise FetchError(f"could not reach {host} to download {url} ({reason})", hint=hint) from exc


def check_commit(commit: str, example: str) -> str:
    """``commit`` when it looks like a commit id or tag, else a :class:`FetchError` showing ``example``."""
    if not re.fullmatch(r"[A-Za-z0-9._-]+", commit or ""):
        raise FetchError(f"{commit!r} is not a commit id", hint=f"pass a commit SHA such as {example}")
    return commit


def fetch_upstream(dest: str | Path, commit: str = PINNED_COMMIT, timeout: float = 20, *,
                   overwrite: bool = False, opener: Opener | None = None) -> Path:
    """Download upstream's ``demonstrations/`` and ``prompts/*.txt`` at ``commit`` into ``dest``.

    ``dest`` must be new or empty unless ``overwrite`` (then its old content is replaced, only after the new
    content is complete). ``opener(url, timeout=...)`` replaces :func:`urllib.request.urlopen` (tests pass one
    that serves an in-memory archive). Makes one attempt; without network it raises :class:`FetchError` at once
    (or after ``timeout`` seconds) with a hint on using a local copy. Returns ``dest``.
    """
    dest = Path(dest)
    check_commit(commit, PINNED_COMMIT)
    _check_dest(dest, overwrite)
    url = archive_url(commit)
    with tempfile.TemporaryFile() as archive:
        # nothing is written under dest's folder before the download succeeded
        download(url, archive, opener=opener, timeout=timeout, hint=local_copy_hint(commit),
                 missing_hint=f"check that {commit!r} is a commit of {UPSTREAM_REPO}, or " + local_copy_hint(commit))
        archive.seek(0)
        with staged_folder(dest) as staging:
            count = _extract(archive, staging)
            if count == 0:
                raise FetchError(f"the archive of {commit} has no demonstrations/ or prompts/ files",
                                 hint=f"use commit {PINNED_COMMIT}, or " + local_copy_hint(commit))
            write_source(staging, {"repo": UPSTREAM_REPO, "commit": commit, "url": url, "license": "MIT",
                                   "files": count})
    return dest


@contextmanager
def staged_folder(dest: Path) -> Iterator[Path]:
    """A new staging folder beside ``dest`` to fill: when the block completes, it replaces ``dest``
    (:func:`move_into_place`); after an error ``dest`` is untouched. The staging folder never stays behind."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.fetch-", dir=dest.parent))
    try:
        yield staging
        move_into_place(staging, dest)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def write_source(folder: Path, info: dict[str, Any]) -> None:
    """``folder/SOURCE.json``: where fetched files came from (``info``) and when (``fetched_at``, UTC)."""
    source = {**info, "fetched_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    (folder / "SOURCE.json").write_text(json.dumps(source, indent=2) + "\n", encoding="utf-8")


def move_into_place(staging: Path, dest: Path) -> None:
    """Replace ``dest`` (absent, or a folder) by the complete folder ``staging``; the old content goes last."""
    if not dest.exists():
        os.replace(staging, dest)
        return
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    os.replace(dest, old)
    try:
        os.replace(staging, dest)
    except OSError:
        os.replace(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)


def read_source_info(folder: str | Path) -> dict | None:
    """The ``SOURCE.json`` that :func:`write_source` wrote in ``folder``, or None."""
    path = Path(folder) / "SOURCE.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
