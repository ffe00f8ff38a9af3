"""Releasing assignments that annotators leave open, so a study can still finish.

An assignment is a lease on one of an item's ``per_item`` slots. An annotator who closes the tab and never comes
back would hold the slot for good, and the item could never reach ``per_item`` responses. A study therefore has a
lease (``lease_minutes``, default 120; 0 = never): an assignment still open (not submitted) that long after it
was handed out is *released*. Its row stays (with ``released_at`` set and its slot moved out of the live numbering),
so the same annotator is never given that item again; the slot goes back to the pool and is claimed like any
other. A late submission for a released assignment is refused with a message, never stored, because the slot
may already be someone else's; the annotator simply gets their next statement.

Releases happen in three ways: the server's sweeper thread (every minute, each study's own lease), the admin page,
and ``toxiforge annotate release``.
"""

from __future__ import annotations

import threading
import time
import weakref
from datetime import datetime, timedelta, timezone

from sqlalchemy import func, select, update

from toxiforge.annotation.schema import Assignment, Item, Study, utcnow
from toxiforge.errors import InputError

ASSIGNMENTS, ITEMS = Assignment.__table__, Item.__table__


def release_stale(store, study_id: int, *, older_than: timedelta | None = None,
                  now: datetime | None = None) -> int:
    """Release the study's open assignments handed out at least ``older_than`` ago (default: the study's lease;
    ``timedelta(0)`` releases every open one). Returns how many were released.

    One write transaction. Per item it keeps the live slots numbered 0..n_assigned-1 (the claim's
    compare-and-set relies on it): the released slot is refilled by the item's highest live slot, and the item's
    ``n_assigned`` goes down by one. The item row is locked first (``FOR UPDATE`` on PostgreSQL; SQLite's write
    transaction is exclusive), and the assignment is released only if it is still open, so a submission that
    commits meanwhile wins."""
    if older_than is None:
        lease = store.study(study_id).lease_minutes
        if not lease:
            return 0
        older_than = timedelta(minutes=lease)
    if older_than < timedelta(0):
        raise InputError(f"older_than must not be negative, got {older_than}", hint="use 0 to release every open one")
    now = now or utcnow()
    released = 0
    with store.engine.begin() as conn:
        # claims and releases of a study take turns (see hotpath.LOCK_STUDY): the study row first, then items
        conn.execute(select(Study.id).where(Study.id == study_id).with_for_update(key_share=True))
        stale = conn.execute(select(ASSIGNMENTS.c.id, ASSIGNMENTS.c.item_id)
                             .join(ITEMS, ITEMS.c.id == ASSIGNMENTS.c.item_id)
                             .where(ITEMS.c.study_id == study_id, ASSIGNMENTS.c.submitted.is_(False),
                                    ASSIGNMENTS.c.released_at.is_(None),
                                    ASSIGNMENTS.c.assigned_at <= now - older_than).order_by(ASSIGNMENTS.c.id)).all()
        for assignment_id, item_id in stale:
            # FOR NO KEY UPDATE: a submission's foreign-key check (KEY SHARE on the item) must not wait for it
            n = conn.execute(select(ITEMS.c.n_assigned).where(ITEMS.c.id == item_id)
                             .with_for_update(key_share=True)).scalar_one()
            slot = conn.execute(select(ASSIGNMENTS.c.slot).where(ASSIGNMENTS.c.id == assignment_id)).scalar_one()
            if conn.execute(update(ASSIGNMENTS).where(ASSIGNMENTS.c.id == assignment_id,
                                                      ASSIGNMENTS.c.submitted.is_(False),
                                             ASSIGNMENTS.c.released_at.is_(None))
                            .values(slot=-assignment_id, released_at=now, draft=None)).rowcount != 1:
                continue  # submitted (or released) meanwhile
            if slot != n - 1:
                conn.execute(update(ASSIGNMENTS).where(ASSIGNMENTS.c.item_id == item_id, ASSIGNMENTS.c.slot == n - 1)
                             .values(slot=slot))
            conn.execute(update(ITEMS).where(ITEMS.c.id == item_id).values(n_assigned=n - 1))
            released += 1
    return released


def open_assignments(store, study_id: int, now: datetime | None = None) -> dict[int, float]:
    """Minutes each annotator's open assignment has been open, by annotator id (annotators with one open)."""
    now = now or utcnow()
    with store.reader.connect() as conn:
        rows = conn.execute(select(ASSIGNMENTS.c.annotator_id, func.min(ASSIGNMENTS.c.assigned_at))
                            .join(ITEMS, ITEMS.c.id == ASSIGNMENTS.c.item_id)
                            .where(ITEMS.c.study_id == study_id, ASSIGNMENTS.c.submitted.is_(False),
                                   ASSIGNMENTS.c.released_at.is_(None))
                            .group_by(ASSIGNMENTS.c.annotator_id)).all()
    return {a: (now - aware(t)).total_seconds() / 60 for a, t in rows}


def aware(t: datetime) -> datetime:
    """SQLite hands back naive UTC datetimes; PostgreSQL aware ones."""
    return t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)


def release_all_studies(store, now: datetime | None = None) -> int:
    """:func:`release_stale` on every study with a lease, each with its own lease."""
    with store.reader.connect() as conn:
        studies = conn.execute(select(Study.id, Study.lease_minutes).where(Study.lease_minutes > 0)).all()
    return sum(release_stale(store, sid, older_than=timedelta(minutes=lease), now=now) for sid, lease in studies)


def start_lease_sweeper(store, interval: float = 60.0) -> threading.Thread:
    """A daemon thread that runs :func:`release_all_studies` every ``interval`` seconds while ``store`` lives."""
    ref = weakref.ref(store)

    def run() -> None:
        while True:
            time.sleep(interval)
            live = ref()
            if live is None:
                return
            try:
                release_all_studies(live)
            except Exception:  # a locked or vanished database: try again next time
                pass
            del live

    thread = threading.Thread(target=run, name="toxiforge-lease-sweeper", daemon=True)
    thread.start()
    return thread
