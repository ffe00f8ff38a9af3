"""The dataset-specific sections of an audit: HateCheck's functional tests (Röttger et al. 2021) and Zhou et
al.'s lexical and dialect false-positive rates (through :func:`toxiforge.bias.measure.measure_data`, the code
``toxiforge bias measure`` runs).

HateCheck: accuracy (prediction P(toxic) > 0.5 equals the gold label) per functional test, keyed by its published
name (``derog_neg_emote_h``, ``counter_quote_nh``, ...), per target identity and overall, each with a 95% Wilson
interval (a proportion: :mod:`toxiforge.audit.metrics`), as the paper's Tables 2-3 report them. Two readings of
those tests are summarised: **over-blocking**, the share of the non-hateful tests' cases (``*_nh``: identity
mentions, counter-speech, negated hate, reclaimed slurs, non-hateful profanity, abuse of non-protected targets)
predicted hateful, and **obfuscation robustness**, the accuracy on the ``spell_*`` tests (swapped, deleted or added
characters and spaces, leet speak).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from toxiforge.audit.metrics import accuracy_metric, rate_metric
from toxiforge.data.examples import LabeledData
from toxiforge.intervals import Metric, Resampler
from toxiforge.records import TOXIC_THRESHOLD

FUNCTIONALITY = "functionality"   # HateCheck's per-row field (Example.meta)
NON_HATEFUL_SUFFIX = "_nh"
SPELLING_PREFIX = "spell_"


def hatecheck_section(data: LabeledData, scores: np.ndarray, resampler: Resampler,
                      threshold: float = TOXIC_THRESHOLD) -> dict[str, Any]:
    """``{"overall", "over_blocking", "obfuscation_accuracy": Estimate, "functional_tests": {name: {"n",
    "label", "accuracy"}}, "targets": {group: {"n", "accuracy"}}}``."""
    y = np.asarray(data.labels, dtype=np.int64)
    preds = (np.asarray(scores) > threshold).astype(np.int64)
    tests = np.asarray([str(t) for t in data.meta_column(FUNCTIONALITY)], dtype=object)
    targets = np.asarray([e.group or "" for e in data.examples], dtype=object)
    test_names = sorted(set(tests))
    target_names = sorted({t for t in targets if t})
    non_hateful = np.asarray([t.endswith(NON_HATEFUL_SUFFIX) for t in tests])
    spelling = np.asarray([t.startswith(SPELLING_PREFIX) for t in tests])
    metrics: dict[str, Metric] = {"overall": accuracy_metric(y, preds),
                                  "over_blocking": rate_metric(y, preds, gold=0, predicted=1, include=non_hateful),
                                  "obfuscation_accuracy": accuracy_metric(y, preds, include=spelling)}
    metrics |= {f"test\0{t}": accuracy_metric(y, preds, include=tests == t) for t in test_names}
    metrics |= {f"target\0{t}": accuracy_metric(y, preds, include=targets == t) for t in target_names}
    est = resampler.estimates(metrics)
    return {
        "overall": est["overall"], "over_blocking": est["over_blocking"],
        "obfuscation_accuracy": est["obfuscation_accuracy"],
        "functional_tests": {t: {"n": int((tests == t).sum()), "label": int(y[tests == t][0]),
                                 "accuracy": est[f"test\0{t}"]} for t in test_names},
        "targets": {t: {"n": int((targets == t).sum()), "accuracy": est[f"target\0{t}"]} for t in target_names},
    }


def has_functional_tests(data: LabeledData) -> bool:
    return any(e.meta and FUNCTIONALITY in e.meta for e in data.examples)


class LexicalContext:
    """The TOXTRIG lexicon and the dialect model, loaded once per audit, and each dataset's lexicon flags and
    p(dialect), computed once per dataset (:func:`lexical_section` runs for each classifier × dataset)."""

    def __init__(self, lexicon: str | None = None, oi_list: Any = None, dialect_model: Any = None):
        from toxiforge.bias.measure import find_dialect_model

        self.lexicon = self.load_lexicon(lexicon, oi_list)
        self.dialect, self.dialect_source = find_dialect_model(dialect_model)
        self._features: dict[int, tuple[LabeledData, dict[str, np.ndarray], np.ndarray | None]] = {}

    @staticmethod
    def load_lexicon(lexicon: str | None = None, oi_list: Any = None) -> Any:
        """The lexicon an audit with these settings tags rows with (its lexical section's NOI/OI/ONI slices), for
        a caller that needs the audit's slices without its dialect model (harden's calibration)."""
        from toxiforge.bias.lexicon import load_bias_lexicon

        return load_bias_lexicon(lexicon, oi_list=oi_list)

    def features(self, data: LabeledData) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """``data``'s lexicon flags (``lexicon.tag``) and p(dialect) (None without a dialect model), the first
        time computed and then kept for that dataset."""
        if id(data) not in self._features:  # the dataset is kept with its features, so its id is not reused
            from toxiforge.bias.dialect import predict_dialects

            p_dialect = predict_dialects(data.texts, self.dialect) if self.dialect is not None else None
            self._features[id(data)] = (data, self.lexicon.tag(data.texts), p_dialect)
        _, flags, p_dialect = self._features[id(data)]
        return flags, p_dialect


def lexical_section(data: LabeledData, scores: np.ndarray, context: LexicalContext,
                    threshold: float = TOXIC_THRESHOLD, resampler: Resampler | None = None) -> dict[str, Any]:
    """Zhou et al.'s numbers from ``bias measure``'s own code: FPR and F1 on the NOI/OI/ONI/AAE slices, with the
    slice sizes; categories that are unavailable (no OI list, no dialect model) or empty are None and ``notes``
    say why. Each FPR is an :class:`Estimate`: ``bias measure``'s value with its Wilson interval and ``n`` (the
    slice's benign rows), and the replicates of the same FPR over ``resampler``'s resamples for paired differences
    (the slices' rows as ``bias measure`` tagged them; no interval without a resampler)."""
    from toxiforge.bias.measure import measure_data
    from toxiforge.records import is_toxic

    flags, p_dialect = context.features(data)
    bias = measure_data(data, lexicon=context.lexicon, dialect_model=context.dialect, scores=scores,
                        threshold=threshold, dialect_source=context.dialect_source, flags=flags,
                        p_dialect=p_dialect).report
    report = bias.to_json()
    slices = [k for k in report["fpr"]]
    y = np.asarray(data.labels, dtype=np.int64)
    preds = is_toxic(np.asarray(scores, dtype=np.float64), threshold).astype(np.int64)
    defined = [k for k in slices if report["fpr"][k] is not None]
    resampler = resampler or Resampler(len(y), 0)
    est = resampler.estimates({k: rate_metric(y, preds, gold=0, predicted=1, include=bias.masks[k]) for k in defined})
    fpr = {k: (replace(est[k], value=report["fpr"][k]) if k in defined else None) for k in slices}
    # the other error direction on the same slices (a classifier that flags nothing has FPR 0 and FNR 1)
    misses = {k: rate_metric(y, preds, gold=1, predicted=0, include=bias.masks[k])
              for k in slices if report["available"][k]}
    fnr_est = resampler.estimates(misses)
    fnr = {k: (fnr_est[k] if k in fnr_est and fnr_est[k].defined else None) for k in slices}
    return {"fpr": fpr, "fnr": fnr, "f1": {k: report["f1"][k] for k in slices},
            "n": {k: report["n"][k] for k in slices}, "n_benign": {k: report["n_benign"][k] for k in slices},
            "available": report["available"], "notes": report["notes"], "dialect": context.dialect_source}


def section_names(data: Sequence[LabeledData]) -> list[str]:
    """The sections an audit of ``data`` has, in report order."""
    names = ["accuracy", "groups", "lexical", "calibration"]
    if any(has_functional_tests(d) for d in data):
        names.insert(2, "hatecheck")
    return names
