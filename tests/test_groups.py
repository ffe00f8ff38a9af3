"""Tests for the target-group registry (toxiforge.groups) and the shipped benign demonstration sets."""

from __future__ import annotations

from importlib.resources import files

import pytest

from toxiforge import groups
from toxiforge.errors import InputError
from toxiforge.groups import (
    COMMUNITY_GROUPS,
    TOXIGEN_GROUP_NAMES,
    TOXIGEN_GROUPS,
    Group,
    all_groups,
    define_group,
    groups_mentioned,
    normalize_group_name,
    register_group,
    resolve_group,
)

EXPECTED_TOXIGEN = (
    "black", "asian", "native_american", "latino", "jewish", "muslim", "chinese", "mexican", "middle_east",
    "lgbtq", "women", "mental_disability", "physical_disability",
)
EXPECTED_COMMUNITY = ("immigrant", "bisexual", "trans")


@pytest.fixture
def restore_registry():
    """Snapshot the registry and restore it afterwards, so user groups defined in a test do not leak."""
    registry = dict(groups._REGISTRY)
    aliases = dict(groups._ALIASES)
    yield
    groups._REGISTRY.clear()
    groups._REGISTRY.update(registry)
    groups._ALIASES.clear()
    groups._ALIASES.update(aliases)


# --- registration ---------------------------------------------------------------------------------------------

def test_toxigen_groups_registered_in_order():
    assert TOXIGEN_GROUP_NAMES == EXPECTED_TOXIGEN
    assert tuple(g.name for g in TOXIGEN_GROUPS) == EXPECTED_TOXIGEN
    assert [g.name for g in all_groups("toxigen")] == list(EXPECTED_TOXIGEN)
    for name in EXPECTED_TOXIGEN:
        group = resolve_group(name)
        assert group.name == name
        assert group.kind == "toxigen"
        assert group.display
        assert group.patterns


def test_community_groups_registered():
    assert tuple(g.name for g in COMMUNITY_GROUPS) == EXPECTED_COMMUNITY
    assert [g.name for g in all_groups("community")] == list(EXPECTED_COMMUNITY)
    for name in EXPECTED_COMMUNITY:
        group = resolve_group(name)
        assert group.name == name
        assert group.kind == "community"


def test_all_groups_contains_both_kinds():
    names = [g.name for g in all_groups()]
    assert names[: len(EXPECTED_TOXIGEN)] == list(EXPECTED_TOXIGEN)
    assert set(EXPECTED_COMMUNITY) <= set(names)
    assert len(names) == len(set(names))


# --- resolving names and aliases --------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "typed, canonical",
    [
        ("middle eastern", "middle_east"),
        ("Middle Eastern", "middle_east"),
        ("middle-eastern", "middle_east"),
        ("middle east", "middle_east"),
        ("LGBTQ+", "lgbtq"),
        ("lgbtq", "lgbtq"),
        ("LGBT", "lgbtq"),
        ("native american", "native_american"),
        ("Native-American", "native_american"),
        ("  NATIVE   american  ", "native_american"),
        ("Mental Disability", "mental_disability"),
        ("mental_dis", "mental_disability"),
        ("physical_dis", "physical_disability"),
        ("Physical Disability", "physical_disability"),
        ("African American", "black"),
        ("Asian Americans", "asian"),
        ("hispanic", "latino"),
        ("Jewish People", "jewish"),
        ("Muslims", "muslim"),
        ("chinese", "chinese"),
        ("Mexican-American", "mexican"),
        ("Women", "women"),
        ("woman", "women"),
        ("Immigrants", "immigrant"),
        ("bisexual people", "bisexual"),
        ("Transgender", "trans"),
    ],
)
def test_aliases_resolve(typed, canonical):
    assert resolve_group(typed).name == canonical


def test_resolve_accepts_group_instance():
    group = resolve_group("asian")
    assert resolve_group(group) is group


def test_normalize_group_name():
    assert normalize_group_name("  Middle-Eastern ") == "middle_eastern"
    assert normalize_group_name("LGBTQ+") == "lgbtq"
    assert normalize_group_name("native / american") == "native_american"
    assert normalize_group_name("a--b__c") == "a_b_c"


def test_unknown_group_raises_with_known_names():
    with pytest.raises(InputError) as info:
        resolve_group("no such group here")
    message = str(info.value)
    assert "no such group here" in message
    for name in ("asian", "middle_east", "physical_disability", "women"):
        assert name in message
    assert "define_group" in message


def test_input_error_is_value_error():
    with pytest.raises(ValueError):
        resolve_group("definitely_unknown_group")


# --- user-defined groups ----------------------------------------------------------------------------------------

def test_define_group_registers_and_matches(restore_registry):
    group = define_group("Test Pacific Islander", [r"pacific islanders?"],
                         aliases=["tf test islanders"], display="Pacific Islander people")
    assert group.name == "test_pacific_islander"
    assert group.kind == "user"
    assert group.display == "Pacific Islander people"
    assert resolve_group("test pacific islander") is group
    assert resolve_group("TF-Test-Islanders") is group
    assert group.mentions("a pacific islander festival took place in the park.")
    assert not group.mentions("the pacific ocean was calm today.")
    assert "test_pacific_islander" in groups_mentioned("Pacific Islanders shared songs at the festival.")
    assert group in all_groups("user")


def test_restore_registry_fixture_cleans_up():
    with pytest.raises(InputError):
        resolve_group("test_pacific_islander")
    assert all_groups("user") == []


def test_define_group_alias_collision_raises(restore_registry):
    with pytest.raises(InputError) as info:
        define_group("test_collision", [r"collision terms?"], aliases=["asian"])
    assert "asian" in str(info.value)
    # nothing was registered by the failed call
    with pytest.raises(InputError):
        resolve_group("test_collision")


def test_define_group_name_collision_raises(restore_registry):
    with pytest.raises(InputError):
        define_group("asian", [r"something else"])
    with pytest.raises(InputError):
        define_group("Middle Eastern", [r"something else"])


def test_define_group_replace(restore_registry):
    define_group("test_replace", [r"first terms?"], aliases=["test old alias"])
    replaced = define_group("test_replace", [r"second terms?"], aliases=["test new alias"], replace=True)
    assert resolve_group("test_replace") is replaced
    assert resolve_group("test new alias") is replaced
    with pytest.raises(InputError):
        resolve_group("test old alias")
    assert replaced.mentions("the second term is here.")
    assert not replaced.mentions("the first term is here.")


def test_register_group_duplicate_raises(restore_registry):
    group = Group(name="test_dup", display="Dup", category="user", patterns=(r"dup terms?",), kind="user")
    register_group(group)
    with pytest.raises(InputError):
        register_group(group)


def test_group_validation():
    with pytest.raises(InputError):
        Group(name="Bad Name", display="x", category="user", patterns=(r"x",))
    with pytest.raises(InputError):
        Group(name="no_patterns", display="x", category="user", patterns=())
    with pytest.raises(InputError):
        Group(name="bad_regex", display="x", category="user", patterns=(r"(unclosed",))


# --- identity-term matching ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "group, text",
    [
        ("asian", "Asian neighbors hosted the street fair."),
        ("asian", "an ASIAN AMERICAN author gave a talk."),
        ("black", "Black families attended the reunion."),
        ("black", "an African-American history exhibit opened."),
        ("native_american", "the Native American museum opened a new wing."),
        ("native_american", "indigenous languages are taught at the school."),
        ("latino", "Latina scientists presented their work."),
        ("jewish", "the synagogue hosted a concert."),
        ("muslim", "the mosque held an open house."),
        ("chinese", "Chinese calligraphy was on display."),
        ("mexican", "a Mexican-American chef cooked dinner."),
        ("middle_east", "a Middle Eastern bakery opened downtown."),
        ("middle_east", "Arabic poetry was read aloud."),
        ("lgbtq", "the LGBTQ+ center hosted a movie night."),
        ("lgbtq", "the Pride parade passed by."),
        ("women", "Women engineers led the project."),
        ("mental_disability", "autistic adults shared their stories."),
        ("mental_disability", "support for people with intellectual disabilities."),
        ("physical_disability", "wheelchair users now have a ramp."),
        ("physical_disability", "Deaf actors performed in sign language."),
    ],
)
def test_mentions_positive(group, text):
    assert resolve_group(group).mentions(text)


@pytest.mark.parametrize(
    "group, text",
    [
        ("asian", "a caucasian shepherd dog slept in the sun."),
        ("asian", "the weather was pleasant today."),
        ("black", "the teacher wrote on the blackboard."),
        ("black", "a blackbird sang in the tree."),
        ("jewish", "the jewelry store opened at nine."),
        ("muslim", "the islands were beautiful."),
        ("women", "the committee met on tuesday."),
        ("chinese", "we visited china last summer."),
        ("middle_east", "the arabesque pattern was intricate."),
        ("lgbtq", "the gaylord hotel is large."),
    ],
)
def test_mentions_word_bounded(group, text):
    assert not resolve_group(group).mentions(text)


def test_find_terms_case_insensitive_in_order():
    group = resolve_group("asian")
    assert group.find_terms("Asian and Caucasian and ASIANS.") == ["Asian", "ASIANS"]
    assert resolve_group("black").find_terms("a blackboard and black people") == ["black people"]


def test_groups_mentioned():
    assert groups_mentioned("the weather was pleasant and the train was on time.") == []
    found = groups_mentioned("asian and jewish neighbors shared a meal.")
    assert set(found) == {"asian", "jewish"}
    found = groups_mentioned("a mexican american teacher and a muslim student planted trees.")
    assert set(found) == {"mexican", "muslim"}
    # order follows registration order
    found = groups_mentioned("women and black artists and asian writers.")
    assert found == ["black", "asian", "women"]


# --- shipped benign demonstration sets ----------------------------------------------------------------------------

BENIGN_DIR = files("toxiforge") / "demonstrations" / "benign"


@pytest.mark.parametrize("name", EXPECTED_TOXIGEN)
def test_benign_demonstrations_shipped(name):
    resource = BENIGN_DIR / f"neutral_{name}.txt"
    assert resource.is_file(), f"missing shipped benign set neutral_{name}.txt"
    text = resource.read_text(encoding="utf-8")
    raw_lines = text.splitlines()
    lines = [line.strip() for line in raw_lines if line.strip()]
    assert len(lines) == len(raw_lines), "benign sets have no blank lines"
    assert len(lines) >= 20
    assert len(set(lines)) == len(lines), "benign sets have no duplicate lines"
    group = resolve_group(name)
    for line in lines:
        assert not line.startswith("- "), line
        assert group.mentions(line), f"{name}: line does not mention the group: {line!r}"
        assert 8 <= len(line.split()) <= 30, line


def test_an_unknown_group_says_did_you_mean():
    """Issue 56 #10: `--groups asain` listed every group but named none; a typo of a name or of an alias now names
    the group it is closest to (the did-you-mean of the name registries)."""
    for typo, meant in (("asain", "asian"), ("Hispanc", "latino"), ("middle esat", "middle_east")):
        with pytest.raises(InputError) as caught:
            resolve_group(typo)
        assert str(caught.value).startswith(f"unknown group {typo!r}")
        assert caught.value.hint.startswith(f"did you mean {meant!r}?"), caught.value.hint
    with pytest.raises(InputError) as caught:
        resolve_group("xyzzy")
    assert "known names: asian, bisexual" in caught.value.hint and "define_group" in caught.value.hint
