"""Bias-only models for LEARNED-MIXIN: for each training example, p(toxic) from the known bias alone.

``--bias-only SPEC`` names one, through the :data:`BIAS_ONLY` registry (``KIND[:ARGUMENT]``):

* ``noi``, ``oi``, ``oni``, ``toxtrig`` -- Zhou et al.'s lexicon bias-only models (LMIXIN-ONI, LMIXIN-TOXTRIG):
  the TOXTRIG lexicon of :mod:`toxiforge.bias.lexicon` (its matcher, plurals and normalisation), restricted to
  that category (``toxtrig``: all three). ``noi:LEXICON.csv`` replaces the default lists with a ``term,category``
  file (or ``upstream``: upstream's own list, paper mode), as ``bias measure --lexicon`` does. ``oi`` needs
  upstream's list (``toxiforge bias lexicon fetch``). Without it ``toxtrig`` is NOI and ONI only, and says so
  (:func:`toxtrig_bias` warns on stderr);
* ``dialect[:MODEL_DIR]`` -- LMIXIN-Dialect (Zhou et al. Table 4): the four dialect probabilities of each text
  (:func:`toxiforge.bias.dialect.predict_dialects`; twitteraae model from the cache or ``MODEL_DIR``) as the
  features of the same calibrated linear SVM, as upstream's ``tools/biasonly_dialectbased.py``. A text the
  dialect model cannot score gets the mean proportions of the scored texts (upstream's data had none missing);
* ``terms:FILE`` -- any word list (one term per line, ``#`` comments), matched the same way;
* ``column:NAME`` -- precomputed probabilities in column ``NAME`` of the training files, matched to the loaded
  examples by text (loaders may skip rows, so positions cannot be trusted).

Features (:func:`lexicon_features`): one count column per lexicon word form seen in the training texts (a bag
of TOXTRIG words; a plural is its own column, as in a CountVectorizer), then the per-category totals of
:func:`toxiforge.bias.lexicon.count_terms`. Zhou et al. (§3.1; their ``tools/biasonly_wordbased.py``) fit a
class-balanced linear SVM, calibrated with scikit-learn's ``CalibratedClassifierCV``, on the lexicon-word counts
of each tweet, and use its probabilities on the training set itself; :func:`fit_bias_only` does the same
(``model="svm"``, the default), or a logistic regression (``model="logistic"``, as Clark et al. 2019 for some
tasks). Departure: the category totals are extra columns (they let the linear model weigh "any swear word"
beside the single words; with one form per category they repeat a column, which a linear model does not mind).

A factory is called as ``factory(argument, examples=..., sources=...)`` and returns p(toxic) per example.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge._lazy import Registry
from toxiforge.bias.lexicon import BiasLexicon
from toxiforge.data.examples import Example
from toxiforge.errors import InputError, check_choice

BiasOnlyFactory = Callable[..., np.ndarray]
BIAS_ONLY: Registry[BiasOnlyFactory] = Registry("bias-only model", {
    "column": "toxiforge.bias.bias_only:column_bias",
    "terms": "toxiforge.bias.bias_only:terms_bias",
    "noi": "toxiforge.bias.bias_only:noi_bias",
    "oi": "toxiforge.bias.bias_only:oi_bias",
    "oni": "toxiforge.bias.bias_only:oni_bias",
    "toxtrig": "toxiforge.bias.bias_only:toxtrig_bias",
    "dialect": "toxiforge.bias.bias_only:dialect_bias",
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


def lexicon_features(texts: Sequence[str], lexicon: BiasLexicon, categories: Sequence[str]) -> np.ndarray:
    """``[n, forms + categories]``: per text, how often each matched form of a lexicon entry of ``categories``
    occurs (one column per form seen in ``texts``, in order of first sight), then :func:`count_terms`'s total per
    category."""
    from toxiforge.bias.lexicon import count_terms

    wanted = frozenset(categories)
    vocabulary: dict[str, int] = {}
    hits: list[list[int]] = []
    for text in texts:
        hits.append([vocabulary.setdefault(words, len(vocabulary))
                     for words, cats in lexicon.find(text) if cats & wanted])
    out = np.zeros((len(hits), len(vocabulary) + len(categories)), dtype=np.float32)
    for row, columns in enumerate(hits):
        np.add.at(out[row], columns, 1.0)
    totals = count_terms(texts, lexicon)
    for j, category in enumerate(categories):
        out[:, len(vocabulary) + j] = totals[category]
    return out


def fit_bias_only(features: np.ndarray, labels: Sequence[int], *, model: str = "svm", seed: int = 0) -> np.ndarray:
    """p(toxic) of each training row from a linear model fitted on ``features`` (see the module docstring)."""
    X = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels)
    check_choice(model, MODELS, what="bias-only model")
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
    from toxiforge.bias.patterns import check_literal

    terms: list[str] = []
    for line_no, line in enumerate(p.read_text(encoding="utf-8").splitlines(), start=1):
        term = check_literal(line.split("#", 1)[0].strip().lower(), path=p, line=line_no)
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
    # the word list rides in one lexicon category (any would do) so it is matched like TOXTRIG
    lexicon = BiasLexicon(terms={"noi": tuple(read_terms(argument))}, sources={"noi": argument})
    features = lexicon_features([e.text for e in examples], lexicon, ["noi"])
    return fit_bias_only(features, [e.label for e in examples], model=model)


def _lexicon_bias(categories: Sequence[str] | None, argument: str, examples: Sequence[Example]) -> np.ndarray:
    """``categories`` None: every category the lexicon has terms for (a note on stderr when one is missing)."""
    from toxiforge.bias.lexicon import CATEGORIES, default_bias_lexicon, load_bias_lexicon

    lexicon = load_bias_lexicon(argument) if argument else default_bias_lexicon()
    if categories is None:
        categories = [c for c in CATEGORIES if lexicon.available(c)]
        note = lexicon.toxtrig_note()
        if note:
            import sys

            print(f"note: bias-only model toxtrig: {note}", file=sys.stderr)
    missing = [c for c in categories if not lexicon.available(c)]
    if missing:
        raise InputError(f"the lexicon has no {'/'.join(missing).upper()} terms: {lexicon.sources[missing[0]]}",
                         hint="run `toxiforge bias lexicon fetch`, or give a lexicon CSV as KIND:FILE")
    features = lexicon_features([e.text for e in examples], lexicon, categories)
    if not features.any():
        raise InputError(f"no training text mentions a {'/'.join(categories).upper()} term, so the bias-only model "
                         "has nothing to learn", hint="pick another bias-only model or lexicon")
    return fit_bias_only(features, [e.label for e in examples])


def noi_bias(argument: str, *, examples: Sequence[Example], sources: Sequence[str] = ()) -> np.ndarray:
    """``noi[:LEXICON]``: non-offensive identity mentions."""
    return _lexicon_bias(["noi"], argument, examples)


def oi_bias(argument: str, *, examples: Sequence[Example], sources: Sequence[str] = ()) -> np.ndarray:
    """``oi[:LEXICON]``: possibly offensive identity mentions (upstream's list)."""
    return _lexicon_bias(["oi"], argument, examples)


def oni_bias(argument: str, *, examples: Sequence[Example], sources: Sequence[str] = ()) -> np.ndarray:
    """``oni[:LEXICON]``: offensive non-identity mentions (LMIXIN-ONI)."""
    return _lexicon_bias(["oni"], argument, examples)


def toxtrig_bias(argument: str, *, examples: Sequence[Example], sources: Sequence[str] = ()) -> np.ndarray:
    """``toxtrig[:LEXICON]``: all available TOXTRIG categories (LMIXIN-TOXTRIG). Without upstream's list
    (``bias lexicon fetch``, ``--oi-list``) OI is unavailable and this is NOI and ONI only, said on stderr."""
    return _lexicon_bias(None, argument, examples)


def dialect_features(texts: Sequence[str], model: Any) -> np.ndarray:
    """``[n, 4]`` p(AAE), p(Hispanic), p(other), p(White) per text (upstream's feature order); rows the dialect
    model cannot score get the column means of the scored rows (all 0.25 when none is scored)."""
    from toxiforge.bias.dialect import DIALECTS, predict_dialects

    X = predict_dialects(list(texts), model)
    missing = np.isnan(X).any(axis=1)
    fill = X[~missing].mean(axis=0) if (~missing).any() else np.full(len(DIALECTS), 1 / len(DIALECTS))
    X[missing] = fill
    return X


def dialect_bias(argument: str, *, examples: Sequence[Example], sources: Sequence[str] = (),
                 model: Any = None) -> np.ndarray:
    """``dialect[:MODEL_DIR]``: LMIXIN-Dialect's bias-only model, a calibrated linear SVM on the four dialect
    probabilities (module docstring). ``model``: a loaded :class:`~toxiforge.bias.dialect.DialectModel`."""
    if model is None:
        from toxiforge.bias.measure import find_dialect_model

        model, source = find_dialect_model(argument or None)
        if model is None:
            raise InputError(f"the dialect bias-only model needs Blodgett et al.'s dialect model: {source}",
                             hint="run `toxiforge bias dialect fetch`, or write --bias-only dialect:DIR "
                                  "(e.g. dialect:../shared/data/twitteraae)")
        import sys

        print(f"note: bias-only model dialect: {source}", file=sys.stderr)
    return fit_bias_only(dialect_features([e.text for e in examples], model), [e.label for e in examples])


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
