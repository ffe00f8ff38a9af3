"""llama-cpp-python's server for the tests: the portable build, its smoke check, and one server per test module.

As a script (``make llama-cpp`` runs ``python tests/models/llama_server.py ensure``) it builds llama-cpp-python from
source without native-CPU code (``GGML_NATIVE=OFF``: ggml's x86-64 defaults, SSE4.2/AVX/AVX2/FMA/F16C/BMI2, no
AVX-512 and no AMX), keeps the wheel in toxiforge's cache so that a new virtualenv installs it in seconds, and then
runs a one-token completion on a ~100-token prompt in a subprocess. A build with native code (``-march=native``,
llama.cpp's default) ran on the machine that built it but died by SIGILL at the first completion on a cloud VM whose
CPU advertises AMX the VM does not let a process use; a wheel cached by pip is reused on whatever machine the cache
moves to, which is why the wheel is kept under a name that says how it was built. The result is written to
``<venv>/llama-cpp-check.json``, and the server tests skip with its reason when the check failed.

For the tests: :class:`LlamaServer` (start checks a real completion, not only ``/v1/models``) and
:class:`SharedServer` (one server per module: the first test that meets a dead server fails with the exit signal and
the log's last lines (:func:`fail_with_server_death`), the rest skip at once instead of retrying for minutes each).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from toxiforge._net import free_port, wait_until_answering
from toxiforge._proc import exit_description, log_tail

VERSION = "0.3.36"
CMAKE_ARGS = ("-DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF -DGGML_BLAS=OFF -DGGML_OPENMP=OFF -DLLAMA_BUILD_TESTS=OFF "
              "-DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF")
BUILD = hashlib.sha256(f"{VERSION} {CMAKE_ARGS}".encode()).hexdigest()[:12]
STATE = Path(sys.prefix) / "llama-cpp-check.json"
ALIAS = "smollm2"
# ~100 tokens of neutral text: a one-word prompt did not always reach the code that faulted, ~100 tokens did.
SMOKE_PROMPT = " ".join(["The weather report for the coastal towns says light rain in the morning, a dry afternoon"
                         " and a cool, clear evening with a gentle wind from the west."] * 4)


def wheel_dir() -> Path:
    from toxiforge._io import cache_dir

    return Path(os.environ.get("TOXIFORGE_WHEELS", cache_dir() / "wheels")) / f"llama-cpp-python-{VERSION}-{BUILD}"


def read_state(state_file: Path = STATE) -> dict:
    try:
        return json.loads(state_file.read_text())
    except (OSError, ValueError):
        return {}


def skip_reason(state_file: Path = STATE) -> str | None:
    """Why the server tests cannot run here, or None."""
    if importlib.util.find_spec("llama_cpp") is None:
        return "llama-cpp-python[server] is not installed (make test builds and installs it)"
    state = read_state(state_file)
    if state and not state.get("ok", True):
        return f"llama-cpp-python failed its smoke test after `make llama-cpp`: {state.get('reason')}"
    return None


def needs_server(test):
    """Marks a test ``server`` and skips it, saying why, when llama-cpp-python is missing or failed its smoke test."""
    reason = skip_reason()
    return pytest.mark.server(pytest.mark.skipif(reason is not None, reason=reason or "")(test))


def smoke(command: list[str] | None = None, timeout: float = 600.0) -> tuple[bool, str]:
    """Run a one-token completion on :data:`SMOKE_PROMPT` in a subprocess (``command`` replaces it in tests);
    (True, what ran) or (False, what failed)."""
    command = command or [sys.executable, __file__, "complete"]
    what = "a 1-token completion on a ~100-token prompt"
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return False, f"{what} did not finish within {timeout:g} s"
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        return False, f"{what} {exit_description(proc.returncode)}" + (f" [stderr: {tail}]" if tail else "")
    return True, f"{what} works"


def complete() -> None:
    """The smoke test's child: load the embedded GGUF as the server does and complete one token."""
    from llama_cpp import Llama

    from toxiforge.models.embedded import smollm2_gguf

    llm = Llama(model_path=str(smollm2_gguf()), n_ctx=2048, n_threads=1, verbose=False)
    print(repr(llm.create_completion(SMOKE_PROMPT, max_tokens=1, temperature=0.0)["choices"][0]["text"]))


def check(command: list[str] | None = None, state_file: Path = STATE) -> bool:
    """Run :func:`smoke`, record the result in ``state_file`` and print one line saying what it means."""
    ok, what = smoke(command)
    state_file.write_text(json.dumps({"version": VERSION, "build": read_state(state_file).get("build"), "ok": ok,
                                 "reason": what, "checked": time.strftime("%Y-%m-%dT%H:%M:%S")}, indent=1) + "\n")
    if ok:
        print(f"llama-cpp-python {VERSION} smoke test: {what}; the server tests will run")
    else:
        print(f"warning: llama-cpp-python {VERSION} smoke test failed: {what}; the server tests will be skipped "
              f"(rebuild: rm -r {wheel_dir()} && {sys.executable} -m pip uninstall -y llama-cpp-python && make "
              "llama-cpp)")
    return ok


def _pip(*args: str, env: dict | None = None) -> bool:
    return subprocess.run([sys.executable, "-m", "pip", *args], env=env).returncode == 0


def ensure(constraints: str = "constraints.txt") -> int:
    """Build (once per machine) and install the portable llama-cpp-python, then run its smoke check. Never fails the
    caller: a failed build or check only warns, and the server tests skip saying why."""
    try:
        installed = importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed != VERSION or read_state().get("build") != BUILD:
        wheels = wheel_dir()
        if not list(wheels.glob("llama_cpp_python-*.whl")):
            print(f"Building llama-cpp-python {VERSION} from source for the server tests (PyPI has no wheel): a "
                  f"portable CPU build (GGML_NATIVE=OFF: AVX2, no AVX-512 or AMX, which can fault on cloud VMs). "
                  f"About 4 min on 2 quiet cores, 11 min or more on busy ones; once per machine (kept in {wheels}).",
                  flush=True)
            env = {**os.environ, "CMAKE_ARGS": CMAKE_ARGS, "CMAKE_BUILD_PARALLEL_LEVEL": "2"}
            if not _pip("wheel", "-q", "--no-deps", "--no-cache-dir", "-w", str(wheels),
                        f"llama-cpp-python=={VERSION}", env=env):
                print(f"warning: could not build llama-cpp-python {VERSION} (the server tests will be skipped)")
                return 0
        wheel = str(next(wheels.glob("llama_cpp_python-*.whl")))
        if not (_pip("install", "-q", "--force-reinstall", "--no-deps", wheel)
                and _pip("install", "-q", "-c", constraints, f"llama-cpp-python[server] @ file://{wheel}")):
            print(f"warning: could not install {wheel} (the server tests will be skipped)")
            return 0
        STATE.write_text(json.dumps({"version": VERSION, "build": BUILD}) + "\n")
    check()
    return 0


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1:port, started and stopped by the tests. ``start`` returns once the
    server has completed a real request (a server that answers ``/v1/models`` can still die at its first
    completion)."""

    def __init__(self, gguf, log_path, port: int | None = None, command: list[str] | None = None):
        self.gguf, self.log_path, self.port = gguf, log_path, port or free_port()
        self.command = command  # replaces the server in tests of this class
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self, timeout: float = 180.0) -> LlamaServer:
        import httpx

        log = open(self.log_path, "ab")
        command = self.command or [
            sys.executable, "-m", "llama_cpp.server", "--model", str(self.gguf), "--model_alias", ALIAS,
            "--host", "127.0.0.1", "--n_ctx", "2048", "--n_threads", "1", "--verbose", "False"]
        self.proc = subprocess.Popen([*command, "--port", str(self.port)], stdout=log, stderr=subprocess.STDOUT)
        started = time.monotonic()
        wait_until_answering(self.proc, f"{self.url}/models", timeout=timeout, what="llama_cpp.server",
                             log=self.log_path)
        try:
            httpx.post(f"{self.url}/completions", json={"model": ALIAS, "prompt": SMOKE_PROMPT, "max_tokens": 1,
                                                         "temperature": 0.0},
                       timeout=max(10.0, timeout - (time.monotonic() - started))).raise_for_status()
        except httpx.HTTPError as exc:
            death = self.death(wait=10.0)  # a dying process may not be reaped yet when its connection drops
            self.stop()
            raise RuntimeError(death or f"llama_cpp.server failed its first completion: {exc}"
                               f"{log_tail(self.log_path)}") from None
        return self

    def death(self, wait: float = 0.0) -> str | None:
        """How the server died, with its log's last lines; None while it runs (after waiting up to ``wait`` seconds
        for it to exit) or before it started."""
        if self.proc is None:
            return None
        try:
            self.proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            return None
        return (f"llama_cpp.server (port {self.port}) {exit_description(self.proc.returncode)}; see {self.log_path}"
                f"{log_tail(self.log_path)}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class SharedServer:
    """One :class:`LlamaServer` for a test module. ``get()`` starts it on first use; once it failed to start or
    died, the first test to meet that fails with the reason and every later one skips at once."""

    def __init__(self, server: LlamaServer):
        self.server, self.error, self.reported = server, None, False
        server.shared = self  # type: ignore[attr-defined]  -- fail_with_server_death finds it from the test

    def get(self) -> LlamaServer:
        if self.error is None and self.server.proc is None:
            try:
                self.server.start()
            except RuntimeError as exc:
                self.error = str(exc)
        self.error = self.error or self.server.death()
        if self.error is not None:
            if not self.reported:
                self.reported = True
                pytest.fail(self.error, pytrace=False)
            pytest.skip("this module's llama.cpp server is down (an earlier test failed with the reason): "
                        + self.error.splitlines()[0])
        return self.server

    def died_during_test(self) -> str | None:
        """The death to report for a test that just failed, once (later tests skip through :meth:`get`)."""
        death = None if self.reported else self.server.death(wait=2.0)
        if death is not None:
            self.error, self.reported = death, True
        return death


def fail_with_server_death(item):
    """The body of a ``pytest_runtest_call`` hook wrapper (tests/conftest.py delegates to it): a test that fails
    while the module's server has died fails with the server's exit signal and log tail, not the client's connection
    error; the module's later tests then skip at once (:meth:`SharedServer.get`)."""
    try:
        return (yield)
    except Exception as exc:
        for value in getattr(item, "funcargs", {}).values():
            shared = getattr(value, "shared", None) if isinstance(value, LlamaServer) else None
            death = shared.died_during_test() if shared is not None else None
            if death is not None:
                raise pytest.fail.Exception(f"{death}\n(the test failed with {type(exc).__name__}: {exc})",
                                            pytrace=False) from None
        raise


if __name__ == "__main__":
    if sys.argv[1:2] == ["complete"]:
        complete()
    elif sys.argv[1:2] == ["ensure"]:
        sys.exit(ensure(*sys.argv[2:3]))
    elif sys.argv[1:2] == ["check"]:
        sys.exit(0 if check() else 1)
    else:
        sys.exit(f"usage: {sys.argv[0]} ensure [CONSTRAINTS] | check | complete")
