"""Issue 55, item 3: ``--add balanced``: the flipped statements of an attack topped up, group by group, with its
other statements of the scarcer label (validated ones only), and the control arm matched group by group. Placeholder
text; the statements are given directly (a run's rows), no model."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from toxiforge.data.examples import Example
from toxiforge.harden.data import balance_groups, select_added, select_control


@dataclass
class Rows:
    """A run's kept statements as harden reads them: (Example with its prompt label, fooled, validator score)."""

    rows_: list[tuple[Example, bool | None, float | None]]

    def rows(self) -> list[tuple[Example, bool | None, float | None]]:
        return self.rows_


def stmt(i: int, group: str, label: int, fooled: bool, agrees: bool = True) -> tuple[Example, bool, float]:
    score = (0.9 if label else 0.1) if agrees else (0.1 if label else 0.9)
    return Example(f"placeholder statement {i} about {group}", label, group), fooled, score


def attack() -> Rows:
    """Group a: 5 toxic and 1 benign flipped, 3 benign not flipped (one the validator disagrees with); group b: 1 toxic
    and 3 benign flipped, 4 toxic not flipped; group c: balanced already."""
    rows = [stmt(i, "a", 1, True) for i in range(5)] + [stmt(5, "a", 0, True)]
    rows += [stmt(6, "a", 0, False), stmt(7, "a", 0, False), stmt(8, "a", 0, False, agrees=False)]
    rows += [stmt(10, "b", 1, True)] + [stmt(11 + i, "b", 0, True) for i in range(3)]
    rows += [stmt(20 + i, "b", 1, False) for i in range(4)]
    rows += [stmt(30, "c", 1, True), stmt(31, "c", 0, True), stmt(32, "c", 0, False)]
    return Rows(rows)


def test_each_group_is_topped_up_with_validated_statements_of_its_scarcer_label():
    source = attack()
    flipped = select_added([source], "flipped", 0)
    assert Counter((e.group, e.label) for e in flipped) == {("a", 1): 5, ("a", 0): 1, ("b", 1): 1, ("b", 0): 3,
                                                             ("c", 1): 1, ("c", 0): 1}
    balanced = select_added([source], "balanced", 0)
    counts = Counter((e.group, e.label) for e in balanced)
    # a: 4 benign wanted, 2 validated ones to give (statement 8's validator disagrees); b: 2 toxic wanted, 4 to give;
    # c: balanced, nothing added
    assert counts == {("a", 1): 5, ("a", 0): 3, ("b", 1): 3, ("b", 0): 3, ("c", 1): 1, ("c", 0): 1}
    assert balanced[:len(flipped)] == flipped          # the flipped statements first, unchanged
    texts = [e.text for e in balanced]
    assert len(texts) == len(set(texts)) and "placeholder statement 8 about a" not in texts
    assert balanced == select_added([source], "balanced", 0)                 # seeded
    assert {e.text for e in balance_groups(flipped, [source], 1)} != set() and \
        len(balance_groups(flipped, [source], 1)) == len(balanced)
    assert select_added([source], "all", 0) == [e for e, _, s in source.rows() if (s > 0.5) == bool(e.label)]


def test_without_a_validator_every_statement_may_top_up():
    rows = [(e, fooled, None) for e, fooled, _ in attack().rows()]
    counts = Counter((e.group, e.label) for e in select_added([Rows(rows)], "balanced", 0))
    assert counts[("a", 0)] == 4 and counts[("a", 1)] == 5   # statement 8 may join now: 1 + 3 of 4 wanted


def test_the_control_arm_matches_group_by_group_under_balanced():
    like = [Example("x", 1, "a")] * 3 + [Example("y", 0, "b")] * 2
    pool = Rows([stmt(100 + i, g, lab, False) for i, (g, lab) in enumerate(
        [("a", 1)] * 4 + [("b", 1)] * 4 + [("a", 0)] * 4 + [("b", 0)] * 4)])
    by_group = Counter((e.group, e.label) for e in select_control(pool, like, 0, by_group=True))
    assert by_group == {("a", 1): 3, ("b", 0): 2}
    by_label = Counter(e.label for e in select_control(pool, like, 0))
    assert by_label == {1: 3, 0: 2}



def test_a_round_with_add_balanced_joins_the_flipped_statements_and_tops_each_group_up(setup, varied_lm, tmp_path):
    """The loop end to end on the tiny models: round 1's ALICE arm holds every flipped statement of round 0's attack
    and, per group, as many of the attack's other statements of the scarcer label as close the gap (or all there
    are); the control arm as many top-k statements group by group and label by label, where its pool has them; the
    run's settings say --add balanced."""
    import json

    from toxiforge.attacks.validation import run_rows
    from toxiforge.harden.data import read_examples

    from .test_harden import harden, kept, training_texts

    out = tmp_path / "h"
    harden(setup, out, varied_lm, add="balanced")
    rows = kept(run_rows(out / "round-0" / "attack", "ALICE"), training_texts(setup))
    flipped = {(e.text, e.label) for e, f in rows if f}
    alice = read_examples(out / "round-1" / "alice" / "added.jsonl")
    assert flipped <= {(e.text, e.label) for e in alice}
    counts = Counter((e.group, e.label) for e in alice)
    for group in {e.group for e, _ in rows}:
        flips = Counter(e.label for e, f in rows if f and e.group == group)
        if not sum(flips.values()):
            continue
        scarce = 0 if flips[1] > flips[0] else 1
        others = sum(1 for e, f in rows if not f and e.group == group and e.label == scarce)
        gap = abs(flips[1] - flips[0])
        assert counts[(group, scarce)] - flips[scarce] == min(gap, others)
    control = Counter((e.group, e.label) for e in read_examples(out / "round-1" / "control" / "added.jsonl"))
    assert all(control[k] <= n for k, n in counts.items()) and set(control) <= set(counts)
    assert json.loads((out / "harden.json").read_text())["settings"]["add"] == "balanced"
