"""What kind of text a token is, for every layer that asks (internal): whitespace, punctuation or an English
stopword ("function text") versus a content word.

ALICE's prompt ban lets function text be copied from the prompt
(:func:`toxiforge.decoding.scorers.exempt_from_prompt_ban`), and the OpenAI-compatible backend keeps such strings
in an id range of their own so that masks computed once stay right as its string vocabulary grows
(:class:`toxiforge.models.openai_tokens.TokenTable`). Both ask :func:`is_function_text`, so they can never disagree,
and the backend does not import the decoders.
"""

from __future__ import annotations

import string
from functools import lru_cache

PUNCTUATION = frozenset(string.punctuation) | frozenset("“”‘’–—…")


@lru_cache(maxsize=1)
def english_stopwords() -> frozenset[str]:
    """scikit-learn's English stopword list (318 words)."""
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    return frozenset(ENGLISH_STOP_WORDS)


def is_function_text(text: str, stopwords: frozenset[str] | None = None) -> bool:
    """Whitespace, punctuation or a stopword (default :func:`english_stopwords`), after stripping whitespace and
    lowercasing: " The", "the", ",", "\\n" and "" are function text; " zorblax" is not."""
    word = text.strip().lower()
    return not word or all(ch in PUNCTUATION for ch in word) or word in (stopwords or english_stopwords())
