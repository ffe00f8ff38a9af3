"""Annotation server under hostile or unlucky input: how fast oversized bodies are refused, and whether a write
lock held by another process stalls unrelated requests.

    .venv/bin/python benchmarks/annotate_abuse.py [--repeat 3]

Starts ``toxiforge annotate serve`` on a free loopback port with a fresh SQLite study and measures, per run:

* ``content_length_413_ms``: a POST announcing a 30 MB body (Content-Length, nothing sent after the headers) until
  the status line arrives;
* ``chunked_413_ms`` / ``chunked_sent_kb``: a chunked 30 MB POST sent in 64 kB chunks until the status line
  arrives, and how much of it had been sent by then;
* ``index_while_locked_ms``: ``GET /`` while another process's connection holds SQLite's write lock
  (``BEGIN IMMEDIATE``) and an annotator's submission waits for it; the lock is held for ``--hold`` seconds
  (default 3) or until ``GET /`` is answered, whichever is later; ``submission_status`` is what the submission got.

Only the server's HTTP interface and ``toxiforge.annotation.loadgen.start_server`` are used, so the same script
measures an older checkout (``PYTHONPATH=old/src``).
"""

from __future__ import annotations

import json
import re
import select
import socket
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import _common

SIZE = 30 * 1024 * 1024


def _connect(port: int, head: str) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=60)
    s.sendall(head.encode())
    return s


def _status(s: socket.socket, timeout: float = 60.0) -> str:
    s.settimeout(timeout)
    try:
        return s.recv(64).split(b"\r\n")[0].decode() or "closed"
    except TimeoutError:
        return f"no answer within {timeout:.0f} s"


def one_run(hold: float) -> dict:
    import httpx

    from toxiforge._net import free_port
    from toxiforge.annotation.loadgen import ANSWERS, start_server
    from toxiforge.annotation.store import Store

    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "abuse.db")
        store = Store(db)
        study, _ = store.create_study("abuse", [{"text": f"placeholder statement {i}", "target_group": "asian",
                                                 "label": 0, "method": "top-k"} for i in range(10)], per_item=1)
        token = store.invite(study.id, 1)[0]
        port = free_port()
        server = start_server(db, port)
        try:
            client = httpx.Client(base_url=f"http://127.0.0.1:{port}", follow_redirects=True, timeout=60)
            page = client.get(f"/a/{token}").text
            csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
            page = client.post("/consent", data={"csrf": csrf, "agree": "yes"}).text
            cookie = f"tf_session={client.cookies['tf_session']}"
            post = (f"POST /consent HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\n"
                    "Content-Type: application/x-www-form-urlencoded\r\n")
            t0 = time.perf_counter()
            s = _connect(port, post + f"Content-Length: {SIZE}\r\n\r\n")
            status_cl = _status(s, 5.0)
            content_length_ms = (time.perf_counter() - t0) * 1000
            s.close()
            t0 = time.perf_counter()
            s = _connect(port, post + "Transfer-Encoding: chunked\r\n\r\n")
            chunk, sent = b"10000\r\n" + b"x" * 0x10000 + b"\r\n", 0
            try:
                while sent < SIZE and not select.select([s], [], [], 0)[0]:
                    s.sendall(chunk)
                    sent += 0x10000
                if sent >= SIZE:
                    s.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            status_chunked = _status(s)
            chunked_ms = (time.perf_counter() - t0) * 1000
            s.close()

            action = re.search(r'action="(/annotate/\d+)"', page).group(1)
            csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
            body = urlencode({**ANSWERS, "csrf": csrf})
            holder = sqlite3.connect(db, timeout=1, isolation_level=None)
            holder.execute("BEGIN IMMEDIATE")
            locked_at = time.perf_counter()
            sub = _connect(port, f"POST {action} HTTP/1.1\r\nHost: x\r\nCookie: {cookie}\r\nContent-Type: "
                                 f"application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n\r\n{body}")
            t0 = time.perf_counter()
            with httpx.Client(timeout=60) as other:
                other.get(f"http://127.0.0.1:{port}/")
            index_ms = (time.perf_counter() - t0) * 1000
            while time.perf_counter() - locked_at < hold:  # keep the lock for --hold seconds
                time.sleep(0.01)
            holder.execute("COMMIT")
            holder.close()
            submission = _status(sub)
            sub.close()
        finally:
            server.terminate()
            server.wait(10)
    return {"content_length_status": status_cl, "content_length_413_ms": round(content_length_ms, 1),
            "chunked_status": status_chunked, "chunked_413_ms": round(chunked_ms, 1),
            "chunked_sent_kb": sent // 1024, "index_while_locked_ms": round(index_ms, 1),
            "submission_status": submission}


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--repeat", type=int, default=3, help="runs; each one's figures and their medians printed")
    parser.add_argument("--hold", type=float, default=3.0, help="seconds the other process holds the write lock")
    args = parser.parse_args()
    runs = [one_run(args.hold) for _ in range(args.repeat)]
    for r in runs:
        print(json.dumps(r), flush=True)
    print(json.dumps({"median": {k: statistics.median(r[k] for r in runs) for k in runs[0]
                                 if isinstance(runs[0][k], (int, float))}}))


if __name__ == "__main__":
    main()
