"""The annotation web app (FastAPI, server-rendered Jinja2 pages with autoescaping; no front-end build).

Annotators open their invite link ``/a/<token>``: the token moves into an HttpOnly, SameSite=Strict cookie and
the browser is redirected to ``/annotate``, so the token appears in one request line only, which the access
log redacts. They accept the content warning and consent form before any statement is shown, then answer the
nine questions for one statement at a time (drafts are kept until submitted). Admins log in with the study's
admin token at ``/admin/login/<token>`` (a separate cookie) and see progress, per-annotator counts, live
agreement and the exports. Every POST carries a CSRF token (an HMAC of the session) in a hidden field.
"""

from __future__ import annotations

import hmac
import logging
import re
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader
from starlette.exceptions import HTTPException as StarletteHTTPException

from toxiforge.annotation.questions import QUESTIONS, AnswerError, draft_answers, options_of, validate_answers
from toxiforge.annotation.store import Store, hash_token
from toxiforge.errors import InputError

SESSION_COOKIE, ADMIN_COOKIE = "tf_session", "tf_admin"
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


def create_app(store: Store | str, *, secure_cookies: bool = False) -> FastAPI:
    """The app over ``store`` (a :class:`Store` or a database URL/path)."""
    store = store if isinstance(store, Store) else Store(store)
    env = Environment(loader=FileSystemLoader(str(Path(__file__).parent / "templates")), autoescape=True)
    app = FastAPI(title="toxiforge annotation", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.store = store
    install_log_redaction()

    def render(name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**ctx), status_code=status,
                            headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY",
                                     "Content-Security-Policy": "default-src 'self'; style-src 'unsafe-inline'; "
                                                                "script-src 'unsafe-inline'"})

    def csrf_for(token: str) -> str:
        return store.keyed_hash("csrf", hash_token(token))[:32]

    def check_csrf(token: str, given: str) -> None:
        if not hmac.compare_digest(csrf_for(token), given or ""):
            raise HTTPException(403, "invalid form token; reload the page")

    def annotator(request: Request):
        token = request.cookies.get(SESSION_COOKIE)
        found = store.annotator_for(token) if token else None
        if found is None:
            raise HTTPException(401, "open your invite link first")
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
    def annotate_page(request: Request):
        token, who = annotator(request)
        if who.consented_at is None:
            return render("consent.html", csrf=csrf_for(token))
        return _form(token, who)

    def _form(token, who, errors: dict[str, str] | None = None, values: dict[str, Any] | None = None,
              status: int = 200):
        got = store.next_assignment(who)
        done = store.annotator_done(who.id)
        if got is None:
            return render("message.html", title="All done",
                          message=f"Thank you! You have annotated {done} statements; nothing is left for you.")
        assignment, item = got
        total = store.item_count(who.study_id)
        return render("form.html", status=status, item=item, assignment=assignment, csrf=csrf_for(token),
                      questions=QUESTIONS, options_of=options_of, errors=errors or {},
                      values=values if values is not None else (assignment.draft or {}), done=done, total=total)

    @app.post("/consent")
    def consent(request: Request, csrf: str = Form(""), agree: str = Form("")):
        token, who = annotator(request)
        check_csrf(token, csrf)
        if agree != "yes":
            return render("consent.html", status=422, csrf=csrf_for(token),
                          error="Please tick the box to give your consent, or close this page.")
        store.consent(who.id)
        return RedirectResponse("/annotate", status_code=303)

    @app.post("/annotate/{assignment_id}")
    async def answer(request: Request, assignment_id: int):
        token, who = annotator(request)
        form = dict((await request.form()).items())
        check_csrf(token, str(form.get("csrf", "")))
        if who.consented_at is None:
            raise HTTPException(403, "consent first")
        if store.get_assignment(who.id, assignment_id) is None:
            raise HTTPException(404, "no such assignment")
        if form.get("action") == "save":
            store.save_draft(who.id, assignment_id, draft_answers(form))
            return RedirectResponse("/annotate", status_code=303)
        try:
            answers = validate_answers(form)
        except AnswerError as exc:
            store.save_draft(who.id, assignment_id, draft_answers(form))
            return _form(token, who, errors=exc.errors, values=draft_answers(form), status=422)
        try:
            store.submit(who.id, assignment_id, answers)
        except InputError as exc:
            raise HTTPException(404, str(exc)) from exc
        return RedirectResponse("/annotate", status_code=303)

    @app.get("/admin/login/{token}")
    def admin_login(token: str):
        if store.study_for_admin(token) is None:
            raise HTTPException(404, "unknown admin link")
        return login(ADMIN_COOKIE, token, "/admin")

    @app.get("/admin", response_class=HTMLResponse)
    def admin_page(request: Request):
        from toxiforge.annotation.agreement import study_agreement

        _, study = admin(request)
        return render("admin.html", study=study, progress=store.progress(study.id),
                      agreement=study_agreement(store, study.id))

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


def serve(db: str, host: str = "127.0.0.1", port: int = 8000, *, workers_log: str = "info") -> None:
    """Run the app with uvicorn (access log on, tokens redacted)."""
    import uvicorn

    app = create_app(db)
    config = uvicorn.Config(app, host=host, port=port, log_level=workers_log)
    server = uvicorn.Server(config)
    install_log_redaction()
    server.run()
