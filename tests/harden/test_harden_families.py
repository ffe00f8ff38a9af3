"""``harden --attacks`` / ``--eval-attacks`` (issue 36, harden/families.py): the families whose fooling statements
join training, and those measured every round on a fixed held-out set and never trained on. Tiny models and
placeholder text (tests/harden/conftest.py's fixtures)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from typer.testing import CliRunner

from toxiforge.attacks.edits import ZERO_WIDTH_SPACE
from toxiforge.attacks.validation import run_rows
from toxiforge.cli import app
from toxiforge.data.examples import column, read_any_table
from toxiforge.errors import InputError
from toxiforge.harden.data import read_examples

from .test_harden import GROUPS, base_rows, config_for, fold, harden, kept, training_texts, write_table

runner = CliRunner()


@pytest.fixture(scope="module")
def held_eval(setup):
    """An eval set whose toxic rows are not in the training data (the held-out attack set), and a benign row."""
    rows = [(f"placeholder sentence alpha beta {i}", 1, GROUPS[i % 2]) for i in range(5)]
    rows += [(f"placeholder sentence beta alpha {i}", 0, GROUPS[i % 2]) for i in range(5)]
    return write_table(setup["root"] / "held.csv", rows)


def attack_table(run_dir):
    table = read_any_table(run_dir)
    return list(zip(column(table, "generation"), column(table, "source_text"), column(table, "prompt_label"),
                    column(table, "fooled"), column(table, "generation_method")))


class ZeroWidthBlind:
    """The attacked classifier of the training attack, known by hand: every statement scores toxic unless it has a
    zero-width space (obfuscate's zero_width edit), so each edit that inserts one fools it."""

    num_classes, toxic_index, benign_index = 2, 1, 0

    def __init__(self, name: str):
        self.name = name

    def predict_proba(self, texts):
        return np.array([0.1 if ZERO_WIDTH_SPACE in t else 0.9 for t in texts])

    def describe(self):
        return {"name": self.name, "backend": "test"}


@pytest.fixture(scope="module")
def trained_run(setup, varied_lm, held_eval, tmp_path_factory):
    """--attacks obfuscate (alone: ALICE statements do not join), the families attacking :class:`ZeroWidthBlind`
    (the rounds' classifiers are trained and measured as always)."""
    from toxiforge.harden import families

    out = tmp_path_factory.mktemp("families") / "h"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(families, "load_attacked", lambda classifier, device, name, options: ZeroWidthBlind(name))
        job = harden(setup, out, varied_lm, attacks=("obfuscate",), transfer=False,
                     eval=(f"held=table:{held_eval}",))
    return job, out


@pytest.fixture(scope="module")
def held_run(setup, varied_lm, held_eval, tmp_path_factory):
    out = tmp_path_factory.mktemp("families") / "h"
    job = harden(setup, out, varied_lm, eval_attacks=("obfuscate",), transfer=False, eval=(f"held=table:{held_eval}",))
    return job, out


def test_attacks_obfuscate_adds_its_fooling_statements_to_training(setup, trained_run):
    """--attacks obfuscate: toxic rows of --data, as many as round 0's ALICE attack has kept toxic-prompt
    statements, are obfuscated against C_0; those that fooled it (and are new: not a source left as it was) join
    the ALICE arm with the toxic label, and nothing else (alice is not in --attacks); the control arm adds as many
    top-k statements per label."""
    _, out = trained_run
    run = out / "round-1" / "alice" / "train-obfuscate"
    rows = attack_table(run)
    alice = {fold(e.text) for e, _ in run_rows(out / "round-0" / "attack", "ALICE")}
    round0 = kept(run_rows(out / "round-0" / "attack", "ALICE"), training_texts(setup))  # the kept statements
    toxic_alice = [e.text for e, _ in round0 if e.label == 1]
    with setup["data"].open() as f:
        toxic_data = {r["text"] for r in csv.DictReader(f) if r["label"] == "1"}
    sources = [source for _, source, _, _, _ in rows]
    assert len(sources) == len(set(sources)) == min(len(toxic_alice), len(toxic_data)) > 0
    assert set(sources) <= toxic_data  # rows of --data the classifier was trained on, never an eval row
    assert all(label == 1 and method == "obfuscate" for _, _, label, _, method in rows)
    expected = sorted({text for text, _, _, fooled, _ in rows if fooled and fold(text) not in alice})
    added = read_examples(out / "round-1" / "alice" / "added.jsonl")
    assert sorted(e.text for e in added) == expected
    assert all(e.label == 1 and e.method == "obfuscate" for e in added)
    assert added and all(ZERO_WIDTH_SPACE in e.text for e in added)  # the edits that fooled it
    control = read_examples(out / "round-1" / "control" / "added.jsonl")
    assert sorted(e.label for e in control) == sorted(e.label for e in added)
    metrics = json.loads((out / "round-1" / "metrics.json").read_text())
    assert metrics["alice"]["added_by_method"] == ({"obfuscate": len(added)} if added else {})
    log = json.loads((out / "round-1" / "alice" / "model" / "training_log.json").read_text())
    assert log["train"]["n"] == base_rows(out) + len(added)
    # a trained family is measured on the held-out set too, marked as trained
    assert metrics["alice"]["attacks"]["obfuscate"]["held_out"] is False


def test_eval_attacks_measures_every_round_and_arm_and_never_trains(setup, held_run, held_eval):
    """--eval-attacks obfuscate: each round's classifier of each arm is attacked on the same toxic --eval rows; the
    flip rate is the share of attacked statements it gets wrong, with its interval; none of them is trained on."""
    job, out = held_run
    sources = sorted(f"placeholder sentence alpha beta {i}" for i in range(5))
    runs = [out / "round-0" / "attacks" / "obfuscate"] + [out / "round-1" / arm / "attacks" / "obfuscate"
                                                          for arm in ("alice", "control")]
    attacked: set[str] = set()
    for r, arm, run in ((0, "alice", runs[0]), (1, "alice", runs[1]), (1, "control", runs[2])):
        rows = attack_table(run)
        assert sorted(source for _, source, _, _, _ in rows) == sources  # the same set every round and arm
        attacked |= {fold(text) for text, _, _, _, _ in rows}
        entry = json.loads((out / f"round-{r}" / "metrics.json").read_text())[arm]["attacks"]["obfuscate"]
        assert entry["held_out"] is True and entry["sources"] == 5
        share = entry["flip_rate"]["all"]
        assert share["n"] == 5 and share["value"] == pytest.approx(sum(f for _, _, _, f, _ in rows) / 5)
        assert share["low"] <= share["value"] <= share["high"]
    for arm in ("alice", "control"):
        added = read_examples(out / "round-1" / arm / "added.jsonl")
        assert not attacked & {fold(e.text) for e in added}  # never trained on
    report = (out / "report.md").read_text()
    assert "obfuscate (held out) flip %" in report
    assert "round-0/attacks/obfuscate" not in json.loads((out / "report.json").read_text())["settings"]


def test_held_out_attacks_resume_without_rework(setup, varied_lm, held_run, held_eval, tmp_path):
    import shutil

    _, done = held_run
    out = tmp_path / "h"
    shutil.copytree(done, out)
    again = harden(setup, out, varied_lm, resume=True, eval_attacks=("obfuscate",), transfer=False,
                   eval=(f"held=table:{held_eval}",))
    assert again.steps == []
    with pytest.raises(InputError, match="differ"):  # a run with other families is another run
        harden(setup, out, varied_lm, resume=True, transfer=False, eval=(f"held=table:{held_eval}",))


@pytest.mark.parametrize(("overrides", "message"), [
    ({"attacks": ("alice", "obfuscat")}, "--attacks: unknown attack family 'obfuscat'"),
    ({"eval_attacks": ("swap",)}, "--eval-attacks: unknown attack family 'swap'"),
    ({"attacks": ("alice", "obfuscate"), "eval_attacks": ("obfuscate",)}, "both --attacks and --eval-attacks"),
    ({"attacks": ("obfuscate",), "eval_attacks": ("alice",)}, "measured every round already"),
    ({"attacks": ()}, "names no family"),
    ({"eval_attacks": ("obfuscate",), "eval": ()}, "no --eval was given"),
    ({"eval_attacks": ("obfuscate",), "eval_attack_n": 0}, "--eval-attack-n 0"),
])
def test_bad_families_are_one_clear_error(setup, overrides, message):
    with pytest.raises(InputError, match=message) as error:
        config_for(setup, **overrides)
    assert error.value.hint


def test_cli_refuses_bad_families_before_any_work(setup, tmp_path):
    common = ["harden", "--data", str(setup["data"]), "-o", str(tmp_path / "h"), "-c", str(setup["start"])]
    result = runner.invoke(app, [*common, "--attacks", "alice,obfuscate", "--eval-attacks", "obfuscate"])
    assert result.exit_code != 0 and "both --attacks and --eval-attacks" in str(result.exception)
    result = runner.invoke(app, [*common, "--attacks", "nope"])
    assert "unknown attack family 'nope'" in str(result.exception)
    assert not (tmp_path / "h").exists()


def test_eval_without_toxic_rows_outside_the_training_data_is_refused(setup, varied_lm, tmp_path):
    """The held-out set leaves out rows of the training data; with none left, --eval-attacks is refused."""
    from .test_harden import placeholder_rows

    trained = write_table(tmp_path / "eval.csv", [r for r in placeholder_rows(16) if r[1] == 1]  # toxic rows of --data
                          + [("placeholder sentence about asian people", 0, "asian")])
    with pytest.raises(InputError, match="no toxic row outside --data"):
        harden(setup, tmp_path / "h", varied_lm, eval_attacks=("obfuscate",), eval=(f"held=table:{trained}",),
               max_eval_overlap=1.0)  # that many --eval rows in --data: accepted, to reach this check
    assert not (tmp_path / "h").exists()


def test_spell_accuracy_of_a_hatecheck_eval_set_by_hand():
    """With --eval hatecheck:..., each round's report gives HateCheck's spell_* accuracy (the audit's
    obfuscation accuracy): the share of spell_* cases whose prediction equals the gold label."""
    import numpy as np

    from toxiforge.audit.run import AuditSettings, sections
    from toxiforge.audit.sections import LexicalContext
    from toxiforge.data.examples import Example, LabeledData
    from toxiforge.harden.report import eval_numbers

    def spell_accuracy(data, scores):  # harden's number, from the audit's sections (what a round reads)
        return eval_numbers(sections(data, scores, LexicalContext(), AuditSettings(n_boot=200))).get("spell_accuracy")

    tests = ["spell_leet_h"] * 4 + ["spell_space_del_h"] * 2 + ["derog_neg_emote_h"] * 3
    rows = [Example(f"placeholder case {i}", i % 2, meta={"functionality": t}) for i, t in enumerate(tests)]
    data = LabeledData(name="HateCheck", examples=rows, layout="hatecheck", source="memory")
    scores = np.array([0.1, 0.9, 0.8, 0.1, 0.7, 0.3, 0.1, 0.9, 0.1])
    spell = spell_accuracy(data, scores)
    # of the six spell_* cases (gold 0, 1, 0, 1, 0, 1), predictions 0, 1, 1, 0, 1, 0: the first two right
    assert spell is not None and spell["value"] == pytest.approx(2 / 6)
    assert spell["low"] <= spell["value"] <= spell["high"]
    plain = LabeledData(name="plain", examples=[Example("placeholder", 1), Example("placeholder b", 0)],
                        layout="table", source="memory")
    assert spell_accuracy(plain, np.array([0.9, 0.2])) is None
