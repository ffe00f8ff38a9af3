"""toxiforge.errors: the InputError rendering and check_choice."""

from __future__ import annotations

import pytest

from toxiforge.errors import InputError, check_choice


def test_check_choice_returns_the_matching_choice():
    choices = ("proportional", "equal")
    assert check_choice("equal", choices, what="allocation") == "equal"
    assert check_choice("proportional", choices, what="allocation") is choices[0]


def test_check_choice_names_the_value_and_the_fix():
    with pytest.raises(InputError) as caught:
        check_choice("Equal", ("proportional", "equal"), what="allocation")  # exact match only
    assert str(caught.value) == "unknown allocation 'Equal'. Fix: use one of proportional, equal"
    with pytest.raises(InputError) as caught:
        check_choice("both", ("drop", "move"), what="on_conflict", hint="use drop or move")
    assert str(caught.value) == "unknown on_conflict 'both'. Fix: use drop or move"
