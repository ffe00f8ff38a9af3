"""Demonstration sets: the example statements ToxiGen prompts are built from, one set per (group, label).

Sources that :func:`load_demonstrations` accepts:

* an upstream checkout root (``microsoft/TOXIGEN``, or what ``toxiforge demonstrations fetch`` wrote) holding
  ``demonstrations/`` and/or ``prompts/``;
* a ``demonstrations/`` folder: sentence files ``{hate,neutral}_<group>[_sentences].txt``, found recursively
  (upstream keeps them in category folders such as ``race/`` and ``religion/``);
* a ``prompts/`` folder: prompt files ``{hate,neutral}_<group>_1k.txt`` directly inside it (subfolders such as
  upstream's ``prompts/new/`` are ignored); a set's demonstrations are the distinct ones its prompts use;
* a single sentence file, prompt file, or table (CSV, JSONL or Parquet with text, group and label columns).

Sentence files hold one statement per line: surrounding whitespace is stripped, blank lines (and lines that
are only ``-``) are skipped and a leading ``"- "`` is dropped. Sentences are de-duplicated, keeping the order
they were first seen. Several sentence files for one (group, label) are merged in path order: upstream's
``religion/`` has both ``hate_muslim.txt`` and ``hate_muslim_sentences.txt``, which become one set. When a
source has both sentence files and prompt files for a (group, label), the sentence files win (they are the
curated originals; the prompts only reuse them).

Toxic demonstrations are not shipped; :func:`load_shipped_benign` returns the benign sets that are.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from toxiforge.demonstrations._files import NAME_PATTERN, decode_lines, parse_file_name, read_lines, resolve_group_label
from toxiforge.demonstrations.fetch import PROMPT_ONLY_GROUPS
from toxiforge.demonstrations.prompts import LITERAL_NEWLINE, Prompt, read_prompt_file
from toxiforge.errors import InputError
from toxiforge.records import label_word, parse_label

SetKey = tuple[str, int]
TABLE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet", ".pq")
FETCH_HINT = ("toxic demonstrations are not shipped with toxiforge: fetch upstream's with "
              "`toxiforge demonstrations fetch --dest DIR`, then pass `--demonstrations DIR`")


@dataclass(frozen=True)
class DemonstrationSet:
    """The demonstrations for one target group and label (1 = toxic/hate, 0 = benign/neutral).

    ``group`` is the canonical group name, ``sentences`` the distinct statements in first-seen order (duplicates
    passed in are dropped) and ``sources`` the files they came from.
    """

    group: str
    label: int
    sentences: tuple[str, ...]
    sources: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.label not in (0, 1) or isinstance(self.label, bool):
            raise InputError(f"label {self.label!r} must be 0 (benign) or 1 (toxic)", hint="use parse_label")
        object.__setattr__(self, "sentences", tuple(dict.fromkeys(self.sentences)))
        object.__setattr__(self, "sources", tuple(str(s) for s in self.sources))

    @property
    def key(self) -> SetKey:
        return (self.group, self.label)

    @property
    def label_word(self) -> str:
        """'toxic' or 'benign'."""
        return label_word(self.label)

    def __len__(self) -> int:
        return len(self.sentences)


def merge_sets(sets: Iterable[DemonstrationSet]) -> DemonstrationSet:
    """One set from several of the same (group, label): sentences de-duplicated in order, sources joined."""
    sets = list(sets)
    if not sets:
        raise InputError("nothing to merge", hint="pass at least one demonstration set")
    keys = {s.key for s in sets}
    if len(keys) > 1:
        raise InputError(f"cannot merge sets of different (group, label): {sorted(keys)}",
                         hint="merge sets of one group and label")
    return DemonstrationSet(sets[0].group, sets[0].label, tuple(x for s in sets for x in s.sentences),
                            tuple(dict.fromkeys(src for s in sets for src in s.sources)))


def _sentences_from_lines(lines: Iterable[tuple[int, str]]) -> list[str]:
    out = []
    for _, raw in lines:
        text = raw.strip()
        if text.startswith("- "):
            text = text[2:].strip()
        if text and text != "-":
            out.append(text)
    return out


def _meta(path: Path, group: object, label: object) -> SetKey:
    """Resolve group/label, filling what is missing from the file name."""
    if group is None or label is None:
        name_group, name_label = parse_file_name(path.name, where=path)
        group = name_group if group is None else group
        label = name_label if label is None else label
    return resolve_group_label(group, label, where=path)


def _sentence_set(lines: list[tuple[int, str]], where: str | Path, group: str, label: int) -> DemonstrationSet:
    sentences = _sentences_from_lines(lines)
    if not sentences:
        raise InputError("file is empty (no non-blank lines)", path=where,
                         hint="put one demonstration sentence per line")
    return DemonstrationSet(group, label, tuple(sentences), (str(where),))


def read_sentence_file(path: str | Path, group: str | None = None, label: int | str | None = None
                       ) -> DemonstrationSet:
    """Read a sentence file (one demonstration per line).

    ``group`` and ``label`` (a label word or 0/1) default to what the name ``{hate,neutral}_<group>[_sentences].txt``
    says. Raises :class:`InputError` for a missing, empty or non-UTF-8 file (naming the line of the first bad
    byte) and for an unknown group or label word.
    """
    path = Path(path)
    lines = read_lines(path)
    g, lab = _meta(path, group, label)
    return _sentence_set(lines, path, g, lab)


def prompt_demonstrations(prompts: Iterable[Prompt], *, group: str, label: int,
                          sources: Iterable[str] = ()) -> DemonstrationSet:
    """The distinct demonstrations a list of prompts uses, in first-seen order, as a set."""
    return DemonstrationSet(group, label, tuple(d for p in prompts for d in p.demonstrations), tuple(sources))


def read_prompt_demonstrations(path: str | Path, group: str | None = None, label: int | str | None = None
                               ) -> DemonstrationSet:
    """The distinct demonstrations of a prompt file as a :class:`DemonstrationSet`.

    Group and label come from the arguments or the file name (``{hate,neutral}_<group>_1k.txt``).
    """
    path = Path(path)
    g, lab = _meta(path, group, label)
    return prompt_demonstrations(read_prompt_file(path, g, lab), group=g, label=lab, sources=[str(path)])


def read_table(path: str | Path, text_col: str = "text", group_col: str = "group", label_col: str = "label"
               ) -> dict[SetKey, DemonstrationSet]:
    """Demonstration sets from a CSV, JSONL or Parquet table, one per (group, label) found.

    Each row gives a statement (``text_col``), a group name or alias (``group_col``) and a label word or 0/1
    (``label_col``). Rows with empty text are skipped. Raises :class:`InputError` for a missing column (naming
    the columns found), an unknown group or label (naming the row) and a table without statements.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError("is a directory, expected a table file", path=path, hint="pass a .csv/.jsonl/.parquet file")
    names, records = _read_records(path)
    if not records:
        raise InputError("table has no rows", path=path, hint="give a table with text, group and label columns")
    missing = [c for c in (text_col, group_col, label_col) if c not in names]
    if missing:
        raise InputError(f"table has no column {', '.join(map(repr, missing))}; columns found: "
                         f"{', '.join(names) or '(none)'}", path=path,
                         hint="rename the table's columns to text, group and label (a demonstrations table needs "
                              "those three)")
    buckets: dict[SetKey, list[str]] = {}
    columns = [[r.get(c) for r in records] for c in (text_col, group_col, label_col)]
    for row, (text, group, label) in enumerate(zip(*columns), start=1):
        text = "" if text is None else str(text).strip()
        if not text:
            continue
        try:
            key = resolve_group_label(group, label)
        except InputError as exc:
            raise InputError(f"row {row}: {exc.message}", path=path, hint=exc.hint) from exc
        buckets.setdefault(key, []).append(text)
    if not buckets:
        raise InputError(f"table has no statements in column {text_col!r}", path=path,
                         hint="give a table with at least one non-empty text")
    return {key: DemonstrationSet(key[0], key[1], tuple(v), (str(path),)) for key, v in sorted(buckets.items())}


def _read_records(path: Path) -> tuple[list[str], list[dict]]:
    """Column names and rows of a table. JSONL is parsed here (so a column may mix label words and 0/1);
    CSV and Parquet go through :func:`toxiforge.records.read_table`."""
    if path.suffix.lower() not in (".jsonl", ".json"):
        from toxiforge.records import read_table as read_arrow

        table = read_arrow(path)
        return list(table.column_names), table.to_pylist()
    names: dict[str, None] = {}
    records = []
    for no, text in read_lines(path):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except ValueError as exc:
            raise InputError(f"not valid JSON ({exc.args[0] if exc.args else exc})", path=path, line=no,
                             hint="write one JSON object per line") from exc
        if not isinstance(record, dict):
            raise InputError("line is not a JSON object", path=path, line=no, hint="write one JSON object per line")
        names.update(dict.fromkeys(record))
        records.append(record)
    return list(names), records


def _looks_like_prompt_file(path: Path, lines: list[tuple[int, str]]) -> bool:
    if path.name.lower().endswith("_1k.txt") or path.parent.name == "prompts":
        return True
    first = next((t.strip() for _, t in lines if t.strip()), "")
    return first.startswith("- ") and first.endswith(LITERAL_NEWLINE + "-")


def _read_text_source(path: Path, *, as_prompts: bool | None = None) -> tuple[str, DemonstrationSet]:
    """('sentences' | 'prompts', set) for a .txt file; prompt files are recognised by name or content."""
    lines = read_lines(path)
    is_prompt = _looks_like_prompt_file(path, lines) if as_prompts is None else as_prompts
    group, label = _meta(path, None, None)
    if not is_prompt:
        return "sentences", _sentence_set(lines, path, group, label)
    prompts = [Prompt.from_line(t, group, label, path=path, line_no=no) for no, t in lines if t.strip()]
    if not prompts:
        raise InputError("file is empty (no prompt lines)", path=path, hint="put one prompt per line")
    return "prompts", prompt_demonstrations(prompts, group=group, label=label, sources=[str(path)])


def _txt_files(folder: Path, recursive: bool) -> list[Path]:
    found = folder.rglob("*.txt") if recursive else folder.glob("*.txt")
    return sorted(p for p in found if p.is_file()
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts))


def _combine(sentence_sets: list[DemonstrationSet], prompt_sets: list[DemonstrationSet]
             ) -> dict[SetKey, DemonstrationSet]:
    """Merge per key; a key with sentence files ignores its prompt-derived sets."""
    by_key: dict[SetKey, list[DemonstrationSet]] = {}
    for s in sentence_sets:
        by_key.setdefault(s.key, []).append(s)
    prompt_keys: dict[SetKey, list[DemonstrationSet]] = {}
    for s in prompt_sets:
        prompt_keys.setdefault(s.key, []).append(s)
    for key, sets in prompt_keys.items():
        by_key.setdefault(key, sets)
    return {key: merge_sets(by_key[key]) for key in sorted(by_key)}


def _load_directory(folder: Path) -> dict[SetKey, DemonstrationSet]:
    sentence_sets: list[DemonstrationSet] = []
    prompt_sets: list[DemonstrationSet] = []
    demo_dir, prompt_dir = folder / "demonstrations", folder / "prompts"
    if demo_dir.is_dir() or prompt_dir.is_dir():  # an upstream checkout root
        if demo_dir.is_dir():
            sentence_sets += [_read_text_source(p, as_prompts=False)[1] for p in _txt_files(demo_dir, True)]
        if prompt_dir.is_dir():
            prompt_sets += [_read_text_source(p, as_prompts=True)[1] for p in _txt_files(prompt_dir, False)]
    elif folder.name == "prompts":
        prompt_sets += [_read_text_source(p, as_prompts=True)[1] for p in _txt_files(folder, False)]
    else:
        for p in _txt_files(folder, True):
            kind, s = _read_text_source(p)
            (prompt_sets if kind == "prompts" else sentence_sets).append(s)
    if not sentence_sets and not prompt_sets:
        raise InputError("found no demonstration or prompt files (*.txt)", path=folder,
                         hint=f"point at a TOXIGEN checkout, its demonstrations/ or prompts/ folder, "
                              f"or a folder of {NAME_PATTERN} files")
    return _combine(sentence_sets, prompt_sets)


def load_demonstrations(source: str | Path) -> dict[SetKey, DemonstrationSet]:
    """All demonstration sets in ``source`` (see the module docstring for the accepted layouts).

    Returns ``{(group, label): DemonstrationSet}`` sorted by key. Sentence files beat prompt files for the same
    (group, label); several sentence files for one key are merged (sentences de-duplicated in path order).
    """
    path = Path(source)
    if not path.exists():
        raise InputError("no such file or directory", path=path,
                         hint="check the path, or fetch upstream's demonstrations with "
                              "`toxiforge demonstrations fetch --dest DIR`")
    if path.is_dir():
        return _load_directory(path)
    if path.suffix.lower() in TABLE_SUFFIXES:
        return read_table(path)
    s = _read_text_source(path)[1]
    return {s.key: s}


def shipped_benign_dir():
    """The package folder (an importlib Traversable) holding the shipped benign demonstration files."""
    return resources.files("toxiforge") / "demonstrations" / "benign"


def load_shipped_benign() -> dict[SetKey, DemonstrationSet]:
    """The benign demonstration sets shipped with toxiforge (files ``neutral_<group>.txt``, label 0)."""
    folder = shipped_benign_dir()
    if not folder.is_dir():
        return {}
    out: dict[SetKey, DemonstrationSet] = {}
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not (entry.is_file() and entry.name.startswith("neutral_") and entry.name.endswith(".txt")):
            continue
        where = f"toxiforge/demonstrations/benign/{entry.name}"
        group, label = parse_file_name(entry.name, where=where)
        s = _sentence_set(decode_lines(entry.read_bytes(), where), where, group, label)
        out[s.key] = DemonstrationSet(s.group, s.label, s.sentences, (str(entry),))
    return dict(sorted(out.items()))


def prompt_only_hint(group: str) -> str:
    """How to get the sets of a group that upstream keeps only in ``prompts/`` (:data:`PROMPT_ONLY_GROUPS`)."""
    return (f"upstream has {group} only as prompt files (prompts/hate_{group}_1k.txt, prompts/neutral_{group}_1k.txt), "
            "not in demonstrations/: pass the folder that holds both demonstrations/ and prompts/ (what "
            "`toxiforge demonstrations fetch` writes, or a TOXIGEN checkout), or choose another group")


def get_set(sets: Mapping[SetKey, DemonstrationSet], group: str, label: int | str) -> DemonstrationSet:
    """The set for ``group`` (name or alias) and ``label`` (0/1 or a label word).

    Raises :class:`InputError` when it is missing, listing the available sets; for a toxic set with no toxic
    demonstrations loaded, the hint says how to fetch upstream's.
    """
    from toxiforge.groups import resolve_group

    name = resolve_group(group).name
    lab = parse_label(label)
    found = sets.get((name, lab))
    if found is not None:
        return found
    available = ", ".join(f"{g}/{label_word(lb)}" for g, lb in sorted(sets)) or "none"
    message = f"no {label_word(lab)} demonstrations for group {name!r} (available: {available})"
    if lab == 1 and not any(lb == 1 for _, lb in sets):
        raise InputError(message, hint=FETCH_HINT)
    if name in PROMPT_ONLY_GROUPS and any(lb == 1 for _, lb in sets) and not any(g == name for g, _ in sets):
        # an upstream folder without its prompts/ (a folder of one's own or the shipped sets get the file hint)
        raise InputError(message, hint=prompt_only_hint(name))
    file_name = f"{'hate' if lab else 'neutral'}_{name}.txt"
    folders = {Path(src).parent for s in sets.values() for src in s.sources}
    shipped = Path(str(shipped_benign_dir()))
    if len(folders) == 1 and shipped not in folders:
        where = f"add {next(iter(folders)) / file_name} (one statement per line)"
    else:
        where = (f"write your own, one statement per line, to DIR/{file_name} and pass --demonstrations DIR (the "
                 f"shipped sets in {shipped} can be copied there too)")
    raise InputError(message, hint=f"choose an available group, or {where}")
