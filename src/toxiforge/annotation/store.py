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
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (JSON, Boolean, DateTime, ForeignKey, Integer, String, Text, UniqueConstraint, create_engine,
                        event, select, update)
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker

from toxiforge.errors import InputError


def utcnow() -> datetime:
    return datetime.now(timezone.utc)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return secrets.token_urlsafe(32)


_RETRY = object()


class Base(DeclarativeBase):
    pass


class Meta(Base):
    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(256))


class Study(Base):
    __tablename__ = "studies"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    per_item: Mapped[int] = mapped_column(Integer)
    admin_token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    source: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Item(Base):
    __tablename__ = "items"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    position: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    target_group: Mapped[str] = mapped_column(String(100), default="")
    label: Mapped[int | None] = mapped_column(Integer, nullable=True)
    method: Mapped[str] = mapped_column(String(50), default="")
    source_row_id: Mapped[str] = mapped_column(String(200), default="")
    n_assigned: Mapped[int] = mapped_column(Integer, default=0)


class Annotator(Base):
    __tablename__ = "annotators"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    study_id: Mapped[int] = mapped_column(ForeignKey("studies.id"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str] = mapped_column(String(100), default="")
    consented_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Assignment(Base):
    __tablename__ = "assignments"
    __table_args__ = (UniqueConstraint("item_id", "slot"), UniqueConstraint("item_id", "annotator_id"))
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"), index=True)
    slot: Mapped[int] = mapped_column(Integer)
    submitted: Mapped[bool] = mapped_column(Boolean, default=False)
    draft: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    assigned_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class Response(Base):
    __tablename__ = "responses"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    assignment_id: Mapped[int] = mapped_column(ForeignKey("assignments.id"), unique=True)
    item_id: Mapped[int] = mapped_column(ForeignKey("items.id"), index=True)
    annotator_id: Mapped[int] = mapped_column(ForeignKey("annotators.id"), index=True)
    author: Mapped[str] = mapped_column(String(10))
    harmful_ai: Mapped[int] = mapped_column(Integer)
    harmful_human: Mapped[int] = mapped_column(Integer)
    stereotyping: Mapped[str] = mapped_column(String(10))
    intent: Mapped[int] = mapped_column(Integer)
    lewd: Mapped[str] = mapped_column(String(10))
    group_reference: Mapped[str] = mapped_column(String(20))
    other_groups: Mapped[str] = mapped_column(Text, default="")
    framing: Mapped[str] = mapped_column(String(20))
    framing_other: Mapped[str] = mapped_column(Text, default="")
    factual: Mapped[str] = mapped_column(String(20))
    trouble: Mapped[bool] = mapped_column(Boolean, default=False)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    submitted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


ANSWER_FIELDS = ("author", "harmful_ai", "harmful_human", "stereotyping", "intent", "lewd", "group_reference",
                 "other_groups", "framing", "framing_other", "factual", "trouble")


def db_url(value: str) -> str:
    """A SQLAlchemy URL: URLs pass through, a plain path becomes a SQLite file URL."""
    if "://" in value:
        return value
    return f"sqlite:///{value}"


def make_engine(url: str) -> Engine:
    """An engine for ``url`` (or a SQLite file path). SQLite: WAL journal, ``synchronous=NORMAL`` (a committed
    transaction survives a killed process), 10 s busy timeout, ``BEGIN IMMEDIATE`` transactions."""
    url = db_url(url)
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"check_same_thread": False, "timeout": 10},
                               pool_size=20, max_overflow=40)

        @event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn, _record):
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA busy_timeout=10000")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.close()

        @event.listens_for(engine, "begin")
        def _on_begin(conn):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        engine = create_engine(url, pool_pre_ping=True, pool_size=20, max_overflow=40)
    Base.metadata.create_all(engine)
    return engine


class Store:
    """Sessions and operations on one database."""

    def __init__(self, url: str | Engine):
        self.engine = url if isinstance(url, Engine) else make_engine(url)
        Base.metadata.create_all(self.engine)
        self.Session = sessionmaker(self.engine, expire_on_commit=False)
        self.secret = self._secret()

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

    def create_study(self, name: str, items: list[dict[str, Any]], *, per_item: int = 3,
                     source: str = "") -> tuple[Study, str]:
        """Create a study with ``items`` (dicts with text, target_group, label, method, source_row_id).

        Returns the study and its admin token (shown once; only its hash is stored)."""
        if per_item < 1:
            raise InputError(f"per_item must be at least 1, got {per_item}", hint="use --per-item 3")
        if not items:
            raise InputError("a study needs at least one item", hint="check the dataset and --sample")
        token = new_token()
        with self.Session.begin() as s:
            if s.scalar(select(Study.id).where(Study.name == name)) is not None:
                raise InputError(f"a study named {name!r} already exists", hint="choose another --name")
            study = Study(name=name, per_item=per_item, admin_token_hash=hash_token(token), source=source)
            s.add(study)
            s.flush()
            s.add_all(Item(study_id=study.id, position=i, text=it["text"], target_group=it.get("target_group") or "",
                           label=it.get("label"), method=it.get("method") or "",
                           source_row_id=str(it.get("source_row_id") or ""))
                      for i, it in enumerate(items))
        return study, token

    def study(self, ref: str | int) -> Study:
        """A study by id or name."""
        with self.Session() as s:
            study = None
            if isinstance(ref, int) or str(ref).isdigit():
                study = s.get(Study, int(ref))
            if study is None:
                study = s.scalar(select(Study).where(Study.name == str(ref)))
        if study is None:
            raise InputError(f"no study {ref!r}", hint="give a study id or name ('annotate study create' makes one)")
        return study

    def study_for_admin(self, token: str) -> Study | None:
        with self.Session() as s:
            return s.scalar(select(Study).where(Study.admin_token_hash == hash_token(token)))

    def invite(self, study_id: int, n: int = 1, label: str = "") -> list[str]:
        """Create ``n`` annotators; returns their tokens (only hashes are stored)."""
        tokens = [new_token() for _ in range(n)]
        with self.Session.begin() as s:
            s.add_all(Annotator(study_id=study_id, token_hash=hash_token(t), label=label) for t in tokens)
        return tokens

    def annotator_for(self, token: str) -> Annotator | None:
        with self.Session() as s:
            return s.scalar(select(Annotator).where(Annotator.token_hash == hash_token(token)))

    def consent(self, annotator_id: int) -> None:
        with self.Session.begin() as s:
            s.execute(update(Annotator).where(Annotator.id == annotator_id, Annotator.consented_at.is_(None))
                      .values(consented_at=utcnow()))

    # --- assignment -------------------------------------------------------------------------------------------

    def next_assignment(self, annotator: Annotator, *, tries: int = 20) -> tuple[Assignment, Item] | None:
        """The annotator's open assignment, or a newly claimed one (least-assigned item first); None when the
        annotator has nothing left to do."""
        for _ in range(tries):
            try:
                with self.Session.begin() as s:
                    found = self._claim(s, annotator)
                    if found is not _RETRY:
                        return found
            except IntegrityError:
                continue  # another annotator took the slot first: try again
        return None

    def _claim(self, s: Session, annotator: Annotator):
        open_ = s.execute(select(Assignment, Item).join(Item, Item.id == Assignment.item_id)
                          .where(Assignment.annotator_id == annotator.id, Assignment.submitted.is_(False))
                          .order_by(Assignment.id).limit(1)).first()
        if open_ is not None:
            return open_[0], open_[1]
        per_item = s.scalar(select(Study.per_item).where(Study.id == annotator.study_id))
        seen = select(Assignment.item_id).where(Assignment.annotator_id == annotator.id)
        candidates = s.execute(select(Item.id, Item.n_assigned)
                               .where(Item.study_id == annotator.study_id, Item.n_assigned < per_item,
                                      Item.id.not_in(seen))
                               .order_by(Item.n_assigned, Item.position).limit(8)).all()
        if not candidates:
            return None
        for item_id, n in candidates:
            claimed = s.execute(update(Item).where(Item.id == item_id, Item.n_assigned == n)
                                .values(n_assigned=n + 1)).rowcount
            if claimed == 1:
                assignment = Assignment(item_id=item_id, annotator_id=annotator.id, slot=n)
                s.add(assignment)
                s.flush()
                return assignment, s.get(Item, item_id)
        return _RETRY

    def get_assignment(self, annotator_id: int, assignment_id: int) -> tuple[Assignment, Item] | None:
        """An assignment of this annotator (None for another annotator's)."""
        with self.Session() as s:
            row = s.execute(select(Assignment, Item).join(Item, Item.id == Assignment.item_id)
                            .where(Assignment.id == assignment_id, Assignment.annotator_id == annotator_id)).first()
        return None if row is None else (row[0], row[1])

    def save_draft(self, annotator_id: int, assignment_id: int, draft: dict[str, Any]) -> bool:
        with self.Session.begin() as s:
            return s.execute(update(Assignment).where(Assignment.id == assignment_id,
                                                      Assignment.annotator_id == annotator_id,
                                                      Assignment.submitted.is_(False))
                             .values(draft=draft)).rowcount == 1

    def submit(self, annotator_id: int, assignment_id: int, answers: dict[str, Any]) -> bool:
        """Store the response of an open assignment; True when stored now, False when it was already submitted
        (a repeated POST), and an :class:`InputError` for an assignment that is not this annotator's."""
        with self.Session.begin() as s:
            a = s.scalar(select(Assignment).where(Assignment.id == assignment_id,
                                                  Assignment.annotator_id == annotator_id))
            if a is None:
                raise InputError(f"no assignment {assignment_id} for this annotator", hint="reload the page")
            if a.submitted:
                return False
            done = s.execute(update(Assignment).where(Assignment.id == a.id, Assignment.submitted.is_(False))
                             .values(submitted=True, draft=None)).rowcount
            if done != 1:
                return False
            s.add(Response(assignment_id=a.id, item_id=a.item_id, annotator_id=annotator_id,
                           started_at=a.assigned_at, **{k: answers[k] for k in ANSWER_FIELDS}))
        return True

    # --- reporting --------------------------------------------------------------------------------------------

    def progress(self, study_id: int) -> dict[str, Any]:
        from sqlalchemy import func

        with self.Session() as s:
            study = s.get(Study, study_id)
            n_items = s.scalar(select(func.count()).select_from(Item).where(Item.study_id == study_id)) or 0
            n_resp = s.scalar(select(func.count()).select_from(Response).join(Item, Item.id == Response.item_id)
                              .where(Item.study_id == study_id)) or 0
            per_ann = s.execute(select(Annotator.id, Annotator.consented_at, func.count(Response.id))
                                .outerjoin(Response, Response.annotator_id == Annotator.id)
                                .where(Annotator.study_id == study_id).group_by(Annotator.id)
                                .order_by(Annotator.id)).all()
        total = n_items * study.per_item
        return {"study": study.name, "study_id": study_id, "items": n_items, "per_item": study.per_item,
                "responses": n_resp, "needed": total, "done_fraction": (n_resp / total) if total else 0.0,
                "annotators": [{"id": self.keyed_hash("annotator", a)[:12], "consented": c is not None,
                                "responses": n} for a, c, n in per_ann]}

    def responses(self, study_id: int) -> list[tuple[Item, Response]]:
        """Every (item, response) pair of a study, by item then submission order."""
        with self.Session() as s:
            rows = s.execute(select(Item, Response).join(Response, Response.item_id == Item.id)
                             .where(Item.study_id == study_id).order_by(Item.position, Response.id)).all()
        return [(i, r) for i, r in rows]

    def items(self, study_id: int) -> list[Item]:
        with self.Session() as s:
            return list(s.scalars(select(Item).where(Item.study_id == study_id).order_by(Item.position)))

    def annotator_done(self, annotator_id: int) -> int:
        from sqlalchemy import func

        with self.Session() as s:
            return s.scalar(select(func.count()).select_from(Response)
                            .where(Response.annotator_id == annotator_id)) or 0

    def item_count(self, study_id: int) -> int:
        from sqlalchemy import func

        with self.Session() as s:
            return s.scalar(select(func.count()).select_from(Item).where(Item.study_id == study_id)) or 0
