"""A rich progress bar for transformers' ``Trainer`` (main process only): steps, epoch, latest loss, and one
line per evaluation with the eval loss and ROC AUC."""

from __future__ import annotations

from typing import Any

from transformers import TrainerCallback


class RichProgressCallback(TrainerCallback):
    def __init__(self, console: Any = None):
        self.console = console
        self.progress: Any = None
        self.task: Any = None
        self.loss: float | None = None

    def _describe(self, state: Any) -> str:
        loss = f" loss {self.loss:.4f}" if self.loss is not None else ""
        return f"training (epoch {state.epoch or 0:.2f}{loss})"

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
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
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, transient=True)
        self.progress.start()
        self.task = self.progress.add_task(self._describe(state), total=state.max_steps)

    def on_step_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.update(self.task, completed=state.global_step, description=self._describe(state))

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.progress is not None and logs and "loss" in logs:
            self.loss = float(logs["loss"])

    def on_evaluate(self, args, state, control, metrics=None, **kwargs):
        if self.progress is None or not metrics:
            return
        auc = metrics.get("eval_auc")
        auc_text = f"AUC {auc:.4f}" if auc is not None else "AUC undefined (one class in the eval set)"
        self.progress.console.print(f"epoch {state.epoch:.2f}: eval loss {metrics.get('eval_loss', float('nan')):.4f}, "
                                    f"{auc_text}", highlight=False)

    def on_train_end(self, args, state, control, **kwargs):
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
