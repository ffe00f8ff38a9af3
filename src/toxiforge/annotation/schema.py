"""The annotation database schema (SQLAlchemy 2.x tables) and engine set-up: SQLite (WAL) or PostgreSQL by URL.

See :mod:`toxiforge.annotation.store` for the rules the constraints enforce and for the operations.
"""

from __future__ import annotations

import hashlib
import secrets
from datetime import datetime, timezone
from typing import ClassVar

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    String,
    Table,
    Text,
    UniqueConstraint,
    create_engine,
    event,
    inspect,
)
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


DEFAULT_LEASE_MINUTES = 120
# A study's questions: "full", the paper's nine (questions.QUESTIONS), or "short", one yes/no question
# (questions.SHORT_QUESTIONS). A response holds the answers of its study's form; the other form's columns are NULL.
FORMS = ("full", "short")
MAX_ID = 2**31 - 1  # ids are INTEGER columns: PostgreSQL refuses larger values (SQLite would take them)


class Base(DeclarativeBase):
    __table__: ClassVar[Table]  # every model here maps a Table (DeclarativeBase says only FromClause)


class Meta(Base):
    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))


class Study(Base):
    __tablename__ = "studies"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String, unique=True)
    per_item: Mapped[int] = mapped_column(Integer)
    admin_token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    source: Mapped[str] = mapped_column(Text, default="")
    # an open assignment older than this is released (its slot goes to another annotator); 0 = never
    lease_minutes: Mapped[int] = mapped_column(Integer, default=DEFAULT_LEASE_MINUTES,
                                               server_default=str(DEFAULT_LEASE_MINUTES))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    form: Mapped[str] = mapped_column(String(10), default="full", server_default="full")


class Item(Base):
    __tablename__ = "items"
    # the claim query: this study's items with a free slot, least-assigned first
    __table_args__ = (Index("ix_items_claim", "study_id", "n_assigned", "position"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    target_group: Mapped[str] = mapped_column(String, default="")
    label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    method: Mapped[str] = mapped_column(String, default="")
    source_row_id: Mapped[str] = mapped_column(String, default="")
    n_assigned: Mapped[int] = mapped_column(Integer, default=0)


class Annotator(Base):
    __tablename__ = "annotators"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String, default="")
    consented_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Assignment(Base):
    """One item handed to one annotator. ``slot`` numbers the item's live assignments 0..n_assigned-1; a released
    assignment (never submitted, past its lease) keeps its row, so the annotator is never given the item again,
    with ``released_at`` set and ``slot = -id`` (out of the live numbering)."""
    __tablename__ = "assignments"
    __table_args__ = (UniqueConstraint("item_id", "slot"), UniqueConstraint("item_id", "annotator_id"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"), index=True)
    slot: Mapped[int] = mapped_column(Integer)
    submitted: Mapped[bool] = mapped_column(Boolean, default=False)
    draft: Mapped[dict | None] = mapped_column(JSON(none_as_null=True), nullable=True)  # None: SQL NULL
    assigned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    released_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class Response(Base):
    __tablename__ = "responses"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id"), unique=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"), index=True)
    # the full form's answers (NULL in a short-form study's responses)
    author: Mapped[str | None] = mapped_column(String(10), nullable=True)
    harmful_ai: Mapped[int | None] = mapped_column(Integer, nullable=True)
    harmful_human: Mapped[int | None] = mapped_column(Integer, nullable=True)
    stereotyping: Mapped[str | None] = mapped_column(String(10), nullable=True)
    intent: Mapped[int | None] = mapped_column(Integer, nullable=True)
    lewd: Mapped[str | None] = mapped_column(String(10), nullable=True)
    group_reference: Mapped[str | None] = mapped_column(String(20), nullable=True)
    other_groups: Mapped[str | None] = mapped_column(Text, default="", nullable=True)
    framing: Mapped[str | None] = mapped_column(String(20), nullable=True)
    framing_other: Mapped[str | None] = mapped_column(Text, default="", nullable=True)
    factual: Mapped[str | None] = mapped_column(String(20), nullable=True)
    # the short form's answer (NULL in a full-form study's responses)
    hateful: Mapped[str | None] = mapped_column(String(10), nullable=True)
    trouble: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    submitted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class BrowserSession(Base):
    """A browser session opened by an invite link (``kind`` "annotator") or an admin link ("admin"). The cookie
    holds a random session id, never the link's token; only its SHA-256 is stored, so deleting the row (or its
    expiry) ends the session without touching the link."""
    __tablename__ = "sessions"
    id_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    annotator_id: Mapped[int | None] = mapped_column(ForeignKey("annotators.id"), nullable=True, index=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))


FULL_FORM_FIELDS = ("author", "harmful_ai", "harmful_human", "stereotyping", "intent", "lewd", "group_reference",
                    "other_groups", "framing", "framing_other", "factual")
ANSWER_FIELDS = (*FULL_FORM_FIELDS, "hateful", "trouble")


def db_url(value: str) -> str:
    """A SQLAlchemy URL: URLs pass through, a plain path becomes a SQLite file URL."""
    if "://" in value:
        return value
    return f"sqlite:///{value}"


def make_engine(url: str, *, busy_timeout: float = 10.0) -> Engine:
    """An engine for ``url`` (or a SQLite file path). SQLite: WAL journal, ``synchronous=NORMAL`` (in WAL mode a
    committed transaction survives a killed process; only a power loss or OS crash can drop the last commits),
    ``busy_timeout`` seconds to wait for another writer's lock (default 10), ``BEGIN IMMEDIATE`` transactions,
    except on connections with the execution option
    ``readonly=True`` (plain deferred ``BEGIN``: WAL readers never wait for the writer)."""
    url = db_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": busy_timeout},
                               pool_size=20, max_overflow=40)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn, _record):
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn):
            conn.exec_driver_sql("BEGIN" if conn.get_execution_options().get("readonly") else "BEGIN IMMEDIATE")
    else:
        engine = create_engine(url, pool_pre_ping=True, pool_size=20, max_overflow=40)
    return engine


# columns added after the first release: (table, column, SQL type and default)
_ADDED_COLUMNS = (("studies", "lease_minutes", f"INTEGER NOT NULL DEFAULT {DEFAULT_LEASE_MINUTES}"),
                  ("assignments", "released_at", "TIMESTAMP WITH TIME ZONE"),
                  ("studies", "form", "VARCHAR(10) NOT NULL DEFAULT 'full'"),
                  ("responses", "hateful", "VARCHAR(10)"))


def holds_short_form(engine: Engine) -> bool:
    """Whether the database can store short-form responses: one made by a toxiforge before short-form studies has
    the full form's answer columns NOT NULL (SQLite cannot drop that constraint in place)."""
    return all(c["nullable"] for c in inspect(engine).get_columns("responses") if c["name"] in FULL_FORM_FIELDS)


def prepare_schema(engine: Engine) -> None:
    """Create the tables that are missing, and bring a database made by an older toxiforge up to this schema
    (added columns and indexes)."""
    Base.metadata.create_all(engine)
    names = {t: {c["name"] for c in inspect(engine).get_columns(t)} for t in {t for t, _, _ in _ADDED_COLUMNS}}
    with engine.begin() as conn:
        for table, column, sql_type in _ADDED_COLUMNS:
            if column not in names[table]:
                conn.exec_driver_sql(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}")
        for index in Item.__table__.indexes:  # the claim index
            index.create(conn, checkfirst=True)
