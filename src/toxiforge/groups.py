"""Target-group registry: the 13 ToxiGen groups, upstream's community groups, and groups users register.

Each :class:`Group` has a canonical name (the one upstream uses in its file names, e.g. ``middle_east``), a
display name, the aliases users type ("middle eastern", "LGBTQ+", "native american"), and identity-term regular
expressions used to check whether a statement mentions the group (ToxiGen Appendix D).

``resolve_group("Middle Eastern")`` returns the ``middle_east`` group; an unknown name raises an
:class:`~toxiforge.errors.InputError` listing the known names.

The identity-term patterns are a deliberately small, reviewable list of neutral identity terms (no slurs); they
match case-insensitively on word boundaries. They measure *explicit* mention; a statement can target a group
without naming it, which the paper's human annotators judged separately.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from toxiforge._lazy import did_you_mean
from toxiforge.errors import InputError

GroupKind = Literal["toxigen", "community", "user"]


def normalize_group_name(name: str) -> str:
    """Fold a user-typed group name to a lookup key: lowercase, '+' dropped, spaces/hyphens/slashes to '_'."""
    key = name.strip().lower().replace("+", "")
    key = re.sub(r"[\s\-/]+", "_", key)
    return re.sub(r"_+", "_", key).strip("_")


@dataclass(frozen=True)
class Group:
    """One target group.

    ``patterns`` are regular-expression fragments for identity terms; they are joined into one compiled,
    case-insensitive, word-bounded regex (:attr:`regex`).
    """

    name: str
    display: str
    category: str
    aliases: tuple[str, ...] = ()
    patterns: tuple[str, ...] = ()
    kind: GroupKind = "toxigen"
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not re.fullmatch(r"[a-z0-9_]+", self.name):
            raise InputError(f"group name {self.name!r} must be lowercase letters, digits and '_'",
                             hint="use a name like 'pacific_islander'")
        if not self.patterns:
            raise InputError(f"group {self.name!r} has no identity-term patterns",
                             hint="give at least one regular expression for a term that names the group")
        try:
            compiled = re.compile(r"\b(?:" + "|".join(self.patterns) + r")\b", re.IGNORECASE)
        except re.error as exc:
            raise InputError(f"group {self.name!r}: identity-term pattern does not compile ({exc})",
                             hint="check the regular expressions passed as patterns") from exc
        object.__setattr__(self, "regex", compiled)

    def mentions(self, text: str) -> bool:
        """True when ``text`` contains one of this group's identity terms."""
        assert self.regex is not None
        return self.regex.search(text) is not None

    def find_terms(self, text: str) -> list[str]:
        """The identity terms of this group found in ``text``, in order."""
        assert self.regex is not None
        return [m.group(0) for m in self.regex.finditer(text)]


def _g(name, display, category, aliases, patterns, kind: GroupKind = "toxigen") -> Group:
    return Group(name=name, display=display, category=category, aliases=tuple(aliases),
                 patterns=tuple(patterns), kind=kind)


# The 13 groups of ToxiGen (paper §3.1, Table 2), named as in upstream's file names.
TOXIGEN_GROUPS: tuple[Group, ...] = (
    _g("black", "Black people", "race", ["black people", "african american", "african americans", "blacks"],
       [r"black(?:s| people| americans?| communit(?:y|ies)| wom[ae]n| m[ae]n| families| folks)?",
        r"african[- ]americans?", r"african descent"]),
    _g("asian", "Asian people", "race", ["asians", "asian people", "asian american", "asian americans"],
       [r"asians?", r"asian[- ]americans?", r"asian descent", r"east asians?", r"south(?:east)? asians?"]),
    _g("native_american", "Native American people", "race",
       ["native american", "native americans", "native", "indigenous", "american indian", "first nations"],
       [r"native(?: american)?s?", r"native american", r"indigenous", r"american indians?", r"first nations?",
        r"tribes?", r"tribal", r"alaska natives?"]),
    _g("latino", "Latino/Latina people", "race",
       ["latina", "latinx", "latine", "hispanic", "hispanics", "latinos", "latino people"],
       [r"latin[oax]s?", r"latine", r"hispanics?", r"latin american(?:s)?"]),
    _g("jewish", "Jewish people", "religion", ["jews", "jewish people", "jew", "judaism"],
       [r"jews?", r"jewish", r"judaism", r"synagogues?", r"rabbis?"]),
    _g("muslim", "Muslim people", "religion", ["muslims", "muslim people", "islam", "islamic"],
       [r"muslims?", r"islam", r"islamic", r"mosques?", r"imams?"]),
    _g("chinese", "Chinese people", "nationality", ["chinese people", "china", "chinese american"],
       [r"chinese", r"chinese[- ]americans?"]),
    _g("mexican", "Mexican people", "nationality", ["mexicans", "mexican people", "mexican american"],
       [r"mexicans?", r"mexican[- ]americans?"]),
    _g("middle_east", "Middle Eastern people", "nationality",
       ["middle eastern", "middle east", "middle easterners", "arab", "arabs"],
       [r"middle[- ]eastern(?:ers?)?", r"middle[- ]east", r"arabs?", r"arabic", r"arab[- ]americans?"]),
    _g("lgbtq", "LGBTQ+ people", "sexual_orientation",
       ["lgbt", "lgbtq+", "lgbtqia", "lgbtqia+", "queer", "gay", "gay people"],
       [r"lgbt(?:q(?:ia)?)?\+?", r"queer", r"gays?", r"lesbians?", r"homosexuals?", r"same[- ]sex",
        r"transgender", r"pride"]),
    _g("women", "Women", "gender", ["woman", "female", "females", "girls"],
       [r"wom[ae]n", r"girls?", r"females?", r"ladies", r"mothers?", r"daughters?", r"sisters?", r"wives",
        r"wife"]),
    _g("mental_disability", "People with mental disabilities", "disability",
       ["mental disability", "mental disabilities", "mentally disabled", "intellectual disability",
        "mental_dis", "mental illness"],
       [r"mental(?:ly)? (?:disabilit(?:y|ies)|ill(?:ness(?:es)?)?|health conditions?|disabled)",
        r"intellectual(?:ly)? (?:disabilit(?:y|ies)|disabled)", r"developmental disabilit(?:y|ies)",
        r"neurodivergent", r"neurodiversity", r"autis(?:m|tic)", r"down syndrome", r"schizophrenia",
        r"bipolar", r"depression", r"adhd", r"learning disabilit(?:y|ies)", r"dyslexi(?:a|c)"]),
    _g("physical_disability", "People with physical disabilities", "disability",
       ["physical disability", "physical disabilities", "physically disabled", "physical_dis", "disabled"],
       [r"physical(?:ly)? (?:disabilit(?:y|ies)|disabled|impair(?:ed|ments?))", r"disabled",
        r"disabilit(?:y|ies)", r"wheelchairs?(?: users?)?", r"blind(?:ness)?", r"deaf(?:ness)?",
        r"amputees?", r"paralym(?:pics?|pians?)", r"paralyzed", r"mobility (?:aids?|impairments?)",
        r"prosthe(?:tic|sis|ses)", r"sign language", r"accessib(?:le|ility)"]),
)

# Groups upstream added after the paper (community contributions: file names hate_/neutral_<name>).
COMMUNITY_GROUPS: tuple[Group, ...] = (
    _g("immigrant", "Immigrants", "nationality", ["immigrants", "migrants", "migrant", "refugees"],
       [r"immigrants?", r"immigration", r"migrants?", r"refugees?", r"newcomers?"], kind="community"),
    _g("bisexual", "Bisexual people", "sexual_orientation", ["bi", "bisexuals", "bisexual people"],
       [r"bisexuals?", r"bisexuality", r"bi\+?"], kind="community"),
    _g("trans", "Transgender people", "gender", ["transgender", "trans people", "transgender people"],
       [r"trans(?:gender)?(?: people| wom[ae]n| m[ae]n| folks)?", r"non[- ]?binary", r"gender identit(?:y|ies)"],
       kind="community"),
)

_REGISTRY: dict[str, Group] = {}
_ALIASES: dict[str, str] = {}


def register_group(group: Group, *, replace: bool = False) -> Group:
    """Add ``group`` to the registry (its name and aliases become resolvable).

    Raises :class:`InputError` when the name or an alias is already taken, unless ``replace`` is true.
    """
    keys = [normalize_group_name(group.name)] + [normalize_group_name(a) for a in group.aliases]
    if not replace:
        for key in keys:
            owner = _ALIASES.get(key)
            if owner is not None and owner != group.name:
                raise InputError(f"group name or alias {key!r} is already used by group {owner!r}",
                                 hint="choose another name/alias or pass replace=True")
        if group.name in _REGISTRY:
            raise InputError(f"group {group.name!r} is already registered", hint="pass replace=True to overwrite")
    else:
        old = _REGISTRY.get(group.name)
        if old is not None:
            for key in [normalize_group_name(old.name)] + [normalize_group_name(a) for a in old.aliases]:
                _ALIASES.pop(key, None)
    _REGISTRY[group.name] = group
    for key in keys:
        _ALIASES[key] = group.name
    return group


def define_group(name: str, patterns: Iterable[str], *, display: str | None = None, category: str = "user",
                 aliases: Iterable[str] = (), replace: bool = False) -> Group:
    """Create and register a user group, e.g. ``define_group("pacific_islander", [r"pacific islanders?"])``."""
    group = Group(name=normalize_group_name(name), display=display or name, category=category,
                  aliases=tuple(aliases), patterns=tuple(patterns), kind="user")
    return register_group(group, replace=replace)


def resolve_group(name: str | Group) -> Group:
    """The registered group for a canonical name or alias (case, spaces, hyphens and '+' are ignored)."""
    if isinstance(name, Group):
        return name
    key = normalize_group_name(str(name))
    canonical = _ALIASES.get(key)
    if canonical is None:
        raise InputError(f"unknown group {name!r}",
                         hint=f"{did_you_mean(key, sorted(_REGISTRY), _ALIASES)} (`toxiforge groups` lists every "
                              "name and alias; toxiforge.groups.define_group registers a new group)")
    return _REGISTRY[canonical]


def all_groups(kind: GroupKind | None = None) -> list[Group]:
    """Registered groups in registration order, optionally only one kind."""
    return [g for g in _REGISTRY.values() if kind is None or g.kind == kind]


def groups_mentioned(text: str) -> list[str]:
    """Names of every registered group whose identity terms occur in ``text``."""
    return [g.name for g in _REGISTRY.values() if g.mentions(text)]


for _group in TOXIGEN_GROUPS + COMMUNITY_GROUPS:
    register_group(_group)

TOXIGEN_GROUP_NAMES: tuple[str, ...] = tuple(g.name for g in TOXIGEN_GROUPS)
