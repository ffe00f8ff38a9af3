"""The annotation web app (FastAPI, server-rendered Jinja2 pages with autoescaping; no front-end build).

Annotators open their invite link ``/a/<token>``: it opens a server-side session whose id goes into an HttpOnly,
SameSite=Lax cookie (never the token itself), and the browser is redirected to ``/annotate``; the token appears in
one request line only, which the access log redacts. They accept the content warning and consent form before any
statement is shown, then answer the nine questions for one statement at a time (drafts are kept until submitted).
Admins log in with the study's admin link ``/admin/login/<token>`` (a separate session) and see progress,
per-annotator counts, live agreement and the exports. Every POST carries a CSRF token (an HMAC of the session).

The pages live in two routers, :mod:`~toxiforge.annotation.annotator_routes` and
:mod:`~toxiforge.annotation.admin_routes`; what they share (sessions, forms, limits, headers) is in
:mod:`~toxiforge.annotation.web`. An assignment left open past the study's lease is released to other annotators
(see :mod:`toxiforge.annotation.leases`). A database that stays locked past the busy timeout (another process
holding SQLite's write lock) is answered with 503 and ``Retry-After``; any other error with a 500 page that carries
the security headers too.
"""

from __future__ import annotations

import gc
import logging
import os
import re
import signal
import sqlite3
import threading
import time

from fastapi import FastAPI, Request
from sqlalchemy.exc import OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from toxiforge.annotation import admin_routes, annotator_routes
from toxiforge.annotation.leases import start_lease_sweeper
from toxiforge.annotation.store import Store
from toxiforge.annotation.web import MAX_BODY_BYTES, BodyLimit, SecurityHeaders, Web

DB_ENV = "TOXIFORGE_ANNOTATE_DB"  # the database of ``app_from_env`` (uvicorn workers import the app by name)
SECURE_ENV = "TOXIFORGE_ANNOTATE_SECURE_COOKIES"
PARENT_ENV = "TOXIFORGE_ANNOTATE_PARENT"  # the pid of the process that started the workers
RETRY_AFTER_SECONDS = 2
_TOKEN_PATH = re.compile(r"(/a/|/admin/login/)[^/?\s\"]+")


class RedactTokens(logging.Filter):
    """Replaces invite/admin tokens in access-log request paths with ``[redacted]``."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_TOKEN_PATH.sub(r"\1[redacted]", a) if isinstance(a, str) else a
                                for a in record.args)
        if isinstance(record.msg, str):
            record.msg = _TOKEN_PATH.sub(r"\1[redacted]", record.msg)
        return True


def install_log_redaction() -> None:
    for name in ("uvicorn.access", "uvicorn.error", "uvicorn"):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactTokens) for f in logger.filters):
            logger.addFilter(RedactTokens())


def create_app(store: Store | str, *, secure_cookies: bool = False, sweep_interval: float | None = 60.0) -> FastAPI:
    """The app over ``store`` (a :class:`Store` or a database URL/path). Every ``sweep_interval`` seconds a
    background thread releases assignments open past their study's lease (None: no sweeper). ``secure_cookies``
    marks the session cookies ``Secure`` (HTTPS only)."""
    store = store if isinstance(store, Store) else Store(store)
    store.start_checkpointer()
    if sweep_interval:
        start_lease_sweeper(store, sweep_interval)
    app = FastAPI(title="toxiforge annotation", docs_url=None, redoc_url=None, openapi_url=None)
    web = app.state.web = Web(store, secure_cookies=secure_cookies)
    app.state.store = store
    install_log_redaction()
    # the hot path first, on the app's own router: matched before (and without) the included routers' layers
    app.add_route(annotator_routes.SUBMISSION_PATH, annotator_routes.answer, methods=["POST"])
    app.include_router(annotator_routes.router)
    app.include_router(admin_routes.router)
    app.add_middleware(BodyLimit, max_bytes=MAX_BODY_BYTES)
    app.add_middleware(SecurityHeaders)

    @app.exception_handler(StarletteHTTPException)
    def http_error(request: Request, exc: StarletteHTTPException):
        return web.render("message.html", status=exc.status_code, title="Sorry", message=str(exc.detail))

    def database_busy(request: Request, exc: Exception):
        response = web.render("message.html", status=503, title="Busy",
                              message="The server is busy. Please try again in a moment; nothing was lost.")
        response.headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response

    app.add_exception_handler(OperationalError, database_busy)  # locked past the busy timeout, or unreachable
    app.add_exception_handler(sqlite3.OperationalError, database_busy)

    @app.exception_handler(Exception)
    def server_error(request: Request, exc: Exception):  # answered outside the middleware: headers set here
        return web.render("message.html", status=500, title="Server error",
                          message="Something went wrong on the server. Please reload the page.")

    return app


def exit_with_parent(parent_pid: int, interval: float = 0.5) -> threading.Thread:
    """A daemon thread that sends this process SIGTERM (uvicorn's graceful shutdown) once ``parent_pid`` is no
    longer its parent: a worker whose main process was killed (``kill -9``) would otherwise keep serving on the
    port as an orphan."""
    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(interval)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=watch, name="toxiforge-exit-with-parent", daemon=True)
    thread.start()
    return thread


def app_from_env() -> FastAPI:
    """The app over the database named by ``$TOXIFORGE_ANNOTATE_DB`` (the factory that uvicorn workers import);
    the worker exits when the process that started it dies."""
    if os.environ.get(PARENT_ENV):
        exit_with_parent(int(os.environ[PARENT_ENV]))
    return create_app(os.environ[DB_ENV], secure_cookies=os.environ.get(SECURE_ENV) == "1")


def serve(db: str, host: str = "127.0.0.1", port: int = 8000, *, workers: int | None = None,
          workers_log: str = "info", secure_cookies: bool = False) -> None:
    """Run the app with uvicorn (access log on, tokens redacted; uvloop and httptools when installed).

    ``workers`` (default ``$TOXIFORGE_ANNOTATE_WORKERS`` or 1) > 1 runs that many server processes on one socket;
    SQLite in WAL mode with ``BEGIN IMMEDIATE`` and a busy timeout serialises their writes safely. Each worker
    exits when the main process dies (:func:`exit_with_parent`). ``secure_cookies``: session cookies are sent over
    HTTPS only."""
    import uvicorn

    workers = workers or int(os.environ.get("TOXIFORGE_ANNOTATE_WORKERS", "1") or 1)
    install_log_redaction()
    if workers > 1:
        Store(db)  # create the tables once, before the workers start
        os.environ.update({DB_ENV: db, PARENT_ENV: str(os.getpid()), SECURE_ENV: "1" if secure_cookies else "0"})
        uvicorn.run("toxiforge.annotation.app:app_from_env", factory=True, host=host, port=port, workers=workers,
                    log_level=workers_log)
        return
    app = create_app(db, secure_cookies=secure_cookies)
    config = uvicorn.Config(app, host=host, port=port, log_level=workers_log)
    server = uvicorn.Server(config)
    gc.collect()
    gc.freeze()  # the imported modules and the app are permanent: keep them out of every later collection
    server.run()
