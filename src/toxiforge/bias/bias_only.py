"""Bias-only models for LEARNED-MIXIN: for each training example, p(toxic) from the known bias alone.

``--bias-only SPEC`` names one, through the :data:`BIAS_ONLY` registry (``KIND[:ARGUMENT]``):

* ``column:NAME`` -- precomputed probabilities in column ``NAME`` of the training files, matched to the loaded
  examples by text (loaders may skip rows, so positions cannot be trusted);
* ``groups`` -- whether each text mentions each of toxiforge's target groups (:mod:`toxiforge.groups` identity
  terms): a neutral-identity-mention bias-only model, close to the paper's NOI features;
* ``terms:FILE`` -- a word list (one term per line, ``#`` comments): each text's whole-word, case-insensitive
  count of every term is the feature vector, and a linear model fitted on the training labels gives p(toxic).

Zhou et al. (§3.1; their ``tools/biasonly_wordbased.py``) fit a class-balanced linear SVM, calibrated with
scikit-learn's ``CalibratedClassifierCV``, on the counts of the lexicon words in each tweet, and use its
probabilities on the training set itself; :func:`fit_bias_only` does the same (``model="svm"``, the default), or
a logistic regression (``model="logistic"``, as Clark et al. 2019 for some tasks).

The lexicon-based bias-only models of the paper (``noi``, ``oni``, ``toxtrig``) are adapters from a lexicon tagger
(``texts -> [n, terms]`` feature matrix) to :func:`fit_bias_only`; register them with
``BIAS_ONLY.register("toxtrig", factory)`` where the tagger lives. A factory is called as
``factory(argument, examples=..., sources=...)`` and returns p(toxic) per example.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge._lazy import Registry
from toxiforge.data.examples import Example
from toxiforge.errors import InputError

BiasOnlyFactory = Callable[..., np.ndarray]
BIAS_ONLY: Registry[BiasOnlyFactory] = Registry("bias-only model", {
    "column": "toxiforge.bias.bias_only:column_bias",
    "terms": "toxiforge.bias.bias_only:terms_bias",
    "groups": "toxiforge.bias.bias_only:group_mention_bias",
})
MODELS: tuple[str, ...] = ("svm", "logistic")


def bias_only_probabilities(spec: str, examples: Sequence[Example], *, sources: Sequence[str] = ()) -> np.ndarray:
    """p(toxic) per example from the bias-only model ``spec`` (``KIND[:ARGUMENT]``, see the module docstring)."""
    kind, _, argument = spec.partition(":")
    factory = BIAS_ONLY.get(kind)
    probs = np.asarray(factory(argument, examples=list(examples), sources=list(sources)), dtype=np.float64)
    if probs.shape != (len(examples),) or np.isnan(probs).any() or (probs < 0).any() or (probs > 1).any():
        raise InputError(f"bias-only model {spec!r} must give one probability in [0, 1] per example",
                         hint="check the column or model")
    return probs


def term_counts(texts: Sequence[str], terms: Sequence[str]) -> np.ndarray:
    """``[n, len(terms)]`` whole-word, case-insensitive counts of each term (multi-word terms match as phrases)."""
    patterns = [re.compile(r"(?<!\w)" + r"\s+".join(map(re.escape, t.lower().split())) + r"(?!\w)") for t in terms]
    out = np.zeros((len(texts), len(terms)), dtype=np.float32)
    for i, text in enumerate(texts):
        low = text.lower()
        for j, pattern in enumerate(patterns):
            out[i, j] = len(pattern.findall(low))
    return out


def fit_bias_only(features: np.ndarray, labels: Sequence[int], *, model: str = "svm", seed: int = 0) -> np.ndarray:
    """p(toxic) of each training row from a linear model fitted on ``features`` (see the module docstring)."""
    X = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels)
    if model not in MODELS:
        raise InputError(f"unknown bias-only model {model!r}", hint=f"use one of {', '.join(MODELS)}")
    if X.ndim != 2 or len(X) != len(y):
        raise InputError(f"bias-only features of shape {X.shape} do not match {len(y)} labels",
                         hint="give one feature row per example")
    if len(np.unique(y)) < 2:
        raise InputError("a bias-only model needs both classes in the training labels", hint="check the data")
    if model == "logistic":
        from sklearn.linear_model import LogisticRegression

        clf = LogisticRegression(max_iter=1000, random_state=seed)
    else:
        from sklearn.calibration import CalibratedClassifierCV
        from sklearn.svm import LinearSVC

        folds = int(min(5, np.bincount(y).min()))
        if folds < 2:
            raise InputError("a calibrated SVM needs at least 2 examples of each class",
                             hint="use --bias-only with more data")
        clf = CalibratedClassifierCV(LinearSVC(class_weight="balanced", dual=False, tol=1e-2, max_iter=100_000,
                                               random_state=seed), cv=folds)
    clf.fit(X, y)
    return clf.predict_proba(X)[:, list(clf.classes_).index(1)]


def read_terms(path: str | Path) -> list[str]:
    """Terms of a word-list file: one per line; blank lines and ``#`` comments skipped; duplicates dropped."""
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError("no such word list", path=p, hint="write one term per line, e.g. --bias-only terms:words.txt")
    terms: list[str] = []
    for line in p.read_text(encoding="utf-8").splitlines():
        term = line.split("#", 1)[0].strip().lower()
        if term and term not in terms:
            terms.append(term)
    if not terms:
        raise InputError("the word list has no terms", path=p, hint="write one term per line")
    return terms


def terms_bias(argument: str, *, examples: Sequence[Example], sources: Sequence[str] = (),
               model: str = "svm") -> np.ndarray:
    """``terms:FILE``: counts of the listed terms -> :func:`fit_bias_only`."""
    if not argument:
        raise InputError("terms: needs a word-list file", hint="write --bias-only terms:FILE")
    features = term_counts([e.text for e in examples], read_terms(argument))
    return fit_bias_only(features, [e.label for e in examples], model=model)


def column_bias(argument: str, *, examples: Sequence[Example], sources: Sequence[str] = ()) -> np.ndarray:
    """``column:NAME``: precomputed p(toxic) from column ``NAME`` of the training files, matched by text."""
    from toxiforge.data.examples import read_any_table
    from toxiforge.data.tables import TEXT_CANDIDATES

    if not argument:
        raise InputError("column: needs a column name", hint="write --bias-only column:NAME")
    files = [s for s in sources if Path(s).expanduser().exists()]
    if not files:
        raise InputError(f"--bias-only column:{argument} reads the training files, and none is a local file",
                         hint="train on local files that have the column")
    by_text: dict[str, Any] = {}
    for source in files:
        table = read_any_table(source)
        if argument not in table.column_names:
            raise InputError(f"no column {argument!r}; the columns found are {table.column_names}", path=source,
                             hint="name the column that holds the bias-only probabilities")
        text_name = next((c for c in ("generation",) + TEXT_CANDIDATES if c in table.column_names), None)
        if text_name is None:
            raise InputError("cannot find the text column", path=source, hint="name it 'text'")
        for text, value in zip(table.column(text_name).to_pylist(), table.column(argument).to_pylist()):
            if text is not None:
                by_text[str(text).strip()] = value
    out = np.empty(len(examples))
    for i, e in enumerate(examples):
        value = by_text.get(e.text.strip())
        if value is None:
            raise InputError(f"no {argument!r} value for training text {e.text[:60]!r}", path=files[0],
                             hint="give every training row a bias-only probability")
        out[i] = float(value)
    return out


def group_mention_bias(argument: str, *, examples: Sequence[Example], sources: Sequence[str] = ()) -> np.ndarray:
    """``groups``: one 0/1 feature per toxiforge target group (does the text mention it?) -> :func:`fit_bias_only`."""
    from toxiforge.groups import all_groups

    if argument:
        raise InputError(f"groups takes no argument, got {argument!r}", hint="write --bias-only groups")
    groups = all_groups()
    features = np.array([[float(g.mentions(e.text)) for g in groups] for e in examples], dtype=np.float32)
    return fit_bias_only(features, [e.label for e in examples])
