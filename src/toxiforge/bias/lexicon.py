"""TOXTRIG (Zhou et al., 2021, §2.1): the words that trigger toxicity classifiers, in three categories.

* **NOI** -- non-offensive minority identity mentions ("gay", "muslim", "black"): the list toxiforge ships
  (``bias/noi_terms.txt``, neutral identity terms only) plus the aliases of the registered groups
  (:mod:`toxiforge.groups`) except :data:`EXCLUDED_ALIASES`.
* **OI** -- possibly offensive identity mentions (slurs, reclaimed slurs). toxiforge writes none: the rows
  ``offensive-minority-reference`` of upstream's word list, downloaded by ``toxiforge bias lexicon fetch``
  (:data:`toxiforge.bias.fetch.TOXTRIG`). Without it OI is *unavailable* (its metrics are empty cells).
* **ONI** -- offensive non-identity mentions (swear words): the profanity list toxiforge already packages
  (:func:`toxiforge.analysis.implicit.load_lexicon`: better-profanity's list minus ambiguous words and identity
  terms), minus the NOI and OI terms. Departure: upstream's ONI is its own hand-made list; better-profanity's
  list also holds some slurs that no identity pattern catches, so without the OI list fetched they count as ONI.
* **TOXTRIG** -- any of the three.

A user CSV (``term,category``; upstream's ``word,categorization`` header and category names are accepted too)
replaces the default source of every category it lists.

Matching (departures from upstream, whose ``re.compile(r"\\b" + r"\\b|\\b".join(words) + "\\b")`` ends in a
non-raw ``"\\b"`` -- a backspace character, so the last word of each list never matched -- and whose words were
not escaped): text is normalised (:func:`normalize_text`: HTML entities decoded; URLs and @mentions dropped;
hashtags kept as words, CamelCase split; hyphens, dashes and underscores become spaces; lowercased). Entries are
normalised the same way and matched as whole words (no letter, digit or underscore on either side: "Scunthorpe"
style substrings never match), a space in an entry matches any whitespace, and each single- or last-word entry
also matches its regular plural ("muslims", "churches"). All entries of all categories are one trie-compiled
regex, matched at every word start, so a phrase and a word inside it both count.
"""

from __future__ import annotations

import csv
import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from toxiforge.analysis.implicit import read_word_list, trie_regex
from toxiforge.errors import InputError

CATEGORIES: tuple[str, ...] = ("noi", "oi", "oni")
TOXTRIG = "toxtrig"
# Upstream's category names (data/word_based_bias_list.csv, column `categorization`).
UPSTREAM_CATEGORIES: dict[str, str] = {"harmless-minority": "noi", "offensive-minority-reference": "oi",
                                       "offensive-not-minority": "oni"}
UPSTREAM_FILE = "word_based_bias_list.csv"
# Group aliases that are not identity mentions on their own ("bi", "native", "china"), outdated as a noun
# ("blacks"), or a reclaimed slur that upstream files under OI ("queer").
EXCLUDED_ALIASES: frozenset[str] = frozenset({"bi", "native", "china", "blacks", "queer"})

_URL = re.compile(r"(?:\bhttps?://|\bwww\.)\S+", re.IGNORECASE)
_MENTION = re.compile(r"(?<![\w@])@\w+")
_HASHTAG = re.compile(r"(?<![\w#])#(\w+)")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[-_\u2010-\u2015\u2212]+")
_PLURAL_ES = ("s", "x", "z", "ch", "sh")


def normalize_text(text: str) -> str:
    """Text as the lexicon sees it (rules in the module docstring): ``"#GayPride @bob http://x.y"`` ->
    ``"gay pride"`` (plus spaces where the URL and mention were)."""
    if "&" in text:
        text = html.unescape(text)
    if "://" in text or "www." in text:
        text = _URL.sub(" ", text)
    if "@" in text:
        text = _MENTION.sub(" ", text)
    if "#" in text:
        text = _HASHTAG.sub(lambda m: " " + _CAMEL.sub(" ", m.group(1)) + " ", text)
    return _SEPARATORS.sub(" ", text).lower()


def normalize_term(term: str) -> str:
    """An entry as matched: normalised like text, whitespace collapsed (``"African-American"`` ->
    ``"african american"``)."""
    return " ".join(_SEPARATORS.sub(" ", term.strip()).lower().split())


def plural_forms(term: str) -> tuple[str, ...]:
    """``term`` and its regular plural (last word + s/es) for plain alphabetic last words of 3+ letters."""
    last = term.rsplit(" ", 1)[-1]
    if len(last) < 3 or not last.isalpha():
        return (term,)
    return (term, term + ("es" if last.endswith(_PLURAL_ES) else "s"))


def canonical_category(value: str) -> str | None:
    key = value.strip().lower()
    return key if key in CATEGORIES else UPSTREAM_CATEGORIES.get(key)


@dataclass(frozen=True)
class BiasLexicon:
    """TOXTRIG terms per category (normalised), where each category came from, and one compiled pattern.

    A category with no terms is *unavailable* (``available(cat)`` is False; ``sources[cat]`` says why): its
    flags are all False and the metrics leave its cells empty.
    """

    terms: Mapping[str, tuple[str, ...]]
    sources: Mapping[str, str]
    plurals: bool = True
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    index: Mapping[str, frozenset[str]] = field(default_factory=dict, compare=False, repr=False)
    wildcards: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        unknown = sorted(set(self.terms) - set(CATEGORIES))
        if unknown:
            raise InputError(f"unknown lexicon categor{'ies' if len(unknown) > 1 else 'y'} {unknown}",
                             hint=f"use {', '.join(CATEGORIES)}")
        terms = {c: tuple(dict.fromkeys(normalize_term(t) for t in self.terms.get(c, ()) if normalize_term(t)))
                 for c in CATEGORIES}
        index: dict[str, set[str]] = {}
        for category, entries in terms.items():
            for entry in entries:
                for form in (plural_forms(entry) if self.plurals else (entry,)):
                    index.setdefault(form, set()).add(category)
        object.__setattr__(self, "terms", terms)
        object.__setattr__(self, "sources", {c: self.sources.get(c, "none") for c in CATEGORIES})
        object.__setattr__(self, "index", {k: frozenset(v) for k, v in index.items()})
        # entries with '*' (any run of word characters, as in implicit.py) are looked up by pattern
        object.__setattr__(self, "wildcards", tuple(
            (re.compile(r"\s+".join(re.escape(w).replace(r"\*", r"\w*") for w in k.split())), frozenset(v))
            for k, v in index.items() if "*" in k))
        if index:
            # every word start: the longest entry starting there, as group 1 (zero-width, so phrases overlap)
            pattern = r"(?<!\w)(?=(" + trie_regex(sorted(index)) + r")(?!\w))"
            object.__setattr__(self, "regex", re.compile(pattern))

    def available(self, category: str) -> bool:
        if category == TOXTRIG:
            return any(self.terms.values())
        return bool(self.terms.get(category))

    def _categories(self, match: str, memo: dict[str, frozenset[str]]) -> frozenset[str]:
        """Categories of a matched string: its own entry and every entry that is a word prefix of it."""
        found = memo.get(match)
        if found is None:
            words = match.split()
            cats: set[str] = set()
            for k in range(1, len(words) + 1):
                prefix = " ".join(words[:k])
                cats |= self.index.get(prefix, frozenset())
                cats.update(c for pattern, wild in self.wildcards if pattern.fullmatch(prefix) for c in wild)
            found = memo[match] = frozenset(cats)
        return found

    def find(self, text: str) -> list[tuple[str, frozenset[str]]]:
        """``(matched words, categories)`` for each entry found in ``text``, in order of position (the words
        normalised: lowercase, single spaces)."""
        if self.regex is None:
            return []
        memo: dict[str, frozenset[str]] = {}
        return [(" ".join(m.split()), self._categories(m, memo)) for m in self.regex.findall(normalize_text(text))]

    def counts(self, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Per category (and ``toxtrig``) the number of entries found in each text, int32 arrays."""
        texts = list(texts)
        out = {c: np.zeros(len(texts), dtype=np.int32) for c in (*CATEGORIES, TOXTRIG)}
        if self.regex is None:
            return out
        findall = self.regex.findall
        memo: dict[str, frozenset[str]] = {}
        columns = [out[c] for c in CATEGORIES]
        bits = {c: i for i, c in enumerate(CATEGORIES)}
        toxtrig = out[TOXTRIG]
        for row, text in enumerate(texts):
            for match in findall(normalize_text(text)):
                categories = self._categories(match, memo)
                toxtrig[row] += bool(categories)
                for category in categories:
                    columns[bits[category]][row] += 1
        return out

    def tag(self, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Per category (and ``toxtrig``) a bool array: does the text mention an entry of it."""
        return {c: v > 0 for c, v in self.counts(texts).items()}

    def describe(self) -> dict:
        return {c: {"terms": len(self.terms[c]), "source": self.sources[c], "available": self.available(c)}
                for c in CATEGORIES}


def shipped_noi_terms() -> list[str]:
    """The NOI list toxiforge ships (``bias/noi_terms.txt``)."""
    return read_word_list(Path(str(resources.files("toxiforge.bias") / "noi_terms.txt")))


def group_alias_terms() -> list[str]:
    """Aliases of every registered group, without ``_`` spellings and :data:`EXCLUDED_ALIASES`."""
    from toxiforge.groups import all_groups

    return [a for g in all_groups() for a in (normalize_term(x) for x in g.aliases)
            if "_" not in a and a not in EXCLUDED_ALIASES]


def read_lexicon_file(path: str | Path) -> dict[str, list[str]]:
    """Terms per category from a CSV ``term,category`` (or upstream's ``word,categorization`` and category
    names). A header row is optional; ``#`` lines and blank lines are skipped. A non-UTF-8 file, a row without
    two cells or an unknown category raises :class:`InputError` naming the line."""
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
    term_col, cat_col = 0, 1
    for line_no, row in enumerate(csv.reader(text.splitlines()), start=1):
        cells = [c.strip() for c in row]
        if not cells or not any(cells) or cells[0].startswith("#"):
            continue
        lowered = [c.lower() for c in cells]
        if not out and {"term", "word"} & set(lowered) and {"category", "categorization"} & set(lowered):
            term_col = lowered.index("term") if "term" in lowered else lowered.index("word")
            cat_col = lowered.index("category") if "category" in lowered else lowered.index("categorization")
            continue
        if len(cells) <= max(term_col, cat_col) or not cells[term_col]:
            raise InputError(f"expected 'term,category', found {len(cells)} cell(s)", path=path, line=line_no,
                             hint="write one term and its category (noi, oi or oni) per line")
        category = canonical_category(cells[cat_col])
        if category is None:
            raise InputError(f"unknown category {cells[cat_col]!r}", path=path, line=line_no,
                             hint="use noi, oi or oni (or upstream's " + ", ".join(UPSTREAM_CATEGORIES) + ")")
        out.setdefault(category, []).append(cells[term_col])
    if not out:
        raise InputError("lexicon file has no terms", path=path, hint="write lines 'term,category'")
    return out


def load_bias_lexicon(lexicon: str | Path | Mapping[str, Sequence[str]] | None = None, *,
                      oi_list: str | Path | None = None, plurals: bool = True) -> BiasLexicon:
    """The TOXTRIG lexicon: defaults per category (module docstring), with the categories of ``lexicon`` (a
    CSV path or a ``{category: terms}`` mapping) replacing them. ``oi_list`` is upstream's CSV or its folder
    (default: the cache that ``toxiforge bias lexicon fetch`` fills); a missing one leaves OI unavailable."""
    from toxiforge.analysis.implicit import load_lexicon
    from toxiforge.bias.fetch import TOXTRIG as RESOURCE
    from toxiforge.bias.fetch import find_resource_file

    if lexicon is None:
        user: dict[str, list[str]] = {}
    elif isinstance(lexicon, (str, Path)):
        user = read_lexicon_file(lexicon)
    else:
        user = {c: list(v) for c, v in lexicon.items()}
        bad = [c for c in user if canonical_category(c) is None]
        if bad:
            raise InputError(f"unknown lexicon categories {bad}", hint=f"use {', '.join(CATEGORIES)}")
        user = {category: v for c, v in user.items() if (category := canonical_category(c)) is not None}
    terms: dict[str, list[str]] = {}
    sources: dict[str, str] = {}
    for category, values in user.items():
        terms[category] = values
        sources[category] = f"user lexicon {lexicon if isinstance(lexicon, (str, Path)) else '(mapping)'}"
    if "noi" not in terms:
        terms["noi"] = shipped_noi_terms() + group_alias_terms()
        sources["noi"] = "toxiforge bias/noi_terms.txt + group registry aliases"
    if "oi" not in terms:
        found = find_resource_file(RESOURCE, UPSTREAM_FILE, oi_list)
        if found is None:
            if oi_list is not None:
                raise InputError(f"no {UPSTREAM_FILE} there", path=oi_list,
                                 hint="run `toxiforge bias lexicon fetch`, or give the CSV or its folder")
            terms["oi"] = []
            sources["oi"] = "unavailable: run `toxiforge bias lexicon fetch` (or pass --lexicon with oi rows)"
        else:
            terms["oi"] = read_lexicon_file(found).get("oi", [])
            sources["oi"] = f"{RESOURCE.repo}@{RESOURCE.commit[:7]} {UPSTREAM_FILE} ({found})"
    if "oni" not in terms:
        taken = {normalize_term(t) for c in ("noi", "oi") for t in terms[c]}
        base = load_lexicon()
        terms["oni"] = [t for t in base.terms if normalize_term(t) not in taken]
        sources["oni"] = f"{base.source} minus ambiguous words and identity, NOI and OI terms"
    return BiasLexicon(terms={c: tuple(v) for c, v in terms.items()}, sources=sources, plurals=plurals)


@lru_cache(maxsize=1)
def default_bias_lexicon() -> BiasLexicon:
    """:func:`load_bias_lexicon` with no arguments (cached)."""
    return load_bias_lexicon()


def tag_texts(texts: Iterable[str], lexicon: BiasLexicon | None = None) -> dict[str, np.ndarray]:
    """Bool columns ``noi``, ``oi``, ``oni``, ``toxtrig``: which texts mention a term of each category."""
    return (lexicon or default_bias_lexicon()).tag(texts)


def count_terms(texts: Iterable[str], lexicon: BiasLexicon | None = None) -> dict[str, np.ndarray]:
    """Int columns ``noi``, ``oi``, ``oni``, ``toxtrig``: how many entries of each category each text has (the
    features of Zhou et al.'s TOXTRIG-only bias model)."""
    return (lexicon or default_bias_lexicon()).counts(texts)
