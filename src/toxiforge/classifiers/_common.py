"""Small helpers shared by the classifier backends."""

from __future__ import annotations

from collections.abc import Sequence

from toxiforge.errors import InputError

# Probabilities are clamped to at least EPS before a log, so class log-probabilities are never -inf (ALICE adds
# them to LM scores; one -inf would rule a candidate out for good).
EPS = 1e-7


def as_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list of str; a bare string or a non-str item is an InputError (not silently iterated)."""
    if isinstance(texts, str):
        raise InputError("texts is a single string", hint="pass a list of strings, e.g. [text]")
    texts = list(texts)
    bad = next((i for i, t in enumerate(texts) if not isinstance(t, str)), None)
    if bad is not None:
        raise InputError(f"text {bad} is {type(texts[bad]).__name__}, not str", hint="pass strings only")
    return texts
