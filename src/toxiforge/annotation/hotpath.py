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
NEW_ASSIGNMENT = insert(ASSIGNMENTS)  # executed with a parameter dict: the columns come from its keys
NEW_RESPONSE = insert(RESPONSES)
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
        return self.connection.execute(statement, params).inserted_primary_key[0]


class CompiledStatement:
    """A Core statement compiled once for SQLite: its SQL, its positional parameter names with their SQLAlchemy bind
    processors and default values, and the result processors of its columns."""

    def __init__(self, statement, dialect: Dialect, column_keys: Sequence[str] | None = None):
        compiled = statement.compile(dialect=dialect, column_keys=list(column_keys) if column_keys else None)
        self.sql = str(compiled)
        self.compiled = compiled
        self.names = tuple(compiled.positiontup or ())
        processors = {name: param.type.dialect_impl(dialect).bind_processor(dialect)
                      for param, name in compiled.bind_names.items()}
        self.bind = tuple(processors.get(name) for name in self.names)
        self.result = tuple(c.type.dialect_impl(dialect).result_processor(dialect, None)
                            for c in statement.exported_columns)  # selected or RETURNING columns
        self.converts_results = any(self.result)

    def parameters(self, params: dict[str, Any]) -> tuple:
        values = self.compiled.construct_params(params)
        return tuple(values[n] if p is None else p(values[n]) for n, p in zip(self.names, self.bind))

    def convert(self, row: Sequence[Any]) -> tuple:
        if not self.converts_results:
            return tuple(row)
        return tuple(v if p is None else p(v) for v, p in zip(row, self.result))


class SQLiteExecutor:
    """The same statements on the sqlite3 driver's cursor, each compiled once (shared cache per dialect)."""

    def __init__(self, cursor, dialect: Dialect, cache: dict):
        self.cursor, self.dialect, self.cache = cursor, dialect, cache

    def _compiled(self, statement, params) -> CompiledStatement:
        key = (statement, tuple(params) if statement.is_insert else None)
        found = self.cache.get(key)
        if found is None:
            found = self.cache[key] = CompiledStatement(statement, self.dialect,
                                                        tuple(params) if statement.is_insert else None)
        return found

    def rows(self, statement, params):
        compiled = self._compiled(statement, params)
        return [compiled.convert(r) for r in self.cursor.execute(compiled.sql, compiled.parameters(params))]

    def rowcount(self, statement, params) -> int:
        compiled = self._compiled(statement, params)
        return self.cursor.execute(compiled.sql, compiled.parameters(params)).rowcount

    def insert(self, statement, params) -> int:
        compiled = self._compiled(statement, params)
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
                                                     "submitted": False, "draft": None, "assigned_at": now})

    def mark_submitted(self, assignment_id, annotator_id):
        row = self._first(MARK_SUBMITTED, {"assignment_id": assignment_id, "owner_id": annotator_id})
        return None if row is None else (row[0], row[1])

    def released_state(self, assignment_id, annotator_id):
        row = self._first(RELEASED_STATE, {"assignment_id": assignment_id, "annotator_id": annotator_id})
        return None if row is None else bool(row[0])

    def new_response(self, values) -> None:
        self.executor.insert(NEW_RESPONSE, {c: values[c] for c in RESPONSE_COLUMNS})
