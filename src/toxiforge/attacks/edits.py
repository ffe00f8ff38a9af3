"""Character edits of the ``obfuscate`` family: the spellings HateCheck's ``spell_*`` tests probe, which a reader
still reads as the original word.

Each operation takes a word and a seeded ``random.Random`` and returns the edited word, or None when it does not
apply to the word (no letter it can change). ``space_delete`` is the one edit of the gap between two words
(:func:`join_words`).

============== ======================================================== =====================================
operation      edit                                                     example (placeholder word "sample")
============== ======================================================== =====================================
swap           two adjacent, different letters change places            "smaple"
delete         one letter is dropped (words of 2+ characters)           "smple"
leet           a letter becomes its leetspeak digit (:data:`LEET`)       "s4mple"
space_insert   a space inside the word                                  "sam ple"
space_delete   the whitespace between this word and the next is dropped "samplewords"
homoglyph      a letter becomes a look-alike character (Unicode TR39)   "sаmple" (Cyrillic а)
zero_width     a zero-width space inside the word                       "sam\\u200bple"
============== ======================================================== =====================================

Homoglyphs come from Unicode's confusables table (UTS #39) as the ``confusable-homoglyphs`` package ships it
(:func:`homoglyphs`), not from a hand-typed list: Cyrillic and Greek look-alikes first, as they render like Latin
letters in ordinary fonts.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from functools import cache

ZERO_WIDTH_SPACE = "\u200b"
LEET = {"a": "4", "e": "3", "i": "1", "l": "1", "o": "0", "s": "5", "t": "7", "b": "8", "g": "9", "z": "2"}
PREFERRED_SCRIPTS = ("CYRILLIC", "GREEK")

Operation = Callable[[str, random.Random], "str | None"]


@cache
def homoglyphs(char: str) -> tuple[str, ...]:
    """Single characters that Unicode's confusables table lists as look-alikes of ``char``, Cyrillic and Greek
    first (then in the table's order); empty when it lists none."""
    from confusable_homoglyphs import categories, confusables

    found = confusables.is_confusable(char, greedy=True)
    if not found:
        return ()
    glyphs = [h["c"] for h in found[0]["homoglyphs"] if len(h["c"]) == 1 and h["c"] != char]
    preferred = [g for g in glyphs if categories.alias(g) in PREFERRED_SCRIPTS]
    return tuple(dict.fromkeys(preferred + glyphs))


def _pick(rng: random.Random, positions: list[int]) -> int | None:
    return rng.choice(positions) if positions else None


def swap(word: str, rng: random.Random) -> str | None:
    p = _pick(rng, [i for i in range(len(word) - 1)
                    if word[i].isalpha() and word[i + 1].isalpha() and word[i] != word[i + 1]])
    return None if p is None else word[:p] + word[p + 1] + word[p] + word[p + 2:]


def delete(word: str, rng: random.Random) -> str | None:
    p = _pick(rng, [i for i, c in enumerate(word) if c.isalpha()] if len(word) >= 2 else [])
    return None if p is None else word[:p] + word[p + 1:]


def leet(word: str, rng: random.Random) -> str | None:
    p = _pick(rng, [i for i, c in enumerate(word) if c.lower() in LEET])
    return None if p is None else word[:p] + LEET[word[p].lower()] + word[p + 1:]


def _insert(word: str, rng: random.Random, char: str) -> str | None:
    p = _pick(rng, list(range(1, len(word))))
    return None if p is None else word[:p] + char + word[p:]


def space_insert(word: str, rng: random.Random) -> str | None:
    return _insert(word, rng, " ")


def zero_width(word: str, rng: random.Random) -> str | None:
    return _insert(word, rng, ZERO_WIDTH_SPACE)


def homoglyph(word: str, rng: random.Random) -> str | None:
    p = _pick(rng, [i for i, c in enumerate(word) if homoglyphs(c)])
    return None if p is None else word[:p] + homoglyphs(word[p])[0] + word[p + 1:]


def join_words(word: str, gap: str, following: str) -> str | None:
    """``space_delete``: two words with only whitespace between them, written as one."""
    return word + following if gap and not gap.strip() else None


WORD_OPERATIONS: dict[str, Operation] = {
    "swap": swap, "delete": delete, "leet": leet, "space_insert": space_insert, "homoglyph": homoglyph,
    "zero_width": zero_width,
}
SPACE_DELETE = "space_delete"
OPERATIONS: tuple[str, ...] = ("swap", "delete", "leet", "space_insert", SPACE_DELETE, "homoglyph", "zero_width")


__all__ = ["LEET", "OPERATIONS", "SPACE_DELETE", "WORD_OPERATIONS", "ZERO_WIDTH_SPACE", "delete", "homoglyph",
           "homoglyphs", "join_words", "leet", "space_insert", "swap", "zero_width"]
