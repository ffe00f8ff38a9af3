"""Simulated annotators against a running server (used by the load tests and ``benchmarks/annotate_load.py``).

:func:`start_server` runs ``toxiforge annotate serve`` in a subprocess on a free loopback port and waits until it
answers; :func:`run_annotators` runs one asyncio task per invite token (one event loop, uvloop when installed,
one keep-alive connection per annotator: the light :class:`RawClient` by default, or ``httpx.AsyncClient``), each
a real HTTP client that logs in, consents, loads the form and then POSTs complete answers (with the form's CSRF
token) until nothing is left (or ``stop`` is set). A submission counts as acknowledged when the server answers 200
with the next form (or the "All done" page), which it does only after the commit; its latency is from sending the
POST to the end of the answer. The clock of the run starts when every annotator has its first form, so the rate is
that of submissions, not of logins. With ``interval`` each annotator submits on a fixed schedule (open loop, one
submission every ``interval`` seconds, random phase) and latency counts from the scheduled time, so a slow server
cannot hide its queueing delay by slowing the clients down. With ``answer`` each annotator answers what
``answer(token, statement)`` returns for the statement on its form (e.g. a simulated annotator's short-form
``{"hateful": "yes"}``) instead of the fixed :data:`ANSWERS`.
"""

from __future__ import annotations

import asyncio
import gc
import html
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlencode

from toxiforge._net import wait_until_answering

ANSWERS = {"author": "human", "harmful_ai": "2", "harmful_human": "3", "stereotyping": "no", "intent": "1",
           "lewd": "no", "group_reference": "direct", "other_groups": "", "framing": "moral", "framing_other": "",
           "factual": "opinion", "hateful": "no", "action": "submit"}  # either form's (the other's are ignored)
_STATEMENT = re.compile(r'id="statement">(.*?)</p>', re.S)
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_ACTION = re.compile(r'action="/annotate/(\d+)"')


def start_server(db: str, port: int, *, timeout: float = 30.0, log_path: str | None = None,
                 workers: int = 1) -> subprocess.Popen:
    """Start the app on 127.0.0.1:``port`` in a subprocess (``workers`` uvicorn processes); returns once it answers
    (polling, no fixed sleep)."""
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOXIFORGE_ANNOTATE_WORKERS": str(workers)}
    proc = subprocess.Popen([sys.executable, "-m", "toxiforge", "annotate", "serve", "--db", db, "--port", str(port)],
                            stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=workers > 1)
    wait_until_answering(proc, f"http://127.0.0.1:{port}/", timeout=timeout, what="annotation server",
                         interval=0.05, log=log_path)
    return proc


@dataclass
class LoadResult:
    acked: list[tuple[str, int]] = field(default_factory=list)  # (token, assignment id) per acknowledged POST
    latencies: list[float] = field(default_factory=list)         # seconds per acknowledged POST
    errors: list[str] = field(default_factory=list)
    elapsed: float = 0.0                                         # seconds from the first form to the end
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


class RawClient:
    """A minimal HTTP/1.1 keep-alive client on one asyncio connection, for the load generator only: a few times
    cheaper per request than httpx, so at hundreds of requests/s the generator's own CPU time (which would count
    as server latency on a 2-core machine) stays small. It keeps the one session cookie the invite link sets and
    understands only what the app answers (Content-Length bodies, no chunking, no redirects followed)."""

    def __init__(self, base: str):
        host, port = base.split("://", 1)[1].rstrip("/").rsplit(":", 1)
        self.host, self.port, self.cookie = host, int(port), ""
        self.reader: asyncio.StreamReader  # both set by __aenter__
        self.writer: asyncio.StreamWriter

    async def __aenter__(self) -> RawClient:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def __aexit__(self, *exc) -> None:
        self.writer.close()

    async def request(self, method: str, path: str, form: dict[str, str] | None = None) -> tuple[int, str]:
        body = urlencode(form).encode() if form is not None else b""
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
                + (f"Cookie: {self.cookie}\r\n" if self.cookie else "")
                + ("Content-Type: application/x-www-form-urlencoded\r\n" if form is not None else "")
                + f"Content-Length: {len(body)}\r\n\r\n")
        self.writer.write(head.encode() + body)
        status_line, *headers = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        length = next(int(h.split(":", 1)[1]) for h in headers if h[:15].lower() == "content-length:")
        cookie = next((h.split(":", 1)[1].split(";", 1)[0].strip() for h in headers
                       if h[:11].lower() == "set-cookie:"), None)
        if cookie:
            self.cookie = cookie
        return int(status_line.split(" ", 2)[1]), (await self.reader.readexactly(length)).decode("utf-8")

    async def get(self, path: str) -> str:
        return (await self.request("GET", path))[1]


class _HttpxClient:
    """The same interface over ``httpx.AsyncClient`` (a full client: cookies, redirects)."""

    def __init__(self, base: str):
        import httpx

        self.client = httpx.AsyncClient(base_url=base, timeout=30.0)

    async def __aenter__(self) -> _HttpxClient:
        await self.client.__aenter__()
        return self

    async def __aexit__(self, *exc) -> None:
        await self.client.__aexit__(*exc)

    async def request(self, method: str, path: str, form: dict[str, str] | None = None) -> tuple[int, str]:
        r = await self.client.request(method, path, data=form, follow_redirects=True)
        return r.status_code, r.text

    async def get(self, path: str) -> str:
        return (await self.request("GET", path))[1]


def _csrf(page: str) -> str:
    found = _CSRF.search(page)
    if found is None:
        raise RuntimeError("the page has no csrf field")
    return found.group(1)


async def _annotate(base: str, token: str, result: LoadResult, stop: threading.Event, limit: int | None,
                    ready: asyncio.Event, waiting: list[int], interval: float | None, client_kind: str,
                    answer: Callable[[str, str], dict[str, str]] | None = None) -> None:
    client: RawClient | _HttpxClient
    if client_kind == "raw":
        client = RawClient(base)
    else:
        client = _HttpxClient(base)
    async with client:
        page = None
        try:
            try:
                await client.get(f"/a/{token}")  # sets the session cookie
                page = await client.get("/annotate")
                await client.request("POST", "/consent", {"csrf": _csrf(page), "agree": "yes"})
                page = await client.get("/annotate")
            finally:
                waiting[0] -= 1
                if waiting[0] == 0:
                    ready.set()
            await ready.wait()
            csrf = _csrf(page)
            done = 0
            due = time.perf_counter() + (random.uniform(0, interval) if interval else 0.0)
            while not stop.is_set() and (limit is None or done < limit):
                found = _ACTION.search(page)
                if found is None:
                    return
                assignment = int(found.group(1))
                if interval:
                    delay = due - time.perf_counter()
                    if delay > 0:
                        await asyncio.sleep(delay)
                    started, due = due, due + interval  # latency from the scheduled time (open loop)
                else:
                    started = time.perf_counter()
                answers = ANSWERS
                if answer is not None:
                    shown = _STATEMENT.search(page)
                    answers = {**answer(token, html.unescape(shown.group(1)) if shown else ""), "action": "submit"}
                status, page = await client.request("POST", f"/annotate/{assignment}", {**answers, "csrf": csrf})
                latency = time.perf_counter() - started
                if status != 200:
                    raise RuntimeError(f"submission answered {status}")
                result.acked.append((token, assignment))
                result.latencies.append(latency)
                done += 1
        except Exception as exc:  # connection refused/reset after a kill, or a real error
            result.errors.append(f"{type(exc).__name__}: {exc}")


async def _run(base: str, tokens: list[str], result: LoadResult, stop: threading.Event, limit: int | None,
               timeout: float, interval: float | None, client_kind: str,
               answer: Callable[[str, str], dict[str, str]] | None = None) -> None:
    ready, waiting = asyncio.Event(), [len(tokens)]
    tasks = [asyncio.ensure_future(_annotate(base, t, result, stop, limit, ready, waiting, interval, client_kind,
                                             answer)) for t in tokens]
    deadline = time.perf_counter() + timeout
    await asyncio.wait_for(ready.wait(), timeout)
    started = time.perf_counter()
    _, pending = await asyncio.wait(tasks, timeout=max(0.0, deadline - started))
    result.elapsed = time.perf_counter() - started
    for task in pending:
        task.cancel()


def _new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency, but the harness works without it
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run_annotators(base: str, tokens: list[str], *, stop: threading.Event | None = None,
                   per_annotator: int | None = None, timeout: float = 120.0,
                   interval: float | None = None, client: str = "raw",
                   answer: Callable[[str, str], dict[str, str]] | None = None) -> LoadResult:
    """One asyncio task per token in one event loop (this thread); returns when all are done (or ``timeout``).
    ``client``: "raw" (:class:`RawClient`, light) or "httpx" (a full HTTP client)."""
    if client not in ("raw", "httpx"):
        raise ValueError(f"client must be 'raw' or 'httpx', got {client!r}")
    result, stop = LoadResult(), stop or threading.Event()
    # the load generator's own garbage collections (tens of ms with SQLAlchemy & co. imported) would count as
    # server latency: freeze what exists and collect no cycles while the clients run
    gc.collect()
    gc.freeze()
    enabled = gc.isenabled()
    gc.disable()
    try:
        main = _run(base, tokens, result, stop, per_annotator, timeout, interval, client, answer)
        if sys.version_info >= (3, 11):
            with asyncio.Runner(loop_factory=_new_loop) as runner:
                runner.run(main)
        else:  # asyncio.Runner is new in 3.11; toxiforge supports 3.10
            loop = _new_loop()
            try:
                loop.run_until_complete(main)
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()
    finally:
        if enabled:
            gc.enable()
        gc.unfreeze()
    return result
