"""``toxiforge harden-seeds``: harden runs that differ only in --seed, read as one experiment. The reports are built
with harden's own :func:`flip_shares` from placeholder statements, so they have the layout a run writes (a real
tiny run's report is read in tests/harden/test_harden.py)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from statsmodels.stats.proportion import confint_proportions_2indep
from typer.testing import CliRunner

from toxiforge.attacks.validation import flip_shares
from toxiforge.cli import app
from toxiforge.data.examples import Example
from toxiforge.errors import InputError
from toxiforge.harden import report as harden_report
from toxiforge.harden import seeds as harden_seeds
from toxiforge.harden.report import MIN_AUC_SPAN, auc_limits
from toxiforge.harden.seeds import SEEDS_JSON, SEEDS_MD, SEEDS_PNG, _series, combine, markdown

EXAMPLES = [Example(f"placeholder statement {i}", i % 2) for i in range(4)]  # two toxic, two benign prompts


def measure(flips: int, agree: int, auc: float, added: int = 0) -> dict:
    """A round's metrics: ``flips`` of the 4 statements flipped, the validator agrees on the first ``agree``."""
    flipped = [i < flips for i in range(4)]
    validated = [float(e.label) if i < agree else 1.0 - e.label for i, e in enumerate(EXAMPLES)]
    return {"flip_rate": flip_shares(EXAMPLES, flipped, validated),
            "transfer": flip_shares(EXAMPLES, [True, False, False, False], validated),
            "eval": {"human": {"auc": auc, "auc_interval": [auc - 0.05, auc + 0.05], "fpr_noi": 0.25,
                               "noi_benign": 40}},
            "added_this_round": added}


def write_run(folder, seed: int, rounds: list[tuple[dict, dict]], **settings) -> str:
    """A finished harden run's report.json: round 0 (both arms the start), then (alice, control) per round."""
    folder.mkdir(parents=True)
    base = {"attack": {"groups": ["asian"], "per_cell": 2, "seed": seed}, "train": {"epochs": 1, "seed": seed},
            "add": "flipped", "init": "base", "validate_with": "validator", **settings}
    report = {"settings": base, "rounds": [{"alice": a, "control": c} for a, c in rounds]}
    (folder / "report.json").write_text(json.dumps(report))
    return str(folder)


@pytest.fixture
def two_runs(tmp_path):
    start = measure(4, 4, 0.80)
    a = write_run(tmp_path / "s1", 1, [(start, start), (measure(2, 4, 0.85, 3), measure(4, 4, 0.84, 3)),
                                       (measure(1, 4, 0.86, 2), measure(3, 4, 0.88, 2))])
    b = write_run(tmp_path / "s2", 2, [(start, start), (measure(3, 4, 0.83, 4), measure(4, 4, 0.86, 4))])
    return a, b


def test_flip_shares_pool_every_runs_statements_and_keep_each_runs_value(two_runs):
    combined = combine(two_runs)
    assert combined["rounds"] == 2 and combined["seeds"] == [1, 2]  # the fewest rounds any run has
    assert combined["headline"] == "confirmed"  # a validated run's headline is the confirmed flip rate
    alice1 = next(row for row in combined["table"] if row["round"] == 1 and row["arm"] == "alice")
    confirmed = alice1["flips"]["confirmed"]
    assert confirmed["per_run"] == [0.5, 0.75]
    assert confirmed["pooled"]["value"] == pytest.approx(5 / 8) and confirmed["pooled"]["n"] == 8
    assert confirmed["pooled"]["low"] <= 5 / 8 <= confirmed["pooled"]["high"]
    assert alice1["eval"]["human"]["auc"]["mean"] == pytest.approx(0.84)
    assert alice1["added"]["mean"] == pytest.approx(3.5)
    assert [row["arm"] for row in combined["table"]] == ["start", "alice", "control"]


def test_changes_per_run_from_round_zero_and_against_the_control(two_runs):
    change = combine(two_runs)["changes"][0]
    assert change["alice_minus_round0"]["per_run"] == pytest.approx([-0.5, -0.25])
    assert change["alice_minus_round0"]["mean"] == pytest.approx(-0.375)
    assert change["alice_minus_control"]["per_run"] == pytest.approx([-0.5, -0.25])
    assert change["auc_alice_minus_control:human"]["per_run"] == pytest.approx([0.01, -0.03])
    # over the runs: the mean with a Student t interval (2 runs: 1 degree of freedom, t = 12.706)
    half = 12.7062047 * 0.25 / math.sqrt(2) / math.sqrt(2)  # t * s.d. / sqrt(runs); s.d. of (-0.5, -0.25) = 0.25/sqrt 2
    over = change["alice_minus_control"]["over_runs"]
    assert over["runs"] == 2 and over["value"] == pytest.approx(-0.375)
    assert (over["low"], over["high"]) == pytest.approx((-0.375 - half, -0.375 + half))
    text = markdown(combine(two_runs))
    assert ("| 1 | -37.5 [-196.3, +121.3] (-50.0, -25.0) | -37.5 [-196.3, +121.3] (-50.0, -25.0) "
            "| -0.010 [-0.264, +0.244] (+0.010, -0.030) |") in text
    assert "ALICE arm minus the control arm on the same prompts" not in text  # these runs have no paired comparison


def test_paired_arm_comparisons_pool_over_runs_with_a_t_interval(tmp_path):
    """Runs whose ALICE arm recorded harden.arms' prompt-by-prompt comparison: each run's paired difference is kept
    with its interval and the runs' mean gets a t interval; a run without one is left out of the mean."""
    start = measure(4, 4, 0.80)
    versus = [{"prompts": 40, "flip": {"value": -0.20, "low": -0.35, "high": -0.05},
               "confirmed": {"value": -0.10, "low": -0.20, "high": 0.00}},
              {"prompts": 38, "flip": {"value": -0.10, "low": -0.25, "high": 0.05},
               "confirmed": {"value": -0.30, "low": -0.45, "high": -0.15}},
              None]
    runs = []
    for seed, v in zip((0, 1, 2), versus):
        alice = measure(2, 4, 0.85, 3) | ({"versus_control": v} if v else {})
        runs.append(write_run(tmp_path / f"s{seed}", seed, [(start, start), (alice, measure(4, 4, 0.84, 3))]))
    paired = combine(runs)["changes"][0]["paired_alice_minus_control"]
    assert paired["prompts"] == [40, 38, None]
    assert paired["flip"]["per_run"] == [versus[0]["flip"], versus[1]["flip"], None]
    flip = paired["flip"]["over_runs"]
    assert flip["runs"] == 2 and flip["value"] == pytest.approx(-0.15)
    half = 12.7062047 * (0.1 / math.sqrt(2)) / math.sqrt(2)
    assert (flip["low"], flip["high"]) == pytest.approx((-0.15 - half, -0.15 + half))
    assert paired["confirmed"]["over_runs"]["value"] == pytest.approx(-0.20)
    text = markdown(combine(runs))
    assert "| round | flip rate | mean over the runs [t 95%] | seed 0 | seed 1 | seed 2 |" in text
    assert "| 1 | flip | -15.0 [-78.5, +48.5] | -20.0 [-35.0, -5.0] | -10.0 [-25.0, +5.0] | - |" in text
    assert "| 1 | confirmed | -20.0 [-147.1, +107.1] | -10.0 [-20.0, +0.0] | -30.0 [-45.0, -15.0] | - |" in text


def test_a_confirmed_share_where_the_validator_agrees_with_none(tmp_path):
    """The confirmed rate counts flips the validator agrees with: none agree, so none is confirmed."""
    start = measure(4, 0, 0.8)
    runs = [write_run(tmp_path / f"s{s}", s, [(start, start), (measure(4, 0, 0.8), measure(4, 0, 0.8))])
            for s in (1, 2)]
    row = combine(runs)["table"][1]
    assert row["flips"]["confirmed"]["pooled"]["value"] == 0.0
    assert row["flips"]["attack"]["pooled"]["value"] == 1.0


def test_runs_with_other_settings_or_the_same_seed_are_refused(tmp_path, two_runs):
    start = measure(4, 4, 0.8)
    other = write_run(tmp_path / "other", 3, [(start, start)], add="all")
    with pytest.raises(InputError, match="add differ.*not one experiment"):
        combine([two_runs[0], other])
    same = write_run(tmp_path / "same", 1, [(start, start)])
    with pytest.raises(InputError, match="share a seed"):
        combine([two_runs[0], same])
    with pytest.raises(InputError, match="needs two or more"):
        combine([two_runs[0]])
    with pytest.raises(InputError, match="no such directory"):
        combine([two_runs[0], str(tmp_path / "missing")])
    (tmp_path / "unfinished").mkdir()
    with pytest.raises(InputError, match="not a finished harden run.*--resume"):
        combine([two_runs[0], str(tmp_path / "unfinished")])


def test_cli_prints_the_tables_and_writes_them(tmp_path, two_runs):
    result = CliRunner().invoke(app, ["harden-seeds", *two_runs, "-o", str(tmp_path / "out")],
                                env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "read over seeds" in result.output and "ALICE arm minus round 0" in result.output
    assert json.loads((tmp_path / "out" / SEEDS_JSON).read_text())["seeds"] == [1, 2]
    assert (tmp_path / "out" / SEEDS_MD).read_text().startswith("# toxiforge harden, read over seeds")
    assert (tmp_path / "out" / SEEDS_PNG).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_series_start_both_arms_at_round_zero(two_runs):
    combined = combine(two_runs)
    middle, runs = _series(combined, "alice", "confirmed")
    assert middle == pytest.approx([100.0, 62.5])  # pooled: round 0 (the start), then the ALICE arm of round 1
    assert runs == [pytest.approx([100.0, 50.0]), pytest.approx([100.0, 75.0])]  # per run
    assert _series(combined, "control", "confirmed")[0] == pytest.approx([100.0, 100.0])
    assert _series(combined, "alice", "auc:human")[0] == pytest.approx([0.80, 0.84])


# --- the AUC panels of harden's report.png and of harden-seeds.png ---------------------------------------------


def figure_panels(monkeypatch, module, draw) -> dict[str, Any]:
    """The panels, by title, of the figure that ``draw()`` saves through ``module.save_round_figure``."""
    panels: dict[str, Any] = {}
    real = module.save_round_figure

    def keep_axes(fig, axes, titles, x, path):
        panels.update(zip(titles, axes))
        return real(fig, axes, titles, x, path)

    monkeypatch.setattr(module, "save_round_figure", keep_axes)
    draw()
    return panels


def auc_axes(monkeypatch, module, draw) -> Any:
    """The ROC AUC panel of the figure that ``draw()`` saves through ``module.save_round_figure``."""
    return next(ax for title, ax in figure_panels(monkeypatch, module, draw).items() if title.startswith("ROC AUC"))


def test_auc_limits_hold_the_intervals_and_span_at_least_the_minimum():
    assert MIN_AUC_SPAN == 0.1
    low, high = auc_limits([0.471, 0.467])  # a 0.004 change is not drawn as the axis' whole height
    assert high - low == pytest.approx(0.1) and (low + high) / 2 == pytest.approx(0.469)
    low, high = auc_limits([0.5, None], [[0.3, 0.7], None])  # a wider interval widens the axis
    assert low <= 0.3 and high >= 0.7
    assert auc_limits([0.99, 1.0]) == pytest.approx((0.9, 1.0))  # moved inside [0, 1], not narrowed
    assert auc_limits([0.0, 0.02]) == pytest.approx((0.0, 0.1))
    assert auc_limits([None]) == (0.0, 1.0)


def test_report_png_draws_auc_intervals_on_an_axis_that_holds_them(tmp_path, monkeypatch):
    start = measure(4, 4, 0.471)  # intervals: AUC ± 0.05 (measure)
    rounds = [{"alice": start, "control": start}, {"alice": measure(2, 4, 0.467), "control": measure(4, 4, 0.470)}]
    ax = auc_axes(monkeypatch, harden_report, lambda rounds=rounds: harden_report.plot(rounds, tmp_path / "report.png"))
    low, high = ax.get_ylim()
    assert high - low >= MIN_AUC_SPAN
    assert low <= 0.467 - 0.05 and high >= 0.471 + 0.05  # every interval is inside the axis
    assert len(ax.collections) == 2  # one interval band per arm
    assert (tmp_path / "report.png").read_bytes()[:4] == b"\x89PNG"


def test_report_draws_fnr_and_says_calibrated_rounds_hold_fpr_noi(tmp_path, monkeypatch):
    """FNR per round in report.md and report.png; a calibrated run's FPR_NOI panel says it is held at round 0's,
    an uncalibrated one's does not; rounds recorded before FNR was show none."""
    def with_fnr(m: dict, fnr: float | None, calibrated: bool = False) -> dict:
        m = json.loads(json.dumps(m))
        m["eval"]["human"] |= {} if fnr is None else {"fnr": fnr}
        return m | ({"calibration": {"threshold": 0.7}} if calibrated else {})

    start = with_fnr(measure(4, 4, 0.6), 0.40)
    for calibrated in (True, False):
        rounds = [{"alice": start, "control": start},
                  {"alice": with_fnr(measure(2, 4, 0.65), 0.55, calibrated),
                   "control": with_fnr(measure(4, 4, 0.62), None, calibrated)}]
        panels = figure_panels(monkeypatch, harden_report,
                               lambda rounds=rounds: harden_report.plot(rounds, tmp_path / "report.png"))
        fnr = next(ax for title, ax in panels.items() if title.startswith("FNR"))
        alice = fnr.get_lines()[0].get_ydata()
        assert list(alice) == pytest.approx([40.0, 55.0])
        assert math.isnan(fnr.get_lines()[1].get_ydata()[1])  # the control round recorded no FNR
        noi = next(title for title in panels if title.startswith("FPR_NOI"))
        assert ("held at round 0's" in noi) == calibrated
        report = harden_report.markdown({"settings": {"attack": {"per_cell": 2, "groups": ["asian"],
                                                                 "labels": ["toxic", "benign"]},
                                                      "add": "flipped", "init": "base"}, "rounds": rounds})
        assert "FNR % human" in report and "| 55.0" in report
        assert ("FPR_NOI stays at round 0's" in report) == calibrated
    old = [{"alice": measure(4, 4, 0.6), "control": measure(4, 4, 0.6)}] * 2  # recorded before FNR was
    panels = figure_panels(monkeypatch, harden_report, lambda: harden_report.plot(old, tmp_path / "report.png"))
    assert not any(title.startswith("FNR") for title in panels)  # no empty panel


def test_harden_seeds_png_draws_auc_on_an_axis_of_at_least_the_minimum_span(tmp_path, monkeypatch):
    start = measure(4, 4, 0.471)
    runs = [write_run(tmp_path / f"s{seed}", seed, [(start, start), (measure(2, 4, auc), measure(4, 4, auc + 0.001))])
            for seed, auc in ((1, 0.467), (2, 0.469))]
    ax = auc_axes(monkeypatch, harden_seeds, lambda: harden_seeds.plot(combine(runs), tmp_path / "seeds.png"))
    low, high = ax.get_ylim()
    assert high - low == pytest.approx(MIN_AUC_SPAN) and low < 0.467 and high > 0.471


def with_families(m: dict, obfuscate_flips: int, substitute_flips: int, spell: float) -> dict:
    """``m`` plus the held-out families' flip rates (of the 4 placeholder statements, validator agreeing with all)
    and a HateCheck set's spell_* accuracy, in the layout harden's report writes."""
    validated = [float(e.label) for e in EXAMPLES]
    m = json.loads(json.dumps(m))
    m["attacks"] = {f: {"held_out": f == "substitute", "sources": 4, "left_out": 0,
                        "flip_rate": flip_shares(EXAMPLES, [i < k for i in range(4)], validated)}
                    for f, k in (("obfuscate", obfuscate_flips), ("substitute", substitute_flips))}
    m["eval"]["hc"] = {"auc": 0.7, "auc_interval": None, "fpr_noi": None, "noi_benign": 0,
                       "spell_accuracy": {"value": spell, "low": spell - 0.1, "high": spell + 0.1, "n": 10}}
    return m


def test_families_and_spell_accuracy_pool_over_seeds(tmp_path):
    """Each family's flip rate pooled over the runs per round and arm, its change from round 0 and against the
    control as a pooled difference with an interval and per run, and the spell_* accuracy's mean per round."""
    start = with_families(measure(4, 4, 0.8), 4, 2, 0.5)
    runs = [write_run(tmp_path / f"s{seed}", seed, [
        (start, start), (with_families(measure(2, 4, 0.85), a, s, sp), with_families(measure(4, 4, 0.84), 4, 2, 0.5))])
        for seed, a, s, sp in ((1, 1, 1, 0.7), (2, 2, 2, 0.6))]
    fam = combine(runs)["families"]
    assert fam["families"] == ["obfuscate", "substitute"] and fam["kinds"] == ["all", "confirmed"]
    alice1 = next(r for r in fam["table"] if r["round"] == 1 and r["arm"] == "alice")
    assert alice1["families"]["obfuscate"]["all"]["per_run"] == [0.25, 0.5]
    assert alice1["families"]["obfuscate"]["all"]["pooled"]["value"] == pytest.approx(3 / 8)
    assert alice1["spell_accuracy"]["hc"]["mean"] == pytest.approx(0.65)
    change = next(c for c in fam["changes"] if c["family"] == "obfuscate" and c["kind"] == "all")
    assert change["alice_minus_round0"]["value"] == pytest.approx(3 / 8 - 1)
    assert change["alice_minus_round0"]["low"] <= 3 / 8 - 1 <= change["alice_minus_round0"]["high"]
    # Newcombe's interval of 3/8 minus 8/8 (statsmodels'), not a bootstrap that holds round 0's 8/8 fixed
    newcombe = confint_proportions_2indep(3, 8, 8, 8, method="newcomb", compare="diff")
    assert (change["alice_minus_round0"]["low"], change["alice_minus_round0"]["high"]) == pytest.approx(newcombe)
    assert change["alice_minus_round0_per_run"] == pytest.approx([-0.75, -0.5])
    held = next(c for c in fam["changes"] if c["family"] == "substitute" and c["kind"] == "confirmed")
    assert held["held_out"] and held["alice_minus_control_per_run"] == pytest.approx([-0.25, 0.0])
    text = markdown(combine(runs))
    assert "## Attack families and HateCheck spell_* accuracy" in text
    assert "| 1 | obfuscate (trained) | all | -62.5 [" in text and "| -75.0, -50.0 |" in text
