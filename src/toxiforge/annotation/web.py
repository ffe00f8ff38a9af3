"""What the annotation app's routers share: the page renderer, sessions and CSRF, form parsing with limits, strict
integers, the thread pool for database calls, the request-body limit and the security headers.

* **Sessions**: an invite or admin link opens a server-side session (:meth:`Store.open_session`); the cookie holds
  the random session id (HttpOnly, ``SameSite=Lax``, ``Secure`` with ``--secure-cookies``), never the link's token.
  Lax, not Strict: a link clicked on another site (a mail client in a browser) is a cross-site navigation, and a
  Strict cookie set by the link's redirect would not be sent on the redirected ``GET /annotate``. Every POST still
  needs its CSRF token (an HMAC of the session), so Lax gives a forged cross-site POST nothing.
* **Database calls** never wait on the event loop: SQLite's ``BEGIN IMMEDIATE`` can wait up to its busy timeout
  for another process's write lock, and that wait would stop every other request, static pages included. Most
  calls run in the thread pool (:meth:`Web.db`); the annotator's hot path (:meth:`Web.hot`) runs on the loop only
  while no lock is taken and moves to the thread pool otherwise.
* **Bodies**: :class:`BodyLimit` refuses a request body over :data:`MAX_BODY_BYTES` with 413, by its
  Content-Length before anything is read and by counting the bytes of a streamed body, before any parsing; forms
  are parsed with a field limit and no file parts.
"""

from __future__ import annotations

import hmac
import re
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qsl

from fastapi import HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader
from markupsafe import Markup
from starlette.concurrency import run_in_threadpool

from toxiforge.annotation.questions import FORM_QUESTIONS, options_of
from toxiforge.annotation.schema import hash_token
from toxiforge.annotation.store import SESSION_DAYS, Store, WouldWait

SESSION_COOKIE, ADMIN_COOKIE = "tf_session", "tf_admin"
# No template has a script: scripts are off altogether; styles are inline in base.html.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; script-src 'none'; style-src 'unsafe-inline'; "
                               "frame-ancestors 'none'; form-action 'self'; base-uri 'none'",
    "X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
}
PAGE_HEADERS = {**SECURITY_HEADERS, "Cache-Control": "no-store"}
MAX_BODY_BYTES = 64 * 1024  # the nine answers and two 500-character texts fit many times over
MAX_FIELDS = 64             # the form has 14 fields
SESSION_CACHE_SECONDS = 30.0  # a consented annotator's session is looked up again after this long
_SESSION_CACHE_SIZE = 100_000
# session kind -> (its cookie, where its link leads, the 404 message of an unknown link)
_LINKS = {"annotator": (SESSION_COOKIE, "/annotate", "unknown invite link"),
          "admin": (ADMIN_COOKIE, "/admin", "unknown admin link")}
_DIGITS = re.compile(r"[0-9]{1,12}")  # ASCII digits only: str.isdigit() also accepts superscripts like "²"

T = TypeVar("T")


def parse_int(value: str | None, name: str, low: int, high: int) -> int:
    """A whole number written in ASCII digits within [low, high], or a 422 that says so."""
    text = (value or "").strip()
    if not _DIGITS.fullmatch(text) or not low <= int(text) <= high:
        raise HTTPException(422, f"{name} must be a whole number from {low} to {high}, got {text[:20]!r}")
    return int(text)


class Web:
    """The app's shared state: the store, templates, cookie settings and the session cache."""

    def __init__(self, store: Store, *, secure_cookies: bool = False):
        self.store, self.secure_cookies = store, secure_cookies
        # the templates ship with the package: no auto_reload, which would stat every template file per render
        self.templates = Environment(loader=FileSystemLoader(str(Path(__file__).parent / "templates")),
                                     autoescape=True, auto_reload=False)
        self.form_template = self.templates.get_template("form.html")
        # per study form: its questions with no answers and no errors, rendered once
        self.blank_questions = {form: Markup(self.templates.get_template("questions.html").render(
            questions=questions, options_of=options_of, errors={}, values={}))
            for form, questions in FORM_QUESTIONS.items()}
        self._sessions: dict[str, tuple[Any, float]] = {}  # session hash -> (consented annotator, cached at)

    async def db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A blocking store call, in the thread pool."""
        return await run_in_threadpool(partial(fn, *args, **kwargs))

    async def hot(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """A hot-path store call (:meth:`Store.open_assignment`, :meth:`Store.submit_and_next`): on SQLite first on
        the event loop without waiting for any lock (WAL reads never wait; a write that would wait raises
        :class:`WouldWait` before doing anything), else, or on another database, in the thread pool. Saves two
        thread hops per submission in the common case; the loop still never waits for a lock."""
        if self.store.fast_sqlite:
            try:
                with self.store.without_waiting():
                    return fn(*args, **kwargs)
            except WouldWait:
                pass
        return await self.db(fn, *args, **kwargs)

    def render(self, name: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(self.templates.get_template(name).render(**ctx), status_code=status,
                            headers=PAGE_HEADERS)

    def csrf_for(self, session_id: str, purpose: str = "csrf") -> str:
        """The form token of a session (``purpose`` "csrf": annotator, "admin-csrf": admin)."""
        return self.store.keyed_hash(purpose, hash_token(session_id))[:32]

    def check_csrf(self, session_id: str, given: str, purpose: str = "csrf") -> None:
        if not hmac.compare_digest(self.csrf_for(session_id, purpose), given or ""):
            raise HTTPException(403, "invalid form token; reload the page")

    async def open_link(self, kind: str, token: str) -> RedirectResponse:
        """The answer to an invite link (``kind`` "annotator") or an admin link ("admin"): a new session and the
        redirect that sets its cookie (never cached: it carries a fresh session), or 404 for an unknown token."""
        cookie, to, unknown = _LINKS[kind]
        session_id = await self.db(self.store.open_session, kind, token)
        if session_id is None:
            raise HTTPException(404, unknown)
        response = RedirectResponse(to, status_code=303, headers=PAGE_HEADERS)
        response.set_cookie(cookie, session_id, httponly=True, samesite="lax", secure=self.secure_cookies,
                            max_age=SESSION_DAYS * 24 * 3600, path="/")
        return response

    async def annotator(self, request: Request):
        """(session id, annotator row) of the request's annotator session, or 401. Consented annotators are cached
        for :data:`SESSION_CACHE_SECONDS`, so a revoked session ends within that time."""
        session_id = request.cookies.get(SESSION_COOKIE)
        if not session_id:
            raise HTTPException(401, "open your invite link first")
        key = hash_token(session_id)
        cached = self._sessions.get(key)
        if cached is not None and time.monotonic() - cached[1] < SESSION_CACHE_SECONDS:
            return session_id, cached[0]
        found = await self.db(self.store.annotator_for_session, session_id)
        if found is None:
            self._sessions.pop(key, None)
            raise HTTPException(401, "open your invite link first")
        if found.consented_at is not None and len(self._sessions) < _SESSION_CACHE_SIZE:
            self._sessions[key] = (found, time.monotonic())
        return session_id, found

    async def admin(self, request: Request):
        """(session id, study) of the request's admin session, or 403."""
        session_id = request.cookies.get(ADMIN_COOKIE)
        study = await self.db(self.store.study_for_admin_session, session_id) if session_id else None
        if study is None:
            raise HTTPException(403, "admin pages need the study's admin link")
        return session_id, study


async def read_form(request: Request) -> dict[str, str]:
    """The posted fields (the last value of a repeated one). URL-encoded bodies, what the forms send, are parsed with
    ``urllib.parse`` (a few times cheaper than the multipart parser); multipart bodies may hold no files. The body
    size is bounded by :class:`BodyLimit`, the number of fields here."""
    if request.headers.get("content-type", "").startswith("application/x-www-form-urlencoded"):
        body = await request.body()
        try:
            return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True,
                                  max_num_fields=MAX_FIELDS))
        except ValueError:
            raise HTTPException(400, "the form has too many fields") from None
    form = await request.form(max_files=0, max_fields=MAX_FIELDS, max_part_size=MAX_BODY_BYTES)
    return {k: v for k, v in form.items() if isinstance(v, str)}


class BodyTooLarge(HTTPException):
    def __init__(self) -> None:
        super().__init__(413, f"the request body is larger than {MAX_BODY_BYTES // 1024} kB")


class BodyLimit:
    """ASGI middleware: a body longer than ``max_bytes`` gets 413, by Content-Length before the app runs, or as soon
    as the streamed bytes pass the limit (the app's next ``receive`` raises :class:`BodyTooLarge`)."""

    def __init__(self, app, max_bytes: int = MAX_BODY_BYTES):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = dict(scope["headers"])
        length = headers.get(b"content-length")
        if length is not None:
            if not length.isdigit() or int(length) > self.max_bytes:
                response = HTMLResponse(f"<p>{BodyTooLarge().detail}</p>", status_code=413,
                                        headers={**PAGE_HEADERS, "Connection": "close"})
                return await response(scope, receive, send)
            if b"transfer-encoding" not in headers:
                # the server reads exactly Content-Length bytes as this request's body (HTTP/1.1 framing), so a
                # body within the limit needs no counting: only a streamed (chunked) body is counted
                return await self.app(scope, receive, send)
        seen = 0

        async def counted():
            nonlocal seen
            message = await receive()
            seen += len(message.get("body", b""))
            if seen > self.max_bytes:
                raise BodyTooLarge()
            return message

        await self.app(scope, counted, send)


class SecurityHeaders:
    """ASGI middleware: the security headers on every response (pages, redirects, exports, errors)."""

    def __init__(self, app):
        self.app = app
        self.headers = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        async def with_headers(message):
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", ())}
                message["headers"] = [*message.get("headers", ()),
                                      *((k, v) for k, v in self.headers if k not in present)]
            await send(message)

        await self.app(scope, receive, with_headers)
