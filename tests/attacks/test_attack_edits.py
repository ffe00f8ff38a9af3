"""The obfuscate family's character edits, one by one, and the word helpers they rely on."""

from __future__ import annotations

import random
import unicodedata

import pytest

from toxiforge.attacks.base import drop_word, word_spans
from toxiforge.attacks.edits import (
    LEET,
    OPERATIONS,
    WORD_OPERATIONS,
    ZERO_WIDTH_SPACE,
    delete,
    homoglyph,
    homoglyphs,
    join_words,
    leet,
    space_insert,
    swap,
    zero_width,
)

WORD = "placeholder"


def rng(seed: int = 0) -> random.Random:
    return random.Random(seed)


@pytest.mark.parametrize("seed", range(5))
def test_swap_exchanges_two_adjacent_different_letters(seed):
    out = swap(WORD, rng(seed))
    diff = [i for i, (a, b) in enumerate(zip(WORD, out)) if a != b]
    assert sorted(out) == sorted(WORD) and len(diff) == 2 and diff[1] == diff[0] + 1
    assert out[diff[0]] == WORD[diff[1]] and out[diff[1]] == WORD[diff[0]]
    assert swap("aa", rng(seed)) is None and swap("a", rng(seed)) is None


@pytest.mark.parametrize("seed", range(5))
def test_delete_drops_one_letter(seed):
    out = delete(WORD, rng(seed))
    assert len(out) == len(WORD) - 1
    assert any(WORD[:i] + WORD[i + 1:] == out for i in range(len(WORD)))
    assert delete("a", rng(seed)) is None


@pytest.mark.parametrize("seed", range(5))
def test_leet_turns_one_letter_into_its_digit(seed):
    out = leet(WORD, rng(seed))
    diff = [i for i, (a, b) in enumerate(zip(WORD, out)) if a != b]
    assert len(out) == len(WORD) and len(diff) == 1 and out[diff[0]] == LEET[WORD[diff[0]]]
    assert leet("fun", rng(seed)) is None


@pytest.mark.parametrize(("operation", "char"), [(space_insert, " "), (zero_width, ZERO_WIDTH_SPACE)])
def test_insertions_put_one_character_strictly_inside_the_word(operation, char):
    for seed in range(5):
        out = operation(WORD, rng(seed))
        at = out.index(char)
        assert 0 < at < len(WORD) and out.replace(char, "", 1) == WORD
    assert operation("a", rng()) is None


def test_homoglyphs_come_from_the_unicode_confusables_table():
    from confusable_homoglyphs import confusables

    for letter in "aeo":
        glyphs = homoglyphs(letter)
        listed = {h["c"] for h in confusables.is_confusable(letter, greedy=True)[0]["homoglyphs"]}
        assert glyphs and set(glyphs) <= listed
        assert unicodedata.name(glyphs[0]).split()[0] in ("CYRILLIC", "GREEK")  # look-alikes in ordinary fonts
    assert homoglyphs("m") == ()  # the table lists only a two-letter look-alike ("rn")


@pytest.mark.parametrize("seed", range(5))
def test_homoglyph_replaces_one_letter_with_a_look_alike(seed):
    out = homoglyph(WORD, rng(seed))
    diff = [i for i, (a, b) in enumerate(zip(WORD, out)) if a != b]
    assert len(out) == len(WORD) and len(diff) == 1
    assert out[diff[0]] == homoglyphs(WORD[diff[0]])[0] != WORD[diff[0]]


def test_space_delete_joins_words_separated_by_whitespace_only():
    assert join_words("place", " ", "holder") == "placeholder"
    assert join_words("place", ", ", "holder") is None and join_words("place", "", "holder") is None


def test_operations_are_seeded():
    for name, operation in WORD_OPERATIONS.items():
        assert operation(WORD, rng(3)) == operation(WORD, rng(3)), name
    assert set(WORD_OPERATIONS) | {"space_delete"} == set(OPERATIONS)


def test_words_and_dropping_one():
    text = "the plan, it's fine"
    assert [text[s:e] for s, e in word_spans(text)] == ["the", "plan", "it's", "fine"]
    spans = word_spans(text)
    assert [drop_word(text, *span) for span in spans] == ["plan, it's fine", "the, it's fine", "the plan, fine",
                                                          "the plan, it's"]
