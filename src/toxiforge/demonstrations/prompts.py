"""ToxiGen prompts: k demonstrations written as a bulleted list that the language model continues.

The paper's prompt (Appendix A) is the demonstrations, each on its own line and starting with ``"- "``, followed
by a line holding only ``"-"``, where the model writes the next statement::

    - s1
    - s2
    - s3
    -

:attr:`Prompt.text` is that string with real newlines. Upstream's prompt files
(``prompts/{hate,neutral}_<group>_1k.txt``) store one prompt per line with the newlines written as the two
characters backslash and ``n``; :meth:`Prompt.to_line` and :meth:`Prompt.from_line` convert exactly, so
``Prompt.from_line(line).to_line() == line`` for every line in upstream's format.

:func:`build_prompts` samples new prompts from a demonstration set: prompt ``i`` draws ``k`` distinct
demonstrations with its own :class:`random.Random` seeded from ``(seed, group, label, i)``, so results are the
same on every run and platform and prompt ``i`` does not depend on how many prompts are built.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from toxiforge.demonstrations._files import atomic_write_text, parse_file_name, read_lines, resolve_group_label
from toxiforge.errors import InputError
from toxiforge.records import parse_label

if TYPE_CHECKING:
    from toxiforge.demonstrations.sets import DemonstrationSet

LITERAL_NEWLINE = "\\n"
"""The two characters backslash and ``n`` that join demonstrations in upstream's prompt files."""
BULLET = "- "
END = "-"
OPEN_INSTRUCT_SEED = 42
"""open-instruct's ``random.seed(42)``: the seed of its per-file shuffle (``--select random``)."""
OPEN_INSTRUCT_GROUPS = ("asian", "black", "chinese", "jewish", "latino", "lgbtq", "mental_disability", "mexican",
                        "middle_east", "muslim", "native_american", "physical_disability", "trans", "women")
"""The 14 groups whose ``hate_<group>_1k.txt`` open-instruct's data script downloads (no bisexual, no immigrant)."""


@dataclass(frozen=True)
class Prompt:
    """One prompt: its demonstrations (without the ``"- "`` bullets) and, when known, group and label.

    ``label`` is 1 for a toxic (hate) prompt and 0 for a benign (neutral) one.
    """

    demonstrations: tuple[str, ...]
    group: str | None = None
    label: int | None = None

    def __post_init__(self) -> None:
        demos = tuple(self.demonstrations)
        object.__setattr__(self, "demonstrations", demos)
        if not demos:
            raise InputError("a prompt needs at least one demonstration", hint="give one or more sentences")
        for i, demo in enumerate(demos, start=1):
            if not isinstance(demo, str):
                raise InputError(f"demonstration {i} is {type(demo).__name__}, not text", hint="pass strings")
            if "\n" in demo or "\r" in demo or LITERAL_NEWLINE in demo:
                raise InputError(f"demonstration {i} contains a line break or a literal backslash-n",
                                 hint="put each demonstration on one line without '\\n'")

    @property
    def text(self) -> str:
        """The language-model input (paper Appendix A): ``"- s1\\n- s2\\n...- sk\\n-"`` with real newlines."""
        return "\n".join(BULLET + d for d in self.demonstrations) + "\n" + END

    def to_line(self) -> str:
        """The prompt as one line of an upstream prompt file (literal backslash-n, no line terminator)."""
        return LITERAL_NEWLINE.join(BULLET + d for d in self.demonstrations) + LITERAL_NEWLINE + END

    @classmethod
    def from_line(cls, line: str, group: str | None = None, label: int | None = None, *,
                  path: str | Path | None = None, line_no: int | None = None) -> Prompt:
        """Parse one line of an upstream prompt file (a trailing ``\\r``/``\\n`` and spaces are ignored).

        Raises :class:`InputError` naming ``path`` and ``line_no`` when the line does not end with the
        ``"-"`` part or a part does not start with ``"- "``.
        """
        body = line.rstrip("\r\n").rstrip()
        if body == END:
            raise InputError("prompt line has no demonstrations", path=path, line=line_no,
                             hint="write '- s1\\n- s2\\n...\\n-' with at least one demonstration")
        parts = body.split(LITERAL_NEWLINE)
        if len(parts) < 2 or parts[-1] != END:
            raise InputError("prompt line does not end with the trailing '-' (expected '- s1\\n- s2\\n...\\n-' "
                             "with literal backslash-n)", path=path, line=line_no,
                             hint="end every prompt line with \\n- (backslash, n, dash)")
        demos = []
        for j, part in enumerate(parts[:-1], start=1):
            if not part.startswith(BULLET):
                raise InputError(f"part {j} of the prompt line does not start with '- ': {part[:40]!r}",
                                 path=path, line=line_no, hint="start every demonstration with '- '")
            demos.append(part[len(BULLET):])
        return cls(tuple(demos), group, label)


def _demo_list(demo_set: DemonstrationSet | Sequence[str]) -> tuple[list[str], str | None, int | None]:
    from toxiforge.demonstrations.sets import DemonstrationSet  # not at the top: sets imports this module

    if isinstance(demo_set, DemonstrationSet):
        return list(demo_set.sentences), demo_set.group, demo_set.label
    if isinstance(demo_set, str):
        raise InputError("build_prompts needs a DemonstrationSet or a list of sentences, not one string",
                         hint="pass a list of sentences")
    return list(dict.fromkeys(demo_set)), None, None


def prompt_rng(seed: int, index: int, group: str | None = None, label: int | None = None) -> random.Random:
    """The random generator of prompt ``index``: seeded by a string, so it is the same on every platform."""
    return random.Random(f"toxiforge-prompt:{seed}:{group}:{label}:{index}")


def build_prompts(demo_set: DemonstrationSet | Sequence[str], n: int, k: int = 5, seed: int = 0) -> list[Prompt]:
    """``n`` prompts, each with ``k`` distinct demonstrations sampled from ``demo_set``.

    ``demo_set`` is a :class:`~toxiforge.demonstrations.sets.DemonstrationSet` (its group and label are copied
    onto the prompts) or a list of sentences (duplicates are dropped). Prompt ``i`` uses
    :func:`prompt_rng` ``(seed, i, group, label)``: the same seed gives the same prompts, and the first prompts
    of a longer run equal those of a shorter one. Raises :class:`InputError` for ``n < 0``, ``k < 1`` or ``k``
    larger than the set.
    """
    sentences, group, label = _demo_list(demo_set)
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise InputError(f"number of prompts n={n!r} must be a whole number >= 0", hint="use -n 1000 or similar")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"demonstrations per prompt k={k!r} must be a whole number >= 1", hint="use -k 5")
    if k > len(sentences):
        what = f"the {label_name(label)} set for {group!r}" if group else "the set"
        raise InputError(f"k={k} is larger than {what}, which has {len(sentences)} distinct demonstrations",
                         hint=f"use -k {len(sentences)} or fewer, or add demonstrations" if sentences
                         else "add demonstrations")
    prompts = []
    for i in range(n):
        rng = prompt_rng(seed, i, group, label)
        picked = rng.sample(range(len(sentences)), k)
        prompts.append(Prompt(tuple(sentences[j] for j in picked), group, label))
    return prompts


def label_name(label: int | None) -> str:
    return "unlabelled" if label is None else {1: "toxic", 0: "benign"}.get(label, "unlabelled")


def format_prompt_file(prompts: Iterable[Prompt]) -> str:
    """The text of a prompt file: one :meth:`Prompt.to_line` per line, each ending with a newline."""
    return "".join(p.to_line() + "\n" for p in prompts)


def write_prompt_file(prompts: Sequence[Prompt], path: str | Path, *, overwrite: bool = False) -> Path:
    """Write ``prompts`` in upstream's prompt-file format, atomically (temporary file, then rename).

    Refuses an existing file unless ``overwrite`` and an empty list of prompts (such a file could not be read
    back). Returns the path.
    """
    prompts = list(prompts)
    if not prompts:
        raise InputError("no prompts to write", path=path, hint="build at least one prompt (-n 1 or more)")
    return atomic_write_text(path, format_prompt_file(prompts), overwrite=overwrite)


def infer_prompt_file_meta(path: str | Path) -> tuple[str | None, int | None]:
    """Group and label from a prompt-file name (``hate_asian_1k.txt``), or ``(None, None)`` if the name does
    not start with a label word. A name that does, but names an unknown group, raises :class:`InputError`."""
    path = Path(path)
    word = path.name.partition("_")[0]
    try:
        parse_label(word)
    except InputError:
        return None, None
    return parse_file_name(path.name, where=path)


def read_prompt_file(path: str | Path, group: str | None = None, label: int | str | None = None) -> list[Prompt]:
    """Read an upstream-format prompt file (one prompt per line; blank lines skipped; last newline optional).

    ``group`` and ``label`` default to what the file name says (``{hate,neutral}_<group>_1k.txt`` or
    ``{hate,neutral}_<group>.txt``); they stay ``None`` when the name does not follow that pattern. Raises
    :class:`InputError` for a missing, empty or non-UTF-8 file and for a malformed line (naming it).
    """
    path = Path(path)
    lines = read_lines(path)
    if group is None or label is None:
        name_group, name_label = infer_prompt_file_meta(path)
        group = group if group is not None else name_group
        label = label if label is not None else name_label
    if group is not None or label is not None:
        if group is None or label is None:
            raise InputError("give both group and label, or neither", path=path,
                             hint="pass group= and label=, or name the file {hate,neutral}_<group>_1k.txt")
        group, label = resolve_group_label(group, label, where=path)
    prompts = [Prompt.from_line(text, group, label, path=path, line_no=no)
               for no, text in lines if text.strip()]
    if not prompts:
        raise InputError("file is empty (no prompt lines)", path=path,
                         hint="give a file with one '- s1\\n- s2\\n...\\n-' prompt per line")
    return prompts


# --- reading prompt files as benchmark users do (allenai/open-instruct's eval/toxigen) --------------------------

def prompt_text_from_line(line: str) -> str | None:
    """The language-model input of one prompt-file line, read as open-instruct reads it: strip the line, turn
    each doubled backslash into one, then each literal backslash-n into a newline. Never raises: upstream's own
    files have lines :meth:`Prompt.from_line` rejects (a doubled backslash before the literal ``\\n``, a last
    demonstration glued to the closing ``-``) and open-instruct uses them as they are. None for a line that cannot
    be a prompt (blank, or not a ``-`` bulleted list)."""
    text = line.strip().replace("\\\\", "\\").replace(LITERAL_NEWLINE, "\n")
    return text if text.startswith(END) and text != END else None


@dataclass(frozen=True)
class PromptSelection:
    """The prompts chosen from one (group, label)'s files, and the lines passed over on the way."""

    texts: tuple[str, ...]               # LM inputs, in selection order
    skipped: tuple[int, ...] = ()        # line numbers (1-based, across the files) that cannot be prompts


def prompt_files(source: str | Path, *, cell: tuple[str, int] | None = None,
                 only_cell: bool = False) -> dict[tuple[str, int], list[Path]]:
    """``(group, label) -> files`` of a prompt file or folder of ``{hate,neutral}_<group>[_1k].txt`` files, from
    the names alone (no file is read). Other ``.txt`` names in a folder are ignored. A single file whose name does
    not say its group and label (``prompts build -o women.txt``) serves ``cell`` when it is the plan's
    ``only_cell``, and is refused otherwise."""
    path = Path(source)
    if not path.exists():
        raise InputError("no such prompt file or folder", path=path, hint="check the --prompts path")
    if path.is_file() and infer_prompt_file_meta(path) == (None, None):
        if cell is None or not only_cell:
            group, label = cell if cell else ("G", None)
            word = "toxic|benign" if label is None else ("toxic" if label else "benign")
            prefix = "<hate|neutral>" if label is None else ("hate" if label else "neutral")
            raise InputError("the file name does not say which group and label its prompts are for", path=path,
                             hint=f"generate one group and label from it (--groups {group} --labels {word}), or "
                                  f"rename it {path.with_name(f'{prefix}_{group}_1k.txt')}")
        return {cell: [path]}
    found: dict[tuple[str, int], list[Path]] = {}
    for f in sorted(path.glob("*.txt")) if path.is_dir() else [path]:
        name_group, name_label = infer_prompt_file_meta(f)
        if name_group is not None and name_label is not None:
            found.setdefault((name_group, name_label), []).append(f)
    return found


def _line_count(files: Sequence[Path]) -> int:
    """Lines of ``files`` as ``for line in f`` counts them, from the bytes (nothing is decoded)."""
    total = 0
    for f in files:
        data = f.read_bytes()
        total += data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)
    return total


def shuffle_order(key: tuple[str, int]) -> tuple[bool, bool, str]:
    """Where a (group, label) file takes its turn in the seeded shuffle: hate before neutral, open-instruct's 14
    groups before the others, then by name (open-instruct shuffles in ``glob`` order, which the file system
    decides; sorted names are the reproducible stand-in)."""
    group, label = key
    return label != 1, group not in OPEN_INSTRUCT_GROUPS, group


def select_prompts(source: str | Path, group: str, label: int, n: int | None = None, *,
                   shuffle_seed: int | None = None, only_cell: bool = False) -> PromptSelection:
    """The first ``n`` prompts (all with None) of the ``(group, label)`` files in ``source``.

    ``shuffle_seed=None`` keeps file order (``--select first``). With a seed, as open-instruct: one
    ``random.Random(seed)`` shuffles the lines of every file in ``source`` in turn (order: :func:`shuffle_order`),
    and this cell takes the first ``n`` of its shuffled lines; only the line counts of the other files are read, so
    a group's selection does not depend on which groups are asked for. Lines that cannot be prompts
    (:func:`prompt_text_from_line`) are passed over and counted, never an error; only the chosen files are parsed.
    ``only_cell``: the plan has this one cell, so a single file whose name says nothing serves it
    (:func:`prompt_files`).
    """
    files = prompt_files(source, cell=(group, label), only_cell=only_cell)
    if (group, label) not in files:
        from toxiforge.records import label_word

        path = Path(source)
        folder = path if path.is_dir() else path.parent
        word, prefix = label_word(label), "hate" if label else "neutral"
        raise InputError(f"no prompt file for group {group!r}, label {word}", path=source,
                         hint=f"build one with `toxiforge prompts build -d DEMONSTRATIONS --groups {group} "
                              f"--labels {word} -o {folder / f'{prefix}_{group}_1k.txt'}`, or drop that "
                              "group or label from --groups/--labels")
    lines = [text for f in files[(group, label)] for _, text in read_lines(f)]
    order = list(range(len(lines)))
    if shuffle_seed is not None:
        rng = random.Random(shuffle_seed)
        for key in sorted(files, key=shuffle_order):
            if key == (group, label):
                rng.shuffle(order)
                break
            rng.shuffle(list(range(_line_count(files[key]))))  # advances the generator as that file's turn does
    texts: list[str] = []
    skipped: list[int] = []
    for i in order:
        if n is not None and len(texts) == n:
            break
        text = prompt_text_from_line(lines[i])
        if text is None:
            skipped.append(i + 1)
        else:
            texts.append(text)
    return PromptSelection(tuple(texts), tuple(skipped))
