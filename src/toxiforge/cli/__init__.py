"""The ``toxiforge`` command line: a thin typer app.

Each command parses its options, calls the library function a Python user would call, and prints the result.
Commands live in one module per stage (generate, classify, analysis, training, annotate, bias); each module has a
``register(app)`` that adds its commands and command groups to the one :data:`app`, called below in the order of
``toxiforge --help``. Heavy modules are imported inside the commands, so ``toxiforge --help`` is fast. A
:class:`~toxiforge.errors.ToxiforgeError` is printed as one line (no traceback) and exits with status 2.
"""

from __future__ import annotations

import sys

from toxiforge.cli import analysis, annotate, bench, bias, classify, generate, harden, training
from toxiforge.cli._app import app, console, err_console
from toxiforge.errors import ToxiforgeError

generate.register(app)
classify.register(app)
analysis.register(app)
training.register(app)
harden.register(app)
annotate.register(app)
bias.register(app)
bench.register(app)


def main() -> None:
    try:
        app()
    except ToxiforgeError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


__all__ = ["app", "console", "main"]
