"""Small file helpers shared by the demonstration and prompt readers (internal).

* :func:`decode_lines` turns the bytes of a text file into ``(line_number, text)`` pairs, splitting on real
  newlines only (a prompt line's literal backslash-n stays inside its line) and reporting the line of the first
  byte that is not UTF-8.
* :func:`read_lines` does the same for a path, with clear errors for a missing path or a directory.
* :func:`parse_file_name` reads the group and label from upstream-style names such as
  ``hate_muslim_sentences.txt``, ``neutral_lgbtq.txt`` or ``hate_asian_1k.txt``.
* :func:`atomic_write_text` writes a file through a temporary file and :func:`os.replace`.
"""

from __future__ import annotations

import re
from pathlib import Path

from toxiforge._io import atomic_write_text as _atomic_write_text
from toxiforge.errors import InputError
from toxiforge.groups import resolve_group
from toxiforge.records import parse_label

_BOM = b"\xef\xbb\xbf"
NAME_SUFFIXES = ("_sentences", "_1k")
NAME_PATTERN = "{hate,neutral}_<group>[_sentences|_1k].txt"


def decode_lines(data: bytes, where: str | Path) -> list[tuple[int, str]]:
    """Decode UTF-8 ``data`` (a leading byte-order mark is ignored) into numbered lines.

    Lines are split on ``\\n`` only; a trailing ``\\r`` is removed. Raises :class:`InputError` naming the line
    that holds the first byte that is not valid UTF-8.
    """
    body = data[len(_BOM):] if data.startswith(_BOM) else data
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        raise InputError(f"byte {body[exc.start]:#04x} is not valid UTF-8", path=where, line=line,
                         hint="save the file as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from exc
    parts = text.split("\n")
    if parts and parts[-1] == "":
        parts.pop()  # the newline that ends the last line
    return [(i, p[:-1] if p.endswith("\r") else p) for i, p in enumerate(parts, start=1)]


def read_lines(path: str | Path) -> list[tuple[int, str]]:
    """Numbered lines of the UTF-8 text file at ``path`` (see :func:`decode_lines`)."""
    path = Path(path)
    if not path.exists():
        raise InputError("no such file", path=path, hint="check the path")
    if path.is_dir():
        raise InputError("is a directory, expected a text file", path=path,
                         hint="pass a file, or pass the directory where a directory is accepted")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read file ({exc.strerror or exc})", path=path,
                         hint="check the file's permissions") from exc
    return decode_lines(data, path)


def parse_file_name(name: str, *, where: str | Path | None = None) -> tuple[str, int]:
    """``(canonical group, label)`` from a file name like ``neutral_middle_east_sentences.txt``.

    The part before the first ``_`` is the label word (hate/neutral, also toxic/benign); the rest, without
    ``.txt`` and a trailing ``_sentences``, ``_1k`` or another count (``_100``, ``_5k``), is the group (any
    registered name or alias).
    Raises :class:`InputError` for a name without ``_``, an unknown label word or an unknown group.
    """
    where = where if where is not None else name
    stem = name[:-4] if name.lower().endswith(".txt") else name
    changed = True
    while changed:
        changed = False
        for suffix in NAME_SUFFIXES:
            if stem.lower().endswith(suffix) and len(stem) > len(suffix):
                stem, changed = stem[: -len(suffix)], True
    counted = re.fullmatch(r"(.+?)_\d+k?", stem, flags=re.IGNORECASE)  # a count, e.g. prompts build's -n
    if counted and "_" in counted.group(1):
        stem = counted.group(1)
    word, sep, rest = stem.partition("_")
    if not sep or not word or not rest:
        raise InputError(f"cannot tell group and label from the file name {name!r}", path=where,
                         hint=f"rename it {NAME_PATTERN} (e.g. neutral_asian.txt), or put the statements in a table "
                              "(.csv, .jsonl or .parquet) with text, group and label columns")
    try:
        label = parse_label(word)
    except InputError as exc:
        raise InputError(f"unknown label word {word!r} in the file name {name!r}", path=where,
                         hint=f"start the name with hate_ or neutral_ ({NAME_PATTERN})") from exc
    try:
        group = resolve_group(rest).name
    except InputError as exc:
        raise InputError(f"unknown group {rest!r} in the file name {name!r}", path=where,
                         hint=exc.hint) from exc
    return group, label


def resolve_group_label(group: object, label: object, *, where: str | Path | None = None) -> tuple[str, int]:
    """Canonical group name and 0/1 label from user values (aliases and label words allowed)."""
    try:
        name = resolve_group(group).name  # type: ignore[arg-type]
    except InputError as exc:
        raise InputError(exc.message, path=where, hint=exc.hint) from exc
    return name, parse_label(label, path=where)


def atomic_write_text(path: str | Path, text: str, *, overwrite: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same folder and :func:`os.replace`.

    Refuses an existing ``path`` unless ``overwrite``; a failed write leaves no partial file behind.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError("is a directory, expected a file name", path=path, hint="give a file path such as out.txt")
    if path.exists() and not overwrite:
        raise InputError("output file already exists", path=path,
                         hint="choose another path or pass overwrite=True (--overwrite)")
    return _atomic_write_text(path, text)
