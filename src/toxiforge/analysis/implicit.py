"""Implicitness: a statement is *explicit* when it contains an entry of a profanity lexicon, else *implicit*.

Default lexicon: the English word list that the ``better-profanity`` package ships
(``better_profanity/profanity_wordlist.txt``, MIT licence, ~940 entries including a few multi-word ones and
spelling variants). It installs from PyPI and works offline. The ToxiGen paper (§3.4, footnote 7) used a
different public list (the Google profanity words list that ElSherief et al. 2021 also used), so toxiforge's
"% implicit" is comparable in spirit, not digit for digit. Pass your own list to reproduce theirs exactly.

Like the paper, ambiguous entries are dropped by default (:data:`AMBIGUOUS_TERMS`: everyday, medical and
historical words such as "bloody", "hell", "drunk", "organ"; the list is a judgment call, reviewable here), and
so are entries that are identity terms of a registered target group (the packaged list contains words such as
"gay" and "queer", which ToxiGen's benign statements use by design). ``load_lexicon(ambiguous=False)`` keeps the
first, ``keep_identity_terms=True`` the second, ``exclude=`` removes more.

Matching is case-insensitive and on word boundaries (an entry must not be preceded or followed by a letter,
digit or underscore, so "ass" does not match "class"). Whitespace inside an entry matches any run of whitespace,
so multi-word entries work; a ``*`` matches any run of word characters. List files: one entry per line; blank
lines and lines starting with ``#`` are ignored.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from toxiforge.errors import InputError

# Entries with a common non-profane meaning (ToxiGen dropped words like "bloody"). Only words that occur in
# everyday, medical, legal or historical writing; the packaged list's many spelling variants are left alone.
AMBIGUOUS_TERMS: tuple[str, ...] = (
    "bloody", "god", "hell", "drunk", "fat", "kill", "murder", "naked", "nude", "pot", "rum", "vodka", "hooch",
    "hootch", "sex", "sexual", "strip", "stupid", "dummy", "dopey", "doofus", "ninny", "nimrod", "moron", "ugly",
    "weed", "hemp", "womb", "loin", "loins", "pawn", "seaman", "seamen", "screw", "screwed", "screwing",
    "urinal", "urine", "vomit", "poop", "pee", "potty", "tinkle", "breasts", "nipple", "nipples", "lust",
    "lusting", "lusty", "hump", "humped", "humping", "knob", "omg", "lmao", "stoned", "trashy", "weirdo",
    "wang", "gai", "len", "maxi", "hiv", "herpes", "pms", "oral", "orally", "ovum", "ovums", "ovary", "uterus",
    "menses", "menstruate", "menstruation", "tampon", "rectal", "rectum", "rectus", "testes", "testis",
    "pubic", "penile", "racy", "meth", "heroin", "opium", "opiate", "peyote", "valium", "viagra", "junkie",
    "junky", "uzi", "sniper", "napalm", "xx", "lech", "thug", "jerk", "jerked", "suck", "sucked", "sucking",
    "teat", "teets", "tush", "rump", "pcp", "lube", "prig", "prude", "whiz", "nazi", "nazism", "hitler",
    "reich", "klan", "kkk", "aryan", "arian", "hoar", "wad", "organ", "slave", "stroke", "thrust", "virgin",
    "tramp", "unwed", "erect", "facial", "fondle", "seduce", "slope", "snatch", "snuff", "steamy", "sandbar",
    "revue", "playboy", "leper", "prostitute", "inbred", "homey", "hookah", "paddy", "pasty", "pastie",
    "punky", "quicky", "tawdry", "toots", "undies", "vixen", "vulgar", "wedgie", "weenie", "willy", "willies",
    "woody", "sissy", "sleaze", "sleazy", "souse", "soused", "transsexual", "cowgirl", "cowgirls", "cow girl",
    "cow girls", "foobar", "fubar", "schizo", "massa", "hooter", "hooters", "bondage", "masochist", "sadist",
    "sadism", "incest", "molest", "pedophile", "pedophilia", "rape", "raped", "rapist", "raping",
)


def packaged_wordlist() -> Path:
    """Path of better-profanity's ``profanity_wordlist.txt`` (found without importing the package)."""
    spec = importlib.util.find_spec("better_profanity")
    if spec is None or spec.origin is None:
        raise InputError("the profanity word list package 'better-profanity' is not installed",
                         hint="run `pip install better-profanity`, or pass your own list file")
    path = Path(spec.origin).parent / "profanity_wordlist.txt"
    if not path.is_file():
        raise InputError("better-profanity has no profanity_wordlist.txt", path=path.parent,
                         hint="reinstall it: `pip install --force-reinstall better-profanity`")
    return path


def read_word_list(path: str | Path) -> list[str]:
    """Entries of a list file: one per line, stripped, lowercased; blank and ``#`` lines skipped."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise InputError("word list file not found", path=path, hint="check the path") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read word list ({exc})", path=path,
                         hint="give a UTF-8 text file with one entry per line") from exc
    return [w for w in (normalize_entry(line) for line in lines) if w and not w.startswith("#")]


def normalize_entry(entry: str) -> str:
    return " ".join(entry.strip().lower().split())


def _atoms(entry: str) -> tuple[str, ...]:
    """Regex fragments of an entry, one per character: whitespace runs -> \\s+, '*' -> \\w*."""
    atoms: list[str] = []
    for word_index, word in enumerate(entry.split(" ")):
        if word_index:
            atoms.append(r"\s+")
        atoms += [r"\w*" if ch == "*" else re.escape(ch) for ch in word]
    return tuple(atoms)


def trie_regex(entries: Iterable[str]) -> str:
    """One regex for all entries, factored as a trie so matching stays fast with ~1,000 entries (no boundaries:
    callers add their own, e.g. ``(?<!\\w)`` ... ``(?!\\w)``)."""
    trie: dict = {}
    for entry in entries:
        node = trie
        for atom in _atoms(entry):
            node = node.setdefault(atom, {})
        node[""] = {}

    def build(node: dict) -> str:
        branches = [atom + build(child) for atom, child in sorted(node.items()) if atom]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:
            return ("(?:" + body + ")?") if len(branches) == 1 else body + "?"
        return body

    return build(trie)


@dataclass(frozen=True)
class Lexicon:
    """A compiled profanity lexicon. ``source`` says where its entries came from; ``excluded`` lists entries
    of the source that were dropped (ambiguous, identity terms, user exclusions)."""

    terms: tuple[str, ...]
    source: str
    excluded: tuple[str, ...] = ()
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.terms:
            raise InputError(f"the profanity lexicon ({self.source}) has no entries left",
                             hint="give a list with entries, or exclude fewer")
        pattern = r"(?<!\w)" + trie_regex(self.terms) + r"(?!\w)"
        object.__setattr__(self, "regex", re.compile(pattern, re.IGNORECASE))

    def find(self, text: str) -> list[str]:
        """The lexicon entries found in ``text`` (as written there), in order."""
        assert self.regex is not None
        return [m.group(0) for m in self.regex.finditer(text)]

    def is_explicit(self, text: str) -> bool:
        assert self.regex is not None
        return self.regex.search(text) is not None

    def is_implicit(self, text: str) -> bool:
        return not self.is_explicit(text)

    def describe(self) -> dict:
        return {"source": self.source, "terms": len(self.terms), "excluded": len(self.excluded)}


def _identity_terms(entries: Iterable[str]) -> set[str]:
    from toxiforge.groups import all_groups

    regexes = [g.regex for g in all_groups() if g.regex is not None]
    return {e for e in entries if any(r.fullmatch(e) for r in regexes)}


def load_lexicon(words: str | Path | Sequence[str] | None = None, *, ambiguous: bool = True,
                 keep_identity_terms: bool = False,
                 exclude: str | Path | Iterable[str] = ()) -> Lexicon:
    """Build a :class:`Lexicon`.

    ``words``: None for the packaged better-profanity list, a list file path, or the entries themselves.
    ``ambiguous=True`` drops :data:`AMBIGUOUS_TERMS`; identity terms of registered groups are dropped unless
    ``keep_identity_terms``; ``exclude`` (entries, or a list file path) drops more.
    """
    if words is None:
        path = packaged_wordlist()
        entries = read_word_list(path)
        from importlib.metadata import PackageNotFoundError, version

        try:
            source = f"better-profanity {version('better-profanity')} profanity_wordlist.txt"
        except PackageNotFoundError:
            source = str(path)
    elif isinstance(words, (str, Path)):
        entries, source = read_word_list(words), str(words)
    else:
        entries, source = [normalize_entry(w) for w in words if normalize_entry(w)], "user entries"
    entries = list(dict.fromkeys(entries))
    drop: set[str] = set()
    if ambiguous:
        drop |= {normalize_entry(w) for w in AMBIGUOUS_TERMS}
    if not keep_identity_terms:
        drop |= _identity_terms(entries)
    if isinstance(exclude, (str, Path)):
        drop |= set(read_word_list(exclude))
    else:
        drop |= {normalize_entry(w) for w in exclude}
    kept = tuple(e for e in entries if e not in drop)
    excluded = tuple(e for e in entries if e in drop)
    return Lexicon(terms=kept, source=source, excluded=excluded)


@lru_cache(maxsize=1)
def default_lexicon() -> Lexicon:
    """The packaged list minus ambiguous entries and identity terms (cached)."""
    return load_lexicon()


def implicit_flags(texts: Iterable[str], lexicon: Lexicon | None = None) -> list[bool]:
    """True for each text with no lexicon entry."""
    lex = lexicon or default_lexicon()
    return [lex.is_implicit(t) for t in texts]


def implicit_share(texts: Sequence[str], lexicon: Lexicon | None = None) -> float:
    """Share of ``texts`` that are implicit (0.0 for no texts)."""
    flags = implicit_flags(texts, lexicon)
    return sum(flags) / len(flags) if flags else 0.0
