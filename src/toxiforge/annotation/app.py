"""The annotation web app (FastAPI, server-rendered Jinja2 pages with autoescaping; no front-end build).

Annotators open their invite link ``/a/<token>``: the token moves into an HttpOnly, SameSite=Strict cookie and
the browser is redirected to ``/annotate``, so the token appears in one request line only, which the access
log redacts. They accept the content warning and consent form before any statement is shown, then answer the
nine questions for one statement at a time (drafts are kept until submitted). Admins log in with the study's
admin token at ``/admin/login/<token>`` (a separate cookie) and see progress, per-annotator counts, live
agreement and the exports. Every POST carries a CSRF token (an HMAC of the session) in a hidden field.

A submitted form is answered with the next form directly (200, no redirect): the submission, the claim of the
next assignment and the progress count are one write transaction, and a repeated POST (reload) stores nothing
twice and shows the next form again. An assignment left open past the study's lease is released to other
annotators (see :mod:`toxiforge.annotation.leases`); a late submission for it is refused with a notice. On
SQLite the annotator endpoints run the (short, local) database calls on the event loop instead of hopping to a
worker thread; other databases go through the thread pool.
"""

from __future__ import annotations

import gc
import hmac
import logging
import os
import re
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Route

from toxiforge.annotation.questions import (
    QUESTIONS,
    AnswerError,
    draft_answers,
    options_of,
    validate_answers,
)
from toxiforge.annotation.leases import release_stale, start_lease_sweeper
from toxiforge.annotation.store import MAX_ID, AssignmentReleased, Store, hash_token
from toxiforge.errors import InputError

SESSION_COOKIE, ADMIN_COOKIE = "tf_session", "tf_admin"
DB_ENV = "TOXIFORGE_ANNOTATE_DB"  # the database of ``app_from_env`` (uvicorn workers import the app by name)
HEADERS = {"Cache-Control": "no-store", "X-Frame-Options": "DENY",
           "Content-Security-Policy": "default-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'"}
_CONSENTED_CACHE = 100_000
MAX_FORM_BYTES = 64 * 1024  # the nine answers and two 500-character texts fit many times over
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
    background thread releases assignments open past their study's lease (None: no sweeper)."""
    store = store if isinstance(store, Store) else Store(store)
    store.start_checkpointer()
    if sweep_interval:
        start_lease_sweeper(store, sweep_interval)
    env = Environment(loader=FileSystemLoader(str(Path(__file__).parent / "templates")), autoescape=True)
    app = FastAPI(title="toxiforge annotation", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.store = store
    install_log_redaction()

    inline = store.engine.dialect.name == "sqlite"
    form_template = env.get_template("form.html")
    blank_questions = Markup(env.get_template("questions.html").render(questions=QUESTIONS, options_of=options_of,
                                                                       errors={}, values={}))
    consented: dict[str, Any] = {}  # token hash -> annotator row, for annotators who consented (never undone)

    async def db(fn, *args, **kwargs):
        """A store call: inline on SQLite (local, short), in the thread pool otherwise."""
        if inline:
            return fn(*args, **kwargs)
        return await run_in_threadpool(partial(fn, *args, **kwargs))

    def render(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**ctx), status_code=status, headers=HEADERS)

    def csrf_for(token: str, purpose: str = "csrf") -> str:
        """The form token of a session (``purpose`` "csrf": annotator, "admin-csrf": admin)."""
        return store.keyed_hash(purpose, hash_token(token))[:32]

    def check_csrf(token: str, given: str, purpose: str = "csrf") -> None:
        if not hmac.compare_digest(csrf_for(token, purpose), given or ""):
            raise HTTPException(403, "invalid form token; reload the page")

    async def annotator(request: Request):
        token = request.cookies.get(SESSION_COOKIE)
        if not token:
            raise HTTPException(401, "open your invite link first")
        found = consented.get(hash_token(token))
        if found is None:
            found = await db(store.annotator_for, token)
            if found is None:
                raise HTTPException(401, "open your invite link first")
            if found.consented_at is not None and len(consented) < _CONSENTED_CACHE:
                consented[found.token_hash] = found
        return token, found

    def admin(request: Request):
        token = request.cookies.get(ADMIN_COOKIE)
        study = store.study_for_admin(token) if token else None
        if study is None:
            raise HTTPException(403, "admin pages need the study's admin link")
        return token, study

    def login(cookie: str, token: str, to: str) -> RedirectResponse:
        response = RedirectResponse(to, status_code=303)
        response.set_cookie(cookie, token, httponly=True, samesite="strict", secure=secure_cookies,
                            max_age=60 * 60 * 24 * 60)
        return response

    @app.get("/", response_class=HTMLResponse)
    def index():
        return render("message.html", title="toxiforge annotation",
                      message="Open the personal link you were given to start annotating.")

    @app.get("/a/{token}")
    def invite_link(token: str):
        if store.annotator_for(token) is None:
            raise HTTPException(404, "unknown invite link")
        return login(SESSION_COOKIE, token, "/annotate")

    @app.get("/annotate", response_class=HTMLResponse)
    async def annotate_page(request: Request):
        token, who = await annotator(request)
        if who.consented_at is None:
            return render("consent.html", csrf=csrf_for(token))
        got, done = await db(store.open_assignment, who)
        return _form(token, who, got, done)

    def _form(token, who, got, done: int, errors: dict[str, str] | None = None,
              values: dict[str, Any] | None = None, status: int = 200, notice: str = ""):
        if got is None:
            return render("message.html", title="All done",
                          message=f"Thank you! You have annotated {done} statements; nothing is left for you.")
        assignment, item = got
        if values is None:
            values = assignment.draft or {}
        html = form_template.render(item=item, assignment=assignment, csrf=csrf_for(token), questions=QUESTIONS,
                                    options_of=options_of, errors=errors or {}, values=values, done=done,
                                    total=store.item_count(who.study_id), notice=notice,
                                    questions_html=None if errors or values else blank_questions)
        return HTMLResponse(html, status_code=status, headers=HEADERS)

    @app.post("/consent")
    def consent(request: Request, csrf: str = Form(""), agree: str = Form("")):
        token = request.cookies.get(SESSION_COOKIE)
        who = store.annotator_for(token) if token else None
        if who is None:
            raise HTTPException(401, "open your invite link first")
        check_csrf(token, csrf)
        if agree != "yes":
            return render("consent.html", status=422, csrf=csrf_for(token),
                          error="Please tick the box to give your consent, or close this page.")
        store.consent(who.id)
        return RedirectResponse("/annotate", status_code=303)

    async def read_form(request: Request) -> dict[str, Any]:
        """The posted fields (the last value of a repeated one). URL-encoded bodies, what the form sends, are parsed
        with ``urllib.parse`` (a few times cheaper than the multipart parser); other bodies go through Starlette."""
        if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
            body = await request.body()
            if len(body) > MAX_FORM_BYTES:
                raise HTTPException(413, "the form is too large")
            try:
                return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True, max_num_fields=100))
            except ValueError:
                raise HTTPException(400, "the form has too many fields") from None
        return dict((await request.form()).items())

    async def released_form(token, who):
        got, done = await db(store.open_assignment, who)
        return _form(token, who, got, done, status=409, notice=(
            "That statement stayed open too long and was handed to another annotator, so those answers were not "
            "stored. Here is your next statement."))

    async def answer(request: Request):
        """POST /annotate/{assignment_id}: the hot path, a plain Starlette route (no FastAPI dependency solving)."""
        assignment_id = request.path_params["assignment_id"]
        if not 0 < assignment_id <= MAX_ID:
            raise HTTPException(404, "no such assignment")
        token, who = await annotator(request)
        form = await read_form(request)
        check_csrf(token, str(form.get("csrf", "")))
        if who.consented_at is None:
            raise HTTPException(403, "consent first")
        if form.get("action") != "save":
            try:
                answers = validate_answers(form)
            except AnswerError as exc:
                found = await db(store.get_assignment, who.id, assignment_id)
                if found is None:
                    raise HTTPException(404, "no such assignment") from None
                if found[0].released_at is not None:
                    return await released_form(token, who)
                await db(store.save_draft, who.id, assignment_id, draft_answers(form))
                got, done = await db(store.open_assignment, who)
                return _form(token, who, got, done, errors=exc.errors, values=draft_answers(form), status=422)
            try:
                _, got, done = await db(store.submit_and_next, who, assignment_id, answers)
            except AssignmentReleased:
                return await released_form(token, who)
            except InputError as exc:
                raise HTTPException(404, "no such assignment") from exc
            return _form(token, who, got, done)
        if await db(store.get_assignment, who.id, assignment_id) is None:
            raise HTTPException(404, "no such assignment")
        await db(store.save_draft, who.id, assignment_id, draft_answers(form))
        return RedirectResponse("/annotate", status_code=303)

    app.router.routes.append(Route("/annotate/{assignment_id:int}", answer, methods=["POST"]))

    @app.get("/admin/login/{token}")
    def admin_login(token: str):
        if store.study_for_admin(token) is None:
            raise HTTPException(404, "unknown admin link")
        return login(ADMIN_COOKIE, token, "/admin")

    @app.get("/admin", response_class=HTMLResponse)
    def admin_page(request: Request):
        from toxiforge.annotation.agreement import study_agreement

        token, study = admin(request)
        released = request.query_params.get("released")
        return render("admin.html", study=study, progress=store.progress(study.id),
                      agreement=study_agreement(store, study.id), csrf=csrf_for(token, "admin-csrf"),
                      released=int(released) if released and released.isdigit() else None)

    @app.post("/admin/release")
    def admin_release(request: Request, csrf: str = Form(""), minutes: str = Form("")):
        token, study = admin(request)
        check_csrf(token, csrf, "admin-csrf")
        if not minutes.strip().isdigit():
            raise HTTPException(422, f"minutes must be a whole number of 0 or more, got {minutes!r}")
        n = release_stale(store, study.id, older_than=timedelta(minutes=int(minutes)))
        return RedirectResponse(f"/admin?released={n}", status_code=303)

    @app.get("/admin/export/{fmt}")
    def admin_export(request: Request, fmt: str):
        from toxiforge.annotation.export import FORMATS, export_bytes

        _, study = admin(request)
        if fmt not in FORMATS:
            raise HTTPException(404, "unknown export format")
        try:
            data = export_bytes(store, study.id, fmt)
        except InputError as exc:
            raise HTTPException(409, str(exc)) from exc
        return Response(data, media_type="text/csv", headers={
            "Content-Disposition": f'attachment; filename="{fmt}-study{study.id}.csv"', "Cache-Control": "no-store"})

    @app.exception_handler(StarletteHTTPException)
    def http_error(request: Request, exc: StarletteHTTPException):
        return render("message.html", status=exc.status_code, title="Sorry", message=str(exc.detail))

    return app


def app_from_env() -> FastAPI:
    """The app over the database named by ``$TOXIFORGE_ANNOTATE_DB`` (the factory that uvicorn workers import)."""
    return create_app(os.environ[DB_ENV])


def serve(db: str, host: str = "127.0.0.1", port: int = 8000, *, workers: int | None = None,
          workers_log: str = "info") -> None:
    """Run the app with uvicorn (access log on, tokens redacted; uvloop and httptools when installed).

    ``workers`` (default ``$TOXIFORGE_ANNOTATE_WORKERS`` or 1) > 1 runs that many server processes on one socket;
    SQLite in WAL mode with ``BEGIN IMMEDIATE`` and a busy timeout serialises their writes safely."""
    import uvicorn

    workers = workers or int(os.environ.get("TOXIFORGE_ANNOTATE_WORKERS", "1") or 1)
    install_log_redaction()
    if workers > 1:
        from toxiforge.annotation.store import Store

        Store(db)  # create the tables once, before the workers start
        os.environ[DB_ENV] = db
        uvicorn.run("toxiforge.annotation.app:app_from_env", factory=True, host=host, port=port, workers=workers,
                    log_level=workers_log)
        return
    app = create_app(db)
    config = uvicorn.Config(app, host=host, port=port, log_level=workers_log)
    server = uvicorn.Server(config)
    gc.collect()
    gc.freeze()  # the imported modules and the app are permanent: keep them out of every later collection
    server.run()
