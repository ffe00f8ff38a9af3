"""Demonstrations and prompts: read upstream ToxiGen's files, fetch them, and build new prompts.

* :mod:`~toxiforge.demonstrations.sets` — :class:`DemonstrationSet` and the readers (:func:`load_demonstrations`
  for any supported layout, :func:`load_shipped_benign`, :func:`get_set`).
* :mod:`~toxiforge.demonstrations.prompts` — :class:`Prompt` (paper Appendix A format and upstream's file
  lines), :func:`build_prompts`, :func:`read_prompt_file`, :func:`write_prompt_file`.
* :mod:`~toxiforge.demonstrations.fetch` — :func:`fetch_upstream` (microsoft/TOXIGEN at :data:`PINNED_COMMIT`).

Names are loaded on first use, so importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "DemonstrationSet": "sets", "read_sentence_file": "sets", "read_prompt_demonstrations": "sets",
    "prompt_demonstrations": "sets", "read_table": "sets", "load_demonstrations": "sets",
    "load_shipped_benign": "sets", "get_set": "sets", "merge_sets": "sets",
    "Prompt": "prompts", "build_prompts": "prompts", "read_prompt_file": "prompts",
    "write_prompt_file": "prompts", "format_prompt_file": "prompts",
    "fetch_upstream": "fetch", "FetchError": "fetch", "PINNED_COMMIT": "fetch", "UPSTREAM_REPO": "fetch",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
