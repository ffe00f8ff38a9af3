"""Every number of an audit named in words: the short name a table shows, a one-line definition and the paper it
comes from. The report's "Definitions" section is written from :data:`TERMS`, and every table header and card line
takes its name from :func:`name`, so a raw key (``roc_auc``, ``fpr.noi``) never reaches a reader.

Keys are the headline numbers' ``section.metric`` paths (:data:`toxiforge.audit.headlines.HEADLINES`, the one
registry of what is compared and gated: their words live there), plus the per-group and per-slice columns under
their own keys (``bpsn_auc``, ``fpr``, ``slice.oi``, ...).
"""

from __future__ import annotations

from toxiforge.audit.headlines import BORKAN, HEADLINES, ROTTGER, SLICE_RATES, ZHOU, Term
from toxiforge.intervals import SMALL_N, SMALL_N_MARK

BLODGETT = "Blodgett et al. 2016's dialect model, as Zhou et al. 2021 use it"

TERMS: dict[str, Term] = {
    **HEADLINES,
    **SLICE_RATES,
    "fpr": HEADLINES["accuracy.fpr"],   # a group's columns: the same rates on its rows
    "fnr": HEADLINES["accuracy.fnr"],
    "subgroup_auc": Term("subgroup AUC", "ROC AUC on the group's rows only: does the classifier rank toxic above "
                         "benign within the group", BORKAN),
    "bpsn_auc": Term("BPSN AUC", "background positive, subgroup negative: ROC AUC on the other rows' toxic and the "
                     "group's benign rows; low when benign mentions of the group score high (false alarms)", BORKAN),
    "bnsp_auc": Term("BNSP AUC", "background negative, subgroup positive: ROC AUC on the other rows' benign and "
                     "the group's toxic rows; low when toxic rows about the group score low (misses)", BORKAN),
    "functional_test": Term("functional test", "one of HateCheck's 29 targeted case types, by its published name; "
                            "the suffix `_h` means gold hateful, `_nh` non-hateful", ROTTGER),
    "slice.noi": Term("NOI", "non-offensive identity: rows with a non-offensive identity mention (e.g. a group's "
                      "name)", ZHOU),
    "slice.oi": Term("OI", "offensive identity: rows with an offensive identity mention (Zhou et al.'s word list, "
                     "--oi-list)", ZHOU),
    "slice.oni": Term("ONI", "offensive non-identity: rows with a swear word that names no group", ZHOU),
    "slice.aae": Term("AAE", "rows the dialect model places in African-American English", BLODGETT),
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


def name(key: str) -> str:
    """The words for ``key`` (a :data:`TERMS` key); an unknown key is shown with its underscores as spaces."""
    term = TERMS.get(key)
    return term.short if term is not None else key.replace("_", " ").replace(".", " ")


def definitions() -> list[str]:
    """The report's "Definitions" section: one bullet per term a reader meets (per-slice rates once, not 8 times)."""
    terms = {id(t): t for k, t in TERMS.items() if not (k.startswith("lexical.f") and k.count(".") == 2)}
    return [f"* **{t.short}**: {t.definition}. *{t.source}*." for t in terms.values()]
