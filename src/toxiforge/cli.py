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


@demonstrations_app.command("fetch")
def demonstrations_fetch(
    dest: Path = typer.Option(..., "--dest", help="New or empty folder to write demonstrations/ and prompts/ to."),
    commit: Optional[str] = typer.Option(None, "--commit", help="Upstream commit (default: the pinned one)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the content of a non-empty --dest."),
    timeout: float = typer.Option(20.0, "--timeout", help="Seconds to wait for GitHub."),
) -> None:
    """Download upstream ToxiGen's demonstrations and prompts (microsoft/TOXIGEN, MIT) into --dest."""
    from toxiforge.demonstrations.fetch import PINNED_COMMIT, fetch_upstream
    from toxiforge.demonstrations.sets import load_demonstrations

    sha = commit or PINNED_COMMIT
    console.print(f"Fetching microsoft/TOXIGEN at {sha} ...", highlight=False)
    out = fetch_upstream(dest, commit=sha, timeout=timeout, overwrite=overwrite)
    sets = load_demonstrations(out)
    console.print(f"[green]Wrote[/] {len(sets)} demonstration sets to {out}. Use them with "
                  f"--demonstrations {out}", highlight=False)


@demonstrations_app.command("list")
def demonstrations_list(
    source: Optional[Path] = typer.Argument(None, help="Checkout, demonstrations/ or prompts/ folder, file or "
                                                       "table (default: the shipped benign sets)."),
) -> None:
    """Show the demonstration sets in SOURCE: group, label, number of sentences, files."""
    from rich.table import Table

    from toxiforge.demonstrations.sets import load_demonstrations, load_shipped_benign

    sets = load_shipped_benign() if source is None else load_demonstrations(source)
    table = Table(title=f"Demonstration sets in {source if source is not None else 'the shipped benign sets'}")
    for column in ("group", "label", "count", "source"):
        table.add_column(column, justify="right" if column == "count" else "left")
    for s in sets.values():
        names = [Path(p).name for p in s.sources]
        table.add_row(s.group, s.label_word, str(len(s)), ", ".join(names))
    console.print(table)
    if not sets:
        console.print("No demonstration sets found.")


@prompts_app.command("build")
def prompts_build(
    demonstrations: Optional[Path] = typer.Option(
        None, "--demonstrations", "-d",
        help="Checkout, demonstrations/ or prompts/ folder, file or table (default: the shipped benign sets)."),
    group: str = typer.Option(..., "--group", "-g", help="Target group (name or alias, e.g. 'middle eastern')."),
    label: str = typer.Option(..., "--label", "-l", help="toxic (hate) or benign (neutral)."),
    n: int = typer.Option(1000, "-n", "--num", help="Number of prompts."),
    k: int = typer.Option(5, "-k", help="Demonstrations per prompt (distinct within a prompt)."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same seed gives the same prompts."),
    output: Path = typer.Option(..., "-o", "--output", help="Prompt file to write (upstream's format)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output file."),
) -> None:
    """Build N prompts of K demonstrations for one group and label, written one per line like upstream's."""
    from toxiforge.demonstrations.prompts import build_prompts, label_name, write_prompt_file
    from toxiforge.demonstrations.sets import get_set, load_demonstrations, load_shipped_benign
    from toxiforge.errors import InputError

    if n < 1:
        raise InputError(f"-n {n} builds no prompts", hint="use -n 1 or more")
    sets = load_shipped_benign() if demonstrations is None else load_demonstrations(demonstrations)
    demo_set = get_set(sets, group, label)
    prompts = build_prompts(demo_set, n, k=k, seed=seed)
    write_prompt_file(prompts, output, overwrite=overwrite)
    console.print(f"[green]Wrote[/] {len(prompts)} {label_name(demo_set.label)} prompts for {demo_set.group} "
                  f"(k={k}, seed={seed}, from {len(demo_set)} demonstrations) to {output}", highlight=False)


# --- generation ------------------------------------------------------------------------------------------------


def main() -> None:
    try:
        app()
    except ToxiforgeError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
