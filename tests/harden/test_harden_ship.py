"""Issue 55, item 2: harden ships a round only beyond noise. Its ROC AUC gain over round 0's reference on the guard
slice must clear --ship-margin with the lower end of an interval simultaneous over every candidate (a max-statistic
bootstrap), its error rates (benign ones and FNR) must be shown not to rise beyond --fpr-tolerance, and a slice too
small to detect the margin is refused. Fixed score arrays through the real paired check (no training); placeholder
text."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from toxiforge.data.examples import Example, LabeledData
from toxiforge.errors import InputError
from toxiforge.harden.decide import DEFAULT_SHIP_MARGIN, check_decision_sets, detectable_rates
from toxiforge.harden.guardset import GUARD_SET, REFERENCE, GuardCheck, Tolerance, split_guard
from toxiforge.harden.ship import recommend

from .test_harden import harden
from .test_harden_guard import Fixed

ARMS = ("alice", "control")

MARGIN = 0.01  # the margin these tests ask for (the default is 0: better beyond noise)


def guard_slice(n: int = 300) -> LabeledData:
    return LabeledData(GUARD_SET, [Example(f"placeholder row {i}", i % 2, "asian") for i in range(n)], "test", "test")


def logits(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    """Labels, the reference's logits (a signal plus noise: ROC AUC about 0.7) and the generator for more."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 2
    return y, 1.2 * (2 * y - 1) + rng.normal(0, 1.5, n), rng


def scores(data: LabeledData, x: np.ndarray) -> dict[str, float]:
    return dict(zip(data.texts, (1 / (1 + np.exp(-x))).tolist()))


def checked(tmp_path: Path, data: LabeledData, ref: np.ndarray, rounds: list[tuple[np.ndarray, np.ndarray]],
            margin: float = MARGIN) -> GuardCheck:
    """The paired check of each round (alice, control logits) against the reference on the slice, as the loop runs
    it (C_0 trained on the slice: the reference is round-0-retrained)."""
    from toxiforge.audit.run import AuditSettings

    specs = {"c0": scores(data, ref + 0.5), "ref": scores(data, ref)}
    for r, pair in enumerate(rounds, 1):
        specs |= {f"r{r}-{arm}": scores(data, x) for arm, x in zip(ARMS, pair)}
    guard = GuardCheck(tmp_path, Tolerance(margin=margin), AuditSettings(resume=True),
                       lambda spec, **_: Fixed(specs[spec]), start="c0", reference="ref")
    for r in range(1, len(rounds) + 1):
        guard.check(r, {arm: f"r{r}-{arm}" for arm in ARMS}, [], data)
    return guard


def test_a_gain_smaller_than_the_margin_is_not_shipped(tmp_path):
    """A round better than the reference beyond noise (its paired interval above 0), but by less than the margin:
    the old rule shipped the best ROC AUC above round 0's; now C_0 ships, and why says by how much it fell short."""
    data = guard_slice()
    y, ref, _ = logits(len(data), 5)
    slight = ref + 0.08 * y    # every toxic row a little higher: a small, sure gain
    guard = checked(tmp_path, data, ref, [(slight, ref)])
    gain = guard.results[1]["sets"][GUARD_SET]["arms"]["round-1-alice"]["roc_auc"]["difference"]
    assert 0 < gain["low"] and gain["value"] < MARGIN
    ship = recommend(guard, 1, ARMS, [], data)
    assert ship["name"] == "C_0" and ship["reference"] == REFERENCE
    assert "round-1-alice: ROC AUC +0.00" in ship["why"] and "needs > +0.010 margin: short by 0.0" in ship["why"]
    alice = next(c for c in ship["candidates"] if c["name"] == "round-1-alice")
    assert not alice["ships"] and alice["gain"]["low"] < MARGIN


def test_the_best_of_eight_rounds_as_good_as_the_reference_is_not_shipped(tmp_path):
    """Four rounds of two arms, each the reference's signal with noise of its own (as good as the reference): by
    chance one's naive paired interval lies above the margin (+0.067 [+0.012, ...]), and the old rule shipped it. Its
    lower end simultaneous over the eight is below 0: C_0 ships."""
    data = guard_slice()
    y, ref, rng = logits(len(data), 33)
    signal = 1.2 * (2 * y - 1)
    draws = [signal + rng.normal(0, 1.5, len(data)) for _ in range(8)]
    guard = checked(tmp_path, data, ref, [(draws[2 * i], draws[2 * i + 1]) for i in range(4)])
    naive = {name: row["roc_auc"]["difference"] for r, check in guard.results.items()
             for name, row in check["sets"][GUARD_SET]["arms"].items()}
    lucky = max(naive, key=lambda k: naive[k]["low"])
    assert naive[lucky]["low"] > MARGIN  # a per-candidate interval would ship it
    assert not any(p for check in guard.results.values() for p in check["problems"])
    ship = recommend(guard, 4, ARMS, [], data)
    assert ship["name"] == "C_0" and len(ship["candidates"]) == 8
    chosen = next(c for c in ship["candidates"] if c["name"] == lucky)
    assert chosen["gain"]["value"] == pytest.approx(naive[lucky]["value"]) and chosen["gain"]["low"] < 0
    assert f"best ranked: {lucky}: ROC AUC +0.06" in ship["why"]


def test_a_clearly_better_round_is_shipped(tmp_path, capsys):
    data = guard_slice()
    y, ref, _ = logits(len(data), 5)
    better = ref + 1.0 * (2 * y - 1)   # ranks better, and calls fewer benign rows toxic
    guard = checked(tmp_path, data, ref, [(ref, better)])
    ship = recommend(guard, 1, ARMS, [], data)
    assert ship["name"] == "round-1-control" and ship["folder"] == "r1-control"
    control = next(c for c in ship["candidates"] if c["name"] == "round-1-control")
    assert control["ships"] and control["gain"]["low"] > MARGIN and control["short"] == []
    assert ship["why"].startswith("ROC AUC +0.09") and "simultaneous lower end +0.0" in ship["why"]
    assert 0 < ship["detectable"]["roc_auc"] < 0.1 and "round-0-retrained's 95% ROC AUC interval" in \
        ship["detectable"]["what"]


def test_a_better_auc_with_fpr_up_beyond_the_tolerance_is_not_shipped(tmp_path):
    """ROC AUC clearly up, FPR up +0.047 [+0.014, +0.084]: not found worse (the interval is not wholly beyond the
    2-point tolerance), so the old rule shipped it; a rise beyond the tolerance is not ruled out, so it is not
    shipped now."""
    data = guard_slice()
    y, ref, _ = logits(len(data), 5)
    trades = ref + 1.0 * y + 0.15      # toxic rows ranked higher, and every row pushed toward toxic
    guard = checked(tmp_path, data, ref, [(trades, ref)])
    rows = guard.results[1]["sets"][GUARD_SET]["arms"]["round-1-alice"]
    assert rows["roc_auc"]["difference"]["low"] > 0.03 and not rows["fpr"]["worse"]
    assert rows["fpr"]["difference"]["low"] < 0.02 < rows["fpr"]["difference"]["high"]
    ship = recommend(guard, 1, ARMS, [], data)
    assert ship["name"] == "C_0"
    assert "round-1-alice: FPR on guard-slice +0.047, upper end +0.08" in ship["why"]
    assert "needs <= +0.02: over by 0.06" in ship["why"]


def test_a_better_auc_with_fnr_up_beyond_the_tolerance_is_not_shipped(tmp_path):
    """The mirror trade: benign rows ranked lower (ROC AUC clearly up, FPR down) and every row pushed toward benign,
    FNR +0.020 [+0.000, +0.045]: not found worse, and the rule that checked benign errors only shipped it; a rise in
    missed toxic rows beyond the tolerance is not ruled out, so it is not shipped now."""
    data = guard_slice()
    y, ref, _ = logits(len(data), 5)
    trades = ref - 1.2 * (1 - y) - 0.25
    guard = checked(tmp_path, data, ref, [(trades, ref)])
    rows = guard.results[1]["sets"][GUARD_SET]["arms"]["round-1-alice"]
    assert rows["roc_auc"]["difference"]["low"] > 0.05 and rows["fpr"]["difference"]["high"] < 0
    assert not rows["fnr"]["worse"] and rows["fnr"]["difference"]["low"] < 0.02 < rows["fnr"]["difference"]["high"]
    ship = recommend(guard, 1, ARMS, [], data)
    assert ship["name"] == "C_0"
    assert "round-1-alice: FNR on guard-slice +0.020, upper end +0.04" in ship["why"]
    assert "needs <= +0.02: over by 0.02" in ship["why"]


def test_the_slice_says_what_error_rate_change_it_detects_and_how_few_rows_a_round_may_change(tmp_path):
    """FPR and FNR: the reference's Wilson half-width on the slice's benign / toxic rows, and the benign rows a round
    may classify otherwise and still show its FPR not up beyond the tolerance ((0.02 × 150 / 1.96)² = 2.3: two).
    A round far better on ROC AUC that moves 12 benign decisions (6 each way, FPR unchanged) is not shipped: its
    paired FPR interval reaches past +0.02, as the count said it would."""
    from statsmodels.stats.proportion import proportion_confint

    data = guard_slice()
    y, ref, _ = logits(len(data), 5)
    benign = np.flatnonzero(y == 0)
    up = [i for i in benign if -1 < ref[i] < 0][:6]      # benign rows the reference lets through, now flagged
    down = [i for i in benign if 0 < ref[i] < 1][:6]     # benign rows it flags, now let through
    moved = ref + 3.0 * y
    moved[up], moved[down] = 3.0, -3.0
    guard = checked(tmp_path, data, ref, [(moved, ref)])
    rates = detectable_rates(guard, data)[data.name]
    fpr = rates["accuracy.fpr"]
    flagged = int(np.sum(ref[benign] > 0))
    low, high = proportion_confint(flagged, 150, method="wilson")
    assert fpr["rows"] == 150 and fpr["value"] == pytest.approx(flagged / 150)
    assert fpr["detectable"] == pytest.approx((high - low) / 2) and fpr["may_differ"] == 2
    assert rates["accuracy.fnr"]["rows"] == 150
    row = guard.results[1]["sets"][GUARD_SET]["arms"]["round-1-alice"]
    assert row["fpr"]["difference"]["value"] == 0 and row["fpr"]["difference"]["high"] > 0.02
    assert row["roc_auc"]["difference"]["low"] > 0.05
    ship = recommend(guard, 1, ARMS, [], data)
    assert ship["name"] == "C_0" and "round-1-alice: FPR on guard-slice +0.000" in ship["why"]
    assert ship["detectable"]["rates"][data.name]["accuracy.fpr"]["may_differ"] == 2
    from toxiforge.harden.ship import _ship_table

    table = "\n".join(_ship_table(ship))
    assert "only when it classifies at most 2 of the 150 benign rows" in table
    widths = sorted((g["high"] - g["low"]) / 2 for c in ship["candidates"] if (g := c["gain"])["high"] > g["low"])
    assert f"simultaneous ROC AUC intervals have half-widths ±{widths[0]:.3f} to ±{widths[-1]:.3f}" in table
    assert f"over {len(widths)} candidate(s), against ±{ship['detectable']['roc_auc']:.3f} predicted" in table
    lines: list[str] = []
    from toxiforge.audit.run import AuditSettings

    logged = GuardCheck(tmp_path, Tolerance(), AuditSettings(resume=True), guard.loader, "c0", "ref", log=lines.append)
    check_decision_sets(logged, data)
    assert any("FPR changes of ±0." in line and "at most 2 of the 150 benign rows" in line for line in lines)
    wider = GuardCheck(tmp_path, Tolerance(rate=0.05), AuditSettings(resume=True), guard.loader, "c0", "ref")
    assert detectable_rates(wider, data)[data.name]["accuracy.fpr"]["may_differ"] == 14   # (0.05 × 150 / 1.96)² = 14.6


def test_a_slice_too_small_to_detect_the_margin_is_refused_naming_guard_slice_size(tmp_path):
    from toxiforge.audit.run import AuditSettings

    data = guard_slice(120)
    _, ref, _ = logits(len(data), 5)
    guard = GuardCheck(tmp_path, Tolerance(margin=0.01), AuditSettings(resume=True),
                       lambda spec, **_: Fixed(scores(data, ref)),
                       start="c0", reference="ref")
    with pytest.raises(InputError, match=r"detects ROC AUC changes of ±0\.\d+ .* more than --ship-margin 0.01") as e:
        check_decision_sets(guard, data)
    assert "--guard-slice-size " in e.value.hint and "120 × (0." in e.value.hint
    need = int(e.value.hint.split("--guard-slice-size ")[1].split()[0])
    assert need > 120 * 4   # the half-width is more than twice the margin
    # a margin the slice can detect, or none (1: no round ships), passes
    wide = GuardCheck(tmp_path, Tolerance(margin=0.2), AuditSettings(resume=True), guard.loader, "c0", "ref")
    assert check_decision_sets(wide, data) is wide and check_decision_sets(guard, None) is guard
    # the default margin (0: a gain shown beyond noise) is never refused by a slice that gives an interval; the run
    # says what the slice can detect
    lines: list[str] = []
    default = GuardCheck(tmp_path, Tolerance(margin=DEFAULT_SHIP_MARGIN), AuditSettings(resume=True), guard.loader,
                         "c0", "ref", log=lines.append)
    assert DEFAULT_SHIP_MARGIN == 0 and check_decision_sets(default, data) is default
    assert any("guard slice: detects ROC AUC changes of ±0." in line for line in lines)
    # and --guard-slice-size sizes the slice (at most half of --data's texts)
    rows = [Example(f"placeholder row {i}", i % 2, "asian") for i in range(1000)]
    assert len(split_guard(rows, 1, size=400)[1]) == 400
    with pytest.raises(InputError, match="--guard-slice-size 600 is outside"):
        split_guard(rows, 1, size=600)


def test_harden_refuses_a_slice_that_cannot_detect_the_margin_before_any_attack(setup, varied_lm, tmp_path):
    """The loop: C_0's recipe retrained on --data less a 4-row slice (the slice's reference), then refused at
    --ship-margin 0.01 with the size that would do, before round 0's attack."""
    out = tmp_path / "h"
    with pytest.raises(InputError, match="more than --ship-margin 0.01") as e:
        harden(setup, out, varied_lm, ship_margin=0.01)
    assert "--guard-slice-size" in e.value.hint and (out / "round-0" / "reference" / "model").is_dir()
    assert not (out / "round-0" / "attack").exists()


def test_without_a_slice_the_eval_sets_are_sized_for_the_decision(tmp_path):
    """--no-guard-slice with --eval: the eval sets decide, so they are sized as the slice is. Before any attack the
    run says what each set detects of FPR / FNR and how few benign rows a round may classify otherwise than C_0
    ((0.02 × 150 / 1.96)² = 2.3: two); a --ship-margin they cannot detect is refused, naming the rows that would do
    and a guard slice; the ship rule's record says the same."""
    from toxiforge.audit.run import AuditSettings

    # every fourth row names a group: 75 of the 150 benign rows are FPR_NOI's
    hc = LabeledData("hc", [Example(f"placeholder case {i}" + (" about asian people" if i % 4 == 0 else ""), i % 2,
                                    "asian") for i in range(300)], "test", "test")
    _, ref, _ = logits(len(hc), 5)
    lines: list[str] = []
    guard = GuardCheck(tmp_path, Tolerance(), AuditSettings(resume=True), lambda spec, **_: Fixed(scores(hc, ref)),
                       "c0", "c0", log=lines.append)
    assert check_decision_sets(guard, None, [hc]) is guard
    assert any(line.startswith("decision sets: hc detects FPR changes of ±0.") and "at most 2 of the 150 benign rows"
               " and 0 of the 75 benign rows naming a group and 2 of the 150 toxic rows otherwise" in line
               for line in lines)
    assert any(line.startswith("decision sets: detect ROC AUC changes of ±0.") and "the eval set(s) hc (300 rows"
               in line for line in lines)
    rates = detectable_rates(guard, None, [hc])
    assert set(rates) == {"hc"} and rates["hc"]["accuracy.fpr"]["rows"] == 150
    assert rates["hc"]["lexical.fpr.noi"]["rows"] == 75   # (0.02 × 75 / 1.96)² = 0.6: none
    assert rates["hc"]["lexical.fpr.noi"]["may_differ"] == 0
    strict = GuardCheck(tmp_path, Tolerance(margin=0.01), AuditSettings(resume=True), guard.loader, "c0", "c0")
    with pytest.raises(InputError, match=r"the decision sets detect ROC AUC changes of ±0\.\d+ .*more than "
                                         r"--ship-margin 0.01") as e:
        check_decision_sets(strict, None, [hc])
    assert "eval sets of about " in e.value.hint and "300 × (0." in e.value.hint
    assert "--guard-slice-size " in e.value.hint
    assert check_decision_sets(strict, None, []) is strict   # nothing decides: nothing to size
    benign = LabeledData("benign", [e for e in hc.examples if e.label == 0], "test", "test")
    lines.clear()  # an eval set of one label gives no ROC AUC: the run goes on, saying no round can ship
    assert check_decision_sets(guard, None, [benign]) is guard
    assert any("no ROC AUC interval" in line and "C_0 will ship" in line for line in lines)
    ship = recommend(guard, 1, ARMS, [hc], None)
    assert ship["detectable"]["rates"]["hc"]["accuracy.fpr"]["may_differ"] == 2
    assert "the eval set(s) hc (300 rows" in ship["detectable"]["what"]
