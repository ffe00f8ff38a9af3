"""Checks only PostgreSQL needs (a throwaway cluster, tests/annotation/pg.py). The store, app, export, lease and
CLI tests run on PostgreSQL through the ``database`` / ``store`` fixtures of tests/annotation/conftest.py; here are
claims racing each other for real (SQLite's ``BEGIN IMMEDIATE`` serialises writers; PostgreSQL's READ COMMITTED
does not), the same results as SQLite for the same study, and an old schema upgraded in place.

The race checks were written as failing tests first; the fixes they drove: claims (and releases) of a study take
turns on the study row (FOR NO KEY UPDATE), releases lock items FOR NO KEY UPDATE so a submission's foreign-key check
never waits on them, unbounded text columns, NUL characters dropped, and ids out of INTEGER range answered as "not
found".
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import asdict
from datetime import timedelta

import pytest
from sqlalchemy import event
from sqlalchemy.engine import make_url

from toxiforge.annotation.agreement import study_agreement
from toxiforge.annotation.export import annotated_rows, annotation_rows
from toxiforge.annotation.leases import release_stale
from toxiforge.annotation.store import Assignment, Item, Store
from toxiforge.errors import InputError

from .test_export import _answers
from .test_lease import live_slots
from .test_store import ANSWERS, make_items

pytestmark = pytest.mark.postgres


@pytest.fixture()
def store(pg_empty_url):
    store = Store(pg_empty_url)
    assert store.engine.dialect.name == "postgresql"
    yield store
    store.engine.dispose()


def _database(store) -> str:
    return make_url(str(store.engine.url)).database


def _fill(store, study):
    """Three annotators, one after the other, answer every item with fixed scores (as tests/test_annotation_export)."""
    scores = {0: [(1, 1), (2, 1), (1, 2)], 1: [(5, 4), (4, 4), (1, 1)], 2: [(3, 1), (5, 5), (1, 1)]}
    for n, token in enumerate(store.invite(study.id, 3)):
        annotator = store.annotator_for(token)
        got = store.next_assignment(annotator)
        while got is not None:
            ai, human = scores[got[1].position][n]
            _, got, _ = store.submit_and_next(annotator, got[0].id,
                                              _answers(ai, human, "ai" if n == 2 else "human",
                                                       "other" if n == 2 else "direct"))


def test_exports_agreement_and_progress_match_sqlite(store, tmp_path):
    lite = Store(f"sqlite:///{tmp_path / 'same.db'}")
    items = make_items(3)
    studies = {}
    for st in (store, lite):
        study, _ = st.create_study("same", items, per_item=3)
        _fill(st, study)
        studies[st] = study.id
    assert annotated_rows(store, studies[store]) == annotated_rows(lite, studies[lite])
    per_response = [[{k: v for k, v in r.items() if k not in ("annotator", "started_at", "submitted_at")}
                     for r in annotation_rows(st, studies[st])] for st in (store, lite)]
    assert per_response[0] == per_response[1] and len(per_response[0]) == 9
    pg_stats, lite_stats = (asdict(study_agreement(st, studies[st])) for st in (store, lite))
    assert pg_stats == lite_stats and pg_stats["n_items"] == 3 and pg_stats["fleiss_kappa"] is not None
    progress = [{k: v for k, v in st.progress(studies[st]).items() if k not in ("annotators", "study_id")}
                for st in (store, lite)]
    assert progress[0] == progress[1] and progress[0]["done_fraction"] == 1.0
    lite.engine.dispose()


def test_old_database_gets_the_new_columns(store, pg_empty_url):
    study, _ = store.create_study("pilot", make_items(3), per_item=1)
    w = store.annotator_for(store.invite(study.id, 1)[0])
    store.next_assignment(w)
    with store.engine.begin() as conn:  # the schema of the first release: no lease columns
        conn.exec_driver_sql("ALTER TABLE assignments DROP COLUMN released_at")
        conn.exec_driver_sql("ALTER TABLE studies DROP COLUMN lease_minutes")
    store.engine.dispose()
    again = Store(pg_empty_url)
    assert again.study("pilot").lease_minutes == 120
    assert release_stale(again, study.id) == 0 and release_stale(again, study.id, older_than=timedelta(0)) == 1
    again.engine.dispose()


# --- claims racing each other ---------------------------------------------------------------------------------

def _wait_for_lock_waits(pg_cluster, database: str, n: int, timeout: float = 10.0) -> None:
    """Bounded poll until ``n`` sessions of ``database`` wait for a lock."""
    deadline = time.monotonic() + timeout
    with pg_cluster.connect(database) as conn:
        while True:
            waiting = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND "
                                   "wait_event_type = 'Lock'", (database,)).fetchone()[0]
            if waiting >= n:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"{waiting} sessions wait for a lock after {timeout} s, expected {n}")
            time.sleep(0.005)


def _is_cas(statement: str) -> bool:
    return statement.lstrip().startswith("UPDATE items SET n_assigned=")


def _is_candidates(statement: str) -> bool:
    return "items.n_assigned <" in statement


def _run(name: str, fn, results: dict, errors: list) -> threading.Thread:
    def target():
        try:
            results[name] = fn()
        except BaseException as exc:  # re-raised by the test
            errors.append(exc)
    thread = threading.Thread(target=target, name=name)
    thread.start()
    return thread


def test_claims_that_lose_races_do_not_deadlock(store, pg_cluster):
    """Two claims, each losing a compare-and-set to another claim in flight (simulated by plain UPDATEs held
    open), must both end with an assignment. Now: claim B keeps item W locked after losing it and waits for X;
    claim A, queued on X as well, wins the lock on X's new version, loses the compare-and-set and waits for W:
    PostgreSQL aborts one claim with a deadlock (a 500 in the app). Who locks X's new version first is a race
    inside the server (about half the time A), so the scenario is run several times."""
    for attempt in range(12):
        _two_claims_each_losing_a_race(store, pg_cluster, attempt)


def _two_claims_each_losing_a_race(store, pg_cluster, attempt: int) -> None:
    study, _ = store.create_study(f"s{attempt}", make_items(2), per_item=5)
    w_item, x_item = (it.id for it in store.items(study.id))  # positions 0 and 1
    a, b = (store.annotator_for(t) for t in store.invite(study.id, 2))
    db = _database(store)
    results: dict = {}
    errors: list = []
    b_cas, b_paused, resume_b = Counter(), threading.Event(), threading.Event()

    def hook(conn, cursor, statement, parameters, context, executemany):
        if _is_cas(statement) and threading.current_thread().name == "claim-b":
            b_cas["n"] += 1
            if b_cas["n"] == 2:  # B lost W and is about to try X: hold it here
                b_paused.set()
                resume_b.wait(10)

    other_w, other_x = pg_cluster.connect(db), pg_cluster.connect(db)  # two other claims in flight
    event.listen(store.engine, "before_cursor_execute", hook)
    threads = []
    try:
        other_w.execute("BEGIN")
        other_w.execute("UPDATE items SET n_assigned = n_assigned + 1 WHERE id = %s", (w_item,))
        threads.append(_run("claim-b", lambda: store.next_assignment(b), results, errors))
        _wait_for_lock_waits(pg_cluster, db, 1)  # B: W (n=0) is locked by the other claim
        other_x.execute("BEGIN")
        other_x.execute("UPDATE items SET n_assigned = n_assigned + 1 WHERE id = %s", (x_item,))
        other_w.execute("COMMIT")  # B loses W (and keeps it locked), moves on to X and is held before its CAS
        assert b_paused.wait(10)
        threads.append(_run("claim-a", lambda: store.next_assignment(a), results, errors))
        _wait_for_lock_waits(pg_cluster, db, 1)  # A: sees W=1, X=0, tries X first and waits
        resume_b.set()
        _wait_for_lock_waits(pg_cluster, db, 2)  # B waits for X too
        other_x.execute("COMMIT")  # A (or B) locks X's new version and loses; A then waits for W, held by B
        for t in threads:
            t.join(30)
    finally:
        resume_b.set()
        event.remove(store.engine, "before_cursor_execute", hook)
        other_w.close()
        other_x.close()
    if errors:
        raise errors[0]
    assert results["claim-a"] is not None and results["claim-b"] is not None, f"attempt {attempt}"


def test_a_claim_that_keeps_losing_races_is_not_told_nothing_is_left(store):
    """Before each of the victim's compare-and-sets another annotator claims the same (only) item and commits.
    The item has a slot left for the victim, so next_assignment must return it. Now the claim gives up after its
    20 tries and returns None, which the app shows as "All done"."""
    tries = 20
    study, _ = store.create_study("s", make_items(1), per_item=tries + 2)
    victim, *others = (store.annotator_for(t) for t in store.invite(study.id, tries + 1))
    helpers: list[threading.Thread] = []

    def hook(conn, cursor, statement, parameters, context, executemany):
        if _is_cas(statement) and threading.current_thread().name == "victim" and others:
            helper = threading.Thread(target=store.next_assignment, args=(others.pop(),))
            helper.start()
            helper.join(0.5)  # with claims serialised per study it waits for the victim: go on
            helpers.append(helper)

    results: dict = {}
    errors: list = []
    event.listen(store.engine, "before_cursor_execute", hook)
    try:
        _run("victim", lambda: store.next_assignment(victim, tries=tries), results, errors).join(60)
    finally:
        event.remove(store.engine, "before_cursor_execute", hook)
        for h in helpers:
            h.join(30)
    if errors:
        raise errors[0]
    with store.Session() as s:
        n_assigned = s.get(Item, store.items(study.id)[0].id).n_assigned
    assert results["victim"] is not None, f"told nothing is left with {n_assigned} of {tries + 2} slots taken"


def test_one_annotator_claiming_twice_at_once_gets_one_assignment(store):
    """The same annotator's page loaded twice at once (two tabs, a double click): both requests must get the same
    assignment, as on SQLite. Now both claims see no open assignment and each takes an item."""
    study, _ = store.create_study("s", make_items(4), per_item=2)
    a = store.annotator_for(store.invite(study.id, 1)[0])
    both_read = threading.Barrier(2, timeout=0.5)

    def hook(conn, cursor, statement, parameters, context, executemany):
        if _is_candidates(statement) and threading.current_thread().name.startswith("tab-"):
            try:
                both_read.wait()  # both claims have looked for an open assignment
            except threading.BrokenBarrierError:  # the other one waits for this claim: go on
                pass

    results: dict = {}
    errors: list = []
    event.listen(store.engine, "before_cursor_execute", hook)
    try:
        threads = [_run(f"tab-{i}", lambda: store.next_assignment(a), results, errors) for i in (1, 2)]
        for t in threads:
            t.join(30)
    finally:
        event.remove(store.engine, "before_cursor_execute", hook)
    if errors:
        raise errors[0]
    with store.Session() as s:
        open_rows = s.query(Assignment).filter(Assignment.annotator_id == a.id, Assignment.submitted.is_(False)).count()
    assert results["tab-1"][0].id == results["tab-2"][0].id and open_rows == 1


@pytest.mark.parametrize("how", ["submit", "submit_and_next"])
def test_a_release_racing_a_submission_does_not_deadlock(store, pg_cluster, how):
    """A submission that has marked its assignment but not yet inserted the response, and a release of every open
    assignment at that moment: both must finish (the response stored, nothing released)."""
    study, _ = store.create_study("s", make_items(1), per_item=2)
    w = store.annotator_for(store.invite(study.id, 1)[0])
    assignment = store.next_assignment(w)[0]
    paused, resume = threading.Event(), threading.Event()

    def hook(conn, cursor, statement, parameters, context, executemany):
        if statement.startswith("INSERT INTO responses") and threading.current_thread().name == "submit":
            paused.set()
            resume.wait(10)

    submit = ((lambda: store.submit(w.id, assignment.id, ANSWERS)) if how == "submit" else
              (lambda: store.submit_and_next(w, assignment.id, ANSWERS)[0]))
    results: dict = {}
    errors: list = []
    event.listen(store.engine, "before_cursor_execute", hook)
    threads = []
    try:
        threads.append(_run("submit", submit, results, errors))
        assert paused.wait(10)
        threads.append(_run("release", lambda: release_stale(store, study.id, older_than=timedelta(0)), results,
                            errors))
        _wait_for_lock_waits(pg_cluster, _database(store), 1)  # the release waits for the marked assignment
        resume.set()
        for t in threads:
            t.join(30)
    finally:
        resume.set()
        event.remove(store.engine, "before_cursor_execute", hook)
    if errors:
        raise errors[0]
    assert results == {"submit": True, "release": 0}
    assert [r.assignment_id for _, r in store.responses(study.id)] == [assignment.id]


def test_many_annotators_at_once_each_annotate_every_item(store):
    """16 annotators start together on 8 items with per_item=16, half through submit_and_next and half through
    submit + next_assignment: nobody errors, everybody annotates every item, no slot is shared."""
    n_annotators, n_items = 16, 8
    study, _ = store.create_study("s", make_items(n_items), per_item=n_annotators)
    annotators = [store.annotator_for(t) for t in store.invite(study.id, n_annotators)]
    start = threading.Barrier(n_annotators, timeout=30)
    done: Counter = Counter()
    errors: list = []

    def work(i, a):
        try:
            start.wait()
            got = store.next_assignment(a)
            while got is not None:
                done[a.id] += 1
                if i % 2:
                    _, got, _ = store.submit_and_next(a, got[0].id, ANSWERS)
                else:
                    store.submit(a.id, got[0].id, ANSWERS)
                    got = store.next_assignment(a)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i, a)) for i, a in enumerate(annotators)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    if errors:
        raise errors[0]
    assert sorted(done.values()) == [n_items] * n_annotators
    assert live_slots(store, study.id) == {it.id: list(range(n_annotators)) for it in store.items(study.id)}


# --- values SQLite stores and PostgreSQL refuses --------------------------------------------------------------

def test_names_and_item_fields_longer_than_their_column_sizes_are_stored(store):
    item = {"text": "placeholder", "target_group": "g" * 150, "label": 1, "method": "m" * 60,
            "source_row_id": "r" * 300}
    study, _ = store.create_study("n" * 250, [item], per_item=1)
    store.invite(study.id, 1, label="l" * 150)
    (stored,) = store.items(study.id)
    assert (stored.target_group, stored.method, stored.source_row_id) == (item["target_group"], item["method"],
                                                                         item["source_row_id"])
    assert store.study("n" * 250).id == study.id


def test_a_nul_character_in_an_item_text_is_stored_or_refused_cleanly(store):
    try:
        study, _ = store.create_study("s", [{"text": "a statement\x00 with a NUL", "target_group": "asian"}])
    except InputError:
        return
    assert store.items(study.id)[0].text in ("a statement\x00 with a NUL", "a statement with a NUL")
