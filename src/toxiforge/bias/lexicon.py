"""TOXTRIG (Zhou et al., 2021, §2.1): the words that trigger toxicity classifiers, in three categories.

* **NOI** -- non-offensive minority identity mentions ("gay", "muslim", "black"): the list toxiforge ships
  (``bias/noi_terms.txt``, neutral identity terms only) plus the aliases of the registered groups
  (:mod:`toxiforge.groups`) except :data:`EXCLUDED_ALIASES`.
* **OI** -- possibly offensive identity mentions (slurs, reclaimed slurs). toxiforge writes none: the rows
  ``offensive-minority-reference`` of upstream's word list, downloaded by ``toxiforge bias lexicon fetch``
  (:data:`toxiforge.bias.fetch.TOXTRIG`) or given once with ``--oi-list`` (then kept in the cache). Without it OI
  is *unavailable* (its metrics are empty cells).
* **ONI** -- offensive non-identity mentions (swear words): the profanity list toxiforge already packages
  (:func:`toxiforge.analysis.implicit.load_lexicon`: better-profanity's list minus ambiguous words and identity
  terms), minus the NOI terms and every entry that an OI pattern matches (spelling variants and plurals of OI
  entries included, :func:`drop_matched`). Departure: upstream's ONI is its own hand-made list;
  better-profanity's list also holds some slurs that no identity pattern catches, so without the OI list they
  count as ONI.
* **TOXTRIG** -- any of the three. Without OI it is NOI or ONI only: the report and the ``toxtrig`` bias-only
  model say so.

``--lexicon upstream`` (paper mode) takes all three categories from upstream's list, as Zhou et al. measured.
A user CSV (``term,category``; upstream's ``word,categorization`` header and category names are accepted too)
replaces the default source of every category it lists. Upstream's file (recognised by its ``categorization``
column) is read with upstream's semantics: every entry is a regular expression (:mod:`toxiforge.bias.patterns`);
a user CSV is literal unless a ``match`` column says ``regex``, and a literal entry that looks like a regular
expression is refused.

Matching, one of two modes (``match``; :func:`default_match` picks it when not given):

* ``raw`` -- upstream's own matching, the default of paper mode (``--lexicon upstream``, or any file in
  upstream's ``word,...,categorization`` layout), so that its counts equal those of the paper's code: per
  category one ``re.search`` on the text as given (no normalisation) with upstream's pattern
  (:func:`toxiforge.bias.patterns.upstream_regex`): ``re.compile(r"\\b" + r"\\b|\\b".join(words) + "\\b")``,
  words not escaped (literal entries of a user CSV are escaped first), and the closing non-raw ``"\\b"`` a
  backspace character, so the last entry of each category's list never matches: upstream's bug, reproduced on
  purpose and said in the report's notes. No plural rule; a count is the number of non-overlapping matches
  (upstream's ``findall``), and TOXTRIG counts the distinct start positions matched by any category.
* ``normalized`` -- the default otherwise (the toxiforge lexicon, user CSVs): departures from upstream meant
  for tweets and generated text alike. Text is normalised (:func:`normalize_text`: HTML entities decoded; URLs
  and @mentions dropped; hashtags kept as words, CamelCase split; hyphens, dashes and underscores become spaces;
  lowercased). Entries are normalised the same way and matched as whole words (no letter, digit or underscore
  on either side: "Scunthorpe" style substrings never match), a space in an entry matches any whitespace, and
  each single- or last-word entry also matches its regular plural ("muslims", "churches"). All entries of all
  categories are one trie-compiled regex, matched at every word start, so a phrase and a word inside it both
  count. So it tags ``#BlackLivesMatter`` and ``gay_pride`` (raw matching does not: ``\\b`` sees no boundary
  inside them) and skips terms inside URLs and @mentions (raw matching counts them).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from toxiforge.analysis.implicit import read_word_list, trie_regex
from toxiforge.bias.patterns import MATCH_MODES, Regex, check_literal, is_plain, upstream_regex, word_pattern
from toxiforge.bias.wordlist import CATEGORIES, canonical_category, read_lexicon_file, read_lexicon_table
from toxiforge.errors import InputError, check_choice

TOXTRIG = "toxtrig"
UPSTREAM_FILE = "word_based_bias_list.csv"
LEXICONS: tuple[str, ...] = ("toxiforge", "upstream")  # named lexicons (``--lexicon NAME``); else a CSV path
# Group aliases that are not identity mentions on their own ("bi", "native", "china"), or a reclaimed slur
# ("queer"; upstream files ``queers?`` under NOI, toxiforge leaves it out of its own NOI list). "blacks" is not
# excluded: every single-word entry matches its plural, so the singular alias "black" tags it anyway.
EXCLUDED_ALIASES: frozenset[str] = frozenset({"bi", "native", "china", "queer"})

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


@dataclass(frozen=True)
class BiasLexicon:
    """TOXTRIG terms per category (normalised), where each category came from, and one compiled pattern.

    Entries given as :class:`~toxiforge.bias.patterns.Regex` are regular expressions (kept in ``patterns``, one
    compiled pattern per category); the others are literal terms (``terms``). A category with neither is
    *unavailable* (``available(cat)`` is False; ``sources[cat]`` says why): its flags are all False and the
    metrics leave its cells empty. ``match`` is ``"normalized"`` or ``"raw"`` (upstream's regexes on the text as
    given; module docstring); :meth:`_find` is the one place that applies it.
    """

    terms: Mapping[str, tuple[str, ...]]
    sources: Mapping[str, str]
    plurals: bool = True
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)
    index: Mapping[str, frozenset[str]] = field(default_factory=dict, compare=False, repr=False)
    wildcards: tuple[tuple[re.Pattern[str], frozenset[str]], ...] = field(default=(), compare=False, repr=False)
    patterns: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    compiled: tuple[tuple[str, re.Pattern[str]], ...] = field(default=(), compare=False, repr=False)
    match: str = "normalized"
    upstream: tuple[tuple[str, re.Pattern[str]], ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self) -> None:
        check_choice(self.match, MATCH_MODES, what="lexicon match mode (--lexicon-match)")
        unknown = sorted(set(self.terms) - set(CATEGORIES))
        if unknown:
            raise InputError(f"unknown lexicon categor{'ies' if len(unknown) > 1 else 'y'} {unknown}",
                             hint=f"use {', '.join(CATEGORIES)}")
        given = {c: tuple(self.terms.get(c, ())) + tuple(Regex(p) for p in self.patterns.get(c, ()))
                 for c in CATEGORIES}
        patterns = {c: tuple(dict.fromkeys(t.strip() for t in v if isinstance(t, Regex))) for c, v in given.items()}
        terms = {c: tuple(dict.fromkeys(normalize_term(t) for t in v
                                        if not isinstance(t, Regex) and normalize_term(t)))
                 for c, v in given.items()}
        object.__setattr__(self, "patterns", patterns)
        # raw: upstream's pattern per category, from the entries as given (file order, duplicates kept)
        object.__setattr__(self, "upstream", tuple(
            (c, upstream_regex([e.strip() if isinstance(e, Regex) else re.escape(e.strip()) for e in v]))
            for c, v in given.items() if v and self.match == "raw"))
        # a pattern without metacharacters is its own text: matched by the trie below, exactly (no plural)
        compiled = {c: [p for p in v if not is_plain(p)] for c, v in patterns.items()}
        object.__setattr__(self, "compiled", tuple((c, word_pattern(p)) for c, p in compiled.items() if p))
        index: dict[str, set[str]] = {}
        for category in CATEGORIES:
            exact = [normalize_term(p) for p in patterns[category] if is_plain(p) and normalize_term(p)]
            for entry in terms[category]:
                for form in (plural_forms(entry) if self.plurals else (entry,)):
                    index.setdefault(form, set()).add(category)
            for entry in exact:
                index.setdefault(entry, set()).add(category)
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
            return any(self.terms.values()) or any(self.patterns.values())
        return bool(self.terms.get(category)) or bool(self.patterns.get(category))

    def size(self, category: str) -> int:
        """Entries of ``category``: literal terms plus regular expressions."""
        return len(self.terms.get(category, ())) + len(self.patterns.get(category, ()))

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

    def _find(self, text: str, memo: dict[str, frozenset[str]]) -> list[tuple[str, frozenset[str]]]:
        """Matches in ``text`` as given, one per start position: the longest match there, with the categories
        that matched at that start. ``raw``: upstream's pattern of each category on ``text`` itself;
        ``normalized``: every entry (literal or regular expression) at each word start of normalised text."""
        found: dict[int, tuple[str, frozenset[str]]] = {}
        if self.match == "raw":
            for category, pattern in self.upstream:
                for m in pattern.finditer(text):
                    words, cats = found.get(m.start(), ("", frozenset()))
                    found[m.start()] = (max(words, m.group(0), key=len), cats | {category})
            return [(" ".join(words.lower().split()), cats) for _, (words, cats) in sorted(found.items()) if words]
        text = normalize_text(text)
        if self.regex is not None:
            for m in self.regex.finditer(text):
                found[m.start()] = (m.group(1), self._categories(m.group(1), memo))
        for category, pattern in self.compiled:
            for m in pattern.finditer(text):
                words, cats = found.get(m.start(), ("", frozenset()))
                found[m.start()] = (max(words, m.group(1), key=len), cats | {category})
        return [(" ".join(words.split()), cats) for _, (words, cats) in sorted(found.items()) if words]

    def find(self, text: str) -> list[tuple[str, frozenset[str]]]:
        """``(matched words, categories)`` for each entry found in ``text``, in order of position (the words
        lowercase, single spaces)."""
        return self._find(text, {})

    def counts(self, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Per category (and ``toxtrig``) the number of entries found in each text, int32 arrays."""
        texts = list(texts)
        out = {c: np.zeros(len(texts), dtype=np.int32) for c in (*CATEGORIES, TOXTRIG)}
        if self.regex is None and not self.compiled and not self.upstream:
            return out
        memo: dict[str, frozenset[str]] = {}
        columns = [out[c] for c in CATEGORIES]
        bits = {c: i for i, c in enumerate(CATEGORIES)}
        toxtrig = out[TOXTRIG]
        for row, text in enumerate(texts):
            for _, categories in self._find(text, memo):
                toxtrig[row] += bool(categories)
                for category in categories:
                    columns[bits[category]][row] += 1
        return out

    def tag(self, texts: Iterable[str]) -> dict[str, np.ndarray]:
        """Per category (and ``toxtrig``) a bool array: does the text mention an entry of it."""
        return {c: v > 0 for c, v in self.counts(texts).items()}

    def describe(self) -> dict:
        return {c: {"terms": self.size(c), "regex": len(self.patterns[c]), "source": self.sources[c],
                    "available": self.available(c)} for c in CATEGORIES}

    def toxtrig_note(self) -> str | None:
        """Why TOXTRIG is not all three categories (None when it is)."""
        missing = [c for c in CATEGORIES if not self.available(c)]
        if not missing:
            return None
        kept = " ∪ ".join(c.upper() for c in CATEGORIES if self.available(c)) or "nothing"
        return f"TOXTRIG here is {kept} only; " + "; ".join(f"{c.upper()} {self.sources[c]}" for c in missing)

    def match_note(self) -> str:
        """How this lexicon matches, for reports."""
        if self.match == "raw":
            return ("lexicon matching: raw (upstream's bias_stats.py regexes on the text as given; as in upstream's "
                    "code, the last entry of each category's list never matches)")
        return "lexicon matching: normalized (HTML entities, URLs, @mentions, hashtags, hyphens; plurals)"


def shipped_noi_terms() -> list[str]:
    """The NOI list toxiforge ships (``bias/noi_terms.txt``)."""
    return read_word_list(Path(str(resources.files("toxiforge.bias") / "noi_terms.txt")))


def group_alias_terms() -> list[str]:
    """Aliases of every registered group, without ``_`` spellings and :data:`EXCLUDED_ALIASES`."""
    from toxiforge.groups import all_groups

    return [a for g in all_groups() for a in (normalize_term(x) for x in g.aliases)
            if "_" not in a and a not in EXCLUDED_ALIASES]


def drop_matched(entries: Sequence[str], by: Sequence[str]) -> list[str]:
    """``entries`` without those that an entry of ``by`` matches as a whole word, in the entry itself or in its
    singular (a trailing s/es removed): what leaves ONI once OI is known (module docstring)."""
    if not by:
        return list(entries)
    matcher = BiasLexicon(terms={"oi": tuple(by)}, sources={})
    kept = []
    for entry in entries:
        forms = {entry, entry[:-1] if entry.endswith("s") else entry, entry[:-2] if entry.endswith("es") else entry}
        if not any(matcher.find(form) for form in forms):
            kept.append(entry)
    return kept


def _user_entries(lexicon: str | Path | Mapping[str, Sequence[str]]) -> tuple[dict[str, list[str]], bool]:
    """The entries of a user lexicon, and whether it is a file in upstream's layout."""
    if isinstance(lexicon, (str, Path)):
        return read_lexicon_table(lexicon)
    bad = [c for c in lexicon if canonical_category(c) is None]
    if bad:
        raise InputError(f"unknown lexicon categories {bad}", hint=f"use {', '.join(CATEGORIES)}")
    return {category: [t if isinstance(t, Regex) else check_literal(t) for t in v]
            for c, v in lexicon.items() if (category := canonical_category(c)) is not None}, False


def default_match(paper_mode: bool) -> str:
    """The match mode when none is given: ``raw`` in paper mode (upstream's list read as upstream reads it, so
    the counts equal those of upstream's code on the same text), ``normalized`` otherwise (toxiforge's lexicon
    and user lists, for tweets and generated sentences alike: hashtags, hyphenated and underscored spellings
    count, URLs and @mentions do not)."""
    return "raw" if paper_mode else "normalized"


def load_bias_lexicon(lexicon: str | Path | Mapping[str, Sequence[str]] | None = None, *,
                      oi_list: str | Path | None = None, plurals: bool = True,
                      match: str | None = None) -> BiasLexicon:
    """The TOXTRIG lexicon: defaults per category (module docstring), with the categories of ``lexicon`` (a
    CSV path or a ``{category: terms}`` mapping) replacing them; ``lexicon="upstream"`` takes every category
    from upstream's list (paper mode), ``"toxiforge"`` is the default. ``oi_list`` is upstream's CSV or its
    folder (default: the cache that ``toxiforge bias lexicon fetch`` or an earlier ``--oi-list`` filled); a
    missing one leaves OI unavailable (and is an error in paper mode). ``match`` is ``raw`` or ``normalized``
    (default: :func:`default_match`; paper mode is ``"upstream"`` or a file in upstream's layout)."""
    from toxiforge.analysis.implicit import load_lexicon
    from toxiforge.bias.fetch import TOXTRIG as RESOURCE
    from toxiforge.bias.fetch import find_resource_file, remember_resource

    named = lexicon.lower() if isinstance(lexicon, str) and lexicon.lower() in LEXICONS else None
    found = find_resource_file(RESOURCE, UPSTREAM_FILE, oi_list)
    upstream = read_lexicon_file(found) if found is not None else {}  # read (checked) before it is cached
    where = remember_resource(RESOURCE, oi_list)[1] if found is not None else ""
    if found is None and (oi_list is not None or named == "upstream"):
        raise InputError(f"no {UPSTREAM_FILE} there", path=oi_list or RESOURCE.default_dir(),
                         hint="run `toxiforge bias lexicon fetch`, or pass --oi-list PATH (the CSV or its folder; "
                              f"e.g. ../shared/data/toxic-debias/{UPSTREAM_FILE})")
    upstream_source = f"{RESOURCE.repo} {UPSTREAM_FILE}: {where}"
    terms: dict[str, list[str]] = {}
    sources: dict[str, str] = {}
    paper_mode = named == "upstream"
    if paper_mode:
        terms = {c: list(v) for c, v in upstream.items()}
        sources = {c: upstream_source for c in terms}
    elif lexicon is not None and named is None:
        terms, paper_mode = _user_entries(lexicon)
        label = lexicon if isinstance(lexicon, (str, Path)) else "(mapping)"
        sources = {c: f"user lexicon {label}" for c in terms}
    if "noi" not in terms:
        terms["noi"] = shipped_noi_terms() + group_alias_terms()
        sources["noi"] = "toxiforge bias/noi_terms.txt + group registry aliases"
    if "oi" not in terms:
        if found is None:
            terms["oi"] = []
            sources["oi"] = ("unavailable: run `toxiforge bias lexicon fetch` (or pass --oi-list, or --lexicon "
                             "with oi rows)")
        else:
            terms["oi"] = upstream.get("oi", [])
            sources["oi"] = upstream_source
    if "oni" not in terms:
        noi = {normalize_term(t) for t in terms["noi"] if not isinstance(t, Regex)}
        base = load_lexicon()
        candidates = [t for t in base.terms if normalize_term(t) not in noi]
        terms["oni"] = drop_matched(candidates, terms["oi"])
        sources["oni"] = f"{base.source} minus ambiguous words, identity terms and NOI terms" + (
            f", and the {len(candidates) - len(terms['oni'])} entries an OI pattern matches" if terms["oi"] else "")
    return BiasLexicon(terms={c: tuple(v) for c, v in terms.items()}, sources=sources, plurals=plurals,
                       match=match or default_match(paper_mode))


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
