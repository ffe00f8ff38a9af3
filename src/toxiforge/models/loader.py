"""``load_language_model``: an LM by name, resolved in the order the package docstring gives."""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING

from toxiforge._lazy import did_you_mean
from toxiforge.errors import InputError, ToxiforgeError
from toxiforge.models.embedded import DEFAULT_LM, EMBEDDED

if TYPE_CHECKING:
    from toxiforge.models.base import LanguageModel


def load_language_model(name: str = DEFAULT_LM, *, dtype: str = "auto", device: str = "auto") -> LanguageModel:
    """Load an LM by embedded name, ``.gguf`` path, local directory or hub id (transformers backend).

    A name that fails to load and is close to an embedded name (a typo such as ``smollm2-153m``) is an
    :class:`~toxiforge.errors.InputError` saying "did you mean".
    """
    from toxiforge.models.transformers_lm import TransformersLM

    key = EMBEDDED.key(name)
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
