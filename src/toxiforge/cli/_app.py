"""The typer application, consoles and small helpers shared by every command module (each adds its commands
in its own ``register(app)``)."""

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


DTYPE_NAMES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")  # toxiforge._hf.DTYPES, + auto
DEVICE_PATTERN = r"auto|cpu|cuda(:\d+)?|mps"


def check_model_options(dtype: str | None = None, device: str | None = None, *, dtype_flag: str = "--dtype",
                        batch_size: int | None = None) -> None:
    """Refuse a bad --dtype (``dtype_flag``: the option's name), --device or --batch-size (texts per classifier
    batch; None: the classifier's default) before anything slow runs (imports, model loads)."""
    import re

    from toxiforge.errors import InputError

    if batch_size is not None and batch_size < 1:
        raise InputError(f"--batch-size {batch_size} must be at least 1", hint="drop it for the classifier's default")
    if dtype is not None and dtype.lower() not in DTYPE_NAMES:
        raise InputError(f"unknown {dtype_flag} {dtype!r}", hint="use auto, float32, bfloat16 or float16")
    if device is not None and not re.fullmatch(DEVICE_PATTERN, device.lower()):
        raise InputError(f"unknown --device {device!r}", hint="use auto, cpu or cuda (cuda:N for GPU N)")


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


# Classifier options every command with -c takes (one definition; load_classifier refuses those that do not apply).
JUDGE_TEMPLATE = typer.Option(None, "--judge-template", help="Judge classifiers (-c judge:MODEL): a shipped "
                              "template (humanval, llama-guard, shieldgemma, granite-guardian-3.1, "
                              "granite-guardian-3.3; `toxiforge classifiers` lists them) or a JSON template FILE. "
                              "Default: humanval.")
JUDGE_POLICY = typer.Option(None, "--judge-policy", help="Judge classifiers: the policy TEXT (or a FILE holding it) "
                            "for templates with a {policy} slot (shieldgemma).")
TOXIC_LABEL = typer.Option(None, "--toxic-label", help="Transformers heads: the label whose probability (softmax) or "
                           "sigmoid (multi-label heads) is P(toxic). Default: from the labels (toxic, toxicity, ...).")


def classifier_options(judge_template: str | None, judge_policy: str | None, toxic_label: str | None) -> dict:
    """The three options above as load_classifier keyword arguments (None values are dropped there)."""
    return {"template": judge_template, "policy": judge_policy, "toxic_label": toxic_label}


# ALICE options generate and harden share (None = AliceConfig's default, the paper's value).
BEAMS = typer.Option(None, "--beams", help="ALICE: beams (paper: 10).")
CANDIDATES = typer.Option(None, "--candidates", help="ALICE: candidate tokens per beam (paper: 100).")
LAMBDA_LM = typer.Option(None, "--lambda-lm", help="ALICE: weight of the LM term (paper: 0.5).")
LAMBDA_CLF = typer.Option(None, "--lambda-clf", help="ALICE: weight of the classifier term (paper: 0.5).")
CLASSIFIER_TOP_EXTENSIONS = typer.Option(
    None, "--classifier-top-extensions",
    help="ALICE: score the classifier only on each prompt's N best extensions by beam + LM score, dropping the "
         "rest (upstream's code: 2 × beams). Default: every candidate, as the paper.")

# openai: server options of every command with --model (generate, harden, bench generate).
CONCURRENCY = typer.Option(8, "--concurrency", help="openai: models: requests in flight (the server's load).")
API_KEY_ENV = typer.Option(None, "--api-key-env", help="openai: models: environment variable holding the API key "
                                                       "(default: OPENAI_API_KEY when set).")

# Ray options of generate, harden, classify and audit (ray_config turns them into a RayConfig).
RAY = typer.Option(False, "--ray", help="Run on Ray: a local instance, or --ray-address / $RAY_ADDRESS.")
RAY_ADDRESS = typer.Option(None, "--ray-address", help="Ray cluster to join (implies --ray).")
WORKERS = typer.Option(1, "--workers", help="Ray: actors, each loads the model once.")
CPUS_PER_WORKER = typer.Option(1.0, "--cpus-per-worker", help="Ray: CPUs (and torch threads) per actor.")
GPUS_PER_WORKER = typer.Option(0.0, "--gpus-per-worker", help="Ray: GPUs per actor.")
RAY_RESOURCES = typer.Option(None, "--ray-resources",
                             help="Ray: custom resources per actor, NAME=AMOUNT,... (e.g. llm_server=1).")
RAY_SPREAD = typer.Option(False, "--ray-spread", help="Ray: one actor per node (each may use its node's own server: "
                                                      "openai:http://127.0.0.1:PORT/v1).")
RAY_PLACEMENT_TIMEOUT = typer.Option(120.0, "--ray-placement-timeout",
                                     help="Ray: seconds to wait for the cluster to place every actor.")


def ray_config(ray: bool, ray_address: str | None, workers: int, cpus_per_worker: float, gpus_per_worker: float,
               resources: str | None = None, spread: bool = False, placement_timeout: float = 120.0):
    """The Ray options above as a :class:`~toxiforge.pipeline.ray_runner.RayConfig`, or None to run in this
    process (``resources`` as --ray-resources takes it: NAME=AMOUNT,...)."""
    if not (ray or ray_address):
        return None
    from toxiforge.pipeline.ray_runner import RayConfig, parse_resources

    return RayConfig(address=ray_address, workers=workers, cpus_per_worker=cpus_per_worker,
                     gpus_per_worker=gpus_per_worker, resources=parse_resources(resources), spread=spread,
                     placement_timeout=placement_timeout)
