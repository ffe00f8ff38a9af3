"""SQLite WAL checkpoints in a background thread, off the commits of the annotator requests.

A commit in WAL mode appends to the ``-wal`` file; every 1000 pages SQLite copies the WAL back into the database
file and fsyncs it (the checkpoint, several ms), inside whichever commit crossed the mark. The server instead runs
``PRAGMA wal_checkpoint(PASSIVE)`` from a daemon thread every ``interval`` seconds (SQLite releases the GIL
meanwhile; writers go on appending to the WAL). Durability is unchanged: a commit is in the WAL before it returns.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import weakref


def start_wal_checkpointer(owner: object, path: str, interval: float = 0.1) -> threading.Thread:
    """A daemon thread that checkpoints the SQLite database at ``path`` every ``interval`` seconds for as long as
    ``owner`` (the store) is alive."""
    ref = weakref.ref(owner)

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

    thread = threading.Thread(target=run, name="toxiforge-wal-checkpoint", daemon=True)
    thread.start()
    return thread
