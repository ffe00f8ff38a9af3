"""The annotation store's database: its engine and sessions, its secret and ``meta`` table, and the transactions
the hot path (claims and submissions, :mod:`toxiforge.annotation.hotpath`) runs in.

On SQLite (a file) the hot path runs on the driver's own connections (``BEGIN IMMEDIATE`` for writes, a deferred
``BEGIN`` for reads), this process's writers queue on one lock, and :meth:`Database.without_waiting` lets the app
try a write on the event loop without ever waiting for SQLite's write lock. Elsewhere (PostgreSQL, SQLite in
memory) the same statements run through SQLAlchemy Core. :class:`toxiforge.annotation.store.Store` adds the
operations on studies, sessions, assignments and responses.
"""

from __future__ import annotations

import hashlib
import hmac
import queue
import secrets
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Engine
from sqlalchemy.orm import sessionmaker
from sqlalchemy.pool import PoolProxiedConnection

from toxiforge.annotation.checkpoint import start_wal_checkpointer
from toxiforge.annotation.hotpath import CoreExecutor, HotPath, HotPathOperations, SQLiteExecutor
from toxiforge.annotation.schema import Meta, make_engine, prepare_schema

__all__ = ["Database", "WouldWait"]


class WouldWait(Exception):
    """A write transaction would have waited for SQLite's write lock (only inside :meth:`Database.without_waiting`);
    nothing was done."""


_IDLE_SQLITE_CONNECTIONS = 16  # driver connections the SQLite fast path keeps between transactions


class Database:
    """One database's engine, sessions and hot-path transactions (the base of
    :class:`~toxiforge.annotation.store.Store`)."""

    def __init__(self, url: str | Engine, *, fast_sqlite: bool = True, busy_timeout: float = 10.0):
        """``busy_timeout``: seconds a SQLite write waits for another process's lock before it fails."""
        self.engine = url if isinstance(url, Engine) else make_engine(url, busy_timeout=busy_timeout)
        prepare_schema(self.engine)
        self.reader = self.engine.execution_options(readonly=True)  # deferred BEGIN on SQLite
        self.Session = sessionmaker(self.engine, expire_on_commit=False)
        self.ReadSession = sessionmaker(self.reader, expire_on_commit=False)
        self.secret = self._secret()
        self._studies: dict[int, tuple[int, int]] = {}  # study id -> (per_item, item count); both never change
        self._forms: dict[int, str] = {}  # study id -> its form (Store.study_form); never changes
        # the SQLite fast path's driver connections (see hotpath.SQLiteExecutor), one per concurrent transaction:
        # store calls run in a thread pool, and a sqlite3 connection holds one transaction at a time
        self._sqlite_connections: queue.SimpleQueue = queue.SimpleQueue()
        # the connection for writes inside without_waiting (busy timeout 0, see _txn)
        self._no_wait_connection: PoolProxiedConnection | None = None
        self._compiled: dict = {}  # Core statement -> CompiledStatement, for the SQLite fast path
        # this process's SQLite writers queue here rather than in SQLite's busy handler, whose sleeps back off
        # (1, 2, 5 ... 100 ms) and gave submissions a tail of seconds under load; other processes still wait in it
        self._sqlite_writer = threading.Lock()
        self._no_wait = threading.local()  # see without_waiting
        self._checkpointer: threading.Thread | None = None
        self.fast_sqlite = fast_sqlite and self.engine.dialect.name == "sqlite" and \
            self.engine.url.database not in (None, "", ":memory:")

    def _secret(self) -> bytes:
        with self.Session.begin() as s:
            row = s.get(Meta, "secret")
            if row is None:
                row = Meta(key="secret", value=secrets.token_hex(32))
                s.add(row)
        return bytes.fromhex(row.value)

    def get_meta(self, key: str) -> str | None:
        """A value of the database's ``meta`` table (e.g. ``serve_url``, written by ``annotate serve``), or None."""
        with self.ReadSession() as s:
            row = s.get(Meta, key)
            return None if row is None else row.value

    def set_meta(self, key: str, value: str) -> None:
        """Insert or replace a value of the ``meta`` table."""
        with self.Session.begin() as s:
            s.merge(Meta(key=key, value=value))

    def keyed_hash(self, purpose: str, value: str | int) -> str:
        """A stable keyed hash (HMAC-SHA256 with this database's secret), e.g. public annotator ids."""
        return hmac.new(self.secret, f"{purpose}:{value}".encode(), hashlib.sha256).hexdigest()

    def start_checkpointer(self, interval: float = 0.1) -> None:
        """Move SQLite's WAL checkpoints off the commits into a background thread (see
        :mod:`toxiforge.annotation.checkpoint`); used by the server. The thread ends with the store."""
        database = self.engine.url.database  # a file whenever fast_sqlite
        if self.fast_sqlite and self._checkpointer is None and database:
            self._checkpointer = start_wal_checkpointer(self, database, interval)

    @contextmanager
    def _txn(self, write: bool) -> Iterator[HotPathOperations]:
        """A transaction on the hot path's statements: ``BEGIN IMMEDIATE`` for writes, a deferred ``BEGIN`` for
        reads on SQLite; committed on leaving the block (durable once it returns), rolled back on an error."""
        if not self.fast_sqlite:
            serialise = write and self.engine.dialect.name == "sqlite"
            if serialise:
                self._sqlite_writer.acquire()
            try:
                with (self.engine if write else self.reader).begin() as conn:
                    yield HotPath(CoreExecutor(conn), lock_studies=True)
            finally:
                if serialise:
                    self._sqlite_writer.release()
            return
        no_wait = write and getattr(self._no_wait, "on", False)
        if write and not self._sqlite_writer.acquire(blocking=not no_wait):
            raise WouldWait  # another of this process's writers is in a transaction
        if no_wait:
            # a write that must not wait runs on its own connection, whose busy timeout is 0 for good (set once),
            # not on one switched to 0 and back around every BEGIN (two more statements per submission); one is
            # enough: such a write holds the writer lock, so no two run at once
            pooled = self._no_wait_connection
            if pooled is None:
                pooled = self._no_wait_connection = self.engine.raw_connection()
                driver = pooled.driver_connection
                assert driver is not None  # None only once a connection is invalidated
                driver.execute("PRAGMA busy_timeout=0")
        else:
            try:
                pooled = self._sqlite_connections.get_nowait()
            except queue.Empty:
                pooled = self.engine.raw_connection()  # a pooled connection: same pragmas, kept for good
        raw = pooled.driver_connection
        assert raw is not None  # None only once a connection is invalidated
        cur = raw.cursor()
        try:
            cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            yield HotPath(SQLiteExecutor(cur, self.engine.dialect, self._compiled), lock_studies=False)
            cur.execute("COMMIT")
        except BaseException as exc:
            if raw.in_transaction:
                raw.execute("ROLLBACK")
            if no_wait and isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc):
                # another process holds the write lock (at BEGIN IMMEDIATE; in WAL mode nothing later in the
                # transaction waits, but if it did, it is rolled back here too): nothing was done
                raise WouldWait from exc
            raise
        finally:
            if write:
                self._sqlite_writer.release()
            cur.close()
            if no_wait:  # it stays the no-wait connection
                pass
            elif self._sqlite_connections.qsize() < _IDLE_SQLITE_CONNECTIONS:
                self._sqlite_connections.put(pooled)
            else:  # back to SQLAlchemy's pool (its size bounds all connections together)
                pooled.close()

    @contextmanager
    def without_waiting(self) -> Iterator[None]:
        """On this thread, inside the block, a hot-path write transaction on SQLite that would wait for the write
        lock (held by another thread of this process, or by another process) raises :class:`WouldWait` before it
        has done anything, instead of waiting. The app runs hot-path calls like this on the event loop and, on
        :class:`WouldWait`, again in the thread pool, so the loop never waits for a lock."""
        self._no_wait.on = True
        try:
            yield
        finally:
            self._no_wait.on = False

    def study_shape(self, study_id: int, ops: HotPathOperations | None = None) -> tuple[int, int]:
        """(per_item, number of items) of a study; cached, as neither changes after the study is created."""
        shape = self._studies.get(study_id)
        if shape is None:
            if ops is None:
                with self.reader.connect() as conn:
                    shape = HotPath(CoreExecutor(conn), lock_studies=False).study_shape(study_id)
            else:
                shape = ops.study_shape(study_id)
            if shape is None:
                return 0, 0
            self._studies[study_id] = shape
        return shape
