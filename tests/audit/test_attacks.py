"""The audit's attack section counts a success with the threshold that selected the rows (issue 48, item 8): a
row flagged at ``--threshold 0.3`` that the classifier scores 0.4 after the attack is still flagged, so it is no
success (before, success was counted at 0.5); the threshold keys the attack cache."""

from __future__ import annotations

import numpy as np

from toxiforge.audit.attacks import AttackCache, attack_record
from toxiforge.classifiers.wrap import CallableClassifier
from toxiforge.data.examples import Example, LabeledData


def test_success_is_counted_at_the_threshold_that_flagged_the_rows(tmp_path):
    rows = [Example(f"placeholder statement number {i}", i % 2) for i in range(8)]
    data = LabeledData("T", rows, layout="table", source="memory")
    originals = set(data.texts)
    # P(toxic) 0.6 for the rows as written, 0.4 for any edited text: an edit lowers the score, not below 0.3
    classifier = CallableClassifier(lambda texts: [0.6 if t in originals else 0.4 for t in texts], name="fake")
    scores = np.full(len(rows), 0.6)
    at_half = attack_record(data, scores, classifier, ["obfuscate"], n=10, seed=0, threshold=0.5)
    assert at_half["rows"] == [1, 3, 5, 7] and all(at_half["outcomes"]["obfuscate"]["success"])  # 0.4 <= 0.5
    at_03 = attack_record(data, scores, classifier, ["obfuscate"], n=10, seed=0, threshold=0.3)
    assert at_03["rows"] == [1, 3, 5, 7]
    assert not any(at_03["outcomes"]["obfuscate"]["success"])  # 0.4 > 0.3: still flagged
    assert at_03["threshold"] == 0.3
    cache = AttackCache(tmp_path)
    assert cache.path("c", "d", ["obfuscate"], 10, 0, 0.3) != cache.path("c", "d", ["obfuscate"], 10, 0, 0.5)
