"""The options several commands share, defined once (the same name, default and help wherever they appear),
and what their values become: the -c classifier options, the dataset-spec options (--on lists, --text-column,
--label-column), ALICE's, an openai: server's, Ray's, the --dtype/--device/--batch-size check, and the checks of
options that take one value (a repeated flag refused, not the last one kept) and of --resume with --overwrite.
Command modules read them as ``opt.NAME``."""

from __future__ import annotations

import typer

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


def single(values: list[str], flag: str, *, hint: str) -> str:
    """The one value of an option that takes one. Such options are declared as lists, so that a repeated flag
    (``-c A -c B``) is refused with ``hint`` instead of click keeping the last value silently."""
    from toxiforge.errors import InputError

    if len(values) != 1:
        raise InputError(f"{flag} given {len(values)} times ({', '.join(values)}); it takes one value", hint=hint)
    return values[0]


def check_resume(resume: bool, overwrite: bool) -> None:
    """Refuse --resume with --overwrite: one keeps what the output folder holds, the other replaces it."""
    if resume and overwrite:
        from toxiforge.errors import InputError

        raise InputError("--resume and --overwrite contradict each other (--resume continues from what the output "
                         "folder holds, --overwrite starts it again)", hint="pass one of them")


# Dataset options of the commands that read dataset specs (--on of audit and attack, --data/--on of training).
TEXT_COLUMN = typer.Option(None, "--text-column", help="Plain tables (table:FILE, or a file of no known layout): "
                           "the text column (default: the first of text, generation, post, statement, sentence, "
                           "comment_text, comment, content).")
LABEL_COLUMN = typer.Option(None, "--label-column", help="Plain tables: the label column, 0/1 or words "
                            "(default: the first of label, labels, toxic, is_toxic, toxicity, hate, prompt_label); "
                            "toxiforge and ToxiGen runs: the label (default prompt_label).")


def dataset_specs(values: list[str] | None) -> list[str]:
    """Dataset specs from a repeated option, each value possibly comma-separated (``--on a,b --on c``)."""
    from toxiforge.cli._app import split_list

    return [v for value in values or [] for v in split_list(value)]


# Classifier options every command with -c takes (one definition; load_classifier refuses those that do not apply).
JUDGE_TEMPLATE = typer.Option(None, "--judge-template", help="Judge classifiers (-c judge:MODEL): a shipped "
                              "template (humanval, llama-guard, shieldgemma, granite-guardian-3.1, "
                              "granite-guardian-3.3; `toxiforge classifiers` lists them) or a JSON template FILE. "
                              "Default: humanval.")
JUDGE_POLICY = typer.Option(None, "--judge-policy", help="Judge classifiers: the policy TEXT (or a FILE holding it) "
                            "for templates with a {policy} slot (shieldgemma).")
JUDGE_CONCURRENCY = typer.Option(None, "--judge-concurrency", min=1, help="Judge classifiers on a server "
                                 "(-c judge:openai:URL#MODEL): requests in flight at once (default 8; 1 for a "
                                 "one-slot server such as llama-cpp-python's).")
TOXIC_LABEL = typer.Option(None, "--toxic-label", help="Transformers heads: the label whose probability (softmax) or "
                           "sigmoid (multi-label heads) is P(toxic). Default: from the labels (toxic, toxicity, ...).")


CLASSIFIER_RUNTIME = typer.Option(None, "--classifier-runtime", help="Transformers heads: how the forward pass "
                                  "runs: torch (default), torch-int8 (dynamic int8 on the CPU: faster, scores move "
                                  "~5e-3), onnx (ONNX Runtime, exported once and cached), onnx-int8. Other "
                                  "classifiers run as they are. Measured: docs/benchmarks.md.")


def classifier_options(judge_template: str | None, judge_policy: str | None, toxic_label: str | None,
                       judge_concurrency: int | None = None, classifier_runtime: str | None = None) -> dict:
    """The options above as load_classifier keyword arguments (None values are dropped there)."""
    return {"template": judge_template, "policy": judge_policy, "toxic_label": toxic_label,
            "concurrency": judge_concurrency, "runtime": classifier_runtime}


# ALICE options generate and harden share (None = AliceConfig's default, the paper's value).
BEAMS = typer.Option(None, "--beams", help="ALICE: beams (paper: 10).")
CANDIDATES = typer.Option(None, "--candidates", help="ALICE: candidate tokens per beam (paper: 100).")
LAMBDA_LM = typer.Option(None, "--lambda-lm", help="ALICE: weight of the LM term (paper: 0.5).")
LAMBDA_CLF = typer.Option(None, "--lambda-clf", help="ALICE: weight of the classifier term (paper: 0.5).")
KEEP_LABEL_WITH = typer.Option(
    None, "--keep-label-with", help="ALICE: a keeper classifier K (any kind -c takes) whose log-probability of the "
    "prompt's label joins the step score (λK · log p_K), so statements flip -c while keeping their label in K's view "
    "(not in the paper; docs/generation.md). Only with --alice-mode auto; --validate-with must be another classifier.")
LAMBDA_KEEP = typer.Option(None, "--lambda-keep", help="ALICE: weight of the keeper term (default 1; needs "
                           "--keep-label-with; docs/generation.md measures what it gets).")
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
RAY_WORKERS = typer.Option(1, "--workers", help="Ray: actors, each loads the model once.")  # classify, audit, attack
# generate and harden: processes of this machine by default (pipeline/processes.py), Ray actors with --ray
WORKERS = typer.Option(
    None, "--workers", min=1, help="Processes that each load the models once and decode shards in turn: on this "
    "machine (one torch thread per core each), or Ray actors with --ray. Default: every core on the CPU (measured "
    "faster than one process's threads: docs/harden.md), 1 on a GPU, an openai: server or Ray. 1: this process "
    "alone. Each holds its own copy of the models: with a large --model, use fewer.")
CPUS_PER_WORKER = typer.Option(1.0, "--cpus-per-worker", help="Ray: CPUs (and torch threads) per actor.")
GPUS_PER_WORKER = typer.Option(0.0, "--gpus-per-worker", help="Ray: GPUs per actor.")
RAY_RESOURCES = typer.Option(None, "--ray-resources",
                             help="Ray: custom resources per actor, NAME=AMOUNT,... (e.g. llm_server=1).")
RAY_SPREAD = typer.Option(False, "--ray-spread", help="Ray: one actor per node (each may use its node's own server: "
                                                      "openai:http://127.0.0.1:PORT/v1).")
RAY_PLACEMENT_TIMEOUT = typer.Option(120.0, "--ray-placement-timeout",
                                     help="Ray: seconds to wait for the cluster to place every actor.")


def ray_config(ray: bool, ray_address: str | None, workers: int | None, cpus_per_worker: float,
               gpus_per_worker: float, resources: str | None = None, spread: bool = False,
               placement_timeout: float = 120.0):
    """The Ray options above as a :class:`~toxiforge.pipeline.ray_runner.RayConfig`, or None to run on this
    machine (``resources`` as --ray-resources takes it: NAME=AMOUNT,...; ``workers`` None: 1)."""
    if not (ray or ray_address):
        return None
    from toxiforge.pipeline.ray_runner import RayConfig, parse_resources

    return RayConfig(address=ray_address, workers=workers or 1, cpus_per_worker=cpus_per_worker,
                     gpus_per_worker=gpus_per_worker, resources=parse_resources(resources), spread=spread,
                     placement_timeout=placement_timeout)


def local_workers(workers: int | None, model: str, device: str) -> tuple[int, int]:
    """``--workers`` on this machine (without --ray) as (processes, torch threads each): the default every core, one
    thread each, on the CPU (:func:`~toxiforge.pipeline.processes.default_workers`); the cores shared out among
    the workers asked for."""
    from toxiforge.pipeline.processes import default_workers, usable_cores

    count = default_workers(model, device) if workers is None else workers
    return count, max(1, usable_cores() // count)
