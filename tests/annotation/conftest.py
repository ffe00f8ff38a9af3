"""Fixtures of the annotation tests: every database-backed test runs on each backend.

``database`` is parametrised over the backends: ``sqlite`` (a fresh file per test) and ``postgresql`` (an emptied
database in a throwaway cluster, see :mod:`.pg`; skipped without the server binaries or psycopg, marked
``postgres``). ``store`` adds the SQLite fast path's twin, SQLAlchemy Core on SQLite (``sqlite-core``), so both ways
of running the hot path's statements are tested. Tests that start a real server process use SQLite only.
"""

from __future__ import annotations

import pytest

from toxiforge.annotation.store import Store

from .pg import pg_cluster, pg_empty_url, pg_url  # noqa: F401 (fixtures)

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]


def _database(request, tmp_path, backend: str) -> str:
    if backend == "postgresql":
        return request.getfixturevalue("pg_empty_url")
    return str(tmp_path / "study.db")


@pytest.fixture(params=BACKENDS)
def database(request, tmp_path) -> str:
    """A database path (SQLite) or URL (PostgreSQL), empty."""
    return _database(request, tmp_path, request.param)


@pytest.fixture(params=["sqlite", "sqlite-core", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, tmp_path):
    """A store on each backend; ``sqlite-core`` runs the hot path through SQLAlchemy instead of the driver."""
    backend = "sqlite" if request.param == "sqlite-core" else request.param
    store = Store(_database(request, tmp_path, backend), fast_sqlite=request.param != "sqlite-core")
    yield store
    store.engine.dispose()
