"""A generation plan: groups × labels × statements per cell, and the prompts it expands to.

Prompts come either from demonstration sets (k demonstrations sampled per prompt, seeded; the shipped benign
sets by default) or from prompt files in upstream's ``{hate,neutral}_<group>_1k.txt`` format (used line by line,
read as open-instruct reads them, in order or, with ``shuffle_seed``, in open-instruct's seeded shuffle, cycling when
a cell asks for more statements than the file has prompts; lines that cannot be prompts are passed over).

Expansion is deterministic: work item ``i`` of cell (group, label) always gets the same prompt and the same
sampling seed for a given plan seed, whatever the batch size, shard size or number of resumes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Literal

from toxiforge.errors import InputError, check_choice
from toxiforge.groups import resolve_group
from toxiforge.records import label_word, parse_label

PromptSource = Literal["demonstrations", "prompts"]


@dataclass(frozen=True)
class Cell:
    """``n`` statements for one (group, label)."""

    group: str
    label: int
    n: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "group", resolve_group(self.group).name)
        object.__setattr__(self, "label", parse_label(self.label))
        if self.n < 1:
            raise InputError(f"cell {self.group}/{label_word(self.label)} asks for n={self.n} statements",
                             hint="ask for at least 1 statement per cell")


@dataclass(frozen=True)
class WorkItem:
    """One prompt to decode: one statement, or one per hypothesis when the decoder returns several."""

    index: int          # position in the whole plan
    row_id: str         # "<group>/<label word>/<i within cell>"
    group: str
    label: int
    prompt: str         # the LM input (real newlines), e.g. "- s1\n- s2\n-"
    seed: int           # this row's sampling seed

    def output_row_id(self, rank: int) -> str:
        """``row_id`` of this item's output of rank ``rank`` (0 = best): the item's own id for the best output,
        ``<row_id>/<rank>`` for the further hypotheses of a decoder that returns several per prompt."""
        return self.row_id if rank == 0 else f"{self.row_id}/{rank}"


@dataclass(frozen=True)
class GenerationPlan:
    """What to generate and from which prompts.

    ``source`` is a demonstrations path (any layout :func:`toxiforge.demonstrations.load_demonstrations` reads)
    or, with ``prompt_source="prompts"``, a prompt file or folder of upstream prompt files. ``source=None`` uses
    toxiforge's shipped benign demonstration sets.
    """

    cells: tuple[Cell, ...]
    source: str | None = None
    prompt_source: PromptSource = "demonstrations"
    k: int = 5
    seed: int = 0
    shuffle_seed: int | None = None  # prompt files: None = lines in file order; else open-instruct's seeded shuffle

    def __post_init__(self) -> None:
        if not self.cells:
            raise InputError("the plan has no cells", hint="give at least one group and one label")
        keys = [(c.group, c.label) for c in self.cells]
        if len(set(keys)) != len(keys):
            raise InputError("the plan lists a (group, label) cell twice", hint="list each group and label once")
        check_choice(self.prompt_source, ("demonstrations", "prompts"), what="prompt source",
                     hint="use demonstrations or prompts")
        if self.k < 1:
            raise InputError(f"k={self.k} demonstrations per prompt must be at least 1", hint="use -k 5 (the paper's)")

    @classmethod
    def grid(cls, groups: Iterable[str], labels: Iterable[str | int], per_cell: int, **kwargs) -> GenerationPlan:
        """Every group × every label, ``per_cell`` statements each."""
        cells = tuple(Cell(g, parse_label(lab), per_cell) for g in groups for lab in labels)
        return cls(cells=cells, **kwargs)

    @property
    def total(self) -> int:
        return sum(c.n for c in self.cells)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["cells"] = [{"group": c.group, "label": label_word(c.label), "n": c.n} for c in self.cells]
        if d["shuffle_seed"] is None:
            del d["shuffle_seed"]  # as manifests written before the field existed, so they still resume
        return d

    def expand(self) -> list[WorkItem]:
        """All work items, cell by cell. Reads the prompt source; raises before anything is written."""
        items: list[WorkItem] = []
        sets = self._demonstration_sets() if self.prompt_source == "demonstrations" else None
        for cell in self.cells:
            prompts = self._cell_prompts(cell, sets)
            for i, prompt in enumerate(prompts):
                items.append(WorkItem(index=len(items), row_id=f"{cell.group}/{label_word(cell.label)}/{i:06d}",
                                      group=cell.group, label=cell.label, prompt=prompt,
                                      seed=row_seed(self.seed, cell.group, cell.label, i)))
        return items

    def _demonstration_sets(self) -> dict:
        from toxiforge.demonstrations import load_demonstrations, load_shipped_benign

        return load_shipped_benign() if self.source is None else load_demonstrations(self.source)

    def _cell_prompts(self, cell: Cell, sets: dict | None) -> list[str]:
        if sets is None:
            lines = _prompt_file_lines(self.source, cell, self.shuffle_seed, only_cell=len(self.cells) == 1)
            return [lines[i % len(lines)] for i in range(cell.n)]
        from toxiforge.demonstrations import build_prompts, get_set

        demo_set = get_set(sets, cell.group, cell.label)
        return [p.text for p in build_prompts(demo_set, cell.n, k=self.k, seed=self.seed)]


def plan_groups(groups: Iterable[str], labels: Iterable[str | int], *, source: str | None,
                prompt_source: PromptSource = "demonstrations") -> tuple[list[str], dict[str, str]]:
    """The groups to plan for ``groups`` (``--groups`` split at commas), and those ``all`` left out, with why.

    ``["all"]`` (any case) is ToxiGen's 13 groups. With demonstrations read from ``source`` (``-d``), ``all`` keeps
    only the groups that have a set of every label in ``labels`` there: upstream's ``demonstrations/`` folder
    alone has no women files (upstream keeps women only as prompt files), and a smaller folder has fewer groups.
    When no group has every set (toxic labels and no toxic demonstrations at all), all 13 are kept, so that
    :meth:`GenerationPlan.expand` raises the error that says what to fetch. Named groups are kept as given (a
    missing set is an error there too). Prompt files (``prompt_source="prompts"``) are not filtered.
    """
    from toxiforge.groups import TOXIGEN_GROUP_NAMES

    groups = list(groups)
    if [g.strip().lower() for g in groups] != ["all"]:
        return groups, {}
    names = list(TOXIGEN_GROUP_NAMES)
    if source is None or prompt_source != "demonstrations":
        return names, {}
    from toxiforge.demonstrations import load_demonstrations
    from toxiforge.demonstrations.fetch import PROMPT_ONLY_GROUPS
    from toxiforge.demonstrations.sets import prompt_only_hint

    sets = load_demonstrations(source)
    wanted = [parse_label(lab) for lab in labels]
    left_out = {}
    for group in names:
        missing = [label_word(lab) for lab in wanted if (group, lab) not in sets]
        if missing:
            why = f"no {' or '.join(missing)} demonstrations in {source}"
            left_out[group] = f"{why}; {prompt_only_hint(group)}" if group in PROMPT_ONLY_GROUPS else why
    kept = [g for g in names if g not in left_out]
    return (kept, left_out) if kept else (names, {})


def row_seed(seed: int, group: str, label: int, i: int) -> int:
    """A 63-bit sampling seed for row ``i`` of a cell, stable across platforms and Python versions."""
    digest = hashlib.sha256(f"toxiforge:{seed}:{group}:{label}:{i}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def _prompt_file_lines(source: str | None, cell: Cell, shuffle_seed: int | None, *,
                       only_cell: bool = False) -> list[str]:
    """The prompt lines for ``cell`` from ``source``: a folder's files named for their group and label, or one
    file. A single file whose name does not say its group and label (``prompts build -o women.txt``) serves a plan
    of one cell (``--groups G --labels L``), which says them."""
    from toxiforge.demonstrations.prompts import select_prompts

    if source is None:
        raise InputError("prompt_source='prompts' needs a prompt file or folder",
                         hint="pass --prompts DIR (upstream's prompts/ folder) or a *_1k.txt file")
    texts = select_prompts(source, cell.group, cell.label, cell.n, shuffle_seed=shuffle_seed,
                           only_cell=only_cell).texts
    if not texts:
        raise InputError(f"the prompt file for group {cell.group!r}, label {label_word(cell.label)} has no line "
                         "that can be a prompt", path=source, hint="give a file with one '- s1\\n- s2\\n...\\n-' "
                         "prompt per line")
    return list(texts)
