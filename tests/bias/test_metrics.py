"""Zhou et al.'s bias metrics on small tables, checked against values computed by hand (and scipy's pearsonr)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.stats import pearsonr

from toxiforge.bias.metrics import aae_members, f1_toxic, false_positive_rate, measure_bias, pearson_r
from toxiforge.errors import InputError

LABELS = [1, 1, 0, 0, 0, 1, 0, 0]
NOI = np.array([1, 0, 1, 1, 0, 0, 0, 0], dtype=bool)
ONI = np.array([1, 1, 0, 0, 0, 0, 1, 0], dtype=bool)
OI = np.zeros(8, dtype=bool)
FLAGS = {"noi": NOI, "oi": OI, "oni": ONI, "toxtrig": NOI | ONI}
SCORES = [0.9, 0.2, 0.7, 0.4, 0.1, 0.8, 0.6, 0.5]   # > 0.5: [1, 0, 1, 0, 0, 1, 1, 0] (0.5 is benign)
GROUPS = ["a", "a", "b", "b", None, "a", "b", "b"]


def test_dataset_bias_pearson_by_hand():
    report = measure_bias(LABELS, FLAGS).to_json()
    # NOI: sum(xy) - n*mx*my = 1 - 8*(3/8)^2 = -1/8; var sums 15/8 each -> R = -1/15
    assert report["pearson_r"]["noi"] == pytest.approx(-1 / 15)
    assert report["pearson_r"]["oni"] == pytest.approx(7 / 15)
    assert report["pearson_r"]["toxtrig"] == pytest.approx(pearsonr(NOI | ONI, LABELS)[0])
    assert report["pearson_r"]["oi"] is None and report["pearson_r"]["aae"] is None
    assert report["n"] == {"all": 8, "noi": 3, "oi": 0, "oni": 3, "toxtrig": 5, "aae": None}
    assert report["pct_toxic"]["noi"] == pytest.approx(100 / 3)
    assert report["pct_toxic"]["oni"] == pytest.approx(200 / 3)
    assert report["accuracy"] is None and report["fpr"]["noi"] is None   # no classifier: empty cells


def test_classifier_bias_by_hand():
    report = measure_bias(LABELS, FLAGS, scores=SCORES, groups=GROUPS).to_json()
    assert report["accuracy"] == pytest.approx(5 / 8)        # TP 2, TN 3
    assert report["f1"]["overall"] == pytest.approx(4 / 7)   # 2TP / (2TP + FP 2 + FN 1)
    assert report["f1"]["noi"] == pytest.approx(2 / 3)       # rows 0,2,3: TP 1, FP 1
    assert report["fpr"]["noi"] == pytest.approx(1 / 2)      # benign rows 2,3: one flagged
    assert report["f1"]["oni"] == pytest.approx(1 / 2)       # rows 0,1,6: TP 1, FN 1, FP 1
    assert report["fpr"]["oni"] == pytest.approx(1.0)        # benign row 6 flagged
    assert report["fpr"]["oi"] is None and report["f1"]["oi"] is None   # n = 0
    assert report["n_benign"]["noi"] == 2
    a, b = report["groups"]["a"], report["groups"]["b"]
    assert a["n"] == 3 and a["fpr"] is None and a["f1"] == pytest.approx(0.8)
    assert b["n"] == 4 and b["fpr"] == pytest.approx(0.5) and b["f1"] == 0.0
    assert set(report["groups"]) == {"a", "b"}
    json.dumps(report, allow_nan=False)   # never NaN


def test_threshold_is_strictly_greater():
    report = measure_bias([0, 0], {"noi": np.array([True, True])}, scores=[0.5, 0.51])
    assert report.slices["noi"].fpr == pytest.approx(0.5)


def test_aae_r_uses_the_probability_and_membership_the_argmax():
    p = np.array([
        [0.6, 0.1, 0.1, 0.2],   # AAE
        [0.4, 0.1, 0.1, 0.4],   # tie AAE/White: argmax picks AAE (first)
        [0.3, 0.1, 0.1, 0.5],
        [0.1, 0.1, 0.1, 0.7],
        [np.nan] * 4,           # not scored
        [0.45, 0.3, 0.05, 0.2],  # AAE by argmax, not by p > 0.5
    ])
    labels = [1, 0, 1, 0, 1, 0]
    report = measure_bias(labels, {}, p_dialect=p, scores=[0.9, 0.9, 0.1, 0.1, 0.9, 0.1])
    scored = [0, 1, 2, 3, 5]
    assert report.pearson["aae"] == pytest.approx(pearsonr(p[scored, 0], np.array(labels)[scored])[0])
    assert aae_members(p).tolist() == [True, True, False, False, False, True]
    assert report.slices["aae"].n == 3 and report.slices["aae"].fpr == pytest.approx(1 / 2)
    strict = measure_bias(labels, {}, p_dialect=p, aae_threshold=0.5)
    assert strict.slices["aae"].n == 1
    assert any("too few in-vocabulary" in n for n in report.notes)


def test_single_class_leaves_r_empty_but_fpr_works():
    report = measure_bias([0, 0, 0], {"noi": np.array([True, False, True])}, scores=[0.9, 0.9, 0.1])
    data = report.to_json()
    assert data["pearson_r"]["noi"] is None
    assert data["fpr"]["noi"] == pytest.approx(0.5)
    assert data["f1"]["overall"] == 0.0            # no toxic gold label, 2 false positives: 0 / (0 + 2 + 0)
    assert any("single class" in n for n in data["notes"])


def test_unavailable_category_has_empty_counts_not_zero():
    report = measure_bias(LABELS, FLAGS, available={"oi": False}).to_json()
    assert report["n"]["oi"] is None and report["pct_toxic"]["oi"] is None
    assert report["available"]["oi"] is False and report["available"]["aae"] is False
    assert any("OI unavailable" in n for n in report["notes"])


def test_bad_inputs():
    with pytest.raises(InputError, match="no labelled rows"):
        measure_bias([], {})
    with pytest.raises(InputError, match="0 .benign. or 1"):
        measure_bias([0, 2], {})
    with pytest.raises(InputError, match="predictions"):
        measure_bias([0, 1], {}, scores=[0.1])
    with pytest.raises(InputError, match="dialect probabilities"):
        measure_bias([0, 1], {}, p_dialect=np.zeros((2, 3)))


def test_helpers_edge_cases():
    assert pearson_r(np.array([1, 1]), np.array([0, 1])) is None
    assert f1_toxic(np.array([0, 0]), np.array([0, 0])) is None
    assert f1_toxic(np.array([0, 0]), np.array([1, 0])) == 0.0
    assert false_positive_rate(np.array([1]), np.array([1])) is None
