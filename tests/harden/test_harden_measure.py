"""--measure-n (issue 55): the attacks that only measure (the control arm's, the ALICE arm's in the last round) use
the first M of a round's attack prompts per group x label; the ALICE arm's attacks that feed a round keep -n."""

from __future__ import annotations

import pytest

from toxiforge.data.examples import read_any_table
from toxiforge.errors import InputError
from toxiforge.harden.config import AttackPlan
from toxiforge.harden.sets import draw_sets, measure_sets, run_sets

from .test_harden import config_for, harden


def prompt_lines(folder):
    return {f.name: f.read_text().splitlines() for f in sorted(folder.glob("*.txt"))}


def test_measure_sets_are_the_first_prompts_of_each_round_attack(setup):
    attack = AttackPlan(groups=("asian", "mexican"), per_cell=3, source=str(setup["demos"]), k=2, seed=3)
    drawn = draw_sets(run_sets(attack, 2, transfer=False))
    measured = measure_sets(drawn, 2, 1)
    assert sorted(measured) == ["round-1/measure", "round-2/measure"]
    for r in (1, 2):
        full, head = drawn[f"round-{r}/attack"], measured[f"round-{r}/measure"]
        assert head.prompts == {cell: texts[:1] for cell, texts in full.prompts.items()}
        assert [c.n for c in head.plan.cells] == [1] * len(full.plan.cells)
    assert measure_sets(drawn, 2, None) == {}


def test_measure_n_outside_one_to_n_is_refused(setup):
    with pytest.raises(InputError, match=r"--measure-n 4 must be from 1 to -n \(3\)"):
        config_for(setup, measure_per_cell=4)
    with pytest.raises(InputError, match="--measure-n 0"):
        config_for(setup, measure_per_cell=0)


def test_attacks_that_only_measure_use_the_first_m_prompts(setup, varied_lm, tmp_path):
    out = tmp_path / "h"
    harden(setup, out, varied_lm, rounds=2, measure_per_cell=1)
    cells = 4  # 2 groups x 2 labels
    sizes = {f"{r}/{arm}": len(read_any_table(out / f"round-{r}" / arm / "attack")) for r in (1, 2)
             for arm in ("alice", "control")}
    # round 1's ALICE arm feeds round 2 (-n 3); the control arm's and the last round's attacks only measure
    assert sizes == {"1/alice": 3 * cells, "1/control": cells, "2/alice": cells, "2/control": cells}
    full, head = prompt_lines(out / "round-1" / "attack.prompts"), prompt_lines(out / "round-1" / "measure.prompts")
    assert len(head) == cells and head == {name: lines[:1] for name, lines in full.items()}
    assert not (out / "round-2" / "attack.prompts").exists()  # no round-2 attack decodes all -n prompts
    assert len(prompt_lines(out / "round-2" / "measure.prompts")) == cells
    # a resumed run with the same options goes on; one extended past its last round is refused (round 2's ALICE
    # arm was measured on 1 prompt per cell, too few to feed round 3)
    harden(setup, out, varied_lm, resume=True, rounds=2, measure_per_cell=1)
    with pytest.raises(InputError, match=r"round 2 was this run's last.*--measure-n 1"):
        harden(setup, out, varied_lm, resume=True, rounds=3, measure_per_cell=1)
    with pytest.raises(InputError, match="measure_per_cell differ"):
        harden(setup, out, varied_lm, resume=True, rounds=2)
