"""Progress of the long phases (generation, scoring, training: issue 55 item 1) where no terminal shows a live bar
(a log file, nohup): a plain line with rows done of the total, the rate and the ETA, at most every ``every``
seconds and always when the last row is done."""

from __future__ import annotations

from io import StringIO
from types import SimpleNamespace

from rich.console import Console

from toxiforge.pipeline.job import progress_bar, progress_line


def log_console() -> tuple[Console, StringIO]:
    file = StringIO()
    return Console(file=file, force_terminal=False, width=200), file


def test_a_job_prints_lines_with_done_rate_and_eta():
    console, file = log_console()
    with progress_bar(True, 10, 2, verb="round 1: ALICE attack", console=console, every=0) as advance:
        advance(4)
        advance(4)
    first, last = file.getvalue().splitlines()
    assert first.startswith("round 1: ALICE attack: 6/10 statements, ") and " statements/s, ETA " in first
    assert last.startswith("round 1: ALICE attack: 10/10 statements, ") and last.endswith("ETA 0:00:00")


def test_lines_are_spaced_but_the_last_is_always_printed():
    console, file = log_console()
    with progress_bar(True, 3, 0, verb="scoring", unit="rows", console=console, every=3600) as advance:
        for _ in range(3):
            advance(1)
    assert [line.split(",")[0] for line in file.getvalue().splitlines()] == ["scoring: 3/3 rows"]


def test_the_eta_counts_hours_past_a_day():
    assert progress_line("x", 1, 1001, 1, 100.0, "rows").endswith("0.01 rows/s, ETA 27:46:40")
    assert progress_line("x", 0, 10, 0, 5.0, "rows").endswith("ETA -")  # no rate yet


def test_training_prints_rows_done_rate_and_eta():
    from toxiforge.training.progress import RichProgressCallback

    console, file = log_console()
    callback = RichProgressCallback(console=console, label="round 1 alice: training", every=0)
    args = SimpleNamespace(per_device_train_batch_size=8, gradient_accumulation_steps=2, world_size=1)
    state = SimpleNamespace(is_world_process_zero=True, global_step=0, max_steps=4, epoch=0.0)
    callback.on_train_begin(args, state, None)
    for step in range(1, 5):
        state.global_step, state.epoch = step, step / 2
        callback.on_step_end(args, state, None)
    lines = file.getvalue().splitlines()
    assert lines[0].startswith("round 1 alice: training (epoch 0.50): 16/64 rows, ") and "rows/s, ETA" in lines[0]
    assert lines[-1].startswith("round 1 alice: training (epoch 2.00): 64/64 rows, ")
    assert lines[-1].endswith("ETA 0:00:00") and len(lines) == 4
