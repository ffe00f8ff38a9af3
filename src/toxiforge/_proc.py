"""How a subprocess ended, in words: the one place that turns a return code into a message (servers the project
starts, the llama.cpp smoke check, Ray workers). A process killed by a signal is named with the signal, what it
usually means and the fix, because "exited with status -4" tells a user nothing."""

from __future__ import annotations

import signal
from pathlib import Path

# What each signal usually means when it kills a server or worker, and what to do about it.
_MEANING: dict[int, tuple[str, str]] = {
    signal.SIGILL: ("illegal instruction: the binary was built for another CPU (for example with AVX-512 or AMX "
                    "code that this machine or its virtual machine does not allow)",
                    "rebuild it for this machine without native-CPU code (llama.cpp: `make llama-cpp`, which builds "
                    "with GGML_NATIVE=OFF), or run it where it was built"),
    signal.SIGKILL: ("killed outright, most often by the kernel's out-of-memory killer (`dmesg` says 'Out of memory' "
                     "then), or by `kill -9`",
                     "free memory or give the process less work at once (a smaller model, batch or context), "
                     "then start it again"),
    signal.SIGSEGV: ("segmentation fault: a crash in native code (a bug, or a library built against other versions)",
                     "see the log's last lines; reinstall the package that crashed in a fresh virtualenv"),
    signal.SIGBUS: ("bus error: a memory-mapped file changed or vanished under the process, or the disk is full",
                    "check free disk space and that the model file is not being rewritten, then start it again"),
    signal.SIGABRT: ("aborted: native code failed an internal check", "see the log's last lines for the check"),
    signal.SIGTERM: ("terminated: something asked it to stop (a user, a supervisor, or the machine shutting down)",
                     "start it again"),
    signal.SIGINT: ("interrupted (Ctrl-C)", "start it again"),
}


def exit_description(returncode: int) -> str:
    """``"exited with status 3"``, or for a death by signal ``"was killed by SIGILL (illegal instruction: ...).
    Fix: ..."`` (``subprocess`` reports a signal as a negative return code)."""
    if returncode >= 0:
        return f"exited with status {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        return f"was killed by signal {number}"
    if number not in _MEANING:
        return f"was killed by {name} (signal {number})"
    meaning, fix = _MEANING[number]
    return f"was killed by {name} ({meaning}). Fix: {fix}"


def log_tail(path: str | Path | None, lines: int = 15) -> str:
    """The last ``lines`` lines of a log file, indented, or "" when there is no such file."""
    if path is None:
        return ""
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ""
    tail = text.rstrip().splitlines()[-lines:]
    return "" if not tail else "\n  last lines of its log:\n    " + "\n    ".join(tail)
