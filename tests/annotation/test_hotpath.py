"""The SQLite fast path of the hot-path statements: parameters and rows as SQLAlchemy makes them, and the statements a
submission runs."""

from __future__ import annotations

import sqlite3
import threading
import time
from datetime import datetime, timezone

from sqlalchemy import event

from toxiforge.annotation import hotpath
from toxiforge.annotation.hotpath import CompiledStatement, CoreExecutor, SQLiteExecutor
from toxiforge.annotation.schema import make_engine
from toxiforge.annotation.store import Store

from .test_store import ANSWERS, make_items

WHEN = datetime(2026, 11, 23, 13, 5, 7, 123456, tzinfo=timezone.utc)
RESPONSE = {"assignment_id": 3, "item_id": 4, "annotator_id": 5, **ANSWERS, "hateful": None, "trouble": True,
            "started_at": WHEN, "submitted_at": WHEN}
# (statement, parameters as HotPath passes them)
CASES = [
    (hotpath.OPEN_ASSIGNMENT, {"annotator_id": 7}),
    (hotpath.CANDIDATES, {"study_id": 1, "per_item": 3, "annotator_id": 7}),
    (hotpath.COMPARE_AND_SET, {"item_id": 9, "seen": 1, "new": 2}),
    (hotpath.SUBMITTED_COUNT, {"annotator_id": 7}),
    (hotpath.MARK_SUBMITTED, {"assignment_id": 11, "owner_id": 7}),
    (hotpath.RELEASED_STATE, {"assignment_id": 11, "annotator_id": 7}),
    (hotpath.STUDY_SHAPE, {"study_id": 1}),
    (hotpath.ANNOTATOR_BY_SESSION, {"id_hash": "ab" * 32}),
    (hotpath.NEW_ASSIGNMENT, {"item_id": 9, "annotator_id": 7, "slot": 2, "assigned_at": WHEN}),
    (hotpath.NEW_RESPONSE, RESPONSE),
]


def reference_parameters(statement, dialect, params):
    """What SQLAlchemy itself sends: construct_params, then each bind's processor, in positional order."""
    compiled = statement.compile(dialect=dialect)
    values = compiled.construct_params(params)
    out = []
    for name in compiled.positiontup:
        process = compiled.binds[name].type.dialect_impl(dialect).bind_processor(dialect)
        out.append(values[name] if process is None else process(values[name]))
    return out


def test_precomputed_parameters_equal_sqlalchemys(tmp_path):
    dialect = make_engine(str(tmp_path / "p.db")).dialect
    for statement, params in CASES:
        compiled = CompiledStatement(statement, dialect)
        assert list(compiled.parameters(params)) == reference_parameters(statement, dialect, params), compiled.sql
    # spot checks by hand: LIMIT 1 OFFSET 0 fixed, the SQLite DATETIME string, booleans as 1/0
    assert CompiledStatement(hotpath.OPEN_ASSIGNMENT, dialect).parameters({"annotator_id": 7}) == [7, 1, 0]
    response = CompiledStatement(hotpath.NEW_RESPONSE, dialect).parameters(RESPONSE)
    assert response[-3:] == [1, "2026-11-23 13:05:07.123456", "2026-11-23 13:05:07.123456"]
    marked = CompiledStatement(hotpath.MARK_SUBMITTED, dialect).parameters({"assignment_id": 11, "owner_id": 7})
    assert marked[0] == 1 and marked[2:] == [11, 7]


def test_driver_rows_equal_sqlalchemy_rows(tmp_path):
    store = Store(str(tmp_path / "r.db"))
    study, _ = store.create_study("s", make_items(4), per_item=2)
    annotator = store.annotator_for(store.invite(study.id, 1)[0])
    store.save_draft(annotator.id, store.next_assignment(annotator)[0].id, {"author": "ai"})
    queries = [(hotpath.OPEN_ASSIGNMENT, {"annotator_id": annotator.id}),
               (hotpath.CANDIDATES, {"study_id": study.id, "per_item": 2, "annotator_id": annotator.id}),
               (hotpath.STUDY_SHAPE, {"study_id": study.id})]
    raw = store.engine.raw_connection()
    try:
        with store.engine.connect() as conn:
            for statement, params in queries:
                core = [tuple(r) for r in CoreExecutor(conn).rows(statement, params)]
                fast = SQLiteExecutor(raw.driver_connection.cursor(), store.engine.dialect, {}).rows(statement, params)
                assert fast == core and core
    finally:
        raw.close()
    assignment, _ = store.open_assignment(annotator)[0]
    assert assignment.draft == {"author": "ai"} and isinstance(assignment.assigned_at, datetime)  # converted


def test_a_submission_runs_the_nine_statements_and_no_pragma(tmp_path):
    """On the loop path (without_waiting) a submission is BEGIN IMMEDIATE, 7 statements, COMMIT: the busy timeout
    0 is set once on the no-wait connection, not switched around every BEGIN; other writes still wait."""
    db = str(tmp_path / "t.db")
    engine = make_engine(db, busy_timeout=5)
    statements: list[str] = []
    event.listen(engine, "connect", lambda dbapi, _: dbapi.set_trace_callback(statements.append))
    store = Store(engine)
    study, _ = store.create_study("s", make_items(6), per_item=1)
    annotator = store.annotator_for(store.invite(study.id, 1)[0])
    first = store.next_assignment(annotator)[0]
    with store.without_waiting():
        _, (second, _), _ = store.submit_and_next(annotator, first.id, ANSWERS)  # opens the no-wait connection
        statements.clear()
        stored, (third, _), done = store.submit_and_next(annotator, second.id, ANSWERS)
    assert stored and done == 2 and third.id not in (first.id, second.id)
    assert [s.split()[0] for s in statements] == ["BEGIN", "UPDATE", "INSERT", "SELECT", "SELECT", "UPDATE",
                                                  "INSERT", "SELECT", "COMMIT"], statements
    assert statements[0] == "BEGIN IMMEDIATE"
    # a write outside without_waiting (the thread pool's) still waits for another process's lock
    holder = sqlite3.connect(db, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    threading.Timer(0.3, holder.execute, ("COMMIT",)).start()
    t0 = time.perf_counter()
    assert store.submit(annotator.id, third.id, ANSWERS)
    assert time.perf_counter() - t0 >= 0.25
    holder.close()
    assert len(store.responses(study.id)) == 3


def test_an_empty_draft_is_sql_null_on_both_paths(tmp_path):
    """A new assignment and a submitted one hold SQL NULL in ``draft`` (not the JSON text 'null'), on the fast path
    and through SQLAlchemy alike; a saved draft is JSON text."""
    db = str(tmp_path / "n.db")
    store = Store(db)
    study, _ = store.create_study("s", make_items(4), per_item=1)
    annotator = store.annotator_for(store.invite(study.id, 1)[0])
    first = store.next_assignment(annotator)[0]
    store.save_draft(annotator.id, first.id, {"author": "ai"})
    _, (second, _), _ = store.submit_and_next(annotator, first.id, ANSWERS)
    fast_store = Store(db)
    with fast_store.without_waiting():
        fast_store.submit_and_next(annotator, second.id, ANSWERS)
    slow = Store(db, fast_sqlite=False)
    third = slow.open_assignment(annotator)[0][0]
    slow.submit_and_next(annotator, third.id, ANSWERS)
    raw = sqlite3.connect(db)
    drafts = dict(raw.execute("SELECT id, draft FROM assignments ORDER BY id").fetchall())
    raw.close()
    assert len(drafts) == 4 and all(value is None for value in drafts.values()), drafts
    store.save_draft(annotator.id, max(drafts), {"author": "human"})
    raw = sqlite3.connect(db)
    assert raw.execute("SELECT draft FROM assignments WHERE id = ?", (max(drafts),)).fetchone()[0] == \
        '{"author": "human"}'
    raw.close()
