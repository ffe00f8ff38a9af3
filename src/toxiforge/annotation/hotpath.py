"""The annotator's hot path: the statements of a claim and a submission, written once as SQLAlchemy Core.

:class:`HotPathOperations` is the interface the store's assignment logic uses inside one transaction.
:class:`HotPath` implements it over an executor, and there are two executors of the same Core statements:

* :class:`CoreExecutor` runs them on a SQLAlchemy connection (any database; SQLAlchemy's statement cache);
* :class:`SQLiteExecutor` runs them on the sqlite3 driver's own cursor. Each statement is compiled once with the
  engine's SQLite dialect (:class:`CompiledStatement`), and values go through the same SQLAlchemy type processors
  the Core path uses, so rows read the same either way. It skips SQLAlchemy's per-execution machinery
  (``benchmarks/annotate_load.py`` measures the difference; see docs/annotation.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import itemgetter
from typing import Any, Protocol

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.engine import Connection, Dialect

from toxiforge.annotation.schema import ANSWER_FIELDS, Annotator, Assignment, BrowserSession, Item, Response, Study


@dataclass(frozen=True)
class OpenAssignment:
    """An annotator's assignment as the app needs it."""
    id: int
    item_id: int
    slot: int
    draft: dict | None
    assigned_at: datetime


@dataclass(frozen=True)
class ItemView:
    """An item as the app needs it (statement, target group and the fields the exports use)."""
    id: int
    study_id: int
    position: int
    text: str
    target_group: str
    label: int | None
    method: str
    source_row_id: str


ASSIGNMENTS, ITEMS, RESPONSES, ANNOTATORS, STUDIES = (Assignment.__table__, Item.__table__, Response.__table__,
                                                      Annotator.__table__, Study.__table__)
ITEM_COLUMNS = (ITEMS.c.id, ITEMS.c.study_id, ITEMS.c.position, ITEMS.c.text, ITEMS.c.target_group, ITEMS.c.label,
                ITEMS.c.method, ITEMS.c.source_row_id)
RESPONSE_COLUMNS = ("assignment_id", "item_id", "annotator_id", *ANSWER_FIELDS, "started_at", "submitted_at")

SESSIONS = BrowserSession.__table__
ANNOTATOR_BY_SESSION = (select(ANNOTATORS, SESSIONS.c.expires_at)
                        .join(ANNOTATORS, ANNOTATORS.c.id == SESSIONS.c.annotator_id)
                        .where(SESSIONS.c.id_hash == bindparam("id_hash"), SESSIONS.c.kind == "annotator"))
ANNOTATOR_BY_TOKEN = select(ANNOTATORS).where(ANNOTATORS.c.token_hash == bindparam("token_hash"))
OPEN_ASSIGNMENT = (select(ASSIGNMENTS.c.id, ASSIGNMENTS.c.item_id, ASSIGNMENTS.c.slot, ASSIGNMENTS.c.draft,
                          ASSIGNMENTS.c.assigned_at, *ITEM_COLUMNS)
                   .join(ITEMS, ITEMS.c.id == ASSIGNMENTS.c.item_id)
                   .where(ASSIGNMENTS.c.annotator_id == bindparam("annotator_id"), ASSIGNMENTS.c.submitted.is_(False),
                          ASSIGNMENTS.c.released_at.is_(None))
                   .order_by(ASSIGNMENTS.c.id).limit(1))
# NOT EXISTS probes the (item_id, annotator_id) unique index per candidate; NOT IN would build the list of every
# item the annotator has had on each claim (10x slower late in a study)
CANDIDATES = (select(ITEMS.c.n_assigned, *ITEM_COLUMNS)
              .where(ITEMS.c.study_id == bindparam("study_id"), ITEMS.c.n_assigned < bindparam("per_item"),
                     ~select(ASSIGNMENTS.c.id).where(ASSIGNMENTS.c.item_id == ITEMS.c.id,
                                                     ASSIGNMENTS.c.annotator_id == bindparam("annotator_id")).exists())
              .order_by(ITEMS.c.n_assigned, ITEMS.c.position).limit(8))
COMPARE_AND_SET = (update(ITEMS).where(ITEMS.c.id == bindparam("item_id"), ITEMS.c.n_assigned == bindparam("seen"))
                   .values(n_assigned=bindparam("new")))
# The first statement of every write transaction that claims: claims of one study take turns. PostgreSQL locks the
# study row (FOR NO KEY UPDATE: foreign-key checks' KEY SHARE locks still pass); SQLite renders no FOR clause, its
# BEGIN IMMEDIATE serialises writers already. Without it PostgreSQL (READ COMMITTED) runs claims side by side: a
# compare-and-set that loses keeps the item row locked to the end of its transaction (deadlocks), a claim can lose
# `tries` rounds in a row (None while slots are free), and one annotator's two requests can claim two items.
LOCK_STUDY = select(STUDIES.c.id).where(STUDIES.c.id == bindparam("study_id")).with_for_update(key_share=True)
SUBMITTED_COUNT = (select(func.count()).select_from(RESPONSES)
                   .where(RESPONSES.c.annotator_id == bindparam("annotator_id")))
MARK_SUBMITTED = (update(ASSIGNMENTS)
                  .where(ASSIGNMENTS.c.id == bindparam("assignment_id"),
                         ASSIGNMENTS.c.annotator_id == bindparam("owner_id"),  # (a column name is reserved)
                         ASSIGNMENTS.c.submitted.is_(False), ASSIGNMENTS.c.released_at.is_(None))
                  .values(submitted=True, draft=None).returning(ASSIGNMENTS.c.item_id, ASSIGNMENTS.c.assigned_at))
RELEASED_STATE = (select(ASSIGNMENTS.c.released_at.is_not(None))
                  .where(ASSIGNMENTS.c.id == bindparam("assignment_id"),
                         ASSIGNMENTS.c.annotator_id == bindparam("annotator_id")))
ASSIGNMENT_COLUMNS = ("item_id", "annotator_id", "slot", "assigned_at")
# the columns are part of the statements (one bind each, typed by its column), so one compilation serves every call;
# a new assignment's fixed values are converted once, at compilation
NEW_ASSIGNMENT = (insert(ASSIGNMENTS).values({c: bindparam(c) for c in ASSIGNMENT_COLUMNS})
                  .values(submitted=False, draft=None))
NEW_RESPONSE = insert(RESPONSES).values({c: bindparam(c) for c in RESPONSE_COLUMNS})
STUDY_SHAPE = select(STUDIES.c.per_item, select(func.count()).select_from(ITEMS)
                     .where(ITEMS.c.study_id == STUDIES.c.id).scalar_subquery()
                     ).where(STUDIES.c.id == bindparam("study_id"))


class Executor(Protocol):
    """Runs a Core statement with named parameters inside the current transaction."""

    def rows(self, statement, params: dict[str, Any]) -> Sequence[Sequence[Any]]: ...
    def rowcount(self, statement, params: dict[str, Any]) -> int: ...
    def insert(self, statement, params: dict[str, Any]) -> int: ...


class CoreExecutor:
    """Statements on a SQLAlchemy connection (any database)."""

    def __init__(self, connection: Connection):
        self.connection = connection

    def rows(self, statement, params):
        return self.connection.execute(statement, params).all()

    def rowcount(self, statement, params) -> int:
        return self.connection.execute(statement, params).rowcount

    def insert(self, statement, params) -> int:
        key = self.connection.execute(statement, params).inserted_primary_key
        assert key is not None, "insert() runs INSERT statements"
        return key[0]


class CompiledStatement:
    """A Core statement compiled once for SQLite: its SQL, a plan for its positional parameters and the result
    processors of its columns.

    The plan is worked out once from the compiled statement, so an execution does not call SQLAlchemy's
    ``construct_params`` (a dict of every bind, about a third of the hot path's time): a bind that needs a value
    (``bindparam("annotator_id")``, an INSERT's columns) is read from the parameter dict by its key, a bind with a
    fixed value (``LIMIT 8``, ``submitted=True``) is converted once; SQLAlchemy's bind processors run only for the
    types that have one (DateTime, Boolean, JSON). Fixed values cannot be overridden per execution (the hot path
    never does), and binds with a callable value or rendered at execution time (``IN`` lists) are refused."""

    def __init__(self, statement, dialect: Dialect):
        compiled = statement.compile(dialect=dialect)
        if compiled.post_compile_params:
            raise ValueError(f"statement binds values at execution time, not supported here: {compiled}")
        self.sql = str(compiled)
        self.compiled = compiled
        by_name = {compiled.escaped_bind_names.get(name, name): param for param, name in compiled.bind_names.items()}
        plan = []
        for name in compiled.positiontup or ():
            param = by_name[name]
            process = param.type.dialect_impl(dialect).bind_processor(dialect)
            if param.required:
                plan.append((param.key, None, process))
            elif param.callable is not None:
                raise ValueError(f"bind parameter {param.key!r} has a callable value, not supported here")
            else:
                plan.append((None, param.value if process is None else process(param.value), None))
        self.plan = tuple(plan)
        self.keys = tuple(key for key, _, _ in plan)  # (None marks a fixed value)
        if plan and all(key is not None and process is None for key, _, process in plan):
            # the common case, values as they are: one C call (itemgetter of one key returns the bare value)
            get = itemgetter(*self.keys)
            # an instance attribute shadowing the method below: the fast path
            self.parameters = get if len(plan) > 1 else lambda params: (get(params),)  # type: ignore[method-assign,assignment]
        result = tuple(c.type.dialect_impl(dialect).result_processor(dialect, None)
                       for c in statement.exported_columns)  # selected or RETURNING columns
        self.converted = tuple((i, p) for i, p in enumerate(result) if p is not None)

    def parameters(self, params: dict[str, Any]) -> Sequence[Any]:
        """The positional parameters of one execution, from a dict with a value for every required bind."""
        return [fixed if key is None else params[key] if process is None else process(params[key])
                for key, fixed, process in self.plan]

    def rows(self, rows: list) -> list:
        """Driver rows with the columns' result processors applied (the rows as they are when none has one)."""
        if not self.converted:
            return rows
        out = []
        for row in rows:
            row = list(row)
            for i, process in self.converted:
                row[i] = process(row[i])
            out.append(tuple(row))
        return out


class SQLiteExecutor:
    """The same statements on the sqlite3 driver's cursor, each compiled once (shared cache per dialect)."""

    def __init__(self, cursor, dialect: Dialect, cache: dict):
        self.cursor, self.dialect, self.cache = cursor, dialect, cache

    def _compile(self, statement) -> CompiledStatement:
        found = self.cache[statement] = CompiledStatement(statement, self.dialect)
        return found

    def rows(self, statement, params):
        compiled = self.cache.get(statement) or self._compile(statement)
        rows = self.cursor.execute(compiled.sql, compiled.parameters(params)).fetchall()
        return compiled.rows(rows) if compiled.converted else rows

    def rowcount(self, statement, params) -> int:
        compiled = self.cache.get(statement) or self._compile(statement)
        return self.cursor.execute(compiled.sql, compiled.parameters(params)).rowcount

    def insert(self, statement, params) -> int:
        compiled = self.cache.get(statement) or self._compile(statement)
        return self.cursor.execute(compiled.sql, compiled.parameters(params)).lastrowid


class HotPathOperations(Protocol):
    """The statements of a claim and a submission, inside one transaction."""

    def open_assignment(self, annotator_id: int) -> tuple[OpenAssignment, ItemView] | None: ...
    def lock_study(self, study_id: int) -> None: ...
    def submitted_count(self, annotator_id: int) -> int: ...
    def study_shape(self, study_id: int) -> tuple[int, int] | None: ...
    def candidates(self, study_id: int, per_item: int, annotator_id: int) -> Sequence[Sequence[Any]]: ...
    def compare_and_set(self, item_id: int, seen: int) -> bool: ...
    def new_assignment(self, item_id: int, annotator_id: int, slot: int, now: datetime) -> int: ...
    def mark_submitted(self, assignment_id: int, annotator_id: int) -> tuple[int, datetime] | None: ...
    def released_state(self, assignment_id: int, annotator_id: int) -> bool | None: ...
    def new_response(self, values: dict[str, Any]) -> None: ...


def split_open(row: Sequence[Any]) -> tuple[OpenAssignment, ItemView]:
    return OpenAssignment(*row[:5]), ItemView(*row[5:])


class HotPath:
    """:class:`HotPathOperations` over an :class:`Executor`."""

    def __init__(self, executor: Executor, *, lock_studies: bool):
        self.executor = executor
        self.lock_studies = lock_studies  # False on SQLite: BEGIN IMMEDIATE holds the write lock already

    def _first(self, statement, params):
        rows = self.executor.rows(statement, params)
        return rows[0] if rows else None

    def open_assignment(self, annotator_id):
        row = self._first(OPEN_ASSIGNMENT, {"annotator_id": annotator_id})
        return None if row is None else split_open(row)

    def lock_study(self, study_id) -> None:
        if self.lock_studies:
            self.executor.rows(LOCK_STUDY, {"study_id": study_id})

    def submitted_count(self, annotator_id) -> int:
        return self._first(SUBMITTED_COUNT, {"annotator_id": annotator_id})[0]

    def study_shape(self, study_id):
        row = self._first(STUDY_SHAPE, {"study_id": study_id})
        return None if row is None else (int(row[0]), int(row[1]))

    def candidates(self, study_id, per_item, annotator_id):  # rows (n_assigned, *item columns)
        return self.executor.rows(CANDIDATES, {"study_id": study_id, "per_item": per_item,
                                               "annotator_id": annotator_id})

    def compare_and_set(self, item_id, seen) -> bool:
        return self.executor.rowcount(COMPARE_AND_SET, {"item_id": item_id, "seen": seen, "new": seen + 1}) == 1

    def new_assignment(self, item_id, annotator_id, slot, now) -> int:
        return self.executor.insert(NEW_ASSIGNMENT, {"item_id": item_id, "annotator_id": annotator_id, "slot": slot,
                                                     "assigned_at": now})

    def mark_submitted(self, assignment_id, annotator_id):
        row = self._first(MARK_SUBMITTED, {"assignment_id": assignment_id, "owner_id": annotator_id})
        return None if row is None else (row[0], row[1])

    def released_state(self, assignment_id, annotator_id):
        row = self._first(RELEASED_STATE, {"assignment_id": assignment_id, "annotator_id": annotator_id})
        return None if row is None else bool(row[0])

    def new_response(self, values) -> None:
        self.executor.insert(NEW_RESPONSE, values)  # values: one per RESPONSE_COLUMNS
