"""A throwaway PostgreSQL cluster for the tests (fixtures imported by tests/annotation/conftest.py).

The session fixture ``pg_cluster`` runs ``initdb`` in a fresh temporary directory (trust auth, no fsync), starts
the server with ``pg_ctl -w`` listening only on a unix socket in that directory (no TCP port, so nothing to
collide with), and at the end stops it (``pg_ctl stop -m immediate``) and deletes the directory. PostgreSQL
refuses to run as root: as root the directory is handed to the ``postgres`` system user and the server binaries
run as that user (``runuser``). ``pg_url`` is a SQLAlchemy URL (``postgresql+psycopg://``) of a database created
once per session; ``pg_empty_url`` is the same URL for a test that needs it empty: before the test, every other
session on it is ended and every table is emptied (``TRUNCATE ... RESTART IDENTITY``; about 20 ms, where a new
database per test costs about 0.2 s, and the tables need not be created again).

The server binaries are looked up in ``$TOXIFORGE_PG_BINDIR`` when it is set (only there), else next to ``initdb``
on ``PATH``, then in Debian's ``/usr/lib/postgresql/<version>/bin`` (newest version first). Without them, or
without the ``psycopg`` driver, the tests that use these fixtures are skipped with a hint (``make postgres``, or
``apt-get install postgresql``). The server runs with ``deadlock_timeout=100ms`` so that the tests that provoke a
deadlock see it quickly.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

INSTALL_HINT = ("install the PostgreSQL server with `make postgres` (as root: apt-get install postgresql) and the "
                "driver with `pip install -e '.[postgres]'`")
BINDIR_ENV = "TOXIFORGE_PG_BINDIR"
SUPERUSER = "postgres"
_PROGRAMS = ("initdb", "pg_ctl", "postgres")


def find_bindir() -> Path | None:
    """The directory with initdb, pg_ctl and postgres, or None."""
    if os.environ.get(BINDIR_ENV):  # only this one (a directory without them skips the tests)
        d = Path(os.environ[BINDIR_ENV])
        return d if all(os.access(d / prog, os.X_OK) for prog in _PROGRAMS) else None
    candidates = []
    on_path = shutil.which("initdb")
    if on_path:  # Debian only links some programs onto PATH: use the directory they really live in
        candidates.append(Path(os.path.realpath(on_path)).parent)

    def version(p: Path):
        return tuple(int(x) for x in re.findall(r"\d+", p.parent.name)) or (0,)

    candidates += sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=version, reverse=True)
    for d in candidates:
        if all(os.access(d / prog, os.X_OK) for prog in _PROGRAMS):
            return d
    return None


@dataclass
class Cluster:
    bindir: Path
    base: Path  # the temp dir: data/, the socket, the server log
    startup_s: float = 0.0
    _counter: itertools.count = field(default_factory=lambda: itertools.count(1))

    @property
    def data(self) -> Path:
        return self.base / "data"

    @property
    def log(self) -> Path:
        return self.base / "server.log"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{SUPERUSER}@/{database}?host={self.base}"

    def connect(self, database: str = "postgres"):
        import psycopg

        return psycopg.connect(host=str(self.base), user=SUPERUSER, dbname=database, autocommit=True)

    def create_database(self, name: str | None = None) -> str:
        name = name or f"t{next(self._counter)}"
        with self.connect() as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return name

    def drop_database(self, name: str) -> None:
        with self.connect() as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # ends connections left open

    def empty_database(self, name: str) -> None:
        """End every other session on ``name`` (engines and pools tests left behind) and empty its tables."""
        with self.connect(name) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                         "WHERE datname = current_database() AND pid <> pg_backend_pid()")
            tables = [r[0] for r in conn.execute("SELECT quote_ident(tablename) FROM pg_tables "
                                                 "WHERE schemaname = 'public'")]
            if tables:
                conn.execute(f"TRUNCATE {', '.join(tables)} RESTART IDENTITY CASCADE")


def _as_server_user(cmd: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return cmd
    runuser = shutil.which("runuser")
    if runuser:
        return [runuser, "-u", SUPERUSER, "--", *cmd]
    return ["su", SUPERUSER, "-s", "/bin/sh", "-c", " ".join(f"'{c}'" for c in cmd)]


def _run(cmd: list[str], what: str, log: Path | None = None) -> None:
    proc = subprocess.run(_as_server_user(cmd), capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        tail = log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""
        raise RuntimeError(f"{what} failed ({proc.returncode}): {proc.stdout}{proc.stderr}\n{tail}")


def start_cluster() -> Cluster:
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(f"PostgreSQL server binaries (initdb, pg_ctl, postgres) not found; {INSTALL_HINT}")
    try:
        import psycopg  # noqa: F401
        psycopg.pq.version()  # loads libpq
    except Exception as exc:  # ImportError, or no libpq on the system
        pytest.skip(f"the psycopg driver is not usable ({exc}); {INSTALL_HINT}")
    if os.geteuid() == 0:
        import pwd

        try:
            server_user = pwd.getpwnam(SUPERUSER)
        except KeyError:
            pytest.skip(f"running as root and there is no {SUPERUSER!r} system user to run the server as; "
                        f"{INSTALL_HINT}")
    # a short path under /tmp: unix socket paths are limited to ~100 bytes, and /tmp is traversable by postgres
    base = Path(tempfile.mkdtemp(prefix="tf-pg-", dir="/tmp" if os.path.isdir("/tmp") else None))
    if os.geteuid() == 0:
        os.chown(base, server_user.pw_uid, server_user.pw_gid)
    cluster = Cluster(bindir, base)
    t0 = time.perf_counter()
    try:
        _run([str(bindir / "initdb"), "-D", str(cluster.data), "-U", SUPERUSER, "-A", "trust", "-E", "UTF8",
              "--locale=C", "--no-sync", "--no-instructions"], "initdb")
        opts = (f"-F -k {base} -c listen_addresses='' -c synchronous_commit=off -c full_page_writes=off "
                "-c max_connections=200 -c shared_buffers=32MB -c deadlock_timeout=100ms")
        # -w: pg_ctl polls until the server accepts connections (bounded by -t)
        _run([str(bindir / "pg_ctl"), "-D", str(cluster.data), "-l", str(cluster.log), "-o", opts,
              "-w", "-t", "60", "start"], "pg_ctl start", cluster.log)
    except Exception:
        _stop(cluster)
        raise
    cluster.startup_s = time.perf_counter() - t0
    return cluster


def _stop(cluster: Cluster) -> None:
    try:
        if (cluster.data / "postmaster.pid").exists():
            _run([str(cluster.bindir / "pg_ctl"), "-D", str(cluster.data), "-m", "immediate", "-w", "stop"],
                 "pg_ctl stop")
    finally:
        shutil.rmtree(cluster.base, ignore_errors=True)


@pytest.fixture(scope="session")
def pg_cluster():
    cluster = start_cluster()
    try:
        yield cluster
    finally:
        _stop(cluster)


@pytest.fixture(scope="session")
def pg_url(pg_cluster) -> str:
    """A SQLAlchemy URL of a database created once per test session."""
    return pg_cluster.url(pg_cluster.create_database("toxiforge"))


@pytest.fixture()
def pg_empty_url(pg_cluster, pg_url) -> str:
    """``pg_url`` with its tables emptied for this test (ids start at 1 again)."""
    pg_cluster.empty_database(make_url(pg_url).database)
    return pg_url
