"""The server tests' own machinery (tests/models/llama_server.py, conftest.py) on fake servers that die by a signal,
so that it is tested on every machine, llama-cpp-python installed or not: the smoke check after the build, a server
that dies at its first completion, and one that dies in the middle of a module."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import llama_server
import pytest

HERE = Path(__file__).parent
SIGILL_CHILD = [sys.executable, "-c", "import os, signal, sys; print('faulting now', file=sys.stderr); "
                "sys.stderr.flush(); os.kill(os.getpid(), signal.SIGILL)"]

# A stand-in for llama_cpp.server: answers /v1/models, completes the first OK requests, then dies by SIGILL at the
# next completion (as the native build did on an AMX-advertising VM).
FAKE_SERVER = '''
import json, os, signal, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
ok, port = int(sys.argv[1]), int(sys.argv[sys.argv.index("--port") + 1])
served = 0
class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass
    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self.reply({"data": [{"id": "smollm2"}]})
    def do_POST(self):
        global served
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if served >= ok:
            print("fake server: faulting at completion", served + 1, file=sys.stderr, flush=True)
            os.kill(os.getpid(), signal.SIGILL)
        served += 1
        self.reply({"choices": [{"text": "x"}]})
HTTPServer(("127.0.0.1", port), Handler).serve_forever()
'''


def test_the_smoke_check_names_a_sigill_and_the_server_tests_then_skip(tmp_path, capsys):
    state = tmp_path / "llama-cpp-check.json"
    ok, what = llama_server.smoke(SIGILL_CHILD)
    assert not ok
    assert what.startswith("a 1-token completion on a ~100-token prompt was killed by SIGILL (illegal instruction")
    assert "faulting now" in what  # the child's last stderr lines
    assert not llama_server.check(SIGILL_CHILD, state_file=state)
    line = capsys.readouterr().out.strip()
    assert len(line.splitlines()) == 1 and "smoke test failed" in line and "SIGILL" in line
    assert "the server tests will be skipped" in line
    assert json.loads(state.read_text())["ok"] is False
    if llama_server.skip_reason(state) is not None:  # llama-cpp-python installed: the recorded failure is the reason
        assert "SIGILL" in llama_server.skip_reason(state) or "not installed" in llama_server.skip_reason(state)


def test_a_smoke_check_that_passes_says_the_tests_will_run(tmp_path, capsys):
    state = tmp_path / "llama-cpp-check.json"
    assert llama_server.check([sys.executable, "-c", "print('ok')"], state_file=state)
    assert "the server tests will run" in capsys.readouterr().out
    assert json.loads(state.read_text())["ok"] is True


def test_a_server_that_dies_at_its_first_completion_is_named_with_the_signal(tmp_path):
    fake = tmp_path / "fake_server.py"
    fake.write_text(FAKE_SERVER)
    server = llama_server.LlamaServer(None, tmp_path / "server.log", command=[sys.executable, str(fake), "0"])
    with pytest.raises(RuntimeError) as caught:
        server.start(timeout=60)
    message = str(caught.value)
    assert "killed by SIGILL (illegal instruction: the binary was built for another CPU" in message
    assert "make llama-cpp" in message and "fake server: faulting at completion 1" in message
    assert server.proc.returncode == -signal.SIGILL


def run_module(pytester, fake: Path, ok: int):
    """Run a three-test module against a fake server that completes ``ok`` requests (one is start's check)."""
    pytester.makeconftest("""
import pytest
import llama_server

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    return (yield from llama_server.fail_with_server_death(item))
""")
    pytester.makepyfile(test_fake=f'''
import sys
import httpx
import pytest
from llama_server import LlamaServer, SharedServer

@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    srv = SharedServer(LlamaServer(None, tmp_path_factory.mktemp("f") / "server.log",
                                   command=[sys.executable, {str(fake)!r}, "{ok}"]))
    yield srv
    srv.server.stop()

@pytest.fixture
def server(shared):
    return shared.get()

def ask(server):
    httpx.post(f"{{server.url}}/completions", json={{}}, timeout=30).raise_for_status()

def test_one(server):
    ask(server)

def test_two(server):
    ask(server)

def test_three(server):
    ask(server)
''')
    return pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rA")  # this session's llama_server module


def test_a_module_whose_server_cannot_start_reports_once_and_skips_the_rest(pytester, tmp_path):
    fake = tmp_path / "fake_server.py"
    fake.write_text(FAKE_SERVER)
    result = run_module(pytester, fake, ok=0)
    result.assert_outcomes(errors=1, skipped=2)
    result.stdout.fnmatch_lines(["*killed by SIGILL (illegal instruction*"])


def test_a_server_that_dies_mid_module_fails_that_test_with_its_signal_and_skips_the_rest(pytester, tmp_path):
    fake = tmp_path / "fake_server.py"
    fake.write_text(FAKE_SERVER)
    result = run_module(pytester, fake, ok=2)  # start's check and test_one; test_two's request kills it
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["FAILED test_fake.py::test_two*"])
    result.stdout.fnmatch_lines(["llama_cpp.server (port *) was killed by SIGILL (illegal instruction*",
                                 "*fake server: faulting at completion 3",
                                 "(the test failed with RemoteProtocolError*"])
    result.stdout.fnmatch_lines(["SKIPPED * this module's llama.cpp server is down (an earlier test failed*SIGILL*"])
