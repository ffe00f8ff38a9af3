"""Simulated annotators against a running server (used by the load tests and ``benchmarks/annotate_load.py``).

:func:`start_server` runs ``toxiforge annotate serve`` in a subprocess on a free loopback port and waits until it
answers; :func:`run_annotators` starts one thread per invite token, each a real HTTP client that opens its link,
consents and submits answers until nothing is left (or ``stop`` is set), recording each acknowledged submission
(HTTP 303 after the commit) and its latency.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field

ANSWERS = {"author": "human", "harmful_ai": "2", "harmful_human": "3", "stereotyping": "no", "intent": "1",
           "lewd": "no", "group_reference": "direct", "other_groups": "", "framing": "moral", "framing_other": "",
           "factual": "opinion", "action": "submit"}
_CSRF = re.compile(r'name="csrf" value="([^"]+)"')
_ACTION = re.compile(r'action="/annotate/(\d+)"')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(db: str, port: int, *, timeout: float = 30.0, log_path: str | None = None) -> subprocess.Popen:
    """Start the app on 127.0.0.1:``port`` in a subprocess; returns once it answers (polling, no fixed sleep)."""
    import httpx

    out = open(log_path, "ab") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, "-m", "toxiforge", "annotate", "serve", "--db", db, "--port", str(port)],
                            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with status {proc.returncode}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/", timeout=1.0).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"server did not answer within {timeout} s")


@dataclass
class LoadResult:
    acked: list[tuple[str, int]] = field(default_factory=list)  # (token, assignment id) per acknowledged POST
    latencies: list[float] = field(default_factory=list)         # seconds per acknowledged POST
    errors: list[str] = field(default_factory=list)
    elapsed: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)


def _annotate(base: str, token: str, result: LoadResult, stop: threading.Event, limit: int | None) -> None:
    import httpx

    with httpx.Client(base_url=base, timeout=30.0) as client:
        try:
            page = client.get(f"/a/{token}", follow_redirects=True).text
            client.post("/consent", data={"csrf": _CSRF.search(page).group(1), "agree": "yes"})
            done = 0
            while not stop.is_set() and (limit is None or done < limit):
                page = client.get("/annotate").text
                found = _ACTION.search(page)
                if found is None:
                    return
                assignment = int(found.group(1))
                started = time.perf_counter()
                r = client.post(f"/annotate/{assignment}", data={**ANSWERS, "csrf": _CSRF.search(page).group(1)})
                latency = time.perf_counter() - started
                if r.status_code != 303:
                    raise RuntimeError(f"submission answered {r.status_code}")
                with result.lock:
                    result.acked.append((token, assignment))
                    result.latencies.append(latency)
                done += 1
        except Exception as exc:  # connection refused/reset after a kill, or a real error
            with result.lock:
                result.errors.append(f"{type(exc).__name__}: {exc}")


def run_annotators(base: str, tokens: list[str], *, stop: threading.Event | None = None,
                   per_annotator: int | None = None, timeout: float = 120.0) -> LoadResult:
    """One thread per token; returns when all are done (or ``timeout``)."""
    result, stop = LoadResult(), stop or threading.Event()
    threads = [threading.Thread(target=_annotate, args=(base, t, result, stop, per_annotator), daemon=True)
               for t in tokens]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, timeout - (time.perf_counter() - started)))
    result.elapsed = time.perf_counter() - started
    return result
