"""Errors that say what is wrong and how to fix it.

Every user-facing failure raises :class:`ToxiforgeError` (or a subclass). The CLI prints the message without a
traceback and exits with status 2. Messages name the file, line or value at fault and end with a fix.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

S = TypeVar("S", bound=str)


class ToxiforgeError(Exception):
    """Base class of toxiforge's user-facing errors."""


class InputError(ToxiforgeError, ValueError):
    """Bad user input: a file, a line in it, or a value.

    ``InputError("k=9 is larger than the 6 demonstrations", path="d.txt", hint="use -k 6 or fewer")`` renders as
    ``d.txt: k=9 is larger than the 6 demonstrations. Fix: use -k 6 or fewer``.
    """

    def __init__(self, message: str, *, path: str | Path | None = None, line: int | None = None,
                 hint: str | None = None):
        self.message = message
        self.path = None if path is None else str(path)
        self.line = line
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        where = ""
        if self.path is not None:
            where = self.path + (f":{self.line}" if self.line is not None else "") + ": "
        elif self.line is not None:
            where = f"line {self.line}: "
        text = where + self.message
        if self.hint:
            text += f". Fix: {self.hint}"
        return text


def check_choice(value: str, choices: Sequence[S], *, what: str, hint: str | None = None) -> S:
    """``value`` when it is one of ``choices`` (returned as the choice, so typed as their ``Literal``), else
    ``InputError("unknown {what} {value!r}")`` with ``hint`` (default: the choices)."""
    for choice in choices:
        if value == choice:
            return choice
    raise InputError(f"unknown {what} {value!r}", hint=hint or f"use one of {', '.join(choices)}")


class ToxiforgeWarning(UserWarning):
    """Something the user should know that does not stop the command (a partial run read, a near-constant bias
    feature). The CLI prints each as one ``warning:`` line; Python users get a standard warning."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, after the work done so far was put in a safe state; :meth:`line` says what was kept and how to
    go on. The CLI prints that line and exits with status 130."""

    def line(self) -> str:
        return "interrupted"
