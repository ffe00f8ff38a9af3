"""Annotation storage: study creation, sampling, assignment rules (also under concurrent annotators)."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from toxiforge.annotation.sampling import items_from_table, stratified_sample
from toxiforge.annotation.store import Annotator, Assignment, hash_token
from toxiforge.errors import InputError
from toxiforge.records import Row, write_rows

ANSWERS = {"author": "human", "harmful_ai": 1, "harmful_human": 2, "stereotyping": "no", "intent": 1,
           "lewd": "no", "group_reference": "direct", "other_groups": "", "framing": "none", "framing_other": "",
           "factual": "neither", "trouble": False}


def make_items(n: int) -> list[dict]:
    groups, methods = ("asian", "women", "jewish"), ("top-k", "ALICE")
    return [{"text": f"placeholder statement number {i}", "target_group": groups[i % 3], "label": i % 2,
             "method": methods[(i // 2) % 2], "source_row_id": f"r{i}"} for i in range(n)]


def test_tokens_are_hashed_and_wal_is_on(store):
    study, admin = store.create_study("s", make_items(3))
    tokens = store.invite(study.id, 2)
    assert len(set(tokens)) == 2 and all(len(t) >= 40 for t in tokens)
    with store.Session() as s:
        stored = {a.token_hash for a in s.query(Annotator)}
        sqlite = s.connection().dialect.name == "sqlite"
        mode = s.connection().exec_driver_sql("PRAGMA journal_mode").scalar() if sqlite else None
    assert stored == {hash_token(t) for t in tokens} and not (set(tokens) & stored)
    assert mode == "wal" or not sqlite
    assert store.study_for_admin(admin).id == study.id and store.study_for_admin(tokens[0]) is None
    assert store.study("s").id == study.id and store.study(str(study.id)).name == "s"
    with pytest.raises(InputError):
        store.study("missing")


def test_each_item_gets_exactly_per_item_distinct_annotators_evenly(store):
    study, _ = store.create_study("s", make_items(5), per_item=3)
    annotators = [store.annotator_for(t) for t in store.invite(study.id, 4)]
    done: Counter = Counter()
    # round-robin: the study fills evenly (no item gets a 2nd annotator before every item has a 1st)
    first_round = []
    for rnd in range(10):
        for a in annotators:
            got = store.next_assignment(a)
            if got is None:
                continue
            assignment, item = got
            if rnd == 0:
                first_round.append(item.id)
            assert store.submit(a.id, assignment.id, ANSWERS)
            assert not store.submit(a.id, assignment.id, ANSWERS)  # a repeat is not a second response
            done[item.id] += 1
    assert len(set(first_round)) == 4
    assert sorted(done.values()) == [3] * 5
    pairs = [(i.id, r.annotator_id) for i, r in store.responses(study.id)]
    assert len(pairs) == len(set(pairs)) == 15
    assert all(store.next_assignment(a) is None for a in annotators)


def test_submit_and_next_is_one_step_and_idempotent(store):
    study, _ = store.create_study("s", make_items(3), per_item=2)
    a, b = (store.annotator_for(t) for t in store.invite(study.id, 2))
    first, item = store.next_assignment(a)
    assert item.text.startswith("placeholder") and first.draft is None
    assert store.save_draft(a.id, first.id, {"author": "ai"})
    assert store.next_assignment(a)[0].draft == {"author": "ai"}
    stored, (second, item2), done = store.submit_and_next(a, first.id, ANSWERS)
    assert stored and done == 1 and second.id != first.id and item2.id != item.id
    again, (same, _), done = store.submit_and_next(a, first.id, ANSWERS)  # a repeated POST
    assert not again and same.id == second.id and done == 1
    with pytest.raises(InputError):
        store.submit_and_next(b, second.id, ANSWERS)
    (_, resp), = store.responses(study.id)
    assert resp.assignment_id == first.id and resp.started_at <= resp.submitted_at and resp.trouble is False


def test_open_assignment_is_returned_again_and_others_cannot_submit_it(store):
    study, _ = store.create_study("s", make_items(2), per_item=2)
    a, b = (store.annotator_for(t) for t in store.invite(study.id, 2))
    first = store.next_assignment(a)[0]
    assert store.next_assignment(a)[0].id == first.id
    with pytest.raises(InputError):
        store.submit(b.id, first.id, ANSWERS)
    assert store.get_assignment(b.id, first.id) is None


def test_concurrent_annotators_never_share_a_slot(store):
    study, _ = store.create_study("s", make_items(20), per_item=3)
    annotators = [store.annotator_for(t) for t in store.invite(study.id, 8)]
    errors = []

    def work(a):
        try:
            while (got := store.next_assignment(a)) is not None:
                store.submit(a.id, got[0].id, ANSWERS)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(a,)) for a in annotators]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors
    with store.Session() as s:
        rows = s.query(Assignment).all()
    assert Counter(r.item_id for r in rows) == Counter({i: 3 for i in Counter(r.item_id for r in rows)})
    assert len(rows) == 60 and len({(r.item_id, r.slot) for r in rows}) == 60
    assert len({(r.item_id, r.annotator_id) for r in rows}) == 60


def test_items_from_dataset_and_stratified_sample(tmp_path):
    rows = [Row(prompt="p", generation=f"placeholder {g} {lab} {m} {i}", generation_method=m, group=g,
                prompt_label=lab, row_id=f"{g}/{lab}/{i}")
            for g in ("asian", "women") for lab in (0, 1) for m in ("top-k", "ALICE") for i in range(10)]
    rows.append(Row(prompt="p", generation="", generation_method="top-k", group="asian", prompt_label=0,
                    parse_error="empty"))
    path = write_rows(rows, tmp_path / "d.parquet")
    items = items_from_table(path)
    assert len(items) == 80 and items[0]["source_row_id"] == "asian/0/0"
    sample = stratified_sample(items, 16, stratify=("group", "label", "method"), seed=1)
    assert len(sample) == 16
    assert set(Counter((i["target_group"], i["label"], i["method"]) for i in sample).values()) == {2}
    assert sample == stratified_sample(items, 16, stratify=("group", "label", "method"), seed=1)
    assert len(stratified_sample(items, None)) == 80
    with pytest.raises(InputError):
        stratified_sample(items, 5, stratify=("colour",))
