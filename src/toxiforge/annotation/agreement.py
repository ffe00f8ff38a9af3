"""The paper's agreement statistics (§4.1, footnote 8) over a study's responses.

Each response's toxicity score is ``max(harmful_ai, harmful_human)`` (1-5), mapped to three classes:
below 3 non-toxic (0), 3 ambiguous (1), above 3 toxic (2). Over the items that have exactly ``per_item``
responses:

* Fleiss' kappa on the classes (``statsmodels.stats.inter_rater``: ``aggregate_raters`` + ``fleiss_kappa``);
* Krippendorff's alpha (the ``krippendorff`` package): ordinal on the 1-5 scores, nominal on the classes;
* % full agreement (all annotators give the same class) and % majority agreement (more than half do);
* % judged human-written by a majority, and the share of items a majority says refer to the target group
  (directly or indirectly), plus the share where at least one annotator says so (paper Appendix E).

The paper reports kappa 0.46, alpha 0.64, 55.17% full and 93.4% majority agreement.

A short-form study (one yes/no question, ``hateful``) has two classes, not hateful (0) and hateful (1): Fleiss' kappa
and Krippendorff's nominal alpha on them, the percentages likewise; the statistics of the other questions are n/a.
:func:`response_vote` is each response's toxic/not vote in either form (the paper's rule for the full form).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import numpy as np

CLASSES = ("non-toxic", "ambiguous", "toxic")
SHORT_CLASSES = ("not hateful", "hateful")


def toxicity_class(harmful_ai: float, harmful_human: float) -> int:
    """0 non-toxic (max < 3), 1 ambiguous (= 3), 2 toxic (> 3)."""
    score = max(harmful_ai, harmful_human)
    return 0 if score < 3 else (1 if score == 3 else 2)


def response_vote(response: Any, form: str) -> int:
    """A response's vote, 1 toxic or 0 not: the short form's ``hateful`` answer; for the full form the paper's
    rule, toxic when max(harmful_ai, harmful_human) > 3 (the ambiguous 3 is not toxic)."""
    if form == "short":
        return int(response.hateful == "yes")
    return int(toxicity_class(response.harmful_ai, response.harmful_human) == 2)


def fleiss(ratings: Sequence[Sequence[int]], n_cat: int | None = None) -> float:
    """Fleiss' kappa of a subjects x raters matrix of category codes (statsmodels)."""
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    table, _ = aggregate_raters(np.asarray(ratings), n_cat=n_cat)
    return float(fleiss_kappa(table, method="fleiss"))


def kripp_alpha(ratings: Sequence[Sequence[int]], level: Literal["nominal", "ordinal", "interval", "ratio"],
                domain: Sequence[int]) -> float:
    """Krippendorff's alpha of a subjects x ratings matrix (raters need not be the same people across
    subjects; the package's value-count form is used)."""
    import krippendorff

    domain = list(domain)
    counts = np.zeros((len(ratings), len(domain)), dtype=int)
    for i, row in enumerate(ratings):
        for v in row:
            counts[i, domain.index(v)] += 1
    return float(krippendorff.alpha(value_counts=counts, value_domain=domain, level_of_measurement=level))


@dataclass
class Agreement:
    n_items: int
    n_responses: int
    raters_per_item: int
    fleiss_kappa: float | None
    krippendorff_alpha_ordinal: float | None
    krippendorff_alpha_nominal: float | None
    full_agreement: float | None
    majority_agreement: float | None
    human_written_majority: float | None
    target_reference_majority: float | None
    target_reference_any: float | None
    class_shares: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        def pct(x):
            return "n/a" if x is None else f"{100 * x:.2f}%"

        def num(x):
            return "n/a" if x is None else f"{x:.3f}"

        return [f"items with {self.raters_per_item} responses: {self.n_items} ({self.n_responses} responses)",
                f"Fleiss' kappa ({len(self.class_shares)} classes): {num(self.fleiss_kappa)}",
                f"Krippendorff's alpha: ordinal on 1-5 scores {num(self.krippendorff_alpha_ordinal)}, "
                f"nominal on classes {num(self.krippendorff_alpha_nominal)}",
                f"full agreement: {pct(self.full_agreement)}; majority agreement: {pct(self.majority_agreement)}",
                f"judged human-written by a majority: {pct(self.human_written_majority)}",
                f"refers to the target group: majority {pct(self.target_reference_majority)}, "
                f"at least one annotator {pct(self.target_reference_any)}",
                "classes (by majority): " + ", ".join(f"{k} {pct(v)}" for k, v in self.class_shares.items())]


def agreement(responses: Iterable[Mapping[str, Any]], raters_per_item: int) -> Agreement:
    """Statistics over responses (mappings with ``item_id``, ``harmful_ai``, ``harmful_human``, ``author``,
    ``group_reference``); only items with exactly ``raters_per_item`` responses count."""
    by_item: dict[Any, list[Mapping[str, Any]]] = defaultdict(list)
    for r in responses:
        by_item[r["item_id"]].append(r)
    complete = [rs for rs in by_item.values() if len(rs) == raters_per_item]
    k = raters_per_item
    n = len(complete)
    if n == 0:
        return Agreement(0, 0, k, None, None, None, None, None, None, None, None, {c: 0.0 for c in CLASSES})
    classes = [[toxicity_class(r["harmful_ai"], r["harmful_human"]) for r in rs] for rs in complete]
    scores = [[max(r["harmful_ai"], r["harmful_human"]) for r in rs] for rs in complete]
    top = [max(np.bincount(c, minlength=3)) for c in classes]
    majority_class = [int(np.argmax(np.bincount(c, minlength=3))) if m * 2 > k else None
                      for c, m in zip(classes, top)]
    human = [sum(r["author"] == "human" for r in rs) * 2 > k for rs in complete]
    refs = [[r["group_reference"] in ("direct", "indirect") for r in rs] for rs in complete]
    multi = k >= 2
    return Agreement(
        n_items=n, n_responses=n * k, raters_per_item=k,
        fleiss_kappa=_safe(lambda: fleiss(classes, n_cat=3)) if multi else None,
        krippendorff_alpha_ordinal=_safe(lambda: kripp_alpha(scores, "ordinal", range(1, 6))) if multi else None,
        krippendorff_alpha_nominal=_safe(lambda: kripp_alpha(classes, "nominal", range(3))) if multi else None,
        full_agreement=sum(m == k for m in top) / n,
        majority_agreement=sum(m * 2 > k for m in top) / n,
        human_written_majority=sum(human) / n,
        target_reference_majority=sum(sum(r) * 2 > k for r in refs) / n,
        target_reference_any=sum(any(r) for r in refs) / n,
        class_shares={c: sum(m == i for m in majority_class) / n for i, c in enumerate(CLASSES)},
    )


def _safe(compute) -> float | None:
    """None where a statistic is undefined (e.g. every rating identical gives 0/0)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            value = compute()
        except (ValueError, ZeroDivisionError):
            return None
    return None if value is None or not np.isfinite(value) else value


def vote_agreement(votes: Iterable[Sequence[int]], raters_per_item: int) -> Agreement:
    """Agreement over items' 0/1 votes (a short-form study's): only items with exactly ``raters_per_item`` votes
    count."""
    complete = [list(v) for v in votes if len(v) == raters_per_item]
    k, n = raters_per_item, len(complete)
    if n == 0:
        return Agreement(0, 0, k, None, None, None, None, None, None, None, None, {c: 0.0 for c in SHORT_CLASSES})
    top = [max(sum(v), k - sum(v)) for v in complete]
    multi = k >= 2
    return Agreement(
        n_items=n, n_responses=n * k, raters_per_item=k,
        fleiss_kappa=_safe(lambda: fleiss(complete, n_cat=2)) if multi else None,
        krippendorff_alpha_ordinal=None,
        krippendorff_alpha_nominal=_safe(lambda: kripp_alpha(complete, "nominal", range(2))) if multi else None,
        full_agreement=sum(m == k for m in top) / n, majority_agreement=sum(m * 2 > k for m in top) / n,
        human_written_majority=None, target_reference_majority=None, target_reference_any=None,
        class_shares={c: sum((sum(v) * 2 > k) == bool(i) and m * 2 > k for v, m in zip(complete, top)) / n
                      for i, c in enumerate(SHORT_CLASSES)})


def study_agreement(store, study_id: int) -> Agreement:
    """:func:`agreement` over a stored study (:func:`vote_agreement` for a short-form one)."""
    study = store.study(study_id)
    if study.form == "short":
        by_item: dict[int, list[int]] = defaultdict(list)
        for i, r in store.responses(study.id):
            by_item[i.id].append(response_vote(r, "short"))
        return vote_agreement(by_item.values(), study.per_item)
    rows = [{"item_id": i.id, "harmful_ai": r.harmful_ai, "harmful_human": r.harmful_human, "author": r.author,
             "group_reference": r.group_reference} for i, r in store.responses(study.id)]
    return agreement(rows, study.per_item)
