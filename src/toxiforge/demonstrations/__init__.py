"""Demonstrations and prompts: read upstream ToxiGen's files, fetch them, and build new prompts.

* :mod:`~toxiforge.demonstrations.sets` — :class:`DemonstrationSet` and the readers (:func:`load_demonstrations`
  for any supported layout, :func:`load_shipped_benign`, :func:`get_set`).
* :mod:`~toxiforge.demonstrations.prompts` — :class:`Prompt` (paper Appendix A format and upstream's file
  lines), :func:`build_prompts`, :func:`read_prompt_file`, :func:`write_prompt_file`.
* :mod:`~toxiforge.demonstrations.fetch` — :func:`fetch_upstream` (microsoft/TOXIGEN at :data:`PINNED_COMMIT`).

Names are loaded on first use, so importing this package stays cheap.
"""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "DemonstrationSet": "sets:DemonstrationSet", "read_sentence_file": "sets:read_sentence_file",
    "read_prompt_demonstrations": "sets:read_prompt_demonstrations",
    "prompt_demonstrations": "sets:prompt_demonstrations", "read_table": "sets:read_table",
    "load_demonstrations": "sets:load_demonstrations", "load_shipped_benign": "sets:load_shipped_benign",
    "get_set": "sets:get_set", "merge_sets": "sets:merge_sets",
    "Prompt": "prompts:Prompt", "build_prompts": "prompts:build_prompts",
    "read_prompt_file": "prompts:read_prompt_file",
    "write_prompt_file": "prompts:write_prompt_file", "format_prompt_file": "prompts:format_prompt_file",
    "fetch_upstream": "fetch:fetch_upstream", "FetchError": "fetch:FetchError", "PINNED_COMMIT": "fetch:PINNED_COMMIT",
    "UPSTREAM_REPO": "fetch:UPSTREAM_REPO",
})
