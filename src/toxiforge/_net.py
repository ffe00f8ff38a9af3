"""Local servers run as subprocesses (the annotation app; LM servers in tests and benchmarks): a free loopback port,
and waiting until one answers."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from toxiforge._proc import exit_description, log_tail


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_answering(proc: subprocess.Popen, url: str, *, timeout: float, what: str = "server",
                         interval: float = 0.2, log: str | Path | None = None) -> None:
    """Poll ``url`` until it answers 200 (bounded polling, no fixed sleep). A :class:`RuntimeError` names ``what``
    (and ``log``, where its output went) if ``proc`` exits first or nothing answers within ``timeout`` seconds; the
    process is killed then. A process that died by a signal is named with the signal, its usual cause and the fix,
    followed by the log's last lines."""
    import httpx

    see = f"; see {log}" if log else ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} {exit_description(proc.returncode)}{see}{log_tail(log)}")
        try:
            if httpx.get(url, timeout=min(2.0, timeout)).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(interval)
    proc.kill()
    raise RuntimeError(f"{what} did not answer within {timeout} s{see}")
