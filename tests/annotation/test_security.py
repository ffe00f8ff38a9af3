"""Issue 14's findings, each as a test: sessions and cookies, body limits, a locked database, strict integers,
security headers, orphan workers. (CSV formula cells: test_export.py; the cross-site link: test_browser.py.)"""

from __future__ import annotations

import os
import select
import signal
import socket
import sqlite3
import time

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from toxiforge._net import free_port
from toxiforge.annotation.app import create_app
from toxiforge.annotation.loadgen import start_server
from toxiforge.annotation.store import Store
from toxiforge.annotation.web import MAX_BODY_BYTES, SESSION_COOKIE

from .test_app import GOOD, action, consented, csrf

ITEMS = [{"text": f"placeholder statement {i}", "target_group": "asian", "label": i % 2, "method": "top-k"}
         for i in range(4)]


@pytest.fixture()
def study(database):
    store = Store(database)
    study, admin_token = store.create_study("s", ITEMS, per_item=2)
    return store, study, admin_token, store.invite(study.id, 2)


# --- sessions and cookies (items 1 and 5) ---------------------------------------------------------------------

def test_the_cookie_holds_a_revocable_session_not_the_token(study):
    store, st, admin_token, tokens = study
    c = TestClient(create_app(store, sweep_interval=None))
    r = c.get(f"/a/{tokens[0]}", follow_redirects=False)
    cookie = r.headers["set-cookie"]
    assert r.status_code == 303 and r.headers["cache-control"] == "no-store"
    assert "httponly" in cookie.lower() and "samesite=lax" in cookie.lower() and "secure" not in cookie.lower()
    session_id = c.cookies[SESSION_COOKIE]
    assert tokens[0] not in cookie and session_id != tokens[0]
    assert "Content warning" in c.get("/annotate").text
    # a second click on the link opens a second session; ending the annotator's sessions ends both
    other = TestClient(create_app(store, sweep_interval=None))
    other.get(f"/a/{tokens[0]}")
    annotator = store.annotator_for(tokens[0])
    assert store.end_sessions(annotator_id=annotator.id) == 2
    assert c.get("/annotate").status_code == 401 and other.get("/annotate").status_code == 401
    # the link itself still works
    assert c.get(f"/a/{tokens[0]}").status_code == 200 and "Content warning" in c.get("/annotate").text
    # an invite token used as the cookie value is refused
    raw = TestClient(create_app(store, sweep_interval=None), cookies={SESSION_COOKIE: tokens[1]})
    assert raw.get("/annotate").status_code == 401
    admin = TestClient(create_app(store, sweep_interval=None))
    r = admin.get(f"/admin/login/{admin_token}", follow_redirects=False)
    assert r.status_code == 303 and admin_token not in r.headers["set-cookie"]
    assert admin.get("/admin").status_code == 200
    assert store.end_sessions(study_id=st.id) == 2  # the annotator's new session and the admin's
    assert admin.get("/admin").status_code == 403


def test_secure_cookies_flag_and_https_base_url(study, monkeypatch, tmp_path):
    store, _, _, tokens = study
    c = TestClient(create_app(store, secure_cookies=True, sweep_interval=None), base_url="https://testserver")
    assert "secure" in c.get(f"/a/{tokens[0]}", follow_redirects=False).headers["set-cookie"].lower()
    seen = {}
    import toxiforge.annotation.app as app_module

    monkeypatch.setattr(app_module, "serve", lambda db, **kw: seen.setdefault(db, kw["secure_cookies"]))
    from toxiforge.cli import app as cli_app

    runner = CliRunner()
    monkeypatch.chdir(tmp_path)
    for name in ("a.db", "b.db", "c.db"):  # serve refuses a database that does not exist (issue 27 #2)
        Store(name).engine.dispose()
    for args in (["--db", "a.db"], ["--db", "b.db", "--secure-cookies"],
                 ["--db", "c.db", "--base-url", "https://annotate.example.org"]):
        assert runner.invoke(cli_app, ["annotate", "serve", *args]).exit_code == 0
    assert seen == {"a.db": False, "b.db": True, "c.db": True}


# --- request bodies (item 2) ------------------------------------------------------------------------------------

def test_bodies_over_the_limit_and_extra_parts_are_refused(study):
    store, _, _, tokens = study
    anon = TestClient(create_app(store, sweep_interval=None))
    big = b"x" * (MAX_BODY_BYTES + 1)
    # unauthenticated multipart: 401 before the body is parsed; over the limit: 413 before anything
    assert anon.post("/consent", files={"f": ("a.txt", b"x")}).status_code == 401
    assert anon.post("/consent", content=big, headers={"content-type": "multipart/form-data; boundary=x"}
                     ).status_code == 413
    c, page = consented(store, tokens[0])
    target = action(page)
    assert c.post(target, content=big, headers={"content-type": "application/x-www-form-urlencoded"}
                  ).status_code == 413
    # streamed without Content-Length: counted while read

    def chunks():
        for _ in range(4):
            yield b"a=" + b"x" * (MAX_BODY_BYTES // 2)

    assert c.post(target, content=chunks(), headers={"content-type": "application/x-www-form-urlencoded"}
                  ).status_code == 413
    assert c.post(target, data={**GOOD, "csrf": csrf(page)}, files={"f": ("a.txt", b"file")}).status_code == 400
    many = "&".join(f"f{i}=1" for i in range(100))
    assert c.post(target, content=many, headers={"content-type": "application/x-www-form-urlencoded"}
                  ).status_code == 400
    assert c.post(target, data={**GOOD, "csrf": csrf(page)}).status_code == 200  # the real form still passes


def _raw_request(port: int, head: bytes) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    s.sendall(head)
    return s


def test_a_30_mb_body_is_refused_before_it_is_sent(tmp_path):
    """Against a real server: the 413 arrives while the client has sent none (Content-Length) or only part
    (chunked) of a 30 MB body."""
    db = str(tmp_path / "big.db")
    store = Store(db)
    study, _ = store.create_study("s", ITEMS, per_item=1)
    token = store.invite(study.id, 1)[0]
    port = free_port()
    server = start_server(db, port)
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}")
        client.get(f"/a/{token}")
        session = client.cookies[SESSION_COOKIE]
        size = 30 * 1024 * 1024
        s = _raw_request(port, (f"POST /consent HTTP/1.1\r\nHost: x\r\nCookie: {SESSION_COOKIE}={session}\r\n"
                                f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {size}\r\n\r\n"
                                ).encode())
        assert s.recv(4096).startswith(b"HTTP/1.1 413")
        s.close()
        s = _raw_request(port, (f"POST /consent HTTP/1.1\r\nHost: x\r\nCookie: {SESSION_COOKIE}={session}\r\n"
                                "Content-Type: application/x-www-form-urlencoded\r\n"
                                "Transfer-Encoding: chunked\r\n\r\n").encode())
        chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
        sent = 0
        try:
            while sent < size and not select.select([s], [], [], 0)[0]:
                s.sendall(chunk)
                sent += 0x10000
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert s.recv(4096).startswith(b"HTTP/1.1 413")
        assert sent < size // 4, f"the server answered only after {sent} bytes"
        s.close()
    finally:
        server.terminate()
        server.wait(10)


# --- a locked database (item 3) ---------------------------------------------------------------------------------

def test_a_write_lock_held_elsewhere_stalls_neither_the_loop_nor_ends_in_a_500(tmp_path):
    """Another process's writer holds SQLite's lock: a submission waits for it in the thread pool, and meanwhile
    other requests are answered (the event loop is free). Once the lock is released the submission completes.
    Before, the wait ran on the event loop: GET / was answered only after the submission's wait (up to 10 s)."""
    db = str(tmp_path / "locked.db")
    store = Store(db)
    study, _ = store.create_study("s", ITEMS, per_item=1)
    token = store.invite(study.id, 1)[0]
    port = free_port()
    server = start_server(db, port)
    holder = sqlite3.connect(db, timeout=1, isolation_level=None)
    try:
        base = f"http://127.0.0.1:{port}"
        client = httpx.Client(base_url=base, follow_redirects=True, timeout=30)
        page = client.get(f"/a/{token}").text
        page = client.post("/consent", data={"csrf": csrf(page), "agree": "yes"}).text
        body = httpx.QueryParams({**GOOD, "csrf": csrf(page)}).__str__().encode()
        holder.execute("BEGIN IMMEDIATE")  # the other process's write transaction
        submission = _raw_request(port, (
            f"POST {action(page)} HTTP/1.1\r\nHost: x\r\nCookie: {SESSION_COOKIE}={client.cookies[SESSION_COOKIE]}"
            f"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body)  # sent in full before the GET below
        with httpx.Client(base_url=base, timeout=30) as other:
            t0 = time.perf_counter()
            assert other.get("/").status_code == 200
            index_s = time.perf_counter() - t0
        waiting = not select.select([submission], [], [], 0)[0]
        holder.execute("COMMIT")
        answer = submission.recv(200)
        submission.close()
        assert waiting, "the submission should still be waiting for the lock when GET / is answered"
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert index_s < 5, f"GET / took {index_s:.1f} s while a writer held the lock"
    finally:
        holder.close()
        server.terminate()
        server.wait(10)
    assert len(Store(db).responses(study.id)) == 1


def test_a_lock_held_past_the_busy_timeout_is_a_503_with_retry_after(tmp_path):
    db = str(tmp_path / "busy.db")
    store = Store(db, busy_timeout=0.05)
    study, _ = store.create_study("s", ITEMS, per_item=1)
    token = store.invite(study.id, 1)[0]
    c, page = consented(store, token)
    holder = sqlite3.connect(db, timeout=1, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        r = c.post(action(page), data={**GOOD, "csrf": csrf(page)})
        assert r.status_code == 503 and r.headers["retry-after"] == "2" and "try again" in r.text
        assert r.headers["x-content-type-options"] == "nosniff"
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert c.post(action(page), data={**GOOD, "csrf": csrf(page)}).status_code == 200
    assert len(store.responses(study.id)) == 1


# --- strict integers (item 6) and headers (item 7) ----------------------------------------------------------------

def test_admin_integers_are_parsed_strictly(study):
    store, _, admin_token, _ = study
    admin = TestClient(create_app(store, sweep_interval=None))
    admin.get(f"/admin/login/{admin_token}")
    page = admin.get("/admin").text
    token = csrf(page)
    for bad in ("²", "99999999999999999999", "9" * 5000, "-1", "1.5", "", "٣"):
        r = admin.post("/admin/release", data={"csrf": token, "minutes": bad})
        assert r.status_code == 422 and "whole number" in r.text, bad
    assert admin.post("/admin/release", data={"csrf": token, "minutes": "10000000"}).status_code == 200
    for bad in ("²", "99999999999999999999", "9" * 5000):
        assert admin.get("/admin", params={"released": bad}).status_code == 422
    assert "Released 3" in admin.get("/admin", params={"released": "3"}).text


def test_security_headers_on_pages_redirects_and_errors(study, monkeypatch):
    store, _, admin_token, tokens = study
    app = create_app(store, sweep_interval=None)
    c = TestClient(app, raise_server_exceptions=False)
    for r in (c.get("/"), c.get(f"/a/{tokens[0]}", follow_redirects=False), c.get("/annotate"),
              c.get("/a/unknown"), c.get(f"/admin/login/{admin_token}", follow_redirects=False)):
        csp = r.headers["content-security-policy"]
        assert "script-src 'none'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
        assert r.headers["x-content-type-options"] == "nosniff" and r.headers["x-frame-options"] == "DENY"
    assert c.get("/a/unknown").headers["cache-control"] == "no-store"

    def broken(*args, **kwargs):
        raise RuntimeError("simulated failure")

    monkeypatch.setattr(store, "progress", broken)
    r = c.get("/admin")
    assert r.status_code == 500 and "simulated" not in r.text
    assert r.headers["x-content-type-options"] == "nosniff" and "script-src 'none'" in \
        r.headers["content-security-policy"]


# --- workers and a killed main process (item 8) -----------------------------------------------------------------

def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    if int(fh.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, IndexError, ValueError):
                pass
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc (Linux)")
def test_workers_exit_when_the_main_process_is_killed(tmp_path):
    db = str(tmp_path / "workers.db")
    Store(db).create_study("s", ITEMS, per_item=1)
    port = free_port()
    server = start_server(db, port, workers=2)
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 30
        while len(workers) < 2 and time.monotonic() < deadline:  # bounded poll: uvicorn starts them
            workers = [p for p in _children(server.pid) if "annotate" in open(f"/proc/{p}/cmdline").read()
                       or "multiprocessing" in open(f"/proc/{p}/cmdline").read()]
            time.sleep(0.05)
        assert len(workers) >= 2, workers
        server.send_signal(signal.SIGKILL)
        server.wait(10)
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(_alive(p) for p in workers), "orphan workers still running"
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/", timeout=2)
    finally:
        for p in workers:
            try:
                os.kill(p, signal.SIGKILL)
            except OSError:
                pass


def test_hot_path_calls_on_the_loop_never_wait_for_a_lock(tmp_path):
    """Inside without_waiting() (how the app runs hot-path calls on the event loop) a write that would wait for
    another process's lock raises WouldWait at once, having done nothing; the app then runs it in the thread pool."""
    from toxiforge.annotation.store import WouldWait

    from .test_store import ANSWERS

    db = str(tmp_path / "nowait.db")
    store = Store(db)
    study, _ = store.create_study("s", ITEMS, per_item=1)
    annotator = store.annotator_for(store.invite(study.id, 1)[0])
    first = store.next_assignment(annotator)[0]
    holder = sqlite3.connect(db, timeout=1, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with store.without_waiting():
            with pytest.raises(WouldWait):
                store.submit_and_next(annotator, first.id, ANSWERS)
            assert store.open_assignment(annotator)[0][0].id == first.id  # a read does not wait
    finally:
        holder.execute("COMMIT")
        holder.close()
    assert store.responses(study.id) == []
    with store.without_waiting():
        stored, (second, _), done = store.submit_and_next(annotator, first.id, ANSWERS)
    assert stored and done == 1 and second.id != first.id
