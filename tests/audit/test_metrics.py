"""The audit's metrics against independent computations: scikit-learn on resampled rows, Borkan et al.'s bias
AUCs written out, ECE by hand, and the paired bootstrap's reproducibility."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, brier_score_loss, f1_score, roc_auc_score, roc_curve

from toxiforge.audit.metrics import (
    accuracy_metric,
    auc_metric,
    brier_metric,
    ece_metric,
    f1_metric,
    fpr_at_tpr_metric,
    group_section,
    pr_auc_metric,
)
from toxiforge.intervals import Estimate, Resampler, paired_difference


def _data(n=200, seed=1):
    rng = np.random.default_rng(seed)
    y = (rng.random(n) < 0.4).astype(int)
    s = np.clip(0.3 * y + rng.random(n) * 0.7, 0, 1).round(2)  # rounded: many ties, as real classifiers have
    return y, s


def _resamples(n, b=5, seed=7):
    idx = np.random.default_rng(seed).integers(0, n, size=(b, n))
    weights = np.stack([np.bincount(row, minlength=n) for row in idx]).astype(float)
    return idx, weights


def _fpr_at_95(y, s):
    fpr, tpr, _ = roc_curve(y, s)
    return fpr[tpr >= 0.95].min()


@pytest.mark.parametrize("metric, reference", [
    (auc_metric, roc_auc_score),
    (pr_auc_metric, average_precision_score),
    (fpr_at_tpr_metric, _fpr_at_95),
    (brier_metric, brier_score_loss),
])
def test_score_metrics_equal_scikit_learn_on_resampled_rows(metric, reference):
    y, s = _data()
    idx, weights = _resamples(len(y))
    got = metric(y, s)(weights)
    want = [reference(y[row], s[row]) for row in idx]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(metric(y, s)(np.ones((1, len(y))))[0], reference(y, s), atol=1e-12)


def test_decision_rule_metrics_equal_scikit_learn():
    y, s = _data()
    preds = (s > 0.5).astype(int)
    idx, weights = _resamples(len(y))
    np.testing.assert_allclose(f1_metric(y, preds)(weights), [f1_score(y[r], preds[r]) for r in idx])
    np.testing.assert_allclose(accuracy_metric(y, preds)(weights), [np.mean(y[r] == preds[r]) for r in idx])


def test_auc_is_nan_without_both_classes():
    y, s = np.array([1, 1, 0]), np.array([0.9, 0.8, 0.1])
    assert np.isnan(auc_metric(y, s, include=np.array([True, True, False]))(np.ones((1, 3))))[0]


def test_ece_by_hand_on_ten_rows():
    y = np.array([0, 0, 1, 0, 1, 1, 1, 0, 1, 1])
    s = np.array([0.01, 0.05, 0.05, 0.30, 0.32, 0.68, 0.70, 0.97, 0.99, 1.00])
    # 15 bins of width 1/15: 0.01, 0.05, 0.05 -> bin 0; 0.30, 0.32 -> bin 4; 0.68, 0.70 -> bin 10;
    # 0.97, 0.99, 1.00 -> bin 14 (1.0 joins the last bin)
    bins = [((0, 0, 1), (0.01, 0.05, 0.05)), ((0, 1), (0.30, 0.32)), ((1, 1), (0.68, 0.70)),
            ((0, 1, 1), (0.97, 0.99, 1.00))]
    by_hand = sum(len(ys) / 10 * abs(np.mean(ys) - np.mean(ps)) for ys, ps in bins)
    assert by_hand == pytest.approx((abs(1 - 0.11) + abs(1 - 0.62) + abs(2 - 1.38) + abs(2 - 2.96)) / 10)
    assert ece_metric(y, s)(np.ones((1, 10)))[0] == pytest.approx(by_hand)


def test_borkan_bias_aucs_and_final_score_as_defined():
    y, s = _data(n=300, seed=3)
    groups = np.array(["g1", "g2", None] * 100, dtype=object)
    stats, final = group_section(y, s, list(groups), Resampler(len(y), 0))
    means = {}
    for g in ("g1", "g2"):
        sub, bg = groups == g, groups != g
        subgroup = roc_auc_score(y[sub], s[sub])
        bpsn_rows = (bg & (y == 1)) | (sub & (y == 0))     # background positive, subgroup negative
        bnsp_rows = (bg & (y == 0)) | (sub & (y == 1))     # background negative, subgroup positive
        bpsn, bnsp = roc_auc_score(y[bpsn_rows], s[bpsn_rows]), roc_auc_score(y[bnsp_rows], s[bnsp_rows])
        m = stats[g].metrics
        assert (m["subgroup_auc"].value, m["bpsn_auc"].value, m["bnsp_auc"].value) == \
            pytest.approx((subgroup, bpsn, bnsp), abs=1e-12)
        assert m["fpr"].value == pytest.approx(np.mean(s[sub & (y == 0)] > 0.5))
        assert m["fnr"].value == pytest.approx(np.mean(s[sub & (y == 1)] <= 0.5))
        means[g] = (subgroup, bpsn, bnsp)
    power = [np.mean([means[g][k] ** -5 for g in means]) ** (-1 / 5) for k in range(3)]
    assert final.value == pytest.approx(0.25 * roc_auc_score(y, s) + 0.25 * sum(power), abs=1e-12)


def test_paired_bootstrap_is_reproducible_by_seed_and_pairs_rows():
    y, s = _data()
    other = np.clip(s + 0.1 * (y - 0.5), 0, 1)

    def auc(scores, seed):
        return Resampler(len(y), 300, seed).estimates({"auc": auc_metric(y, scores)})["auc"]

    a, b = auc(s, 0), auc(other, 0)
    again = auc(s, 0)
    assert (a.low, a.high) == (again.low, again.high) and np.array_equal(a.reps, again.reps)
    assert (auc(s, 1).low, auc(s, 1).high) != (a.low, a.high)
    diff = paired_difference(a, b)
    np.testing.assert_allclose(diff.reps, b.reps - a.reps)
    assert diff.value == pytest.approx(b.value - a.value) and diff.low <= diff.value <= diff.high
    assert diff.excludes_zero()   # the second classifier ranks every toxic row higher on the same resamples
    same = paired_difference(a, auc(s, 0))
    assert (same.value, same.low, same.high) == (0.0, 0.0, 0.0) and not same.excludes_zero()
    with pytest.raises(ValueError, match="same resamples"):
        paired_difference(a, Resampler(len(y), 10, 0).estimates({"auc": auc_metric(y, s)})["auc"])


def test_estimate_cells_and_undefined():
    assert Estimate.of(float("nan"), None).cell() == "n/a"
    assert Estimate.of(0.5, np.array([0.4, np.nan, 0.6])).low == pytest.approx(0.405)


def test_lexical_fprs_are_bias_measures_values_with_intervals_from_the_same_resamples(monkeypatch):
    from toxiforge.audit.compare import compare
    from toxiforge.audit.sections import LexicalContext, lexical_section
    from toxiforge.bias.lexicon import BiasLexicon
    from toxiforge.bias.measure import measure_data
    from toxiforge.data.examples import Example, LabeledData

    # neutral placeholders: rows 0-29 mention an identity (NOI), 30-39 carry a mild swear word (ONI), the rest none
    texts = ([f"placeholder {i} about muslim people" for i in range(30)]
             + [f"placeholder {i} with damn" for i in range(10)] + [f"plain placeholder {i}" for i in range(40)])
    rng = np.random.default_rng(3)
    y = (rng.random(80) < 0.3).astype(int)
    s = rng.random(80).round(2)
    data = LabeledData("T", [Example(t, int(label)) for t, label in zip(texts, y)], "table", "test")
    context = LexicalContext(dialect_model=None)
    context.dialect, context.dialect_source = None, "none (test)"
    resampler = Resampler(80, n_boot=50, seed=5)
    tagged, tag = [], BiasLexicon.tag
    monkeypatch.setattr(BiasLexicon, "tag", lambda self, texts: tagged.append(data.name) or tag(self, texts))
    section = lexical_section(data, s, context, resampler=resampler)
    report = measure_data(data, lexicon=context.lexicon, scores=s).report.to_json()
    noi = section["fpr"]["noi"]
    assert isinstance(noi, Estimate) and noi.value == report["fpr"]["noi"]   # bias measure's own number
    assert noi.low is not None and noi.low <= noi.value <= noi.high
    assert section["fpr"]["aae"] is None                                       # no dialect model: empty, no interval
    # the replicates are the NOI FPR on the resampled rows, written out per resample
    in_noi, preds = np.arange(80) < 30, s > 0.5
    for weights, rep in zip(next(resampler.blocks()), noi.reps):
        rows = np.repeat(np.arange(80), weights.astype(int))
        benign = rows[in_noi[rows] & (y[rows] == 0)]
        assert rep == pytest.approx(preds[benign].mean())
    # the same resamples as every other section: the ONI FPR of a second classifier pairs with this one
    other = lexical_section(data, 1 - s, context, resampler=resampler)
    assert tagged == ["T", "T"]  # the section's tagging and measure_data's above; the second classifier reuses it
    rows = compare({"lexical": section}, {"lexical": other})["lexical"]["metrics"]
    assert {"fpr.noi", "fpr.oni"} <= set(rows) and "fpr.aae" not in rows
    assert rows["fpr.noi"]["difference"].value == pytest.approx(other["fpr"]["noi"].value - noi.value)
    assert np.allclose(rows["fpr.noi"]["difference"].reps, other["fpr"]["noi"].reps - noi.reps)   # paired
