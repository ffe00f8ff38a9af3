"""A rich progress bar for transformers' ``Trainer`` (main process only): rows done of the total, rows/s, ETA,
epoch, latest loss, and one line per evaluation with the eval loss and ROC AUC. On a console that is no terminal (a
log file) the same numbers as a plain line at most every ``every`` seconds (``pipeline.job.progress_line``)."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback


class RichProgressCallback(TrainerCallback):
    """``label`` names the bar (harden: the round and arm). Rows are steps x rows per optimizer step (batch size x
    gradient accumulation x processes): an epoch's last, smaller batch counts as a whole one."""

    def __init__(self, console: Any = None, label: str = "training", every: float = 60.0):
        self.console, self.label, self.every = console, label, every
        self.progress: Any = None
        self.task: Any = None
        self.loss: float | None = None
        self._rows_per_step = 1
        self._started = self._last = 0.0
        self._first_step = 0

    def _describe(self, state: Any) -> str:
        loss = f" loss {self.loss:.4f}" if self.loss is not None else ""
        return f"{self.label} (epoch {state.epoch or 0:.2f}{loss})"

    def _rate(self, state: Any) -> str:
        import time

        rows = (state.global_step - self._first_step) * self._rows_per_step
        return f"{rows / max(time.perf_counter() - self._started, 1e-9):.1f}"

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        import time

        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self.console = self.console or Console(stderr=True)
        self._rows_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * max(
            1, args.world_size)
        self._started = self._last = time.perf_counter()
        self._first_step = state.global_step
        if not self.console.is_terminal:
            return
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("rows, {task.fields[rate]} rows/s"), TimeElapsedColumn(),
                                 TextColumn("ETA"), TimeRemainingColumn(), console=self.console, transient=True)
        self.progress.start()
        self.task = self.progress.add_task(self._describe(state), total=state.max_steps * self._rows_per_step,
                                           completed=state.global_step * self._rows_per_step, rate="-")

    def on_step_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step * self._rows_per_step,
                                 description=self._describe(state), rate=self._rate(state))
            return
        import time

        now = time.perf_counter()
        if self.console is None or (now - self._last < self.every and state.global_step < state.max_steps):
            return
        from toxiforge.pipeline.job import progress_line

        self._last = now
        self.console.print(progress_line(self._describe(state), state.global_step * self._rows_per_step,
                                         state.max_steps * self._rows_per_step,
                                         (state.global_step - self._first_step) * self._rows_per_step,
                                         now - self._started, "rows"), highlight=False, soft_wrap=True)

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.console is not None and logs and "loss" in logs:
            self.loss = float(logs["loss"])

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.console is None or not metrics or not state.is_world_process_zero:
            return
        auc = metrics.get("eval_auc")
        auc_text = f"AUC {auc:.4f}" if auc is not None else "AUC undefined (one class in the eval set)"
        self.console.print(f"epoch {state.epoch:.2f}: eval loss {metrics.get('eval_loss', float('nan')):.4f}, "
                           f"{auc_text}", highlight=False)

    def on_train_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
