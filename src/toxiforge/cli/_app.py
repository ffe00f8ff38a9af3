"""The typer application, consoles and small helpers shared by every command module (each adds its commands
in its own ``register(app)``)."""

from __future__ import annotations

import typer
from rich.console import Console

app = typer.Typer(help="Build and use ToxiGen-style machine-generated datasets.", no_args_is_help=True,
                  pretty_exceptions_enable=False)
console = Console()
err_console = Console(stderr=True)


def split_list(value: str) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c'] (comma-separated option values)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def load_lm(model: str, dtype: str, device: str):
    """Load a language model with a spinner, then print what was loaded and how long it took."""
    import time

    from toxiforge.models import load_language_model

    started = time.perf_counter()
    with console.status(f"loading {model}"):
        lm = load_language_model(model, dtype=dtype, device=device)
    console.print(f"loaded {model} ({lm.describe()['dtype']}, {lm.device}) in {time.perf_counter() - started:.1f} s")
    return lm

