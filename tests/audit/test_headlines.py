"""One registry of the numbers classifiers are compared on (issue 56, item 2): the comparison, the gate, the
glossary and harden's round check all read toxiforge.audit.headlines, so FPR and FNR at the threshold, which
harden checks, are compared and gateable too, and no second list decides which way is better."""

from __future__ import annotations

import numpy as np

from toxiforge.audit import gate, glossary
from toxiforge.audit.compare import compare
from toxiforge.audit.headlines import HEADLINES, in_section, sections
from toxiforge.audit.metrics import ACCURACY_METRICS, accuracy_section
from toxiforge.harden import guardset
from toxiforge.intervals import Resampler


def test_every_check_of_harden_is_a_headline_and_the_gate_gates_each_of_them():
    assert set(guardset.CHECKS) <= set(HEADLINES)
    assert {"accuracy.fpr", "accuracy.fnr"} <= set(guardset.CHECKS)
    assert gate.METRICS == {k: h.higher_is_better for k, h in HEADLINES.items()}
    assert not HEADLINES["accuracy.fnr"].higher_is_better and HEADLINES["accuracy.roc_auc"].higher_is_better


def test_each_headline_has_words_a_definition_and_a_paper():
    for key, h in HEADLINES.items():
        assert glossary.name(key) == h.short and h.definition and h.source, key
    # every accuracy number the audit computes is compared, FPR and FNR at the threshold among them
    assert list(in_section("accuracy")) == list(ACCURACY_METRICS)
    assert sections() == ["accuracy", "groups", "hatecheck", "lexical", "calibration"]
    bullets = glossary.definitions()
    assert sum(b.startswith("* **FPR**:") for b in bullets) == 1   # the group columns' FPR is the same term


def test_the_comparison_weighs_both_error_rates_at_the_threshold():
    """A candidate that flags nothing: FPR better, FNR worse, so its accuracy section reads mixed, not better."""
    y = np.array([0, 1] * 40)
    base = np.where(y == 1, 0.9, 0.6)             # flags every row: FPR 1, FNR 0
    none = np.where(y == 1, 0.2, 0.1)             # the same ranking, flags nothing: FPR 0, FNR 1
    resampler = Resampler(len(y), 200, 0)
    found = compare({"accuracy": accuracy_section(y, base, resampler)},
                    {"accuracy": accuracy_section(y, none, resampler)})["accuracy"]
    assert found["metrics"]["fpr"]["better"] is True and found["metrics"]["fnr"]["better"] is False
    assert found["verdict"] == "mixed"
