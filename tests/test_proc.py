"""Return codes in words (toxiforge._proc): every subprocess the project starts reports its death this way."""

from __future__ import annotations

import signal

from toxiforge._proc import exit_description, log_tail


def test_an_exit_status_is_said_plainly():
    assert exit_description(0) == "exited with status 0"
    assert exit_description(3) == "exited with status 3"


def test_sigill_names_another_cpu_and_the_portable_build():
    text = exit_description(-signal.SIGILL)
    assert text.startswith("was killed by SIGILL (illegal instruction: the binary was built for another CPU")
    assert "Fix: rebuild it for this machine" in text and "GGML_NATIVE=OFF" in text


def test_sigkill_names_the_out_of_memory_killer():
    text = exit_description(-signal.SIGKILL)
    assert "out-of-memory killer" in text and "Fix: free memory" in text


def test_signals_without_a_known_meaning_are_still_named():
    assert exit_description(-signal.SIGUSR1) == f"was killed by SIGUSR1 (signal {int(signal.SIGUSR1)})"
    assert exit_description(-200) == "was killed by signal 200"


def test_log_tail_keeps_the_last_lines(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n" for i in range(30)))
    tail = log_tail(log, lines=2)
    assert tail == "\n  last lines of its log:\n    line 28\n    line 29"
    assert log_tail(tmp_path / "missing.log") == "" and log_tail(None) == ""
