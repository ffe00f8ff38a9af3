"""Storage of annotation studies (SQLAlchemy 2.x): SQLite file by default (WAL mode), PostgreSQL by URL.

Tables: ``studies``, ``items`` (statement, target group, label, method, source row id), ``annotators`` (only a
SHA-256 hash of each invite token is stored), ``assignments`` (one per item and annotator, numbered slot per
item) and ``responses`` (the form's answers and timestamps; one per assignment).

Assignment rules, enforced by unique constraints as well as by the code: an item gets at most ``per_item``
assignments (``slot`` in 0..per_item-1, unique per item), an annotator at most one per item, and at most one
response per assignment. Items are handed out least-assigned first; a claim is a compare-and-set
``UPDATE items SET n_assigned = n_assigned + 1 WHERE id = ? AND n_assigned = ?`` in the same transaction as the
new assignment row, so two annotators working at once never get the same slot (SQLite runs write transactions
with ``BEGIN IMMEDIATE``; PostgreSQL re-checks the condition after the row lock).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import sqlite3
import threading
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from toxiforge.annotation.schema import (ANSWER_FIELDS, DEFAULT_LEASE_MINUTES, Annotator, Assignment,  # noqa: F401
                                         MAX_ID, Base, Item, Meta, Response, Study, db_url, hash_token,
                                         make_engine, new_token, prepare_schema, utcnow)  # (re-exported)
from toxiforge.annotation.leases import open_assignments
from toxiforge.errors import InputError


_RETRY = object()


class _Conflict(Exception):
    """Raised inside a transaction to roll it back and try again."""


class AssignmentReleased(InputError):
    """A submission for an assignment that was released (open past its study's lease, or by an admin) and may
    now be another annotator's: nothing is stored."""

    def __init__(self, assignment_id: int):
        super().__init__(f"assignment {assignment_id} was released before it was submitted; the answers were not "
                         "stored", hint="answer the next statement")


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


_A, _I, _R, _N, _S = (Assignment.__table__, Item.__table__, Response.__table__, Annotator.__table__,
                      Study.__table__)
_ITEM_COLS = (_I.c.id, _I.c.study_id, _I.c.position, _I.c.text, _I.c.target_group, _I.c.label, _I.c.method,
              _I.c.source_row_id)
# Prebuilt statements of the hot path (compiled once, then served from SQLAlchemy's statement cache).
_Q_ANNOTATOR = select(_N).where(_N.c.token_hash == bindparam("h"))
_Q_OPEN = (select(_A.c.id, _A.c.item_id, _A.c.slot, _A.c.draft, _A.c.assigned_at, *_ITEM_COLS)
           .join(_I, _I.c.id == _A.c.item_id)
           .where(_A.c.annotator_id == bindparam("w"), _A.c.submitted.is_(False), _A.c.released_at.is_(None))
           .order_by(_A.c.id).limit(1))
_Q_ITEM = select(*_ITEM_COLS).where(_I.c.id == bindparam("i"))
# NOT EXISTS probes the (item_id, annotator_id) unique index per candidate; NOT IN would build the list of every
# item the annotator has had on each claim (10x slower late in a study)
_Q_CANDIDATES = (select(_I.c.n_assigned, *_ITEM_COLS)
                 .where(_I.c.study_id == bindparam("s"), _I.c.n_assigned < bindparam("p"),
                        ~select(_A.c.id).where(_A.c.item_id == _I.c.id, _A.c.annotator_id == bindparam("w"))
                        .exists())
                 .order_by(_I.c.n_assigned, _I.c.position).limit(8))
_Q_CAS = (update(_I).where(_I.c.id == bindparam("i"), _I.c.n_assigned == bindparam("n"))
          .values(n_assigned=bindparam("n1")))
# The first statement of every write transaction that claims: claims of one study take turns. PostgreSQL locks the
# study row (FOR NO KEY UPDATE: foreign-key checks' KEY SHARE locks still pass); SQLite renders no FOR clause, its
# BEGIN IMMEDIATE serialises writers already. Without it PostgreSQL (READ COMMITTED) runs claims side by side: a
# compare-and-set that loses keeps the item row locked to the end of its transaction (deadlocks), a claim can lose
# `tries` rounds in a row (None while slots are free), and one annotator's two requests can claim two items.
_Q_LOCK_STUDY = select(_S.c.id).where(_S.c.id == bindparam("s")).with_for_update(key_share=True)
_Q_DONE = select(func.count()).select_from(_R).where(_R.c.annotator_id == bindparam("w"))
_Q_MARK = (update(_A).where(_A.c.id == bindparam("a"), _A.c.annotator_id == bindparam("w"),
                            _A.c.submitted.is_(False), _A.c.released_at.is_(None))
           .values(submitted=True, draft=None).returning(_A.c.item_id, _A.c.assigned_at))
_Q_OWNED = select(_A.c.released_at.is_not(None)).where(_A.c.id == bindparam("a"), _A.c.annotator_id == bindparam("w"))
_Q_NEW_ASSIGNMENT = insert(_A)  # executed with a parameter dict: built and compiled once
_Q_NEW_RESPONSE = insert(_R)
_Q_STUDY = select(_S.c.per_item, select(func.count()).select_from(_I).where(_I.c.study_id == _S.c.id)
                  .scalar_subquery()).where(_S.c.id == bindparam("s"))


def _no_nul(text: str) -> str:
    """PostgreSQL text cannot hold NUL characters (SQLite can): they are dropped on every database."""
    return text.replace("\x00", "")


def _split_open(row) -> tuple[OpenAssignment, ItemView]:
    return (OpenAssignment(row[0], row[1], row[2], row[3], row[4]), ItemView(*row[5:]))


class _CoreOps:
    """The hot path's statements on a SQLAlchemy connection (any database)."""

    def __init__(self, conn: Connection):
        self.conn = conn

    def open(self, w: int):
        row = self.conn.execute(_Q_OPEN, {"w": w}).first()
        return None if row is None else _split_open(row)

    def lock_study(self, s: int) -> None:
        self.conn.execute(_Q_LOCK_STUDY, {"s": s})

    def done(self, w: int) -> int:
        return self.conn.execute(_Q_DONE, {"w": w}).scalar_one()

    def study(self, s: int):
        return self.conn.execute(_Q_STUDY, {"s": s}).first()

    def candidates(self, s: int, p: int, w: int):  # rows (n_assigned, *item columns)
        return self.conn.execute(_Q_CANDIDATES, {"s": s, "p": p, "w": w}).all()

    def cas(self, i: int, n: int) -> bool:
        return self.conn.execute(_Q_CAS, {"i": i, "n": n, "n1": n + 1}).rowcount == 1

    def new_assignment(self, item_id: int, w: int, slot: int, now: datetime) -> int:
        return self.conn.execute(_Q_NEW_ASSIGNMENT, {"item_id": item_id, "annotator_id": w, "slot": slot,
                                                     "submitted": False, "draft": None,
                                                     "assigned_at": now}).inserted_primary_key[0]

    def mark(self, a: int, w: int):  # (item_id, assigned_at) of the assignment now marked submitted, or None
        return self.conn.execute(_Q_MARK, {"a": a, "w": w}).first()

    def owned(self, a: int, w: int) -> bool | None:  # None: not this annotator's; else whether it was released
        row = self.conn.execute(_Q_OWNED, {"a": a, "w": w}).first()
        return None if row is None else bool(row[0])

    def new_response(self, values: dict[str, Any]) -> None:
        self.conn.execute(_Q_NEW_RESPONSE, values)


_RESPONSE_COLS = ("assignment_id", "item_id", "annotator_id", *ANSWER_FIELDS, "started_at", "submitted_at")
_ITEM_SQL = "i.id, i.study_id, i.position, i.text, i.target_group, i.label, i.method, i.source_row_id"
_RAW_SQL = {
    "open": f"SELECT a.id, a.item_id, a.slot, a.draft, a.assigned_at, {_ITEM_SQL} FROM assignments a "
            "JOIN items i ON i.id = a.item_id WHERE a.annotator_id = ? AND a.submitted = 0 AND a.released_at IS NULL "
            "ORDER BY a.id LIMIT 1",
    "done": "SELECT count(*) FROM responses WHERE annotator_id = ?",
    "study": "SELECT per_item, (SELECT count(*) FROM items WHERE study_id = studies.id) FROM studies WHERE id = ?",
    "candidates": f"SELECT i.n_assigned, {_ITEM_SQL} FROM items i WHERE i.study_id = ? AND i.n_assigned < ? "
                  "AND NOT EXISTS (SELECT 1 FROM assignments a WHERE a.item_id = i.id AND a.annotator_id = ?) "
                  "ORDER BY i.n_assigned, i.position LIMIT 8",
    "cas": "UPDATE items SET n_assigned = ? WHERE id = ? AND n_assigned = ?",
    "new_assignment": "INSERT INTO assignments (item_id, annotator_id, slot, submitted, draft, assigned_at) "
                      "VALUES (?, ?, ?, 0, NULL, ?)",
    "mark": "UPDATE assignments SET submitted = 1, draft = NULL WHERE id = ? AND annotator_id = ? AND submitted = 0 "
            "AND released_at IS NULL RETURNING item_id, assigned_at",
    "owned": "SELECT released_at IS NOT NULL FROM assignments WHERE id = ? AND annotator_id = ?",
    "new_response": f"INSERT INTO responses ({', '.join(_RESPONSE_COLS)}) "
                    f"VALUES ({', '.join('?' for _ in _RESPONSE_COLS)})",
}


class _RawOps:
    """The same statements on the driver's own sqlite3 connection: a SQLite-only fast path that skips
    SQLAlchemy's per-statement machinery (about half the server's time per submission otherwise). Values are
    converted with SQLAlchemy's own SQLite type processors, so rows read the same through either path."""

    def __init__(self, cur, conv):
        self.cur, (self.dt_in, self.dt_out, self.json_out) = cur, conv

    def open(self, w: int):
        row = self.cur.execute(_RAW_SQL["open"], (w,)).fetchone()
        if row is None:
            return None
        return (OpenAssignment(row[0], row[1], row[2], self.json_out(row[3]), self.dt_out(row[4])),
                ItemView(*row[5:]))

    def done(self, w: int) -> int:
        return self.cur.execute(_RAW_SQL["done"], (w,)).fetchone()[0]

    def lock_study(self, s: int) -> None:
        pass  # BEGIN IMMEDIATE holds SQLite's write lock already

    def study(self, s: int):
        return self.cur.execute(_RAW_SQL["study"], (s,)).fetchone()

    def candidates(self, s: int, p: int, w: int):
        return self.cur.execute(_RAW_SQL["candidates"], (s, p, w)).fetchall()

    def cas(self, i: int, n: int) -> bool:
        return self.cur.execute(_RAW_SQL["cas"], (n + 1, i, n)).rowcount == 1

    def new_assignment(self, item_id: int, w: int, slot: int, now: datetime) -> int:
        return self.cur.execute(_RAW_SQL["new_assignment"], (item_id, w, slot, self.dt_in(now))).lastrowid

    def mark(self, a: int, w: int):
        row = self.cur.execute(_RAW_SQL["mark"], (a, w)).fetchone()
        return None if row is None else (row[0], self.dt_out(row[1]))

    def owned(self, a: int, w: int) -> bool | None:
        row = self.cur.execute(_RAW_SQL["owned"], (a, w)).fetchone()
        return None if row is None else bool(row[0])

    def new_response(self, values: dict[str, Any]) -> None:
        values = {**values, "started_at": self.dt_in(values["started_at"]),
                  "submitted_at": self.dt_in(values["submitted_at"]), "trouble": int(bool(values["trouble"]))}
        self.cur.execute(_RAW_SQL["new_response"], tuple(values[c] for c in _RESPONSE_COLS))


class Store:
    """Sessions and operations on one database."""

    def __init__(self, url: str | Engine, *, fast_sqlite: bool = True):
        self.engine = url if isinstance(url, Engine) else make_engine(url)
        prepare_schema(self.engine)
        self.reader = self.engine.execution_options(readonly=True)  # deferred BEGIN on SQLite
        self.Session = sessionmaker(self.engine, expire_on_commit=False)
        self.ReadSession = sessionmaker(self.reader, expire_on_commit=False)
        self.secret = self._secret()
        self._studies: dict[int, tuple[int, int]] = {}  # study id -> (per_item, item count); both never change
        self._raw = None  # the SQLite fast path's connection (see _RawOps), opened on first use
        self._checkpointer: threading.Thread | None = None
        self._raw_lock = threading.Lock()
        self.fast_sqlite = fast_sqlite and self.engine.dialect.name == "sqlite" and \
            self.engine.url.database not in (None, "", ":memory:")

    def _secret(self) -> bytes:
        with self.Session.begin() as s:
            row = s.get(Meta, "secret")
            if row is None:
                row = Meta(key="secret", value=secrets.token_hex(32))
                s.add(row)
        return bytes.fromhex(row.value)

    def keyed_hash(self, purpose: str, value: str | int) -> str:
        """A stable keyed hash (HMAC-SHA256 with this database's secret), e.g. public annotator ids."""
        return hmac.new(self.secret, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()

    # --- studies, items, annotators ---------------------------------------------------------------------------

    def create_study(self, name: str, items: list[dict[str, Any]], *, per_item: int = 3, source: str = "",
                     lease_minutes: int = DEFAULT_LEASE_MINUTES) -> tuple[Study, str]:
        """Create a study with ``items`` (dicts with text, target_group, label, method, source_row_id).

        ``lease_minutes``: an assignment still open after this long is released to other annotators (0: never).
        Returns the study and its admin token (shown once; only its hash is stored)."""
        if per_item < 1:
            raise InputError(f"per_item must be at least 1, got {per_item}", hint="use --per-item 3")
        if lease_minutes < 0:
            raise InputError(f"lease_minutes must be 0 (never release) or more, got {lease_minutes}",
                             hint="use --lease-minutes 120")
        if not items:
            raise InputError("a study needs at least one item", hint="check the dataset and --sample")
        token = new_token()
        with self.Session.begin() as s:
            if s.scalar(select(Study.id).where(Study.name == name)) is not None:
                raise InputError(f"a study named {name!r} already exists", hint="choose another --name")
            study = Study(name=name, per_item=per_item, admin_token_hash=hash_token(token), source=source,
                          lease_minutes=lease_minutes)
            s.add(study)
            s.flush()
            s.add_all(Item(study_id=study.id, position=i, text=_no_nul(it["text"]),
                           target_group=_no_nul(it.get("target_group") or ""), label=it.get("label"),
                           method=_no_nul(it.get("method") or ""),
                           source_row_id=_no_nul(str(it.get("source_row_id") or "")))
                      for i, it in enumerate(items))
        return study, token

    def study(self, ref: str | int) -> Study:
        """A study by id or name."""
        with self.ReadSession() as s:
            study = None
            if (isinstance(ref, int) or str(ref).isdigit()) and int(ref) <= MAX_ID:
                study = s.get(Study, int(ref))
            if study is None:
                study = s.scalar(select(Study).where(Study.name == str(ref)))
        if study is None:
            raise InputError(f"no study {ref!r}", hint="give a study id or name ('annotate study create' makes one)")
        return study

    def study_for_admin(self, token: str) -> Study | None:
        with self.ReadSession() as s:
            return s.scalar(select(Study).where(Study.admin_token_hash == hash_token(token)))

    def invite(self, study_id: int, n: int = 1, label: str = "") -> list[str]:
        """Create ``n`` annotators; returns their tokens (only hashes are stored)."""
        tokens = [new_token() for _ in range(n)]
        with self.Session.begin() as s:
            s.add_all(Annotator(study_id=study_id, token_hash=hash_token(t), label=label) for t in tokens)
        return tokens

    def annotator_for(self, token: str):
        """The annotator row (id, study_id, consented_at, ...) of an invite token, or None."""
        with self.reader.connect() as conn:
            return conn.execute(_Q_ANNOTATOR, {"h": hash_token(token)}).first()

    def consent(self, annotator_id: int) -> None:
        with self.Session.begin() as s:
            s.execute(update(Annotator).where(Annotator.id == annotator_id, Annotator.consented_at.is_(None))
                      .values(consented_at=utcnow()))

    # --- assignment -------------------------------------------------------------------------------------------

    def start_checkpointer(self, interval: float = 0.1) -> None:
        """Move SQLite's WAL checkpoints (which write the WAL back into the database file and fsync it, several ms)
        off the commits of the fast path into a daemon thread that runs ``PRAGMA wal_checkpoint(PASSIVE)`` every
        ``interval`` seconds (SQLite releases the GIL meanwhile; writers go on appending to the WAL). Used by the
        server; without it commits checkpoint themselves every 1000 WAL pages as usual. Durability is unchanged:
        a commit is in the WAL before it returns. The thread ends when the store is garbage-collected."""
        if not self.fast_sqlite or self._checkpointer is not None or self._raw is not None:
            return
        ref, path = weakref.ref(self), self.engine.url.database

        def run() -> None:
            conn = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
            try:
                while ref() is not None:
                    time.sleep(interval)
                    try:
                        conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    except sqlite3.Error:  # busy, or the file went away (tests): try again later
                        pass
            finally:
                conn.close()

        self._checkpointer = threading.Thread(target=run, name="toxiforge-wal-checkpoint", daemon=True)
        self._checkpointer.start()

    @contextmanager
    def _txn(self, write: bool):
        """A transaction on the hot path's statements: ``BEGIN IMMEDIATE`` for writes, a deferred ``BEGIN`` for
        reads on SQLite; committed on leaving the block (durable once it returns), rolled back on an error."""
        if not self.fast_sqlite:
            with (self.engine if write else self.reader).begin() as conn:
                yield _CoreOps(conn)
            return
        with self._raw_lock:
            if self._raw is None:
                dialect, dt, js = self.engine.dialect, _A.c.assigned_at.type, _A.c.draft.type
                self._conv = (dt.dialect_impl(dialect).bind_processor(dialect),
                              dt.dialect_impl(dialect).result_processor(dialect, None),
                              js.dialect_impl(dialect).result_processor(dialect, None))
                self._raw = self.engine.raw_connection()  # a pooled connection: same pragmas, kept for good
            raw = self._raw.driver_connection
            cur = raw.cursor()
            try:
                cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
                yield _RawOps(cur, self._conv)
                cur.execute("COMMIT")
            except BaseException:
                if raw.in_transaction:
                    raw.execute("ROLLBACK")
                raise
            finally:
                cur.close()

    def study_shape(self, study_id: int, ops=None) -> tuple[int, int]:
        """(per_item, number of items) of a study; cached, as neither changes after the study is created."""
        shape = self._studies.get(study_id)
        if shape is None:
            if ops is None:
                with self.reader.connect() as conn:
                    row = _CoreOps(conn).study(study_id)
            else:
                row = ops.study(study_id)
            if row is None:
                return 0, 0
            shape = self._studies[study_id] = (int(row[0]), int(row[1]))
        return shape

    def next_assignment(self, annotator, *, tries: int = 20) -> tuple[OpenAssignment, ItemView] | None:
        """The annotator's open assignment, or a newly claimed one (least-assigned item first); None when the
        annotator has nothing left to do."""
        return self.open_assignment(annotator, tries=tries)[0]

    def open_assignment(self, annotator, *, tries: int = 20) -> tuple[tuple[OpenAssignment, ItemView] | None, int]:
        """(the annotator's open or newly claimed assignment or None, how many they have submitted)."""
        with self._txn(write=False) as ops:  # the common case, a read: the open assignment
            found = ops.open(annotator.id)
            if found is not None:
                return found, ops.done(annotator.id)
        for _ in range(tries):
            try:
                with self._txn(write=True) as ops:
                    ops.lock_study(annotator.study_id)
                    found = self._claim(ops, annotator.id, annotator.study_id)
                    if found is not _RETRY:
                        return found, ops.done(annotator.id)
            except (IntegrityError, sqlite3.IntegrityError):
                continue  # another annotator took the slot first: try again
        return None, self.annotator_done(annotator.id)

    def _claim(self, ops, annotator_id: int, study_id: int):
        found = ops.open(annotator_id)
        if found is not None:
            return found
        per_item, _ = self.study_shape(study_id, ops)
        candidates = ops.candidates(study_id, per_item, annotator_id)
        if not candidates:
            return None
        for n, *item in candidates:
            if ops.cas(item[0], n):
                now = utcnow()
                new_id = ops.new_assignment(item[0], annotator_id, n, now)
                return OpenAssignment(new_id, item[0], n, None, now), ItemView(*item)
        return _RETRY

    def get_assignment(self, annotator_id: int, assignment_id: int) -> tuple[Assignment, Item] | None:
        """An assignment of this annotator (None for another annotator's)."""
        with self.ReadSession() as s:
            row = s.execute(select(Assignment, Item).join(Item, Item.id == Assignment.item_id)
                            .where(Assignment.id == assignment_id, Assignment.annotator_id == annotator_id)).first()
        return None if row is None else (row[0], row[1])

    def save_draft(self, annotator_id: int, assignment_id: int, draft: dict[str, Any]) -> bool:
        with self.Session.begin() as s:
            return s.execute(update(Assignment).where(Assignment.id == assignment_id,
                                                      Assignment.annotator_id == annotator_id,
                                                      Assignment.submitted.is_(False),
                                                      Assignment.released_at.is_(None))
                             .values(draft=draft)).rowcount == 1

    def _submit(self, ops, annotator_id: int, assignment_id: int, answers: dict[str, Any]) -> bool:
        marked = ops.mark(assignment_id, annotator_id)
        if marked is None:
            released = ops.owned(assignment_id, annotator_id)
            if released is None:
                raise InputError(f"no assignment {assignment_id} for this annotator", hint="reload the page")
            if released:
                raise AssignmentReleased(assignment_id)
            return False  # already submitted: a repeated POST
        ops.new_response({"assignment_id": assignment_id, "item_id": marked[0], "annotator_id": annotator_id,
                          "started_at": marked[1], "submitted_at": utcnow(),
                          **{k: answers[k] for k in ANSWER_FIELDS}})
        return True

    def submit(self, annotator_id: int, assignment_id: int, answers: dict[str, Any]) -> bool:
        """Store the response of an open assignment; True when stored now, False when it was already submitted
        (a repeated POST), and an :class:`InputError` for an assignment that is not this annotator's."""
        with self._txn(write=True) as ops:
            return self._submit(ops, annotator_id, assignment_id, answers)

    def submit_and_next(self, annotator, assignment_id: int, answers: dict[str, Any], *, tries: int = 20
                        ) -> tuple[bool, tuple[OpenAssignment, ItemView] | None, int]:
        """:meth:`submit` and :meth:`open_assignment` in one write transaction: (stored now, the next assignment
        or None, how many the annotator has submitted). The response is durable once this returns."""
        for _ in range(tries):
            try:
                with self._txn(write=True) as ops:
                    ops.lock_study(annotator.study_id)  # before the assignment row (release_stale's order)
                    stored = self._submit(ops, annotator.id, assignment_id, answers)
                    found = self._claim(ops, annotator.id, annotator.study_id)
                    if found is not _RETRY:
                        return stored, found, ops.done(annotator.id)
                    raise _Conflict  # every candidate slot was taken meanwhile: roll back, start again
            except (IntegrityError, sqlite3.IntegrityError, _Conflict):
                continue  # PostgreSQL only: SQLite's BEGIN IMMEDIATE serialises writers
        stored = self.submit(annotator.id, assignment_id, answers)
        found, done = self.open_assignment(annotator, tries=tries)
        return stored, found, done

    # --- reporting --------------------------------------------------------------------------------------------

    def progress(self, study_id: int) -> dict[str, Any]:
        with self.ReadSession() as s:
            study = s.get(Study, study_id)
            n_items = s.scalar(select(func.count()).select_from(Item).where(Item.study_id == study_id)) or 0
            n_resp = s.scalar(select(func.count()).select_from(Response).join(Item, Item.id == Response.item_id)
                              .where(Item.study_id == study_id)) or 0
            per_ann = s.execute(select(Annotator.id, Annotator.consented_at, func.count(Response.id))
                                .outerjoin(Response, Response.annotator_id == Annotator.id)
                                .where(Annotator.study_id == study_id).group_by(Annotator.id)
                                .order_by(Annotator.id)).all()
        total = n_items * study.per_item
        open_minutes = open_assignments(self, study_id)
        return {"study": study.name, "study_id": study_id, "items": n_items, "per_item": study.per_item,
                "responses": n_resp, "needed": total, "done_fraction": (n_resp / total) if total else 0.0,
                "open": len(open_minutes), "oldest_open_minutes": max(open_minutes.values(), default=0.0),
                "annotators": [{"id": self.keyed_hash("annotator", a)[:12], "consented": c is not None,
                                "responses": n, "open_minutes": open_minutes.get(a)} for a, c, n in per_ann]}

    def responses(self, study_id: int) -> list[tuple[Item, Response]]:
        """Every (item, response) pair of a study, by item then submission order."""
        with self.ReadSession() as s:
            rows = s.execute(select(Item, Response).join(Response, Response.item_id == Item.id)
                             .where(Item.study_id == study_id).order_by(Item.position, Response.id)).all()
        return [(i, r) for i, r in rows]

    def items(self, study_id: int) -> list[Item]:
        with self.ReadSession() as s:
            return list(s.scalars(select(Item).where(Item.study_id == study_id).order_by(Item.position)))

    def annotator_done(self, annotator_id: int) -> int:
        with self.reader.connect() as conn:
            return conn.execute(_Q_DONE, {"w": annotator_id}).scalar_one()

    def item_count(self, study_id: int) -> int:
        return self.study_shape(study_id)[1]
