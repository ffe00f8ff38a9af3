"""The audit's headline numbers, one registry: every number two classifiers are compared on, with its name, which
way is better, a one-line definition and the paper it comes from.

Everything that compares two classifiers reads :data:`HEADLINES` and nothing else: the comparison
(:mod:`toxiforge.audit.compare`: the differences tables, the summary card's and the model card's verdicts), the
release gate (:mod:`toxiforge.audit.gate`: the names ``--gate-metric`` takes, and which side is worse) and harden's
paired check of every round against round 0 (``toxiforge.harden.guardset``, which picks the keys it checks). A
number added here is compared, gated and checkable alike; the report's Definitions come from the same entries
(:mod:`toxiforge.audit.glossary`).

Keys are ``section.metric`` paths into one (classifier, dataset) pair's sections (report.json's ``results``), a
dotted metric going deeper (``lexical.fpr.noi``).
"""

from __future__ import annotations

from dataclasses import dataclass

BORKAN = "Borkan et al. 2019, Nuanced metrics for measuring unintended bias with real data for text classification"
ZHOU = "Zhou et al. 2021, Challenges in automated debiasing for toxic language detection"
ROTTGER = "Röttger et al. 2021, HateCheck: functional tests for hate speech detection models"
STANDARD = "standard binary classification"
SLICES: tuple[str, ...] = ("noi", "oi", "oni", "aae")   # Zhou et al.'s lexical and dialect slices


@dataclass(frozen=True)
class Term:
    short: str        # what a table header or card line says
    definition: str   # one line, in words
    source: str       # the paper (or convention) it comes from


@dataclass(frozen=True)
class Headline(Term):
    """A number classifiers are compared on: a :class:`Term` and which way is better."""

    higher_is_better: bool


# the lexical section's two rates, per slice below: Zhou et al.'s FPRs, with the FNRs on the same slices (both
# error directions, so a classifier that flags nothing, FPR 0 and FNR 1, reads "mixed", not "better")
SLICE_RATES: dict[str, Term] = {
    "lexical.fpr": Term("FPR on a slice", "share of the slice's benign rows flagged toxic: how much the words or the "
                        "dialect alone trigger the classifier (lower is better)", ZHOU),
    "lexical.fnr": Term("FNR on a slice", "share of the slice's toxic rows not flagged; read beside the FPR, so a "
                        "classifier that flags nothing is not called fair (lower is better)", ZHOU),
}

HEADLINES: dict[str, Headline] = {
    "accuracy.roc_auc": Headline("ROC AUC", "chance that a random toxic row scores above a random benign one (0.5 = "
                                 "chance, 1 = perfect ranking)", "Hanley & McNeil 1982", True),
    "accuracy.pr_auc": Headline("PR AUC", "average precision over the thresholds, weighted by the recall each adds; "
                                "its chance level is the share of toxic rows", "scikit-learn's average precision",
                                True),
    "accuracy.f1": Headline("F1", "harmonic mean of precision and recall of the toxic class at P(toxic) > 0.5",
                            STANDARD, True),
    "accuracy.accuracy": Headline("accuracy", "share of rows whose prediction at P(toxic) > 0.5 is their label",
                                  STANDARD, True),
    "accuracy.fpr_at_95_tpr": Headline("FPR at 95% TPR", "share of benign rows flagged at the highest threshold "
                                       "that still catches 95% of the toxic rows (lower is better)",
                                       "Hendrycks & Gimpel 2017's convention", False),
    # both error directions at the decision threshold: accuracy alone can stay level while a candidate trades
    # missed toxic rows for flagged benign ones (FPR 0.459 -> 0.792 passed a gate on accuracy before these)
    "accuracy.fpr": Headline("FPR", "false positive rate: share of benign rows flagged toxic at P(toxic) > 0.5 "
                             "(lower is better)", STANDARD, False),
    "accuracy.fnr": Headline("FNR", "false negative rate: share of toxic rows not flagged at P(toxic) > 0.5 (lower "
                             "is better)", STANDARD, False),
    "groups.final_score": Headline("bias score", "Jigsaw final score: 0.25 × overall ROC AUC + 0.25 × the power mean "
                                   "(p = -5) over groups of each of subgroup, BPSN and BNSP AUC (1 = no bias found, "
                                   "weighted toward the worst group)", BORKAN, True),
    "hatecheck.overall": Headline("HateCheck accuracy", "share of HateCheck's cases whose prediction is their gold "
                                  "label, over all functional tests", ROTTGER, True),
    "hatecheck.over_blocking": Headline("over-blocking", "share of the non-hateful tests' cases (`*_nh`: identity "
                                        "mentions, counter-speech, negated hate, reclaimed slurs, non-hateful "
                                        "profanity) flagged hateful (lower is better)", ROTTGER, False),
    "hatecheck.obfuscation_accuracy": Headline("obfuscation accuracy", "accuracy on the spelling-variation tests "
                                               "(`spell_*`: swapped, deleted or added characters and spaces, leet "
                                               "speak)", ROTTGER, True),
    **{f"lexical.{rate}.{s}": Headline(f"{rate.upper()} {s.upper()}", f"{SLICE_RATES[f'lexical.{rate}'].definition}"
                                       f"; slice {s.upper()}", ZHOU, False)
       for rate in ("fpr", "fnr") for s in SLICES},
    "calibration.ece": Headline("ECE", "expected calibration error: mean gap between P(toxic) and the share toxic, "
                                "over 15 equal-width bins weighted by their rows (lower is better)",
                                "Naeini et al. 2015; Guo et al. 2017", False),
    "calibration.brier": Headline("Brier score", "mean squared gap between P(toxic) and the label (lower is better)",
                                  "Brier 1950", False),
}


def section_of(key: str) -> tuple[str, str]:
    """``("lexical", "fpr.noi")`` for ``lexical.fpr.noi``."""
    section, _, metric = key.partition(".")
    return section, metric


def sections() -> list[str]:
    """The sections that hold headline numbers, in registry order."""
    return list(dict.fromkeys(section_of(k)[0] for k in HEADLINES))


def in_section(section: str) -> dict[str, Headline]:
    """``{metric: headline}`` of one section (the metric without its section: ``fpr.noi``)."""
    return {section_of(k)[1]: h for k, h in HEADLINES.items() if section_of(k)[0] == section}
