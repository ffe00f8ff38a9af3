"""Hugging Face cards for what toxiforge writes: the pieces the dataset card (:mod:`toxiforge.pipeline.card`), the
model card (:mod:`toxiforge.training.card`) and the audit's card section (:mod:`toxiforge.audit.card`) share.

A card is the folder's ``README.md``: YAML metadata between ``---`` lines, then Markdown, as the Hub reads it
(``huggingface_hub``'s :class:`~huggingface_hub.ModelCard` / :class:`~huggingface_hub.DatasetCard` write and parse
the metadata; ``huggingface_hub`` comes with transformers). Cards hold counts and settings only, never a row's text.
A section that a later command adds (the audit's) sits between HTML comment markers, so a rerun replaces it
(:func:`replace_section`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text

CARD_FILE = "README.md"

CONTENT_WARNING = (
    "> **Content warning.** {what} implicit hate speech: statements that demean groups of people, often without "
    "slurs or profanity, written by language models as ToxiGen's were (Hartvigsen et al. 2022, "
    "https://arxiv.org/abs/2203.09509). It is meant for research on detecting and reducing such speech; do not "
    "use it to produce or spread hateful content.")

# Outputs of the toolkit are not the toolkit: the rows' terms follow the models and data that made them.
OUTPUT_LICENSE, OUTPUT_LICENSE_NAME = "other", "toxiforge-generated"
OUTPUT_LICENSE_TEXT = (
    "toxiforge (the toolkit, MIT licence) sets no licence on what it generates, so the metadata says `license: "
    "other`. The rows' terms follow those of what made them: the language model's licence (named under "
    "*Models*), and the prompts' source (upstream ToxiGen's demonstrations and prompt files are MIT-licensed, "
    "microsoft/TOXIGEN; the ToxiGen dataset on the Hub, toxigen/toxigen-data, is gated behind its own terms) or, "
    "for an attack run, the dataset its source statements come from. Set `license` in the metadata above to the "
    "terms that apply before publishing this folder.")


def hub_dataset_id(layout: str) -> str | None:
    """The hub id of the published dataset a layout reads (ToxiGen's, SBF's), for a card's ``datasets`` and
    ``model-index``; None for the others (local files, toxiforge runs)."""
    from toxiforge.data.benchmarks import SBF_HUB_ID
    from toxiforge.data.toxigen import HUB_ID

    return {"toxigen-annotated": HUB_ID, "toxigen-train": HUB_ID, "sbf": SBF_HUB_ID}.get(layout)


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
    block = f"{start}\n{section.strip()}\n{end}"
    pattern = re.compile(re.escape(start) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(text):
        return pattern.sub(lambda _: block, text, count=1)
    return text.rstrip() + "\n\n" + block + "\n"


def make_card(card_class: Any, data: Any, body: Sequence[str]) -> Any:
    """A ``huggingface_hub`` card (``ModelCard`` or ``DatasetCard``) of metadata ``data`` and the Markdown
    paragraphs ``body`` (taken as they are: no template expansion)."""
    return card_class(f"---\n{data.to_yaml()}\n---\n\n" + "\n\n".join(body) + "\n")


def write_card(card: Any, folder: str | Path) -> Path:
    """Write a ``huggingface_hub`` card (its ``str``: metadata and text) to ``folder``/:data:`CARD_FILE`
    atomically."""
    path = Path(folder) / CARD_FILE
    atomic_write_text(path, str(card).rstrip() + "\n")
    return path
