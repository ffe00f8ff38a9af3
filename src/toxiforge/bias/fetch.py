"""Fetch the two upstream resources the bias metrics use, each at a pinned commit, into toxiforge's cache.

* :data:`TOXTRIG` -- Zhou et al.'s TOXTRIG word list (``XuhuiZhou/Toxic_Debias``, ``data/word_based_bias_list.csv``,
  columns ``word,categorization``; the paper's footnote 6 and upstream's ``tools/get_stats.py`` and
  ``tools/biasonly_wordbased.py`` read it). toxiforge takes only its OI rows (``offensive-minority-reference``)
  by default; the word list is never copied into this repository.
* :data:`TWITTERAAE` -- Blodgett et al.'s (2016) demographic dialect model (``slanglab/twitteraae``,
  ``model/model_vocab.txt`` and ``model/model_count_table.txt``, the paths its ``code/predict.py`` loads at the
  pinned commit).

Each file is downloaded from GitHub's raw-file service with the download machinery of
:mod:`toxiforge.demonstrations.fetch` (one attempt; offline it fails at once with a hint on using a local copy),
into a staging folder that replaces ``dest`` only when every file arrived, beside a ``SOURCE.json``.

A local copy given once (``--oi-list``, ``--dialect-model``) is kept in the same cache folder
(:func:`remember_resource`), so later commands find it without the option; they say which copy they use.
"""

from __future__ import annotations

import filecmp
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from toxiforge._io import cache_dir
from toxiforge.demonstrations.fetch import FetchError, Opener, check_commit, download, staged_folder, write_source
from toxiforge.errors import InputError

RAW_URL = "https://raw.githubusercontent.com/{repo}/{commit}/{path}"


@dataclass(frozen=True)
class Resource:
    """An upstream resource: repository, pinned commit, files (repository paths) and the cache folder name."""

    name: str
    repo: str
    commit: str
    files: tuple[str, ...]
    license: str
    option: str  # the command-line option that points toxiforge at a local copy instead

    def url(self, path: str, commit: str | None = None) -> str:
        return RAW_URL.format(repo=self.repo, commit=commit or self.commit, path=path)

    def default_dir(self) -> Path:
        return cache_dir() / "bias" / self.name

    def local_copy_hint(self, commit: str | None = None) -> str:
        commit = commit or self.commit
        files = " and ".join(self.files)
        return (f"on a machine with internet, download {files} of https://github.com/{self.repo} at commit "
                f"{commit}, then copy them into {self.default_dir()} (where toxiforge looks by default) or pass "
                f"their folder with {self.option} DIR")


TOXTRIG = Resource("toxtrig", "XuhuiZhou/Toxic_Debias", "bb511db7766fade0866d2254f79b90340e61a456",
                   ("data/word_based_bias_list.csv",), "see the upstream repository", "--oi-list")
TWITTERAAE = Resource("twitteraae", "slanglab/twitteraae", "e17de3184dfe2dfa2a5918da60a10b6cc851f74f",
                      ("model/model_vocab.txt", "model/model_count_table.txt"), "see the upstream repository",
                      "--dialect-model")


def fetch_resource(resource: Resource, dest: str | Path | None = None, *, commit: str | None = None,
                   timeout: float = 20, overwrite: bool = True, opener: Opener | None = None) -> Path:
    """Download ``resource``'s files at ``commit`` (default: the pinned one) into ``dest`` (default: its cache
    folder, :meth:`Resource.default_dir`), flat (base names), with a ``SOURCE.json``. Returns ``dest``.

    ``opener(url, timeout=...)`` replaces urllib's urlopen (tests serve bytes from memory). Nothing under ``dest``
    changes unless every file downloads.
    """
    commit = check_commit(commit or resource.commit, resource.commit)
    dest = Path(dest) if dest is not None else resource.default_dir()
    if dest.exists() and not dest.is_dir():
        raise FetchError("destination exists and is not a folder", path=dest, hint="choose a folder for --dest")
    if dest.is_dir() and any(dest.iterdir()) and not overwrite:
        raise FetchError("destination folder is not empty", path=dest, hint="choose an empty folder")
    with staged_folder(dest) as staging:
        for path in resource.files:
            url = resource.url(path, commit)
            with open(staging / Path(path).name, "wb") as out:
                download(url, out, opener=opener, timeout=timeout, hint=resource.local_copy_hint(commit),
                         missing_hint=f"check that {commit!r} is a commit of {resource.repo} that has {path}, "
                                      f"or use the pinned {resource.commit}")
        write_source(staging, {"repo": resource.repo, "commit": commit, "files": list(resource.files),
                               "urls": [resource.url(p, commit) for p in resource.files], "license": resource.license})
    return dest


def find_resource_file(resource: Resource, name: str, folder: str | Path | None = None) -> Path | None:
    """``folder/name`` (``folder`` default: the cache folder) when it exists; a file path is taken as it is."""
    base = Path(folder).expanduser() if folder is not None else resource.default_dir()
    if base.is_file():
        return base
    path = base / name
    return path if path.is_file() else None


def _origin(folder: Path) -> str:
    try:
        info = json.loads((folder / "SOURCE.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return ""
    when = str(info.get("fetched_at", ""))[:10]
    if info.get("copied_from"):
        return f", copied from {info['copied_from']} on {when}"
    return f", fetched from {info.get('repo')}@{str(info.get('commit', ''))[:7]} on {when}"


def remember_resource(resource: Resource, given: str | Path | None = None) -> tuple[Path | None, str]:
    """Where to read ``resource`` from, and a line saying which copy that is.

    ``given`` (a folder with the resource's files, or for a one-file resource the file itself): used, and copied
    into the cache folder (:meth:`Resource.default_dir`, with a ``SOURCE.json`` naming it) unless the cache
    already holds the same files, so later commands use it by default. ``None``: the cache folder when it has
    every file. Returns ``(None, reason)`` when the files are not there."""
    names = [Path(p).name for p in resource.files]
    cache = resource.default_dir()
    if given is None:
        if all(find_resource_file(resource, n) is not None for n in names):
            return cache, f"the cached copy {cache}{_origin(cache)}"
        return None, f"no copy in the cache {cache}"
    files = {n: find_resource_file(resource, n, given) for n in names}
    if any(f is None for f in files.values()):
        return None, f"not found at {given}"
    here = {n: f for n, f in files.items() if f is not None}
    if all((cache / n).is_file() and filecmp.cmp(f, cache / n, shallow=False) for n, f in here.items()):
        return Path(given), f"{given} (the same files as the cached copy {cache})"
    try:
        with staged_folder(cache) as staging:
            for n, f in here.items():
                shutil.copyfile(f, staging / n)
            write_source(staging, {"repo": resource.repo, "copied_from": str(Path(given).resolve()),
                                   "files": list(resource.files), "license": resource.license})
    except OSError as exc:
        raise InputError(f"cannot keep a copy in the cache ({exc})", path=cache,
                         hint="free disk space or set TOXIFORGE_CACHE to a writable folder") from exc
    return Path(given), f"{given} (now kept in the cache {cache}: later commands use it without {resource.option})"
