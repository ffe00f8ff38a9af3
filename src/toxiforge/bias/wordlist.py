"""TOXTRIG word-list files: the categories and reading a ``term,category`` CSV or upstream's
``word_based_bias_list.csv`` (layout and semantics: :func:`read_lexicon_table`; matching:
:mod:`toxiforge.bias.lexicon`)."""

from __future__ import annotations

import csv
from pathlib import Path

from toxiforge.bias.patterns import Regex, check_literal, compile_entry
from toxiforge.errors import InputError, check_choice

CATEGORIES: tuple[str, ...] = ("noi", "oi", "oni")
# Upstream's category names (data/word_based_bias_list.csv, column `categorization`).
UPSTREAM_CATEGORIES: dict[str, str] = {"harmless-minority": "noi", "offensive-minority-reference": "oi",
                                       "offensive-not-minority": "oni"}

def canonical_category(value: str) -> str | None:
    key = value.strip().lower()
    return key if key in CATEGORIES else UPSTREAM_CATEGORIES.get(key)


MATCH_KINDS: tuple[str, ...] = ("word", "regex")


def read_lexicon_file(path: str | Path) -> dict[str, list[str]]:
    """The entries of :func:`read_lexicon_table`."""
    return read_lexicon_table(path)[0]


def read_lexicon_table(path: str | Path) -> tuple[dict[str, list[str]], bool]:
    """Entries per category from a CSV ``term,category`` (or upstream's ``word,categorization`` and category
    names), and whether the file is in upstream's layout. A header row is optional; ``#`` lines and blank lines
    are skipped.

    Upstream's file (header with ``word`` and ``categorization``) is read as upstream reads it: every entry is a
    regular expression (:class:`~toxiforge.bias.patterns.Regex`). Other files are literal, unless their header
    has a ``match`` column whose cell is ``regex`` (or ``word``, the default) for that row. A non-UTF-8 file, a
    row without two cells, an unknown category, a pattern that does not compile or a literal entry that looks
    like a regular expression raises :class:`InputError` naming the line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("lexicon file not found", path=path, hint="check the path") from None
    except UnicodeDecodeError as exc:
        raise InputError(f"lexicon file is not UTF-8 (byte {exc.start}: {exc.reason})", path=path,
                         hint="save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)") from None
    except OSError as exc:
        raise InputError(f"cannot read lexicon file ({exc})", path=path, hint="check the path") from exc
    out: dict[str, list[str]] = {}
    term_col, cat_col, match_col, upstream = 0, 1, None, False
    for line_no, row in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [c.strip() for c in row]
        if not cells or not any(cells) or cells[0].startswith("#"):
            continue
        lowered = [c.lower() for c in cells]
        if not out and {"term", "word"} & set(lowered) and {"category", "categorization"} & set(lowered):
            term_col = lowered.index("term") if "term" in lowered else lowered.index("word")
            cat_col = lowered.index("category") if "category" in lowered else lowered.index("categorization")
            match_col = lowered.index("match") if "match" in lowered else None
            upstream = "categorization" in lowered and match_col is None
            continue
        if len(cells) <= max(term_col, cat_col) or not cells[term_col]:
            raise InputError(f"expected 'term,category', found {len(cells)} cell(s)", path=path, line=line_no,
                             hint="write one term and its category (noi, oi or oni) per line")
        category = canonical_category(cells[cat_col])
        if category is None:
            raise InputError(f"unknown category {cells[cat_col]!r}", path=path, line=line_no,
                             hint="use noi, oi or oni (or upstream's " + ", ".join(UPSTREAM_CATEGORIES) + ")")
        kind = "regex" if upstream else "word"
        if match_col is not None and len(cells) > match_col and cells[match_col]:
            kind = check_choice(cells[match_col].lower(), MATCH_KINDS, what=f"match kind (line {line_no})")
        entry = cells[term_col]
        if kind == "regex":
            compile_entry(entry, path=path, line=line_no)
            out.setdefault(category, []).append(Regex(entry))
        else:
            out.setdefault(category, []).append(check_literal(entry, path=path, line=line_no))
    if not out:
        raise InputError("lexicon file has no terms", path=path, hint="write lines 'term,category'")
    return out, upstream
