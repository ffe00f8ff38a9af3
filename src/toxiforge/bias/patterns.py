"""Lexicon entries that are regular expressions (upstream's NOI list: ``wom[ae]n``, ``jew\\w*``, ``non-?binar\\w*``).

Zhou et al.'s ``word_based_bias_list.csv`` is read by upstream's ``src/bias_stats.py`` as regular expressions,
each between ``\\b`` word boundaries, case-insensitive (the paper: NOI is "26 regular expressions"). toxiforge
reads that file the same way (:class:`Regex` entries); a user CSV stays literal unless a ``match`` column says
``regex`` for a row. A literal entry that looks like a regular expression (:func:`looks_like_regex`: a backslash,
``|``, brackets, parentheses, braces or ``?``) is refused, never matched literally in silence (``+``, ``$`` and
``*`` are left out: "lgbtq+" and spelled-out swear words are literal, and ``*`` is the literal lists' wildcard).

Two ways to match (:data:`MATCH_MODES`, chosen per lexicon by :class:`toxiforge.bias.lexicon.BiasLexicon`):

* ``normalized``: on normalised text (:func:`toxiforge.bias.lexicon.normalize_text`: hyphens and underscores
  become spaces, lowercase), so :func:`translate` rewrites a pattern to match the same spellings there: a literal
  ``-`` outside a character class becomes a space, and a literal space matches any run of whitespace. Entries
  match as whole words (no word character on either side), as upstream's ``\\b``.
* ``raw``: upstream's own pattern on the text as given (:func:`upstream_regex`), its bug included.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from toxiforge.errors import InputError

REGEX_CHARS = frozenset("\\|[](){}?")
MATCH_MODES: tuple[str, ...] = ("raw", "normalized")
SPACE = r"(?:\s+)"  # what a literal space or hyphen of a pattern becomes (a group, so "-?" stays optional)


class Regex(str):
    """A lexicon entry to be matched as a regular expression (a ``str``; compares equal to its text)."""

    __slots__ = ()


def is_plain(pattern: str) -> bool:
    """Does ``pattern`` match only its own text (no metacharacter ``.^$*+?{}[]\\|()``)? Such entries of a
    regular-expression list go into the fast literal matcher, without the plural rule."""
    return not any(c in ".^$*+?{}[]\\|()" for c in pattern)


def looks_like_regex(entry: str) -> bool:
    """Does ``entry`` contain a regular-expression character (``*`` is excluded: literal entries use it as a
    wildcard for any run of word characters)?"""
    return any(c in REGEX_CHARS for c in entry)


def check_literal(entry: str, *, path: str | Path | None = None, line: int | None = None) -> str:
    """``entry`` unchanged, or :class:`InputError` (naming the line) when it looks like a regular expression."""
    if looks_like_regex(entry):
        raise InputError(f"entry {entry!r} looks like a regular expression but would be matched literally",
                         path=path, line=line,
                         hint="add a column 'match' with 'regex' for such rows (header term,category,match), "
                              "or write the entry without \\ | [ ] ( ) { } ?")
    return entry


def translate(pattern: str) -> str:
    """``pattern`` for normalised text: outside character classes a literal ``-``, ``_`` or space (escaped or
    not) becomes :data:`SPACE` (any run of whitespace, as one group); the rest is unchanged."""
    out: list[str] = []
    in_class, i = False, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\" and i + 1 < len(pattern):
            pair = pattern[i:i + 2]
            out.append(SPACE if pair in ("\\-", "\\_", "\\ ") and not in_class else pair)
            i += 2
            continue
        if in_class:
            in_class = c != "]" or pattern[i - 1] == "["
        elif c == "[":
            in_class = True
            if pattern[i + 1:i + 2] == "^":
                out.append("[^")
                i += 2
                if pattern[i:i + 1] == "]":  # a leading ']' is a literal inside the class
                    out.append("]")
                    i += 1
                continue
        elif c in "-_ ":
            c = SPACE
        out.append(c)
        i += 1
    return "".join(out)


def compile_entry(entry: str, *, path: str | Path | None = None, line: int | None = None) -> re.Pattern[str]:
    """The compiled (translated) pattern of one entry; :class:`InputError` naming the line when it does not
    compile or matches the empty string."""
    try:
        compiled = re.compile(translate(entry.strip()), re.IGNORECASE)
    except re.error as exc:
        raise InputError(f"regular expression {entry!r} does not compile ({exc})", path=path, line=line,
                         hint="fix the pattern (Python `re` syntax), or mark the row as a literal term") from None
    if compiled.fullmatch(""):
        raise InputError(f"regular expression {entry!r} matches the empty string", path=path, line=line,
                         hint="make the pattern match at least one character")
    return compiled


def word_pattern(entries: Sequence[str]) -> re.Pattern[str]:
    """One pattern for ``entries``: at every word start, the first entry that matches up to a word end, as
    group 1 (zero-width, so a match inside a longer one is found too)."""
    for entry in entries:
        compile_entry(entry)
    body = "|".join(f"(?:{translate(e.strip())})" for e in entries)
    return re.compile(r"(?<!\w)(?=(" + body + r")(?!\w))", re.IGNORECASE)


def upstream_regex(entries: Sequence[str]) -> re.Pattern[str]:
    """Upstream's pattern for one category (``src/bias_stats.py`` of XuhuiZhou/Toxic_Debias): the entries joined
    unescaped as ``\\b`` + ``\\b|\\b``.join(entries) + ``"\\b"``, case-insensitive, for ``re.search`` on the
    raw text. Upstream's bug is kept on purpose so that counts equal its code's: the closing ``"\\b"`` is not a
    raw string, so it is a backspace character (U+0008) and the last entry of each list never matches."""
    body = r"\b" + r"\b|\b".join(entries) + "\b"  # "\b" == "\x08": upstream's bug, reproduced
    try:
        return re.compile(body, re.IGNORECASE)
    except re.error as exc:
        raise InputError(f"the entries joined as upstream joins them do not compile ({exc})",
                         hint="match this list with --lexicon-match normalized, or fix the entry the error "
                              "points at") from None
