"""``load_language_model``: an LM by name, resolved in the order the package docstring gives; ``openai:URL``
names open an OpenAI-compatible server."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from toxiforge._hf import local_model
from toxiforge._lazy import did_you_mean
from toxiforge.errors import InputError, ToxiforgeError
from toxiforge.models.embedded import DEFAULT_LM, EMBEDDED

if TYPE_CHECKING:
    from toxiforge.models.base import LanguageModel

API_PREFIX = "openai:"


def load_language_model(name: str = DEFAULT_LM, *, dtype: str = "auto", device: str = "auto",
                        **api_options) -> LanguageModel:
    """Load an LM by embedded name, ``.gguf`` path, local directory or hub id (transformers backend), or open
    ``openai:BASE_URL[#MODEL]``; ``api_options`` (``api_key_env``, ``concurrency``, ``top_logprobs``, ``retry``)
    go to :meth:`~toxiforge.models.openai_lm.OpenAILM.open`.

    A name that fails to load and is close to an embedded name (a typo such as ``smollm2-153m``) is an
    :class:`~toxiforge.errors.InputError` saying "did you mean".
    """
    if name.startswith(API_PREFIX):
        from toxiforge.models.openai_lm import OpenAILM

        return OpenAILM.open(name, **api_options)
    if api_options:
        raise InputError(f"options {sorted(api_options)} apply to openai:URL models only, not {name!r}",
                         hint="drop them, or pass --model openai:BASE_URL#MODEL")
    key = EMBEDDED.key(name)
    if key not in EMBEDDED:
        local_model(name, what="language model")  # a mistyped path fails here, before torch or the hub's retries
    from toxiforge.models.transformers_lm import TransformersLM

    if key in EMBEDDED:
        return TransformersLM.load(EMBEDDED.get(key).locate(), dtype=dtype, device=device, name=key)
    try:
        return TransformersLM.load(name, dtype=dtype, device=device)
    except ToxiforgeError as exc:
        typo = difflib.get_close_matches(key, EMBEDDED.names(), n=1, cutoff=0.8)
        if isinstance(exc, InputError) or "/" in name or not typo:
            raise
        raise InputError(f"could not load language model {name!r}, and it is not an embedded name",
                         hint=did_you_mean(key, EMBEDDED.names())) from exc
