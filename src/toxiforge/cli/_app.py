"""The typer application, consoles and small helpers shared by every command module (each adds its commands in
its own ``register(app)``; the options several commands share are in ``_options``)."""

from __future__ import annotations

from typing import Any

import typer
from rich.console import Console, ConsoleDimensions
from typer.core import TyperCommand

# Old option spellings, still accepted but hidden from help (issue 33: one vocabulary): old -> the options that
# replaced it. A command accepts an old spelling when it has one of those options and does not use the old
# spelling itself (-n is generate's statements per group × label; elsewhere it was another count).
OLD_SPELLINGS: dict[str, tuple[str, ...]] = {
    "--output": ("--out",),
    "--group": ("--groups",), "-g": ("--groups",),
    "--label": ("--labels",), "-l": ("--labels",),
    "--num": ("--per-cell",),
    "-n": ("--annotators", "--target-size"),
}


class Command(TyperCommand):
    """A typer command whose parser also takes the :data:`OLD_SPELLINGS` of its options (help shows only the
    current names, and errors name them)."""

    def old_spellings(self) -> dict[str, Any]:
        """Old spelling -> the option it stands for, in this command."""
        taken = {name for p in self.params for name in (*p.opts, *p.secondary_opts)}
        found = {}
        for old, new in OLD_SPELLINGS.items():
            param = next((p for p in self.params if set(p.opts) & set(new)), None)
            if param is not None and old not in taken:
                found[old] = param
        return found

    def make_parser(self, ctx):
        parser = super().make_parser(ctx)
        for old, param in self.old_spellings().items():
            parser.add_option(obj=param, opts=[old], dest=param.name, nargs=param.nargs,
                              action="append" if param.multiple else "store")
        return parser


class App(typer.Typer):
    """The toxiforge typer app and its command groups: every command is a :class:`Command`."""

    def command(self, *args: Any, **kwargs: Any):
        kwargs.setdefault("cls", Command)
        return super().command(*args, **kwargs)


# Plain click help and errors: rich's help tables cut long option names at 80 columns ("--classifier-top-ex…").
START_HERE = """Build and use ToxiGen-style machine-generated datasets.

Start here: each step reads what the one before wrote (README.md, "The path in short"); `toxiforge COMMAND --help`
tells the options of each.

\b
  toxiforge demonstrations fetch --dest upstream   # internet, once
  toxiforge generate -o runs/a -d upstream --groups asian,women -n 20
  toxiforge summary runs/a                         # what was generated
  toxiforge train --data runs/a -o models/a        # fine-tune a classifier
  toxiforge evaluate -c models/a --on upstream -o reports/a
  toxiforge bias measure upstream -c models/a --markdown bias.md
"""
app = App(help=START_HERE, no_args_is_help=True,
          rich_markup_mode=None,
          pretty_exceptions_enable=False)


class _Console(Console):
    """rich's Console, except off a terminal (a pipe, a file, a log) without $COLUMNS: there rich squeezes tables
    to 80 columns, this prints them at their natural width (lines are never wrapped for a width nobody sees)."""

    UNBOUNDED = 100_000  # columns: a table is as wide as its content, never this

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # rich fixes $COLUMNS / $LINES as they are when the console is made (at import); read them when printing
        # instead (rich's size does), so that the width follows the environment of the command being run
        self._width = kwargs.get("width")
        self._height = kwargs.get("height")

    @property
    def size(self) -> ConsoleDimensions:
        size = super().size
        if self.is_terminal or self._width is not None or "COLUMNS" in self._environ:
            return size
        return ConsoleDimensions(self.UNBOUNDED, size.height)

    @size.setter
    def size(self, new_size: tuple[int, int]) -> None:
        self._width, self._height = new_size


console = _Console()  # every command prints through these two
err_console = _Console(stderr=True)


def command_line(ctx: typer.Context) -> str:
    """The command being run as one shell line, ``toxiforge COMMAND`` and the options given on the command line
    (defaults left out, each option by its long name), from the command's context (a ``ctx: typer.Context``
    parameter): what a card records as the command that made something."""
    import shlex

    words = ["toxiforge", *ctx.command_path.split()[1:]]
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name else None
        if source is None or source.name not in ("COMMANDLINE", "ENVIRONMENT"):
            continue
        value = ctx.params.get(param.name or "")
        if param.param_type_name != "option":
            words += [str(v) for v in (value if isinstance(value, (list, tuple)) else [value])]
            continue
        name = next((o for o in param.opts if o.startswith("--")), param.opts[0])
        if getattr(param, "is_flag", False):
            flag = name if value else next(iter(param.secondary_opts), None)
            words += [flag] if flag else []
        else:
            values = list(value or []) if getattr(param, "multiple", False) else [value]
            words += [w for v in values for w in (name, str(v))]
    return shlex.join(words)


def split_list(value: str) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c'] (comma-separated option values)."""
    return [v.strip() for v in value.split(",") if v.strip()]


def group_names(groups: str, labels: list[str], source: str | None, prompt_source: str) -> list[str]:
    """``--groups`` as group names (``all``: ToxiGen's groups that ``source`` has every label's set for), printing
    which groups ``all`` left out and why (:func:`toxiforge.pipeline.plan_groups`)."""
    from toxiforge.pipeline import plan_groups

    names, left_out = plan_groups(split_list(groups), labels, source=source, prompt_source=prompt_source)
    for group, why in left_out.items():
        console.print(f"note: --groups all leaves out {group}: {why}", highlight=False, soft_wrap=True)
    if left_out:
        console.print(f"note: --groups all plans {len(names)} groups: {', '.join(names)}", highlight=False,
                      soft_wrap=True)
    return names


def load_lm(model: str, dtype: str = "auto", device: str = "auto", **api_options):
    """Load a language model (``api_options`` for openai: servers) with a spinner, then print what was loaded and
    how long it took (``load_language_model``'s signature, so a :class:`~toxiforge.pipeline.Generator` takes it)."""
    import time

    from toxiforge.models import load_language_model

    started = time.perf_counter()
    with console.status(f"loading {model}"):
        lm = load_language_model(model, dtype=dtype, device=device, **api_options)
    info = lm.describe()
    where = f"{info['dtype']}, {lm.device}" if info.get("backend") != "openai-compatible" else info["url"]
    console.print(f"loaded {lm.name} ({where}) in {time.perf_counter() - started:.1f} s", highlight=False)
    return lm
