"""The float-noise rule the tests share (tests/floats.py): noise within it passes, a wrong term does not."""

from __future__ import annotations

import pytest

from floats import FLOAT32_EPS, alice_depth, assert_close, assert_same_hypotheses, noise_tolerance
from toxiforge.decoding.beam import Hypothesis


def test_noise_passes_and_a_wrong_term_fails():
    depth = alice_depth(5)  # a 5-token ALICE statement of the 2-layer test Llama
    score = -2.726711082458496
    assert_close([score], [-2.7267112731933594], depth)  # 1.9e-7 apart: what an AMD EPYC's kernels gave
    assert_close([score], [score * (1 + depth * FLOAT32_EPS)], depth)  # one epsilon per rounding, all one way
    for off in (1e-3, 1e-4):
        with pytest.raises(AssertionError, match="apart; float noise"):
            assert_close([score], [score + off], depth)
    assert noise_tolerance(depth) < 1e-4


def test_hypotheses_compare_ids_and_reasons_exactly_and_scores_as_asked():
    a = [[Hypothesis((1, 2), -1.0, "newline")]]
    noisy = [[Hypothesis((1, 2), -1.0 - 2e-7, "newline")]]
    assert_same_hypotheses(a, noisy, depth=alice_depth(2))
    with pytest.raises(AssertionError):
        assert_same_hypotheses(a, noisy)  # exact: the same shapes ran the same kernels
    with pytest.raises(AssertionError):
        assert_same_hypotheses(a, [[Hypothesis((1, 3), -1.0, "newline")]], depth=alice_depth(2))
    with pytest.raises(AssertionError):
        assert_same_hypotheses(a, [[Hypothesis((1, 2), -1.0, "eos")]], depth=alice_depth(2))
    assert_same_hypotheses([[Hypothesis((), float("-inf"), "blocked")]],
                           [[Hypothesis((), float("-inf"), "blocked")]], depth=1)
    with pytest.raises(ValueError, match="depth"):
        noise_tolerance(0)
