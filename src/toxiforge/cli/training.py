"""Commands: train, evaluate, experiment table4 (paper §5)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import App, command_line, console, err_console
from toxiforge.cli.debias import BF16, PAPER_SETTINGS, WARMUP_RATIO, WEIGHT_DECAY, training_settings
from toxiforge.cli.experiment_debias import register_experiment_commands
from toxiforge.models.embedded import DEFAULT_ENCODER

if TYPE_CHECKING:
    from rich.console import JustifyMethod

experiment_app = App(help="The papers' experiments as commands (ToxiGen Tables 4 and 7; Zhou et al.'s "
                                  "debiasing comparison).", no_args_is_help=True)


def _train_config(base_model: str, tokenizer: str | None, epochs: float, max_steps: int, batch_size: int,
                  learning_rate: float, max_length: int, seed: int, eval_fraction: float,
                  early_stopping: int | None, device: str, bf16: bool):
    from toxiforge.training.trainer import TrainConfig

    return TrainConfig(base_model=base_model, tokenizer=tokenizer, epochs=epochs, max_steps=max_steps,
                       batch_size=batch_size, learning_rate=learning_rate, max_length=max_length, seed=seed,
                       eval_fraction=eval_fraction, early_stopping=early_stopping, device=device, bf16=bf16)


_BASE_MODEL_HELP = ("Encoder to fine-tune: all-minilm-l6-v2 (embedded, offline), hatebert, toxdect-roberta, a model "
                    "directory or a hub id.")
_DATA_HELP = ("Dataset spec [NAME=][KIND:]PATH or KIND:hub; KIND is toxigen-annotated (humanval), toxigen-train, "
              "toxiforge, sbf, ihc, dynahate, hatecheck, davidson (davidson:PATH#hate: hate speech only) or table; "
              "without KIND the layout is told from the columns. Repeat "
              "the option or separate with commas.")


def train_command(
    ctx: typer.Context,
    data: list[str] = typer.Option(..., "--data", help="Training data: " + _DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output model directory."),
    base_model: str = typer.Option(DEFAULT_ENCODER, "--base-model", help=_BASE_MODEL_HELP),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help="Tokenizer (default: the base model's)."),
    subset: str = typer.Option("all", "--subset", help="all, alice, top-k (downsampled to the ALICE size) or "
                                                       "both (ALICE + that top-k sample)."),
    label_column: str | None = typer.Option(None, "--label-column",
                                            help="Label column (default: prompt_label, the proxy label)."),
    text_column: str | None = typer.Option(None, "--text-column", help="Text column of plain tables."),
    weight_column: str | None = typer.Option(None, "--weight-column", help="Column of the training tables that "
                                             "holds each row's loss weight (a number above 0; a row of weight k "
                                             "counts as k copies in its batch's loss). Tables without it, and "
                                             "empty cells, weigh 1. Cross-entropy only (not with --debias)."),
    eval_data: list[str] | None = typer.Option(None, "--eval", help="Evaluated after each epoch (default: "
                                                                    "--eval-fraction of the training data)."),
    eval_fraction: float = typer.Option(0.1, "--eval-fraction", help="Share held out for evaluation when no --eval."),
    epochs: float | None = typer.Option(None, "--epochs", help="Default 3."),
    max_steps: int = typer.Option(-1, "--max-steps", help="Stop after this many steps (-1: run all epochs)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Per-device batch size (default 32)."),
    learning_rate: float | None = typer.Option(None, "--learning-rate", "--lr", help="Default 2e-5."),
    max_length: int = typer.Option(128, "--max-length", help="Truncate texts to this many tokens."),
    warmup_ratio: float | None = WARMUP_RATIO,
    weight_decay: float | None = WEIGHT_DECAY,
    paper_settings: bool = PAPER_SETTINGS,
    seed: int = typer.Option(0, "--seed"),
    early_stopping: int | None = typer.Option(None, "--early-stopping",
                                              help="Stop after N epochs without a better eval AUC."),
    gradient_accumulation: int = typer.Option(1, "--gradient-accumulation", help="Batches whose gradients are "
                                              "summed per optimizer step (transformers' gradient_accumulation_steps): "
                                              "an effective batch of N × --batch-size × GPUs."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (multi-GPU: run under torchrun)."),
    bf16: bool = BF16,
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    debias: str | None = typer.Option(None, "--debias", help="learned-mixin or learned-mixin+h (Clark et al. "
                                         "2019; needs --bias-only). The saved model is a plain classifier."),
    bias_only: str | None = typer.Option(None, "--bias-only", help="Bias-only model: noi, oni, oi or toxtrig (a "
                                         "calibrated linear SVM on the TOXTRIG words, Zhou et al.'s LMIXIN-ONI / "
                                         "-TOXTRIG; KIND:LEXICON.csv or KIND:upstream replaces the lists), dialect"
                                         "[:DIR] (the same SVM on the four dialect probabilities: LMIXIN-Dialect), "
                                         "terms:FILE (any word list) or column:NAME (precomputed p(toxic) in the "
                                         "training files)."),
    entropy_weight: float | None = typer.Option(None, "--entropy-weight", help="Entropy penalty of "
                                                   "learned-mixin+h (default 0.01, Zhou et al.'s code)."),
) -> None:
    """Fine-tune an encoder for binary toxicity on ToxiGen/toxiforge data (Trainer; torchrun/accelerate ready)."""
    from rich.table import Table

    from toxiforge._io import require_empty_dir
    from toxiforge.data import check_column_options, load_specs
    from toxiforge.training.subsets import normalize_subset, select_subset
    from toxiforge.training.trainer import train_classifier

    subset = normalize_subset(subset)
    require_empty_dir(out, overwrite)
    if (debias is None) != (bias_only is None):
        from toxiforge.errors import InputError

        raise InputError("--debias and --bias-only go together",
                         hint="e.g. --debias learned-mixin+h --bias-only toxtrig")
    if debias is not None and weight_column is not None:
        from toxiforge.errors import InputError

        raise InputError("--weight-column weighs the cross-entropy loss, and --debias trains with LEARNED-MIXIN's",
                         hint="drop --weight-column or --debias")
    datasets = load_specs(opt.dataset_specs(data), label_column=label_column, text_column=text_column,
                          check_columns=False)
    held_sets = load_specs(opt.dataset_specs(eval_data), text_column=text_column, check_columns=False) \
        if eval_data else []
    check_column_options([*datasets, *held_sets], text_column=text_column)  # --text-column reads both
    check_column_options(datasets, label_column=label_column)
    if weight_column is not None:
        from toxiforge.training.weighted import column_weights

        datasets = column_weights(datasets, weight_column)
    rows = select_subset([e for d in datasets for e in d.examples], subset, seed=seed)
    held = [e for d in held_sets for e in d.examples] if eval_data else None
    from dataclasses import replace

    given = training_settings(paper=paper_settings, epochs=epochs, batch_size=batch_size,
                              learning_rate=learning_rate, warmup=warmup_ratio, weight_decay=weight_decay)
    if gradient_accumulation < 1:
        from toxiforge.errors import InputError

        raise InputError(f"--gradient-accumulation {gradient_accumulation} must be at least 1",
                         hint="use 1 (every batch is a step) or more")
    config = replace(_train_config(base_model, tokenizer, 3.0, max_steps, 32, 2e-5, max_length, seed,
                                   eval_fraction, early_stopping, device, bf16), **given,
                     gradient_accumulation=gradient_accumulation)
    toxic = sum(e.label for e in rows)
    weighted = sum(e.weight != 1 for e in rows)
    console.print(f"training {base_model} on {len(rows)} rows ({toxic} toxic, {len(rows) - toxic} benign; "
                  f"subset {subset}" + (f"; {weighted} with a loss weight other than 1, --weight-column "
                                        f"{weight_column}" if weight_column else "") + ")",
                  highlight=False, soft_wrap=True)
    if held is None and eval_fraction > 0:
        from toxiforge.training.trainer import split_heldout_indices

        kept, validation = split_heldout_indices([e.label for e in rows], eval_fraction, seed)
        console.print(f"of which {len(validation)} ({eval_fraction:.0%} of each label, --eval-fraction) are held out "
                      f"for validation after each epoch, so the model trains on {len(kept)}; --eval-fraction 0 "
                      "trains on all of them", highlight=False, soft_wrap=True)
    from toxiforge.training.card import CardFacts

    common: dict[str, Any] = dict(eval_examples=held, progress=progress, overwrite=overwrite, console=err_console,
                  data_sources=[d.source for d in datasets], card=CardFacts(command_line(ctx), datasets))
    if debias is not None and bias_only is not None:
        from toxiforge.bias.bias_only import bias_only_probabilities
        from toxiforge.training.debias import normalize_method, train_debiased

        method = normalize_method(debias)
        probs = bias_only_probabilities(bias_only, rows, sources=[d.source for d in datasets])
        warn_if_constant(probs, bias_only)
        console.print(f"{method} against bias-only model {bias_only} (mean p(toxic) {probs.mean():.3f})",
                      highlight=False, soft_wrap=True)
        result = train_debiased(rows, out, config, bias_probs=probs, method=method, entropy_weight=entropy_weight,
                                bias_only=bias_only, **common)
    else:
        result = train_classifier(rows, out, config, **common)
    if not result.log:  # not the main process of a multi-GPU run
        return
    table = Table(title=f"Training log ({out / 'training_log.json'})")
    for col in ("epoch", "train loss", "eval loss", "eval AUC"):
        table.add_column(col, justify="right")

    def fmt(v):
        return "-" if v is None else f"{v:.4f}"

    for e in result.log["epochs"]:
        table.add_row(f"{e['epoch']:g}", fmt(e["train_loss"]), fmt(e["eval_loss"]),
                      fmt(e["eval_auc"]) if e["eval_auc"] is not None else "undefined" if e["eval_loss"] else "-")
    console.print(table)
    for note in {e.get("eval_auc_note") for e in result.log["epochs"]} - {None}:
        console.print(f"note: eval AUC {note}", highlight=False, soft_wrap=True)
    console.print(f"saved to {out} in {result.log['train_seconds']:.1f} s "
                  f"({result.log['train_examples_per_second']:.1f} examples/s)", highlight=False, soft_wrap=True)


def warn_if_constant(probs, bias_only: str) -> None:
    """Warn when the bias-only model gives (nearly) every row the same p(toxic): its words match almost no
    training row, so LEARNED-MIXIN has (almost) nothing to take out and trains like a plain classifier."""
    import warnings

    import numpy as np

    from toxiforge.errors import ToxiforgeWarning

    _, counts = np.unique(np.round(np.asarray(probs, dtype=np.float64), 6), return_counts=True)
    differing = int(len(probs) - counts.max())
    if differing < max(5, 0.05 * len(probs)):
        warnings.warn(ToxiforgeWarning(
            f"the bias-only model {bias_only} is (nearly) constant: only {differing} of {len(probs)} training rows "
            "get another p(toxic) than the rest, so LEARNED-MIXIN has (almost) nothing to remove. Fix: choose a "
            "bias-only model whose words occur in the data (e.g. --bias-only toxtrig), or train without --debias"),
            stacklevel=2)


MIN_SLICE = 30  # AUC of a slice with fewer examples is marked as unreliable


def _print_evaluation(report, title: str) -> None:
    from rich.table import Table

    table = Table(title=title)
    columns: tuple[tuple[str, JustifyMethod], ...] = (("dataset", "left"), ("slice", "left"), ("n", "right"),
                                                      ("toxic", "right"), ("ROC AUC", "right"))
    for col, justify in columns:
        table.add_column(col, justify=justify)
    few = False
    for r in report.results:
        table.add_row(r.data.name, "all", str(r.auc.n), str(r.auc.toxic), r.auc.cell(3))
        for kind, slices in (("method", r.by_method), ("group", r.by_group)):
            for key, auc in slices.items():
                small = auc.n < MIN_SLICE and auc.value is not None
                table.add_row("", f"{kind}: {key}", str(auc.n), str(auc.toxic), auc.cell(3) + (" *" if small else ""))
                few = few or small
    console.print(table)
    if few:
        console.print(f"[yellow]note:[/] * fewer than {MIN_SLICE} examples: that AUC can move a lot with one "
                      "example; read it as a rough hint", highlight=False, soft_wrap=True)
    for label, reason in report.undefined():
        console.print(f"[yellow]note:[/] {label}: AUC {reason}", highlight=False, soft_wrap=True)


def evaluate_command(
    classifier: str = typer.Option(..., "--classifier", "-c", help="Registry name (toxigen-roberta, "
                                   "profanity-check, ...), a model directory (e.g. from toxiforge train) or hub id."),
    judge_template: str | None = opt.JUDGE_TEMPLATE,
    judge_policy: str | None = opt.JUDGE_POLICY,
    judge_concurrency: int | None = opt.JUDGE_CONCURRENCY,
    classifier_runtime: str | None = opt.CLASSIFIER_RUNTIME,
    toxic_label: str | None = opt.TOXIC_LABEL,
    on: list[str] = typer.Option(..., "--on", help="Evaluation data: " + _DATA_HELP),
    out: Path = typer.Option(Path("evaluation"), "-o", "--out", help="Report folder (evaluation.json, "
                                                                     "evaluation.md, roc.png)."),
    label_rule: str = typer.Option("sum", "--label-rule", help="ToxiGen annotated labels: sum "
                                   "(toxicity_ai + toxicity_human > 5.5, upstream) or max (max > 3, the paper)."),
    text_column: str | None = typer.Option(None, "--text-column", help="Text column of plain tables."),
    label_column: str | None = typer.Option(None, "--label-column", help="Label column of plain tables."),
    split: str | None = typer.Option(None, "--split", help="Split for hub sources and DynaHate (default test)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Texts per classifier batch."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o."),
) -> None:
    """ROC AUC of a classifier per dataset, per group and per generation method (Table 7); JSON, Markdown, PNG."""
    from toxiforge._io import require_empty_dir
    from toxiforge.classifiers import load_classifier
    from toxiforge.data import load_specs
    from toxiforge.training.evaluate import evaluate, write_report

    require_empty_dir(out, overwrite)
    datasets = load_specs(opt.dataset_specs(on), label_rule=label_rule, text_column=text_column,
                          label_column=label_column, split=split)
    with console.status(f"loading {classifier}"):
        clf = load_classifier(classifier, device=device, batch_size=batch_size,
                              **opt.classifier_options(judge_template, judge_policy, toxic_label,
                                                       judge_concurrency, classifier_runtime))
    with console.status(f"scoring {sum(len(d) for d in datasets)} texts with {clf.name}"):
        report = evaluate(clf, datasets)
    paths = write_report(report, out)
    _print_evaluation(report, f"ROC AUC of {clf.name}")
    console.print(f"wrote {paths['json']}, {paths['markdown']} and {paths['png']}", highlight=False, soft_wrap=True)


@experiment_app.command("table4")
def experiment_table4(
    train: list[str] = typer.Option(..., "--train", help="Training data with ALICE and top-k rows: " + _DATA_HELP),
    eval_data: list[str] = typer.Option(..., "--eval", help="Evaluation sets: " + _DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output folder (models, reports, table4.md/json)."),
    base_model: str = typer.Option(DEFAULT_ENCODER, "--base-model", help=_BASE_MODEL_HELP),
    tokenizer: str | None = typer.Option(None, "--tokenizer", help="Tokenizer (default: the base model's)."),
    zero_shot: str | None = typer.Option(None, "--zero-shot", help="Classifier for the 'None' column (default: "
                                         "the base model if it already is a classifier)."),
    label_column: str | None = typer.Option(None, "--label-column", help="Training label (default prompt_label)."),
    label_rule: str = typer.Option("sum", "--label-rule", help="ToxiGen annotated labels: sum or max."),
    eval_fraction: float = typer.Option(0.1, "--eval-fraction", help="Share of each variant held out per epoch."),
    epochs: float = typer.Option(3.0, "--epochs"),
    max_steps: int = typer.Option(-1, "--max-steps"),
    batch_size: int = typer.Option(32, "--batch-size"),
    learning_rate: float = typer.Option(2e-5, "--learning-rate", "--lr"),
    max_length: int = typer.Option(128, "--max-length"),
    seed: int = typer.Option(0, "--seed"),
    early_stopping: int | None = typer.Option(None, "--early-stopping"),
    device: str = typer.Option("auto", "--device"),
    bf16: bool = BF16,
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o."),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Zero-shot plus fine-tuned on ALICE, top-k and ALICE + top-k, each on every eval set (paper Tables 4, 7)."""
    import time

    from toxiforge.data import load_specs
    from toxiforge.training.experiment import run_table4

    started = time.perf_counter()
    train_sets = load_specs(opt.dataset_specs(train), label_column=label_column)
    eval_sets = load_specs(opt.dataset_specs(eval_data), label_rule=label_rule)
    config = _train_config(base_model, tokenizer, epochs, max_steps, batch_size, learning_rate, max_length, seed,
                           eval_fraction, early_stopping, device, bf16)
    table = run_table4(train_sets, eval_sets, out, config, zero_shot=zero_shot, progress=progress,
                       overwrite=overwrite, console=err_console, device=device,
                       on_stage=lambda msg: console.print(f"[bold]>[/] {msg}", highlight=False))
    console.print(table.markdown(), markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {out / 'table4.md'} and {out / 'table4.json'} in {time.perf_counter() - started:.1f} s",
                  highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add train and evaluate, then the experiment group, to ``app``."""
    app.command("train")(train_command)
    app.command("evaluate")(evaluate_command)
    app.add_typer(experiment_app, name="experiment")


register_experiment_commands(experiment_app)  # experiment debias (cli/experiment_debias.py, issues 11, 37)
