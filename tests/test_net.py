"""Waiting for a local server started as a subprocess (toxiforge._net)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from toxiforge._net import free_port, wait_until_answering


def python(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code])


def test_returns_once_the_server_answers():
    port = free_port()
    proc = python(f"import http.server as h; h.HTTPServer(('127.0.0.1', {port}), h.SimpleHTTPRequestHandler)"
                  ".serve_forever()")
    try:
        wait_until_answering(proc, f"http://127.0.0.1:{port}/", timeout=30, interval=0.05)
        assert proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_a_server_that_exits_first_is_named_with_its_status_and_log(tmp_path):
    proc = python("raise SystemExit(3)")
    with pytest.raises(RuntimeError, match=r"^toy server exited with status 3; see .*toy.log$"):
        wait_until_answering(proc, f"http://127.0.0.1:{free_port()}/", timeout=30, what="toy server",
                             interval=0.05, log=tmp_path / "toy.log")


def test_a_server_that_never_answers_is_killed_after_the_timeout():
    proc = python("import time; time.sleep(60)")
    with pytest.raises(RuntimeError, match=r"^server did not answer within 0.5 s$"):
        wait_until_answering(proc, f"http://127.0.0.1:{free_port()}/", timeout=0.5, interval=0.05)
    assert proc.wait(5) != 0  # killed, not left running


def test_a_server_killed_by_a_signal_is_named_with_the_signal_its_cause_and_the_log(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("loading model\nstarting workers\n")
    proc = python("import os, signal; os.kill(os.getpid(), signal.SIGKILL)")
    with pytest.raises(RuntimeError) as caught:
        wait_until_answering(proc, f"http://127.0.0.1:{free_port()}/", timeout=30, what="toy server",
                             interval=0.05, log=log)
    message = str(caught.value)
    assert message.startswith("toy server was killed by SIGKILL (killed outright, most often by the kernel's "
                              "out-of-memory killer")
    assert "Fix: free memory" in message and message.endswith("starting workers")
