"""Hugging Face cards for what toxiforge writes: the pieces the dataset card (:mod:`toxiforge.pipeline.card`), the
model card (:mod:`toxiforge.training.card`) and the audit's card section (:mod:`toxiforge.audit.card`) share.

A card is the folder's ``README.md``: YAML metadata between ``---`` lines, then Markdown, as the Hub reads it
(``huggingface_hub``'s :class:`~huggingface_hub.ModelCard` / :class:`~huggingface_hub.DatasetCard` write and parse
the metadata; ``huggingface_hub`` comes with transformers). Cards hold counts and settings only, never a row's text.
A section that a later command adds (the audit's) sits between HTML comment markers, so a rerun replaces it
(:func:`replace_section`); a section may hold named blocks of its own (:func:`blocks`, the audit's one per dataset).

A card is written to be published as it is: :func:`write_card` writes no absolute local path (a site-packages
folder, a data folder, a report): each becomes its name, relative to the card's folder when it lies inside it
(:func:`public_paths`); datasets are named by their Hub id where toxiforge knows one
(:func:`toxiforge.data.registry.hub_dataset_id`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text

CARD_FILE = "README.md"

CONTENT_WARNING = (
    "> **Content warning.** {what}: statements that demean groups of people, often without slurs or profanity{made}. "
    "It is meant for research on detecting and reducing such speech; do not use it to produce or spread hateful "
    "content.")
TOXIGEN_PAPER = "ToxiGen's were (Hartvigsen et al. 2022, https://arxiv.org/abs/2203.09509)"
# How a card tells its reader that local paths were shortened (:func:`public_paths`).
PATHS_NOTE = ("Local paths are given by their last name (a file in this card's folder by its path from the folder): "
              "put where your copies are in their place.")


def content_warning(what: str, machine: tuple[int, int] | None = None) -> str:
    """The card's content warning for ``what`` (``"This dataset contains implicit hate speech"``), saying who wrote
    the statements as the rows show it: every row by a language model (``machine`` None), or ``machine`` =
    ``(machine-generated rows, rows)``: none, some or all of them."""
    done, rows = machine if machine is not None else (1, 1)
    if rows and done == rows:
        made = f", written by language models as {TOXIGEN_PAPER}"
    elif done:
        made = f"; {done} of its {rows} rows ({done / rows:.0%}) were written by language models as {TOXIGEN_PAPER}"
    else:
        made = f"; none of its {rows} rows is machine-generated" if rows else ""
    return CONTENT_WARNING.format(what=what, made=made)


# An absolute local path in a card's text: "/" (or "~/") where no word, path or option character precedes it (so
# hub ids owner/name, URLs and "a / b" stay), up to the first character no path name here uses (space, backtick,
# quote, "|", "#", ",", ")", ...): a spec's KIND: or NAME= before it and its #OPTION after it are kept.
_ABSOLUTE_PATH = re.compile(r"(?<![\w/.~-])(?:~(?=/))?/[\w.~+@%-][\w.~+@%/-]*")


def public_paths(text: str, folder: str | Path) -> str:
    """``text`` with each absolute local path replaced by its name: relative to ``folder`` (the card's) when it lies
    inside it, else its last component (``/data/hatecheck/test_suite_cases.csv`` -> ``test_suite_cases.csv``; the
    card's folder itself by its own name). A card is published without the machine it was written on."""
    roots = {Path(folder).expanduser().absolute(), Path(folder).expanduser().resolve()}

    def name(match: re.Match[str]) -> str:
        path = Path(match.group(0)).expanduser()
        inside = [path.relative_to(root).as_posix() for root in roots if root in path.parents]
        return inside[0] if inside else path.name or match.group(0)

    return _ABSOLUTE_PATH.sub(name, text)


# Outputs of the toolkit are not the toolkit: the rows' terms follow the models and data that made them.
OUTPUT_LICENSE, OUTPUT_LICENSE_NAME = "other", "toxiforge-generated"
OUTPUT_LICENSE_TEXT = (
    "toxiforge (the toolkit, MIT licence) sets no licence on what it generates, so the metadata says `license: "
    "other`. The rows' terms follow those of what made them: the language model's licence (named under "
    "*Models*), and the prompts' source (upstream ToxiGen's demonstrations and prompt files are MIT-licensed, "
    "microsoft/TOXIGEN; the ToxiGen dataset on the Hub, toxigen/toxigen-data, is gated behind its own terms) or, "
    "for an attack run, the dataset its source statements come from. Set `license` in the metadata above to the "
    "terms that apply before publishing this folder.")


def size_category(n: int) -> str:
    """The Hub's ``size_categories`` value for ``n`` rows."""
    bounds = [(1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
              (10_000_000, "1M<n<10M"), (100_000_000, "10M<n<100M")]
    return next((name for bound, name in bounds if n < bound), "n>1T" if n > 10**12 else "100M<n<1B")


def table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A Markdown table (``|`` in cells escaped)."""
    def cell(value: Any) -> str:
        return "-" if value is None else str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def settings_table(settings: Mapping[str, Any]) -> str:
    """``setting | value`` rows of a flat settings dict (nested dicts shown as ``key.sub``)."""
    flat: dict[str, Any] = {}
    for key, value in settings.items():
        if isinstance(value, Mapping):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return table(("setting", "value"), ((f"`{k}`", f"`{v}`") for k, v in flat.items()))


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- toxiforge:{name} start -->", f"<!-- toxiforge:{name} end -->"


def replace_section(text: str, name: str, section: str) -> str:
    """``text`` with its section ``name`` (between :func:`_markers`) replaced by ``section``, or ``section``
    appended when it has none: a rerun replaces what the last one wrote, and nothing else."""
    start, end = _markers(name)
    marked = block(name, section)
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: marked, text, count=1)
    return text.rstrip() + "\n\n" + marked + "\n"


def blocks(text: str, prefix: str) -> dict[str, str]:
    """The sections of ``text`` whose names start with ``prefix`` (:func:`replace_section`'s markers), by name in
    their order, each without its markers."""
    pattern = re.compile(r"<!-- toxiforge:(" + re.escape(prefix) + r"[^\n]*?) start -->\n?(.*?)\n?"
                         r"<!-- toxiforge:\1 end -->", re.DOTALL)
    return {m.group(1): m.group(2).strip() for m in pattern.finditer(text)}


def block(name: str, content: str) -> str:
    """``content`` between the markers of section ``name`` (what :func:`blocks` reads back)."""
    start, end = _markers(name)
    return f"{start}\n{content.strip()}\n{end}"


def make_card(card_class: Any, data: Any, body: Sequence[str]) -> Any:
    """A ``huggingface_hub`` card (``ModelCard`` or ``DatasetCard``) of metadata ``data`` and the Markdown
    paragraphs ``body`` (taken as they are: no template expansion)."""
    return card_class(f"---\n{data.to_yaml()}\n---\n\n" + "\n\n".join(body) + "\n")


def metadata_yaml(data: Any) -> str:
    """The YAML of a card's metadata ``data``, with a model card's ``model_name`` kept at the top level beside
    ``model-index`` (``huggingface_hub`` moves it into the index's ``name`` and drops it from the top level once
    there are results)."""
    from huggingface_hub.utils import yaml_dump

    meta = data.to_dict()
    name = getattr(data, "model_name", None)
    if name and "model_name" not in meta:
        meta = {"model_name": name, **meta}
    return yaml_dump(meta, sort_keys=False).strip()


def write_card(card: Any, folder: str | Path) -> Path:
    """Write a ``huggingface_hub`` card (metadata, :func:`metadata_yaml`, and text) to ``folder``/:data:`CARD_FILE`
    atomically, with no absolute local path in it (:func:`public_paths`)."""
    path = Path(folder) / CARD_FILE
    text = f"---\n{metadata_yaml(card.data)}\n---\n{card.text}"
    atomic_write_text(path, public_paths(text, folder).rstrip() + "\n")
    return path
