"""Every number of an audit named in words: the short name a table shows, a one-line definition and the paper it
comes from. The report's "Definitions" section is written from :data:`TERMS`, and every table header and card line
takes its name from :func:`name`, so a raw key (``roc_auc``, ``fpr.noi``) never reaches a reader.

Keys are the comparison's ``section.metric`` paths (:data:`toxiforge.audit.compare.HEADLINES`; the gate's metric
names), plus the per-group and per-slice columns under their own keys (``bpsn_auc``, ``slice.oi``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass

from toxiforge.intervals import SMALL_N, SMALL_N_MARK


@dataclass(frozen=True)
class Term:
    short: str        # what a table header or card line says
    definition: str   # one line, in words
    source: str       # the paper (or convention) it comes from


BORKAN = "Borkan et al. 2019, Nuanced metrics for measuring unintended bias with real data for text classification"
ZHOU = "Zhou et al. 2021, Challenges in automated debiasing for toxic language detection"
ROTTGER = "Röttger et al. 2021, HateCheck: functional tests for hate speech detection models"
BLODGETT = "Blodgett et al. 2016's dialect model, as Zhou et al. 2021 use it"
STANDARD = "standard binary classification"

TERMS: dict[str, Term] = {
    "accuracy.roc_auc": Term("ROC AUC", "chance that a random toxic row scores above a random benign one (0.5 = "
                             "chance, 1 = perfect ranking)", "Hanley & McNeil 1982"),
    "accuracy.pr_auc": Term("PR AUC", "average precision over the thresholds, weighted by the recall each adds; "
                            "its chance level is the share of toxic rows", "scikit-learn's average precision"),
    "accuracy.f1": Term("F1", "harmonic mean of precision and recall of the toxic class at P(toxic) > 0.5",
                        STANDARD),
    "accuracy.accuracy": Term("accuracy", "share of rows whose prediction at P(toxic) > 0.5 is their label",
                              STANDARD),
    "accuracy.fpr_at_95_tpr": Term("FPR at 95% TPR", "share of benign rows flagged at the highest threshold that "
                                   "still catches 95% of the toxic rows (lower is better)",
                                   "Hendrycks & Gimpel 2017's convention"),
    "groups.final_score": Term("bias score", "Jigsaw final score: 0.25 × overall ROC AUC + 0.25 × the power mean "
                               "(p = -5) over groups of each of subgroup, BPSN and BNSP AUC (1 = no bias found, "
                               "weighted toward the worst group)", BORKAN),
    "subgroup_auc": Term("subgroup AUC", "ROC AUC on the group's rows only: does the classifier rank toxic above "
                         "benign within the group", BORKAN),
    "bpsn_auc": Term("BPSN AUC", "background positive, subgroup negative: ROC AUC on the other rows' toxic and the "
                     "group's benign rows; low when benign mentions of the group score high (false alarms)", BORKAN),
    "bnsp_auc": Term("BNSP AUC", "background negative, subgroup positive: ROC AUC on the other rows' benign and "
                     "the group's toxic rows; low when toxic rows about the group score low (misses)", BORKAN),
    "fpr": Term("FPR", "false positive rate: share of benign rows flagged toxic at P(toxic) > 0.5 (lower is "
                "better)", STANDARD),
    "fnr": Term("FNR", "false negative rate: share of toxic rows not flagged at P(toxic) > 0.5 (lower is better)",
                STANDARD),
    "hatecheck.overall": Term("HateCheck accuracy", "share of HateCheck's cases whose prediction is their gold "
                              "label, over all functional tests", ROTTGER),
    "hatecheck.over_blocking": Term("over-blocking", "share of the non-hateful tests' cases (`*_nh`: identity "
                                    "mentions, counter-speech, negated hate, reclaimed slurs, non-hateful "
                                    "profanity) flagged hateful (lower is better)", ROTTGER),
    "hatecheck.obfuscation_accuracy": Term("obfuscation accuracy", "accuracy on the spelling-variation tests "
                                           "(`spell_*`: swapped, deleted or added characters and spaces, leet "
                                           "speak)", ROTTGER),
    "functional_test": Term("functional test", "one of HateCheck's 29 targeted case types, by its published name; "
                            "the suffix `_h` means gold hateful, `_nh` non-hateful", ROTTGER),
    "slice.noi": Term("NOI", "non-offensive identity: rows with a non-offensive identity mention (e.g. a group's "
                      "name)", ZHOU),
    "slice.oi": Term("OI", "offensive identity: rows with an offensive identity mention (Zhou et al.'s word list, "
                     "--oi-list)", ZHOU),
    "slice.oni": Term("ONI", "offensive non-identity: rows with a swear word that names no group", ZHOU),
    "slice.aae": Term("AAE", "rows the dialect model places in African-American English", BLODGETT),
    "lexical.fpr": Term("FPR on a slice", "share of the slice's benign rows flagged toxic: how much the words or "
                        "the dialect alone trigger the classifier (lower is better)", ZHOU),
    "lexical.fnr": Term("FNR on a slice", "share of the slice's toxic rows not flagged; read beside the FPR, so a "
                        "classifier that flags nothing is not called fair (lower is better)", ZHOU),
    "calibration.ece": Term("ECE", "expected calibration error: mean gap between P(toxic) and the share toxic, "
                            "over 15 equal-width bins weighted by their rows (lower is better)",
                            "Naeini et al. 2015; Guo et al. 2017"),
    "calibration.brier": Term("Brier score", "mean squared gap between P(toxic) and the label (lower is better)",
                              "Brier 1950"),
    "interval": Term("[low, high]", "95% interval: for a proportion (accuracy, FPR, FNR, over-blocking, success and "
                     "flip rates) the Wilson score interval, which does not collapse at 0 or 1, marked "
                     f"{SMALL_N_MARK} when fewer than {SMALL_N} rows are behind it; for other numbers the bootstrap "
                     "percentile interval over resampled rows", "Wilson 1927; Efron & Tibshirani 1993"),
    "difference": Term("paired difference", "a classifier's number minus the first classifier's, with the "
                       "interval of that difference over the same resampled rows; a difference is shown when its "
                       "interval excludes 0", "paired bootstrap"),
}

SECTIONS: dict[str, str] = {"accuracy": "accuracy", "groups": "groups", "hatecheck": "HateCheck tests",
                            "lexical": "lexical and dialect bias", "calibration": "calibration"}

for _slice in ("noi", "oi", "oni", "aae"):
    for _rate in ("fpr", "fnr"):
        TERMS[f"lexical.{_rate}.{_slice}"] = Term(f"{_rate.upper()} {_slice.upper()}",
                                                   f"{TERMS[f'lexical.{_rate}'].definition}; slice "
                                                   f"{_slice.upper()}", ZHOU)


def name(key: str) -> str:
    """The words for ``key`` (a :data:`TERMS` key); an unknown key is shown with its underscores as spaces."""
    term = TERMS.get(key)
    return term.short if term is not None else key.replace("_", " ").replace(".", " ")


def definitions() -> list[str]:
    """The report's "Definitions" section: one bullet per term a reader meets (per-slice rates once, not 8 times)."""
    keys = [k for k in TERMS if not (k.startswith("lexical.f") and k.count(".") == 2)]
    return [f"* **{TERMS[k].short}**: {TERMS[k].definition}. *{TERMS[k].source}*." for k in keys]
