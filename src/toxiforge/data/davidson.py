"""Davidson et al. (ICWSM 2017): 24,783 tweets labelled hate speech / offensive language / neither.

Published as ``data/labeled_data.csv`` in github.com/t-davidson/hate-speech-and-offensive-language (MIT). Columns
(after an unnamed index): ``count`` (annotators, at least 3), ``hate_speech``, ``offensive_language``, ``neither``
(their votes), ``class`` (the authors' majority label: 0 = hate speech, 1 = offensive language, 2 = neither) and
``tweet`` (the raw tweet: @mentions, ``RT``, URLs, newlines and HTML character references such as ``&amp;``).

Binary label, by rule (:data:`DAVIDSON_RULES`; a spec picks one with ``davidson:PATH#hate``):

* ``toxic`` (default): hate speech or offensive language = 1, neither = 0. This matches Founta et al. (2018)'s
  abusive + hateful, the data Zhou et al. (2021) audited, of which this is the closest freely available set;
* ``hate``: hate speech = 1, offensive language and neither = 0 (the distinction the paper is about).

Text normalisation: HTML character references that end in ``;`` (``&amp;``, ``&lt;``, ``&#128514;``, ``&#x1F602;``)
are decoded, once, so ``&amp;#128514;`` becomes ``&#128514;`` as the author typed it. Nothing else changes: case,
@mentions, ``RT``, URLs, emoji, newlines and spacing stay as tweeted, because TOXTRIG matching
(:mod:`toxiforge.bias.lexicon`) and the dialect model (:mod:`toxiforge.bias.dialect`) were built for raw tweets and
tokenize them themselves. Undecoded, ``&amp;`` would reach the dialect model as the word ``amp`` and an emoji as
a number. A reference without its ``;`` is left alone (``html.unescape`` would also decode some of those, such
as ``&copy`` inside a word); the published file has none.

``meta`` keeps ``count``, ``hate_speech``, ``offensive_language``, ``neither`` and ``class`` of each tweet. Without
a local file the CSV is read from GitHub at :data:`DAVIDSON_COMMIT` (the commit the shared copy came from).
"""

from __future__ import annotations

import html
import re
from collections import Counter
from pathlib import Path

from toxiforge.data.examples import (
    Example,
    LabeledData,
    clean_text,
    column,
    finish,
    read_local_or_pinned,
    require_columns,
    to_float,
)
from toxiforge.errors import InputError

DAVIDSON_REPO = "t-davidson/hate-speech-and-offensive-language"
DAVIDSON_COMMIT = "cb50f7e9eb855a99abc51423bf40df0e26d6fe30"
DAVIDSON_FILE = "labeled_data.csv"
DAVIDSON_URL = f"https://raw.githubusercontent.com/{DAVIDSON_REPO}/{DAVIDSON_COMMIT}/data/{DAVIDSON_FILE}"
DAVIDSON_HUB_ID = "tdavidson/hate_speech_offensive"  # the same 24,783 tweets on the Hub (cards name it)
DAVIDSON_VOTES: tuple[str, ...] = ("count", "hate_speech", "offensive_language", "neither")
DAVIDSON_COLUMNS: tuple[str, ...] = (*DAVIDSON_VOTES, "class", "tweet")
DAVIDSON_CLASSES = {0: "hate speech", 1: "offensive language", 2: "neither"}
# rule -> the classes that are label 1
DAVIDSON_RULES: dict[str, tuple[int, ...]] = {"toxic": (0, 1), "hate": (0,)}
DEFAULT_RULE = "toxic"

_CHAR_REF = re.compile(r"&(?:#[0-9]+|#[xX][0-9a-fA-F]+|[A-Za-z][A-Za-z0-9]*);")


def decode_entities(text: str) -> str:
    """``text`` with each complete HTML character reference (ending in ``;``) decoded once; unknown names stay."""
    return _CHAR_REF.sub(lambda m: html.unescape(m.group(0)), text)


def load_davidson(path: str | Path | None = None, *, rule: str = DEFAULT_RULE,
                  name: str | None = None) -> LabeledData:
    """Davidson et al.'s ``labeled_data.csv`` (module docstring) under label ``rule`` (``toxic`` or ``hate``), or
    the pinned GitHub copy when ``path`` is None."""
    if rule not in DAVIDSON_RULES:
        raise InputError(f"unknown Davidson label rule {rule!r}; the rules are {', '.join(DAVIDSON_RULES)}",
                         hint="toxic = hate speech or offensive language (default), hate = hate speech only; "
                              "e.g. davidson:labeled_data.csv#hate")
    table, source = read_local_or_pinned(path, DAVIDSON_URL, f"davidson:{DAVIDSON_FILE} (data/{DAVIDSON_FILE} of "
                                                             f"github.com/{DAVIDSON_REPO} at commit {DAVIDSON_COMMIT})")
    require_columns(table.column_names, DAVIDSON_COLUMNS, layout="Davidson et al. 2017", path=source,
                    hint=f"expected {DAVIDSON_FILE} of github.com/{DAVIDSON_REPO} (columns "
                         f"{', '.join(DAVIDSON_COLUMNS)})")
    votes = {c: column(table, c) for c in DAVIDSON_VOTES}
    positive = DAVIDSON_RULES[rule]
    skipped: Counter = Counter()
    examples = []
    for i, (raw, value) in enumerate(zip(column(table, "tweet"), column(table, "class"))):
        number = to_float(value)
        if number is None or number not in DAVIDSON_CLASSES:
            raise InputError(f"class {value!r} at data row {i + 1} is not 0, 1 or 2", path=source,
                             hint="Davidson et al.'s class is 0 (hate speech), 1 (offensive language) or 2 "
                                  f"(neither); is this {DAVIDSON_FILE}?")
        cls = int(number)
        text = clean_text(decode_entities(raw) if isinstance(raw, str) else raw)
        if text is None:
            skipped["empty text"] += 1
            continue
        meta = {c: votes[c][i] for c in DAVIDSON_VOTES} | {"class": cls}
        examples.append(Example(text, int(cls in positive), row=i, meta=meta))
    ones = " or ".join(DAVIDSON_CLASSES[c] for c in positive)
    return finish(name or f"Davidson ({rule})", examples, layout="davidson", source=source, skipped=skipped,
                  notes=[f"label rule {rule}: label 1 = {ones} (class {'/'.join(map(str, positive))})"])
