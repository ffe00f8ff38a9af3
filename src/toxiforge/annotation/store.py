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

import difflib
import sqlite3
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError

from toxiforge.annotation.database import Database, WouldWait
from toxiforge.annotation.hotpath import (
    ANNOTATOR_BY_SESSION,
    ANNOTATOR_BY_TOKEN,
    SUBMITTED_COUNT,
    HotPathOperations,
    ItemView,
    OpenAssignment,
)
from toxiforge.annotation.leases import aware, open_assignments
from toxiforge.annotation.schema import (  # noqa: F401  (the unused ones are re-exported)
    ANSWER_FIELDS,
    DEFAULT_LEASE_MINUTES,
    FORMS,
    MAX_ID,
    Annotator,
    Assignment,
    Base,
    BrowserSession,
    Item,
    Meta,
    Response,
    Study,
    db_url,
    hash_token,
    holds_short_form,
    make_engine,
    new_token,
    prepare_schema,
    utcnow,
)
from toxiforge.errors import InputError, check_choice

__all__ = ["AssignmentReleased", "ItemView", "OpenAssignment", "Store", "WouldWait"]

_RETRY = object()


class _Conflict(Exception):
    """Raised inside a transaction to roll it back and try again."""


class AssignmentReleased(InputError):
    """A submission for an assignment that was released (open past its study's lease, or by an admin) and may
    now be another annotator's: nothing is stored."""

    def __init__(self, assignment_id: int):
        super().__init__(f"assignment {assignment_id} was released before it was submitted; the answers were not "
                         "stored", hint="answer the next statement")


SESSION_DAYS = 60  # a browser session lasts this long (the invite link can open a new one at any time)


def _no_nul(text: str) -> str:
    """PostgreSQL text cannot hold NUL characters (SQLite can): they are dropped on every database."""
    return text.replace("\x00", "")


class Store(Database):
    """Sessions and operations on one database (its connections and transactions: :class:`Database`)."""

    # --- studies, items, annotators ---------------------------------------------------------------------------

    def create_study(self, name: str, items: list[dict[str, Any]], *, per_item: int = 3, source: str = "",
                     lease_minutes: int = DEFAULT_LEASE_MINUTES, form: str = "full") -> tuple[Study, str]:
        """Create a study with ``items`` (dicts with text, target_group, label, method, source_row_id).

        ``lease_minutes``: an assignment still open after this long is released to other annotators (0: never).
        ``form``: the questions, "full" (the paper's nine) or "short" (is it hateful? yes/no).
        Returns the study and its admin token (shown once; only its hash is stored)."""
        check_choice(form, FORMS, what="study form", hint="use full (the paper's questions) or short")
        if form == "short" and not holds_short_form(self.engine):
            raise InputError("this study database was made by an older toxiforge and cannot store short-form "
                             "answers", hint="use a new database for the study, or the full form")
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
                          lease_minutes=lease_minutes, form=form)
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
            known = [] if study is not None else list(s.execute(select(Study.id, Study.name).order_by(Study.id)))
        if study is None:
            if not known:
                raise InputError(f"no study {ref!r}: this database has no studies yet",
                                 hint="make one with 'toxiforge annotate study create', or check --db")
            close = difflib.get_close_matches(str(ref), [name for _, name in known], n=1, cutoff=0.6)
            listed = ", ".join(f"{i} ({name})" for i, name in known[:20]) + (", ..." if len(known) > 20 else "")
            raise InputError(f"no study {ref!r}", hint=(f"did you mean {close[0]!r}? " if close else "")
                             + f"give a study id or name; this database has {listed}")
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
            return conn.execute(ANNOTATOR_BY_TOKEN, {"token_hash": hash_token(token)}).first()

    # --- browser sessions (the cookie holds a session id, never a link's token) -----------------------------------

    def open_session(self, kind: str, token: str) -> str | None:
        """A new session for an invite link (``kind`` "annotator") or an admin link ("admin"); returns its id (the
        cookie value; only its hash is stored), or None for an unknown token."""
        found: Sequence[Any] | None
        with self.Session.begin() as s:
            if kind == "annotator":
                found = s.execute(select(Annotator.id, Annotator.study_id)
                                  .where(Annotator.token_hash == hash_token(token))).first()
            elif kind == "admin":
                study_id = s.scalar(select(Study.id).where(Study.admin_token_hash == hash_token(token)))
                found = None if study_id is None else (None, study_id)
            else:
                raise ValueError(f"unknown session kind {kind!r}")
            if found is None:
                return None
            session_id = new_token()
            now = utcnow()
            s.add(BrowserSession(id_hash=hash_token(session_id), kind=kind, annotator_id=found[0],
                                 study_id=found[1], created_at=now, expires_at=now + timedelta(days=SESSION_DAYS)))
        return session_id

    def _live_session(self, conn, session_id: str, kind: str):
        row = conn.execute(select(BrowserSession.annotator_id, BrowserSession.study_id, BrowserSession.expires_at)
                           .where(BrowserSession.id_hash == hash_token(session_id),
                                  BrowserSession.kind == kind)).first()
        return None if row is None or aware(row[2]) <= utcnow() else row

    def annotator_for_session(self, session_id: str):
        """The annotator row of a live annotator session (with the session's ``expires_at``), or None."""
        with self.reader.connect() as conn:
            row = conn.execute(ANNOTATOR_BY_SESSION, {"id_hash": hash_token(session_id)}).first()
        return None if row is None or aware(row.expires_at) <= utcnow() else row

    def study_for_admin_session(self, session_id: str) -> Study | None:
        with self.ReadSession() as s:
            row = self._live_session(s.connection(), session_id, "admin")
            return None if row is None else s.get(Study, row[1])

    def end_sessions(self, *, annotator_id: int | None = None, study_id: int | None = None) -> int:
        """Revoke sessions: an annotator's, or every session of a study (its invite links keep working)."""
        where = [BrowserSession.annotator_id == annotator_id] if annotator_id is not None else []
        if study_id is not None:
            where.append(BrowserSession.study_id == study_id)
        if not where:
            raise InputError("end_sessions needs an annotator or a study", hint="pass annotator_id or study_id")
        with self.Session.begin() as s:
            # a DML statement's result is a CursorResult; Session.execute() is annotated with the base Result
            return s.execute(delete(BrowserSession).where(*where)).rowcount  # type: ignore[attr-defined]

    def consent(self, annotator_id: int) -> None:
        with self.Session.begin() as s:
            s.execute(update(Annotator).where(Annotator.id == annotator_id, Annotator.consented_at.is_(None))
                      .values(consented_at=utcnow()))

    # --- assignment -------------------------------------------------------------------------------------------


    def next_assignment(self, annotator, *, tries: int = 20) -> tuple[OpenAssignment, ItemView] | None:
        """The annotator's open assignment, or a newly claimed one (least-assigned item first); None when the
        annotator has nothing left to do."""
        return self.open_assignment(annotator, tries=tries)[0]

    def open_assignment(self, annotator, *, tries: int = 20) -> tuple[tuple[OpenAssignment, ItemView] | None, int]:
        """(the annotator's open or newly claimed assignment or None, how many they have submitted)."""
        with self._txn(write=False) as ops:  # the common case, a read: the open assignment
            found = ops.open_assignment(annotator.id)
            if found is not None:
                return found, ops.submitted_count(annotator.id)
        for _ in range(tries):
            try:
                with self._txn(write=True) as ops:
                    ops.lock_study(annotator.study_id)
                    found = self._claim(ops, annotator.id, annotator.study_id)
                    if found is not _RETRY:
                        return found, ops.submitted_count(annotator.id)
            except (IntegrityError, sqlite3.IntegrityError):
                continue  # another annotator took the slot first: try again
        return None, self.annotator_done(annotator.id)

    def _claim(self, ops: HotPathOperations, annotator_id: int, study_id: int):
        found = ops.open_assignment(annotator_id)
        if found is not None:
            return found
        per_item, _ = self.study_shape(study_id, ops)
        candidates = ops.candidates(study_id, per_item, annotator_id)
        if not candidates:
            return None
        for n, *item in candidates:
            if ops.compare_and_set(item[0], n):
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
                             .values(draft=draft)).rowcount == 1  # type: ignore[attr-defined]  # as end_sessions

    def _submit(self, ops: HotPathOperations, annotator_id: int, assignment_id: int, answers: dict[str, Any]) -> bool:
        marked = ops.mark_submitted(assignment_id, annotator_id)
        if marked is None:
            released = ops.released_state(assignment_id, annotator_id)
            if released is None:
                raise InputError(f"no assignment {assignment_id} for this annotator", hint="reload the page")
            if released:
                raise AssignmentReleased(assignment_id)
            return False  # already submitted: a repeated POST
        ops.new_response({"assignment_id": assignment_id, "item_id": marked[0], "annotator_id": annotator_id,
                          "started_at": marked[1], "submitted_at": utcnow(),
                          **{k: answers.get(k) for k in ANSWER_FIELDS}})  # the other form's: NULL
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
                        return stored, found, ops.submitted_count(annotator.id)
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
            if study is None:
                raise InputError(f"no study {study_id!r}", hint="give the id of an existing study")
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
            return conn.execute(SUBMITTED_COUNT, {"annotator_id": annotator_id}).scalar_one()

    def study_form(self, study_id: int) -> str:
        """The study's form ("full" or "short"); cached, as it never changes after the study is created."""
        form = self._forms.get(study_id)
        if form is None:
            with self.ReadSession() as s:
                form = s.scalar(select(Study.form).where(Study.id == study_id)) or "full"
            self._forms[study_id] = form
        return form

    def item_count(self, study_id: int) -> int:
        return self.study_shape(study_id)[1]
