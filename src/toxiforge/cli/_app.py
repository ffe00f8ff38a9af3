"""The typer application, consoles and small helpers shared by every command module (each adds its commands
in its own ``register(app)``)."""

from __future__ import annotations

import typer
from rich.console import Console

# Plain click help and errors: rich's help tables cut long option names at 80 columns ("--classifier-top-ex…").
app = typer.Typer(help="Build and use ToxiGen-style machine-generated datasets.", no_args_is_help=True,
                  rich_markup_mode=None,
                  pretty_exceptions_enable=False)
console = Console()
err_console = Console(stderr=True)


def split_list(value: str) -> list[str]:
    """'a, b,,c' -> ['a', 'b', 'c'] (comma-separated option values)."""
    return [v.strip() for v in value.split(",") if v.strip()]


DTYPE_NAMES = ("auto", "float32", "fp32", "bfloat16", "bf16", "float16", "fp16")  # toxiforge._hf.DTYPES, + auto
DEVICE_PATTERN = r"auto|cpu|cuda(:\d+)?|mps"


def check_model_options(dtype: str | None = None, device: str | None = None) -> None:
    """Refuse a bad --dtype or --device before anything slow runs (imports, model loads)."""
    import re

    from toxiforge.errors import InputError

    if dtype is not None and dtype.lower() not in DTYPE_NAMES:
        raise InputError(f"unknown --dtype {dtype!r}", hint="use auto, float32, bfloat16 or float16")
    if device is not None and not re.fullmatch(DEVICE_PATTERN, device.lower()):
        raise InputError(f"unknown --device {device!r}", hint="use auto, cpu or cuda (cuda:N for GPU N)")


def load_lm(model: str, dtype: str, device: str, **api_options):
    """Load a language model (``api_options`` for openai: servers) with a spinner, then print what was loaded and
    how long it took."""
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
                              "template (humanval, llama-guard, shieldgemma, granite-guardian; `toxiforge "
                              "classifiers` lists them) or a JSON template FILE. Default: humanval.")
JUDGE_POLICY = typer.Option(None, "--judge-policy", help="Judge classifiers: the policy TEXT (or a FILE holding it) "
                            "for templates with a {policy} slot (shieldgemma).")
TOXIC_LABEL = typer.Option(None, "--toxic-label", help="Transformers heads: the label whose probability (softmax) or "
                           "sigmoid (multi-label heads) is P(toxic). Default: from the labels (toxic, toxicity, ...).")


def classifier_options(judge_template: str | None, judge_policy: str | None, toxic_label: str | None) -> dict:
    """The three options above as load_classifier keyword arguments (None values are dropped there)."""
    return {"template": judge_template, "policy": judge_policy, "toxic_label": toxic_label}
