"""Agreement statistics: Fleiss (1971)'s worked example, direct library calls, the paper's percentages."""

from __future__ import annotations

import numpy as np
import pytest

from toxiforge.annotation.agreement import agreement, fleiss, kripp_alpha, toxicity_class

# Fleiss (1971), Table 1: 30 patients, 6 psychiatric diagnoses each, 5 categories (depression, personality
# disorder, schizophrenia, neurosis, other); cell = number of raters choosing that category. kappa = 0.430.
FLEISS_1971 = [
    [0, 0, 0, 6, 0], [0, 3, 0, 0, 3], [0, 1, 4, 0, 1], [0, 0, 0, 0, 6], [0, 3, 0, 3, 0], [2, 0, 4, 0, 0],
    [0, 0, 4, 0, 2], [2, 0, 3, 1, 0], [2, 0, 0, 4, 0], [0, 0, 0, 0, 6], [1, 0, 0, 5, 0], [1, 1, 0, 4, 0],
    [0, 3, 3, 0, 0], [1, 0, 0, 5, 0], [0, 2, 0, 3, 1], [0, 0, 5, 0, 1], [3, 0, 0, 1, 2], [5, 1, 0, 0, 0],
    [0, 2, 0, 4, 0], [1, 0, 2, 0, 3], [0, 0, 0, 0, 6], [0, 1, 0, 5, 0], [0, 2, 0, 1, 3], [2, 0, 0, 4, 0],
    [1, 0, 0, 4, 1], [0, 5, 0, 1, 0], [4, 0, 0, 0, 2], [0, 2, 0, 4, 0], [1, 0, 5, 0, 0], [0, 0, 0, 0, 6],
]


def _ratings_from_counts(table):
    return [[cat for cat, c in enumerate(row) for _ in range(c)] for row in table]


def test_fleiss_1971_worked_example():
    assert all(sum(r) == 6 for r in FLEISS_1971) and len(FLEISS_1971) == 30
    assert fleiss(_ratings_from_counts(FLEISS_1971), n_cat=5) == pytest.approx(0.430, abs=5e-4)


def test_matches_direct_library_calls():
    import krippendorff
    from statsmodels.stats.inter_rater import aggregate_raters, fleiss_kappa

    rng = np.random.default_rng(0)
    ratings = rng.integers(1, 6, size=(40, 3))
    ratings[:20, 1] = ratings[:20, 0]
    table, _ = aggregate_raters(ratings)
    assert fleiss(ratings) == pytest.approx(fleiss_kappa(table, method="fleiss"))
    # the same raters on every item: the reliability-data form must agree with our value-count form
    for level in ("ordinal", "nominal", "interval"):
        direct = krippendorff.alpha(reliability_data=ratings.T, level_of_measurement=level,
                                    value_domain=[1, 2, 3, 4, 5])
        assert kripp_alpha(ratings.tolist(), level, range(1, 6)) == pytest.approx(direct)


def test_toxicity_classes_follow_the_paper():
    assert [toxicity_class(a, h) for a, h in [(1, 2), (3, 1), (2, 3), (4, 1), (1, 5), (3, 3)]] == [0, 1, 1, 2, 2, 1]


def _resp(item, ai, human, author="human", ref="direct"):
    return {"item_id": item, "harmful_ai": ai, "harmful_human": human, "author": author, "group_reference": ref}


def test_study_statistics():
    rows = [_resp(1, 1, 1), _resp(1, 2, 1), _resp(1, 1, 2),              # full agreement, non-toxic
            _resp(2, 5, 4, "ai"), _resp(2, 4, 4), _resp(2, 1, 1, "ai", "unclear"),  # majority toxic
            _resp(3, 3, 1, ref="other"), _resp(3, 5, 5, ref="unclear"), _resp(3, 1, 1, "ai"),  # no majority
            _resp(4, 5, 5)]                                               # incomplete: left out
    stats = agreement(rows, 3)
    assert stats.n_items == 3 and stats.n_responses == 9
    assert stats.full_agreement == pytest.approx(1 / 3)
    assert stats.majority_agreement == pytest.approx(2 / 3)
    assert stats.human_written_majority == pytest.approx(2 / 3)
    assert stats.target_reference_majority == pytest.approx(2 / 3)
    assert stats.target_reference_any == pytest.approx(1.0)
    assert stats.class_shares == {"non-toxic": pytest.approx(1 / 3), "ambiguous": 0.0, "toxic": pytest.approx(1 / 3)}
    assert stats.fleiss_kappa == pytest.approx(fleiss([[0, 0, 0], [2, 2, 0], [1, 2, 0]], n_cat=3))
    assert -1 <= stats.krippendorff_alpha_ordinal <= 1 and -1 <= stats.krippendorff_alpha_nominal <= 1
    assert any("Fleiss" in line for line in stats.lines())


def test_empty_and_degenerate_studies():
    assert agreement([], 3).fleiss_kappa is None
    same = agreement([_resp(i, 1, 1) for i in range(4) for _ in range(3)], 3)
    assert same.full_agreement == 1.0 and same.krippendorff_alpha_nominal is None
