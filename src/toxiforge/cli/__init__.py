"""The ``toxiforge`` command line: a thin typer app.

Each command parses its options, calls the library function a Python user would call, and prints the result.
Commands live in one module per stage (generate, classify, analysis, training, annotate), each registering on the
one :data:`app`. Heavy modules are imported inside the commands, so ``toxiforge --help`` is fast. A
:class:`~toxiforge.errors.ToxiforgeError` is printed as one line (no traceback) and exits with status 2.
"""

from __future__ import annotations

import sys

from toxiforge.cli._app import app, console, err_console

# Importing a command module registers its commands on `app`; this order is the order of `toxiforge --help`.
from toxiforge.cli import generate  # noqa: E402,F401  isort: skip
from toxiforge.cli import classify  # noqa: E402,F401  isort: skip
from toxiforge.cli import analysis  # noqa: E402,F401  isort: skip
from toxiforge.cli import training  # noqa: E402,F401  isort: skip
from toxiforge.cli import annotate  # noqa: E402,F401  isort: skip
from toxiforge.cli import debias  # noqa: E402  isort: skip
from toxiforge.errors import ToxiforgeError

debias.register(app)  # stand-in `bias` group; at merge cli/bias.py calls debias.register_bias_commands(bias_app)


def main() -> None:
    try:
        app()
    except ToxiforgeError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


__all__ = ["app", "console", "main"]
