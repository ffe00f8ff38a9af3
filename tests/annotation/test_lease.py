"""Releasing assignments left open (leases): slots stay consistent, late submissions are refused, admin and CLI."""

from __future__ import annotations

import random
import re
import sqlite3
import threading
from collections import Counter, defaultdict
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from toxiforge.annotation.app import create_app
from toxiforge.annotation.leases import release_stale
from toxiforge.annotation.store import Assignment, AssignmentReleased, Item, Response, Store, utcnow
from toxiforge.cli import app as cli_app
from toxiforge.errors import InputError

ANSWERS = {"author": "human", "harmful_ai": 1, "harmful_human": 2, "stereotyping": "no", "intent": 1,
           "lewd": "no", "group_reference": "direct", "other_groups": "", "framing": "none", "framing_other": "",
           "factual": "neither", "trouble": False}
FORM = {"author": "human", "harmful_ai": "2", "harmful_human": "3", "stereotyping": "no", "intent": "1",
        "lewd": "no", "group_reference": "direct", "framing": "none", "factual": "neither", "action": "submit"}


def items(n: int) -> list[dict]:
    return [{"text": f"placeholder statement {i}", "target_group": "asian", "label": i % 2, "method": "top-k"}
            for i in range(n)]


def live_slots(store, study_id) -> dict[int, list[int]]:
    """Per item: the slots of its live (not released) assignments, and check n_assigned matches."""
    with store.Session() as s:
        out = defaultdict(list)
        for a in s.query(Assignment).join(Item, Item.id == Assignment.item_id).filter(Item.study_id == study_id):
            if a.released_at is None:
                out[a.item_id].append(a.slot)
            else:
                assert a.slot == -a.id and not a.submitted
        for item in s.query(Item).filter(Item.study_id == study_id):
            assert item.n_assigned == len(out[item.id])
    return {k: sorted(v) for k, v in out.items()}


def test_released_slot_goes_to_another_annotator_and_numbering_stays_dense(store):
    study, _ = store.create_study("s", items(1), per_item=3)
    a, b, c, d = (store.annotator_for(t) for t in store.invite(study.id, 4))
    got = {w.id: store.next_assignment(w)[0] for w in (a, b, c)}
    assert sorted(x.slot for x in got.values()) == [0, 1, 2] and store.next_assignment(d) is None
    store.submit(a.id, got[a.id].id, ANSWERS)
    store.submit(c.id, got[c.id].id, ANSWERS)
    assert release_stale(store, study.id, older_than=timedelta(0)) == 1  # only b's is still open
    assert live_slots(store, study.id) == {got[a.id].item_id: [0, 1]}
    assert store.next_assignment(b) is None  # b never gets the item again
    with pytest.raises(AssignmentReleased):  # b's late answer is refused, not stored
        store.submit(b.id, got[b.id].id, ANSWERS)
    with pytest.raises(AssignmentReleased):
        store.submit_and_next(b, got[b.id].id, ANSWERS)
    assert not store.save_draft(b.id, got[b.id].id, {"author": "human"})
    nxt = store.next_assignment(d)[0]
    assert nxt.slot == 2
    assert store.submit(d.id, nxt.id, ANSWERS)
    with store.Session() as s:
        who = sorted(r.annotator_id for r in s.query(Response))
    assert who == sorted([a.id, c.id, d.id])
    assert live_slots(store, study.id) == {nxt.item_id: [0, 1, 2]}


def test_the_study_lease_decides_by_default(store):
    study, _ = store.create_study("s", items(2), per_item=1, lease_minutes=30)
    never, _ = store.create_study("t", items(2), per_item=1, lease_minutes=0)
    for st in (study, never):
        w = store.annotator_for(store.invite(st.id, 1)[0])
        assert store.next_assignment(w) is not None
    now = utcnow()
    assert release_stale(store, study.id, now=now + timedelta(minutes=29)) == 0
    assert release_stale(store, never.id, now=now + timedelta(days=30)) == 0
    assert store.progress(study.id)["open"] == 1
    assert release_stale(store, study.id, now=now + timedelta(minutes=31)) == 1
    assert store.progress(study.id)["open"] == 0 and store.progress(never.id)["open"] == 1
    assert store.study("s").lease_minutes == 30
    with pytest.raises(InputError, match="lease_minutes"):
        store.create_study("u", items(1), lease_minutes=-1)
    with pytest.raises(InputError, match="negative"):
        release_stale(store, study.id, older_than=timedelta(minutes=-1))


def test_releases_racing_annotators_never_lose_or_duplicate(store):
    """Annotators claim, sometimes abandon, and submit while another thread keeps releasing every open
    assignment: a submission is either stored (acknowledged) or refused, never both; an item never gets two
    responses from one annotator or more than per_item; the live slot numbering stays dense."""
    per_item = 2
    study, _ = store.create_study("s", items(12), per_item=per_item)
    annotators = [store.annotator_for(t) for t in store.invite(study.id, 6)]
    acknowledged: Counter = Counter()
    stop = threading.Event()
    errors: list[BaseException] = []

    def work(w, seed):
        rng = random.Random(seed)
        try:
            while (got := store.next_assignment(w)) is not None:
                if rng.random() < 0.3:  # sometimes the annotator hesitates: a release may come first
                    stop.wait(0.001)
                try:
                    if store.submit(w.id, got[0].id, ANSWERS):
                        acknowledged[w.id] += 1
                except AssignmentReleased:
                    pass
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def releaser():
        while not stop.is_set():
            try:
                release_stale(store, study.id, older_than=timedelta(0))
            except Exception as exc:  # pragma: no cover - reported below (a dead releaser would pass silently)
                errors.append(exc)
                return

    rel = threading.Thread(target=releaser)
    rel.start()
    threads = [threading.Thread(target=work, args=(w, i)) for i, w in enumerate(annotators)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stop.set()
    rel.join()
    assert not errors
    with store.Session() as s:
        responses = [(r.item_id, r.annotator_id) for r in s.query(Response)]
    assert len(responses) == len(set(responses))  # nobody answered an item twice
    assert max(Counter(i for i, _ in responses).values()) <= per_item
    assert Counter(a for _, a in responses) == acknowledged  # stored == acknowledged, per annotator
    slots = live_slots(store, study.id)
    assert all(v == list(range(len(v))) for v in slots.values())


def test_app_refuses_a_late_submission_and_admin_can_release(database):
    store = Store(database)
    study, admin_token = store.create_study("s", items(2), per_item=1)
    token = store.invite(study.id, 1)[0]
    c = TestClient(create_app(store, sweep_interval=None))
    c.get(f"/a/{token}")
    page = c.get("/annotate").text
    page = c.post("/consent", data={"csrf": re.search(r'name="csrf" value="([^"]+)"', page).group(1),
                                    "agree": "yes"}).text
    form_csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    first = re.search(r'action="(/annotate/\d+)"', page).group(1)

    admin = TestClient(create_app(store, sweep_interval=None))
    admin.get(f"/admin/login/{admin_token}")
    page = admin.get("/admin").text
    assert "1 open" in page and "open 0 min" in page
    admin_csrf = re.search(r'id="release-form">\s*<input type="hidden" name="csrf" value="([^"]+)"', page).group(1)
    assert admin.post("/admin/release", data={"csrf": "forged", "minutes": "0"}).status_code == 403
    assert admin.post("/admin/release", data={"csrf": admin_csrf, "minutes": "x"}).status_code == 422
    assert admin.post("/admin/release", data={"csrf": admin_csrf, "minutes": "60"}).text.count("Released 0") == 1
    done = admin.post("/admin/release", data={"csrf": admin_csrf, "minutes": "0"})
    assert "Released 1 assignment" in done.text and "0 open" in done.text
    assert c.post("/admin/release", data={"csrf": admin_csrf, "minutes": "0"}).status_code == 403  # annotator

    late = c.post(first, data={**FORM, "csrf": form_csrf})
    assert late.status_code == 409 and "were not stored" in late.text
    nxt = re.search(r'action="(/annotate/\d+)"', late.text).group(1)
    assert nxt != first
    assert c.post(nxt, data={**FORM, "csrf": form_csrf}).status_code == 200
    with store.Session() as s:
        assert s.query(Response).count() == 1


def test_release_command_and_old_databases_are_upgraded(tmp_path):
    db = str(tmp_path / "old.db")
    store = Store(db)
    study, _ = store.create_study("pilot", items(3), per_item=1)
    w = store.annotator_for(store.invite(study.id, 1)[0])
    store.next_assignment(w)
    store.engine.dispose()
    with sqlite3.connect(db) as conn:  # the schema of the first release: no lease columns
        conn.execute("ALTER TABLE assignments DROP COLUMN released_at")
        conn.execute("ALTER TABLE studies DROP COLUMN lease_minutes")
    runner = CliRunner()
    r = runner.invoke(cli_app, ["annotate", "release", "--study", "pilot", "--db", db])
    assert r.exit_code == 0, r.output
    assert "released 0 open assignment(s)" in r.output  # the default lease (120 min) has not passed
    r = runner.invoke(cli_app, ["annotate", "release", "--study", "pilot", "--db", db, "--older-than", "0"])
    assert r.exit_code == 0 and "released 1 open assignment(s)" in r.output
    assert Store(db).study("pilot").lease_minutes == 120
