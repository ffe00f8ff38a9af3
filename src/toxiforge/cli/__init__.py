"""The ``toxiforge`` command line: a thin typer app.

Each command parses its options, calls the library function a Python user would call, and prints the result.
Commands live in one module per stage (generate, classify, analysis, training, annotate, bias); each module has a
``register(app)`` that adds its commands and command groups to the one :data:`app`, called below in the order of
``toxiforge --help``. Heavy modules are imported inside the commands, so ``toxiforge --help`` is fast. A
:class:`~toxiforge.errors.ToxiforgeError` is printed as one line (no traceback) and exits with status 2, as
``Error: ...`` like click's usage errors. Help is click's plain layout (``rich_markup_mode=None``): it wraps
long option names instead of cutting them at 80 columns. Ctrl-C exits with status 130 after one line saying what
was kept (:class:`~toxiforge.errors.Interrupted`), and each :class:`~toxiforge.errors.ToxiforgeWarning` prints as one
``warning:`` line.
"""

from __future__ import annotations

import sys
import warnings

from toxiforge.cli import analysis, annotate, attack, audit, bench, bias, classify, generate, harden, training
from toxiforge.cli._app import app, console, err_console
from toxiforge.errors import Interrupted, ToxiforgeError, ToxiforgeWarning

generate.register(app)
classify.register(app)
analysis.register(app)
training.register(app)
harden.register(app)
attack.register(app)
annotate.register(app)
bias.register(app)
audit.register(app)
bench.register(app)


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    if issubclass(category, ToxiforgeWarning):
        err_console.print(f"[bold yellow]warning:[/] {message}", highlight=False, soft_wrap=True)
    else:
        _default_showwarning(message, category, filename, lineno, file, line)


_default_showwarning = warnings.showwarning


def interrupted_line(exc: BaseException) -> str:
    """What a Ctrl-C kept: the :class:`Interrupted` line found in ``exc``'s chain (typer turns KeyboardInterrupt
    into ``Exit(130)``, then ``SystemExit``), else a plain note."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, Interrupted):
            return seen.line()
        seen = seen.__cause__ or seen.__context__
    return "interrupted (Ctrl-C)"


def main() -> None:
    warnings.showwarning = _show_warning
    try:
        app()
    except ToxiforgeError as exc:
        err_console.print(f"[bold red]Error:[/] {exc}", highlight=False, soft_wrap=True)  # click's own form
        sys.exit(2)
    except SystemExit as exc:
        if exc.code == 130:
            err_console.print(f"[bold yellow]{interrupted_line(exc)}[/]", highlight=False, soft_wrap=True)
        raise


__all__ = ["app", "console", "main"]
