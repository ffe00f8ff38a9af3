"""toxiforge.intervals: proportions get a Wilson interval that does not collapse at 0 and 1 (statsmodels'), the
audit's proportion metrics keep their bootstrap replicates for pairing while showing Wilson's interval, and small
n is marked."""

from __future__ import annotations

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from toxiforge.intervals import (
    SMALL_N,
    SMALL_N_MARK,
    Estimate,
    Proportion,
    Resampler,
    Share,
    interval_cell,
    mean_over_runs,
    paired_difference,
    points_cell,
    pooled_share,
    proportion,
    proportion_interval,
    share_difference,
    simultaneous_differences,
)


def test_no_success_and_all_successes_have_an_interval_that_is_not_a_point():
    none = proportion([0] * 22)     # an FPR of 0 on 22 benign rows
    assert none.value == 0.0 and none.low == 0.0 and none.high > 0.1
    every = proportion([1] * 100)   # an attack that succeeds on all 100 rows
    assert every.value == 1.0 and every.high == 1.0 and every.low < 0.97
    assert proportion_interval(7, 20) == pytest.approx(proportion_confint(7, 20, alpha=0.05, method="wilson"))
    assert proportion([]).value is None and proportion([True, False]).n == 2
    with pytest.raises(ValueError, match="0/1 outcomes"):
        proportion([0.2, 0.9])


def test_pooled_shares_add_the_counts():
    shares = [Share.of_counts(3, 10).to_dict(), Share.of_counts(0, 5).to_dict()]
    pooled = pooled_share(shares)
    assert pooled == Share.of_counts(3, 15).to_dict() and pooled["high"] > pooled["value"] > pooled["low"]
    assert pooled_share([shares[0], Share.of_counts(0, 0).to_dict()]) is None
    diff = share_difference((30, 100), (10, 100))
    assert diff["value"] == pytest.approx(0.2) and diff["low"] < 0.2 < diff["high"]


# Newcombe (1998), "Interval estimation for the difference between independent proportions: comparison of eleven
# methods", Statistics in Medicine 17:873-890, Table II, method 10 (hybrid score), to his four decimals.
NEWCOMBE_TABLE_II = [((56, 70), (48, 80), (0.0524, 0.3339)), ((9, 10), (3, 10), (0.1705, 0.8090)),
                     ((6, 7), (2, 7), (0.0582, 0.8062)), ((5, 56), (0, 29), (-0.0381, 0.1926)),
                     ((0, 10), (0, 20), (-0.1611, 0.2775)), ((0, 10), (0, 10), (-0.2775, 0.2775)),
                     ((10, 10), (0, 20), (0.6791, 1.0)), ((10, 10), (0, 10), (0.6075, 1.0))]


@pytest.mark.parametrize(("a", "b", "published"), NEWCOMBE_TABLE_II)
def test_share_difference_is_newcombes_hybrid_score_interval(a, b, published):
    diff = share_difference(a, b)
    assert diff["value"] == pytest.approx(a[0] / a[1] - b[0] / b[1])
    assert (diff["low"], diff["high"]) == pytest.approx(published, abs=5e-5)


def test_share_difference_does_not_collapse_at_0_and_1():
    """A binomial bootstrap of each share gave 0/40 - 0/40 the interval [0, 0] and 0/40 - 3/40 [-0.175, 0.0]."""
    none = share_difference((0, 40), (0, 40))
    assert none["value"] == 0.0 and none["low"] == pytest.approx(-0.0876, abs=1e-4) == -none["high"]
    every = share_difference((40, 40), (40, 40))
    assert every["low"] < 0 < every["high"]
    three = share_difference((0, 40), (3, 40))
    assert three["value"] == pytest.approx(-0.075)
    assert (three["low"], three["high"]) == pytest.approx((-0.1986, 0.0255), abs=1e-4)
    assert share_difference((3, 40), (0, 40)) == pytest.approx({"value": 0.075, "low": -0.0255, "high": 0.1986},
                                                               abs=1e-4)   # the sign turns, nothing else
    assert share_difference(None, (0, 40)) is None and share_difference((0, 40), None) is None


def test_a_proportion_metric_shows_wilson_and_keeps_its_replicates_for_pairing():
    benign = np.arange(40) < 22                  # 22 benign rows, none predicted toxic by a
    a = Proportion(np.zeros(40, bool), benign)
    b = Proportion(benign & (np.arange(40) < 5), benign)   # b flags 5 of them
    resampler = Resampler(40, 200, 0)
    est = resampler.estimates({"a": a, "b": b, "auc-like": lambda w: w[:, 0] / w.sum(axis=1)})
    fpr_a, fpr_b = est["a"], est["b"]
    assert fpr_a.value == 0.0 and fpr_a.n == 22 and (fpr_a.low, fpr_a.high) == proportion_interval(0, 22)
    assert fpr_a.high > 0 and np.all(fpr_a.reps == 0)    # the replicates are still the resampled FPRs
    assert fpr_b.value == pytest.approx(5 / 22) and (fpr_b.low, fpr_b.high) == proportion_interval(5, 22)
    diff = paired_difference(fpr_a, fpr_b)               # the paired bootstrap of the difference
    np.testing.assert_allclose(diff.reps, fpr_b.reps - fpr_a.reps)
    assert diff.excludes_zero() and est["auc-like"].n is None
    assert Resampler(40, 0, 0).estimates({"a": a})["a"].low is None   # --bootstrap 0: no intervals


def test_small_n_is_marked_in_cells_and_json():
    small = Estimate.proportion(0, 3)
    assert small.small_n and small.cell().endswith(SMALL_N_MARK) and small.high > 0
    assert small.to_dict() == {"value": 0.0, "low": 0.0, "high": pytest.approx(0.5615, abs=1e-4), "n": 3,
                               "small_n": True}
    large = Estimate.proportion(4, SMALL_N)
    assert not large.small_n and SMALL_N_MARK not in large.cell() and large.to_dict()["small_n"] is False
    assert "n" not in Estimate.of(0.5, None).to_dict() and Estimate.proportion(0, 0).value is None


def test_simultaneous_intervals_are_the_paired_one_for_one_candidate_and_wider_for_many():
    """harden's ship rule (issue 55): intervals that hold for several candidates at once, from the same resamples."""
    from toxiforge.audit.metrics import auc_metric

    rng = np.random.default_rng(1)
    y = np.arange(200) % 2
    ref = 1.2 * (2 * y - 1) + rng.normal(0, 1.5, 200)
    resampler = Resampler(200, 500, 0)
    auc = {k: resampler.estimates({"a": auc_metric(y, x)})["a"] for k, x in
           {"ref": ref, **{f"c{i}": ref + rng.normal(0, 1, 200) for i in range(4)}}.items()}
    one = simultaneous_differences(auc["ref"], {"c0": auc["c0"]})["c0"]
    paired = paired_difference(auc["ref"], auc["c0"])
    assert one.value == pytest.approx(paired.value) and one.low == pytest.approx(paired.low)
    assert one.high == pytest.approx(paired.high)
    many = simultaneous_differences(auc["ref"], {k: v for k, v in auc.items() if k != "ref"})
    assert many["c0"].value == pytest.approx(paired.value) and many["c0"].low < paired.low
    assert many["c0"].high > paired.high


def test_a_difference_of_shares_is_written_in_points():
    assert points_cell({"value": 0.04, "low": -0.012, "high": 0.093}) == "+4.0 [-1.2, +9.3]"
    assert points_cell(share_difference((0, 40), (3, 40))) == "-7.5 [-19.9, +2.5]"
    assert points_cell({"value": -0.195}) == "-19.5"  # no interval: the value alone
    assert points_cell(None) == points_cell({"value": None, "low": None, "high": None}) == "-"


def test_mean_over_runs_is_a_student_t_interval_over_the_seeds():
    """Three seeds' differences: mean +- t(0.975, 2) s.d. / sqrt(3), t = 4.303 (the three-seed noise); runs without
    a value are left out; one run has no interval, runs that agree a zero-width one, none at all gives None."""
    values = [0.011, 0.0, None, 0.0]
    got = mean_over_runs(values)
    known = np.array([0.011, 0.0, 0.0])
    half = 4.30265273 * known.std(ddof=1) / np.sqrt(3)
    assert got["runs"] == 3 and got["value"] == pytest.approx(known.mean())
    assert (got["low"], got["high"]) == pytest.approx((known.mean() - half, known.mean() + half))
    assert got["low"] < 0 < got["high"]  # +1.1 points on one seed of three is within seed noise
    assert mean_over_runs([0.2]) == {"value": 0.2, "low": None, "high": None, "runs": 1}
    assert mean_over_runs([0.2, 0.2, 0.2]) == pytest.approx({"value": 0.2, "low": 0.2, "high": 0.2, "runs": 3})
    assert mean_over_runs([None]) is None and mean_over_runs([]) is None
    wider, usual = mean_over_runs([0.1, 0.2, 0.3], level=0.99), mean_over_runs([0.1, 0.2, 0.3])
    assert wider["high"] - wider["low"] > usual["high"] - usual["low"]


def test_a_difference_is_written_to_three_decimals_beside_its_points_twin():
    assert interval_cell({"value": 0.0323, "low": -0.0839, "high": 0.1484}) == "+0.032 [-0.084, +0.148]"
    assert interval_cell({"value": -0.5, "low": None, "high": None}) == "-0.500"
    assert interval_cell(None) == "-" and interval_cell({"value": None}) == "-"
    over = mean_over_runs([0.011, 0.086, 0.0])
    assert interval_cell(over) == "+0.032 [-0.084, +0.149]"  # the proof's shipped accuracy gains, as rounded in
    assert points_cell(over) == "+3.2 [-8.4, +14.9]"  # its doc (unrounded they give [-0.084, +0.148])
