"""The ``toxiforge`` command line: a thin typer app.

Each command parses its options, calls the library function a Python user would call, and prints the result.
Heavy modules are imported inside the commands, so ``toxiforge --help`` is fast. A
:class:`~toxiforge.errors.ToxiforgeError` is printed as one line (no traceback) and exits with status 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from toxiforge.errors import ToxiforgeError

app = typer.Typer(help="Build and use ToxiGen-style machine-generated datasets.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
demonstrations_app = typer.Typer(help="Demonstration sets: fetch upstream's, inspect.", no_args_is_help=True)
prompts_app = typer.Typer(help="ToxiGen-style prompts from demonstrations.", no_args_is_help=True)
app.add_typer(demonstrations_app, name="demonstrations")
app.add_typer(prompts_app, name="prompts")

console = Console()
err_console = Console(stderr=True)


# --- demonstrations and prompts -------------------------------------------------------------------------------
# (section owned by the demonstrations work)


# --- generation ------------------------------------------------------------------------------------------------


def main() -> None:
    try:
        app()
    except ToxiforgeError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
