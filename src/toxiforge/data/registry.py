"""Dataset specs for the command line: ``[NAME=][KIND:]PATH[#OPTION]`` or ``KIND:hub``.

``KIND`` is one of :data:`KINDS` (aliases in :data:`ALIASES`): ``toxigen-annotated`` (alias ``humanval``),
``toxigen-train``, ``toxiforge``, ``sbf``, ``ihc``, ``dynahate``, ``hatecheck``, ``davidson``, ``table``,
``demonstrations``. ``KIND:hub`` (or a bare ``KIND``) loads the data from its usual online source (HateCheck and
Davidson from GitHub at the commit :mod:`toxiforge.data.hatecheck` / :mod:`toxiforge.data.davidson` pin). A bare
``PATH`` is read once and its layout told from its columns (:func:`detect_layout`). ``NAME=`` renames the dataset
in reports, e.g. ``"SBF=sbf:SBIC.v2.tst.csv"``. ``#OPTION`` picks a variant of the kinds in :data:`OPTIONS`, the
only one today being Davidson et al.'s label rule: ``#toxic`` (hate speech or offensive, the default) or
``#hate`` (hate speech only); any other kind, or an unknown rule, is an error that lists what is accepted.
A last ``#sample=N`` (any kind, after the option: ``davidson:labeled_data.csv#hate#sample=2000``) keeps a seeded
stratified sample of N rows (:func:`sample_data`): for audits and quick runs of slow classifiers on large sets.

Examples: ``humanval:annotated_test.parquet``, ``sbf:SBIC.v2.tst.csv``, ``ihc:implicit_hate_v1_stg1_posts.tsv``,
``dynahate:hub``, ``hatecheck:test_suite_cases.csv`` (HateCheck, hateful = 1, ``target_ident`` as the group, the
functional test kept per row), ``davidson:labeled_data.csv`` and ``davidson:labeled_data.csv#hate`` (Davidson et
al. 2017, annotator votes kept per row), ``runs/alice`` (a toxiforge generation directory), ``table:mine.csv``,
``demonstrations:toxigen-upstream`` (demonstration sentence files, hate_* = 1; a folder holding
``demonstrations/`` is detected).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge._lazy import did_you_mean
from toxiforge.data.benchmarks import SBF_HUB_ID, load_dynahate, load_ihc, load_sbf
from toxiforge.data.davidson import DAVIDSON_HUB_ID, DAVIDSON_RULES, DEFAULT_RULE, load_davidson
from toxiforge.data.examples import LabeledData, read_any_table
from toxiforge.data.hatecheck import HATECHECK_HUB_ID, load_hatecheck
from toxiforge.data.tables import load_table
from toxiforge.data.toxigen import (
    HUB_ID,
    is_demonstration_folder,
    load_demonstration_data,
    load_generated,
    load_toxigen_annotated,
)
from toxiforge.errors import InputError

KINDS: tuple[str, ...] = ("toxigen-annotated", "toxigen-train", "toxiforge", "sbf", "ihc", "dynahate", "hatecheck",
                          "davidson", "table", "demonstrations")
ALIASES: dict[str, str] = {
    "humanval": "toxigen-annotated", "toxigen-humanval": "toxigen-annotated", "toxigen-val": "toxigen-annotated",
    "annotated": "toxigen-annotated", "toxigen": "toxigen-train", "socialbiasframes": "sbf",
    "implicit-hate": "ihc", "implicithate": "ihc", "davidson2017": "davidson",
}
# kind -> the Hub's id of the published dataset it reads, for cards' ``datasets`` and ``model-index``
HUB_IDS: dict[str, str] = {"toxigen-annotated": HUB_ID, "toxigen-train": HUB_ID, "sbf": SBF_HUB_ID,
                           "hatecheck": HATECHECK_HUB_ID, "davidson": DAVIDSON_HUB_ID}
# option -> the kinds that read it (the others have their own text and label columns)
COLUMN_OPTIONS: dict[str, tuple[str, ...]] = {"--text-column": ("table",),
                                              "--label-column": ("table", "toxigen-train", "toxiforge")}
# kind -> the #OPTION values its specs take
OPTIONS: dict[str, tuple[str, ...]] = {"davidson": tuple(DAVIDSON_RULES)}
# a trailing #word (no dot, so "notes#2.csv" stays a file name)
_OPTION = re.compile(r"#([A-Za-z][\w-]*)$")
_SAMPLE = re.compile(r"#sample=([^#]*)$")
# what a KIND: prefix looks like (two characters at least, so a Windows drive letter C: stays a path)
_KIND_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_-]+")
SAMPLE_SEED = 0


def hub_dataset_id(layout: str) -> str | None:
    """The Hub id of the published dataset a layout reads (ToxiGen's, SBF's, HateCheck's, Davidson et al.'s);
    None for the others (local tables, toxiforge runs, sets without a Hub copy)."""
    return HUB_IDS.get(layout)


def _kind(text: str) -> str | None:
    key = text.strip().lower().replace("_", "-")
    key = ALIASES.get(key, key)
    return key if key in KINDS else None


def unknown_kind(word: str, spec: str) -> InputError:
    """The error for a ``KIND:`` prefix that is no kind (``hatechek:x.csv``), naming the closest kinds."""
    known = [*KINDS, *ALIASES]
    return InputError(f"unknown dataset kind {word!r} in {spec!r}, {did_you_mean(word.lower(), known)}",
                      hint=f"write KIND:PATH with one of {', '.join(KINDS)} (or an alias such as humanval), or "
                           "the PATH alone to tell the layout from the columns")


def detect_layout(columns: Sequence[str]) -> str:
    """The :data:`KINDS` entry whose published columns ``columns`` has; ``table`` when none matches."""
    cols = set(columns)
    if {"text", "toxicity_ai", "toxicity_human"} <= cols:
        return "toxigen-annotated"
    if {"generation", "prompt_label"} <= cols:
        return "toxiforge" if "machine_generated" in cols else "toxigen-train"
    if {"post", "offensiveYN"} <= cols:
        return "sbf"
    if {"post", "class"} <= cols:
        return "ihc"
    if {"text", "label", "split"} <= cols and ("acl.id" in cols or "round.base" in cols):
        return "dynahate"
    if {"functionality", "test_case", "label_gold"} <= cols:
        return "hatecheck"
    if {"tweet", "class", "hate_speech", "offensive_language", "neither"} <= cols:
        return "davidson"
    return "table"


def parse_spec(spec: str) -> tuple[str | None, str | None, str | None]:
    """``(name, kind, path)`` of a spec; ``path`` None means the online source, ``kind`` None auto-detection."""
    name = None
    text = spec.strip()
    if "=" in text and not Path(text).exists():
        name, text = (part.strip() for part in text.split("=", 1))
        if not name:
            raise InputError(f"empty dataset name in {spec!r}", hint="write NAME=[KIND:]PATH, e.g. SBF=sbf:file.csv")
    if ":" in text:
        head, rest = text.split(":", 1)
        kind = _kind(head)
        if kind is not None and not Path(text).exists():
            return name, kind, (None if rest.strip().lower() in ("", "hub") else rest.strip())
        if kind is None and _KIND_WORD.fullmatch(head.strip()) and not Path(text).expanduser().exists():
            raise unknown_kind(head.strip(), spec)
    kind = _kind(text)
    if kind is not None and not Path(text).exists():
        return name, kind, None
    return name, None, text


def split_option(spec: str) -> tuple[str, str | None]:
    """``(spec without its #OPTION, OPTION)``, or ``(spec, None)`` when it has none or when the text with the
    ``#word`` names an existing file or folder (which is then read as it is)."""
    text = spec.strip()
    match = _OPTION.search(text)
    if match is None:
        return text, None
    tails = (text, text.split("=", 1)[-1], text.rsplit(":", 1)[-1])
    if any(Path(tail.strip()).expanduser().exists() for tail in tails):
        return text, None
    return text[:match.start()], match.group(1)


def load_spec(spec: str, *, label_rule: str = "sum", text_column: str | None = None,
              label_column: str | None = None, split: str | None = None) -> LabeledData:
    """Load one dataset spec (see the module docstring).

    ``label_rule`` applies to ToxiGen annotated data; ``label_column`` to tables and to ToxiGen train/toxiforge
    data (default ``prompt_label``); ``text_column`` to tables; ``split`` to hub sources and DynaHate. Davidson et
    al.'s label rule comes with the spec (``davidson:PATH#hate``), not from ``label_rule``; a last
    ``#sample=N`` keeps a stratified sample of N rows (:func:`sample_data`). A ``text_column`` or
    ``label_column`` that the spec's kind does not read is an error (:func:`check_column_options`).
    """
    data = _load_sampled(spec, label_rule=label_rule, text_column=text_column, label_column=label_column,
                         split=split)
    check_column_options([data], text_column=text_column, label_column=label_column)
    return data


def _load_sampled(spec: str, *, label_rule: str = "sum", text_column: str | None = None,
                  label_column: str | None = None, split: str | None = None) -> LabeledData:
    text, size = split_sample(spec)
    data = _load(text, label_rule=label_rule, text_column=text_column, label_column=label_column, split=split)
    return data if size is None else sample_data(data, size)


def check_column_options(datasets: Sequence[LabeledData], *, text_column: str | None = None,
                         label_column: str | None = None) -> None:
    """An InputError when ``--text-column`` or ``--label-column`` was given and none of ``datasets`` reads it
    (:data:`COLUMN_OPTIONS`): a ``hatecheck:`` set reads HateCheck's own columns, so the option would be ignored
    without a word. With several sets, one that reads it is enough (the others read their own columns)."""
    for option, value in (("--text-column", text_column), ("--label-column", label_column)):
        readers = COLUMN_OPTIONS[option]
        if value is None or not datasets or any(d.layout in readers for d in datasets):
            continue
        named = ", ".join(f"{d.name} ({d.layout})" for d in datasets)
        raise InputError(f"{option} {value} would be ignored: {named} {'has' if len(datasets) == 1 else 'have'} "
                         f"a layout whose columns are fixed, and {option} applies to "
                         f"{' and '.join(readers)} data only",
                         hint=f"drop {option}, or read the file as a plain table: table:PATH {option} {value}"
                              + (" --text-column COLUMN" if option == "--label-column" else
                                 " --label-column COLUMN"))


def split_sample(spec: str) -> tuple[str, int | None]:
    """``(spec without its #sample=N, N)``, or ``(spec, None)`` when it has none (or names an existing file as
    it is); an InputError when N is not a positive whole number."""
    text = spec.strip()
    match = _SAMPLE.search(text)
    tails = (text, text.split("=", 1)[-1], text.rsplit(":", 1)[-1])
    if match is None or any(t.strip() and Path(t.strip()).expanduser().exists() for t in tails):
        return text, None
    value = match.group(1).strip()
    if not value.isdigit() or int(value) == 0:
        raise InputError(f"#sample={value} in {spec!r} is not a positive number of rows",
                         hint="write #sample=N with N a whole number above 0, e.g. #sample=2000")
    return text[:match.start()], int(value)


def sample_data(data: LabeledData, size: int, seed: int = SAMPLE_SEED) -> LabeledData:
    """A seeded stratified sample of ``size`` rows of ``data``, in their original order (all of it when ``size``
    is not smaller). The strata are label × HateCheck functional test when the rows have one, else label ×
    group (rows without a group are one stratum); each gets its proportional share, rounded by largest
    remainder, so every functional test, group and label keeps its place in the sample."""
    if size >= len(data):
        return data
    strata: dict[tuple[int, str], list[int]] = {}
    for i, e in enumerate(data.examples):
        key = e.meta.get("functionality") if e.meta and "functionality" in e.meta else e.group
        strata.setdefault((e.label, str(key or "")), []).append(i)
    keys = sorted(strata)
    quota = np.array([size * len(strata[k]) / len(data) for k in keys])
    take = np.floor(quota).astype(np.int64)
    for j in np.argsort(-(quota - take), kind="stable")[:size - int(take.sum())]:
        take[j] += 1
    rng = np.random.default_rng(seed)
    chosen = sorted(int(i) for k, t in zip(keys, take, strict=True)
                    for i in rng.choice(strata[k], size=int(t), replace=False))
    by = "functional test" if any(e.meta and "functionality" in e.meta for e in data.examples) else "group"
    note = f"stratified sample of {size} of {len(data)} rows (label x {by}, seed {seed}; #sample={size})"
    return replace(data, examples=[data.examples[i] for i in chosen], notes=[*data.notes, note])


def _load(spec: str, *, label_rule: str, text_column: str | None, label_column: str | None,
          split: str | None) -> LabeledData:
    text, option = split_option(spec)
    name, kind, path = parse_spec(text)
    if path is not None and not Path(path).expanduser().exists():
        raise InputError("no such file or directory", path=path,
                         hint=f"check the path; known kinds for KIND:PATH or KIND:hub are {', '.join(KINDS)}")
    if kind is None and path is not None and is_demonstration_folder(path):
        kind = "demonstrations"
    if kind is None:
        assert path is not None, "parse_spec gives a path whenever it gives no kind"
        kind = detect_layout(read_any_table(path).column_names)
    if option is not None and kind not in OPTIONS:
        accepted = "; ".join(f"{k}: #{', #'.join(v)}" for k, v in OPTIONS.items())
        raise InputError(f"the {kind} kind takes no #{option} option (in {spec!r})",
                         hint=f"drop #{option}; the kinds with options are {accepted}")
    loaders: dict[str, Callable[[], Any]] = {
        "toxigen-annotated": lambda: load_toxigen_annotated(path, split=split or "test", rule=label_rule,
                                                            name=name),
        "toxigen-train": lambda: load_generated(path, label_column=label_column or "prompt_label", name=name),
        "toxiforge": lambda: load_generated(path, label_column=label_column or "prompt_label", name=name),
        "sbf": lambda: load_sbf(path, split=split or "test", name=name),
        "ihc": lambda: load_ihc(path, name=name),
        "dynahate": lambda: load_dynahate(path, split=split or "test", name=name),
        "hatecheck": lambda: load_hatecheck(path, name=name),
        "davidson": lambda: load_davidson(path, rule=option or DEFAULT_RULE, name=name),
        "table": lambda: _table(path, text_column, label_column, name),
        "demonstrations": lambda: _demonstrations(path, name),
    }
    return loaders[kind]()


def _table(path: str | None, text_column: str | None, label_column: str | None, name: str | None) -> LabeledData:
    if path is None:
        raise InputError("table: needs a file", hint="write table:PATH")
    return load_table(path, text_column=text_column, label_column=label_column, name=name)


def _demonstrations(path: str | None, name: str | None) -> LabeledData:
    if path is None:
        raise InputError("demonstrations: needs a folder or file",
                         hint="write demonstrations:PATH (fetch upstream's with `toxiforge demonstrations fetch`)")
    return load_demonstration_data(path, name=name)


def load_specs(specs: Sequence[str], *, check_columns: bool = True, **kwargs: Any) -> list[LabeledData]:
    """:func:`load_spec` for each spec; names made unique (``x``, ``x (2)``) so reports keep them apart. A
    ``text_column``/``label_column`` must apply to one of the sets (:func:`check_column_options`); a command that
    loads two lists with one such option (``train --data ... --eval ...``) passes ``check_columns=False`` and
    checks both lists together."""
    out: list[LabeledData] = []
    seen: dict[str, int] = {}
    for spec in specs:
        data = _load_sampled(spec, **kwargs)
        seen[data.name] = seen.get(data.name, 0) + 1
        if seen[data.name] > 1:
            data.name = f"{data.name} ({seen[data.name]})"
        out.append(data)
    if check_columns:
        check_column_options(out, text_column=kwargs.get("text_column"), label_column=kwargs.get("label_column"))
    return out
