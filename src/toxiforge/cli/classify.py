"""Command: classify (add a classifier's P(toxic) column to a dataset)."""

from __future__ import annotations

from pathlib import Path

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import console


def classify(
    data: Path = typer.Argument(..., help="A dataset file (.parquet/.jsonl/.csv) or a generation output directory."),
    classifier: str = typer.Option(
        ..., "--classifier", "-c", help="toxigen-roberta, toxigen-hatebert, toxdect-roberta, profanity-check "
                                        "(offline), a model directory or a hub id (owner/name)."),
    judge_template: str | None = opt.JUDGE_TEMPLATE,
    judge_policy: str | None = opt.JUDGE_POLICY,
    judge_concurrency: int | None = opt.JUDGE_CONCURRENCY,
    classifier_runtime: str | None = opt.CLASSIFIER_RUNTIME,
    toxic_label: str | None = opt.TOXIC_LABEL,
    column: str | None = typer.Option(
        None, "--column", help="Score column to add (default: roberta_prediction for toxigen-roberta, else "
                               "<classifier>_score). An existing column of that name is replaced."),
    text_column: str | None = typer.Option(None, "--text-column", help="Text to score (default: generation, "
                                                                       "else text)."),
    output: Path | None = typer.Option(
        None, "-o", "--out", help="Output file; its suffix picks the format (default: DATA.scored.<ext>, or "
                                     "DIR/scored.parquet for a generation directory)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output file."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Texts per classifier batch "
                                                                     "(default: the backend's)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (transformers classifiers)."),
    dtype: str = typer.Option("auto", "--dtype", help="auto (float32), float32 or bfloat16."),
    toxic_index: int | None = typer.Option(None, "--toxic-index", help="Column of the toxic class (default: "
                                                                       "from the model's labels)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    ray: bool = opt.RAY,
    ray_address: str | None = opt.RAY_ADDRESS,
    workers: int = opt.WORKERS,
    cpus_per_worker: float = opt.CPUS_PER_WORKER,
    gpus_per_worker: float = opt.GPUS_PER_WORKER,
) -> None:
    """Add a P(toxic) column from a classifier to every row of DATA and write the result."""
    import time

    from toxiforge._io import require_new_files
    from toxiforge.classifiers import default_score_column, load_classifier
    from toxiforge.classifiers.scoring import default_output_path, pick_text_column, score_table
    from toxiforge.data.examples import read_any_table
    from toxiforge.records import write_table

    opt.check_model_options(dtype, device, batch_size=batch_size)
    out = output if output is not None else default_output_path(data)
    require_new_files(out, overwrite=overwrite)
    table = read_any_table(data)
    text = pick_text_column(table.column_names, text_column, path=data)  # fail before loading a model
    score_column = column or default_score_column(classifier)
    started = time.perf_counter()
    options = {"device": device, "dtype": dtype, "batch_size": batch_size, "toxic_index": toxic_index,
               **opt.classifier_options(judge_template, judge_policy, toxic_label,
                                        judge_concurrency, classifier_runtime)}
    with console.status(f"loading {classifier}"):
        ray_run = opt.ray_config(ray, ray_address, workers, cpus_per_worker, gpus_per_worker)
        if ray_run is not None:
            from functools import partial

            from toxiforge.pipeline.ray_runner import RayClassifier

            clf = RayClassifier(partial(load_classifier, classifier, **options), ray_run)
        else:
            clf = load_classifier(classifier, **options)
    console.print(f"loaded {clf.name} in {time.perf_counter() - started:.1f} s", highlight=False)
    started = time.perf_counter()
    try:
        if progress and table.num_rows >= 1000 and console.is_terminal:
            from rich.progress import Progress

            with Progress(console=console, transient=True) as bar:
                task = bar.add_task(f"scoring with {clf.name}", total=table.num_rows)
                scored, summary = score_table(table, clf, score_column=score_column, text_column=text, path=data,
                                              on_progress=lambda n: bar.advance(task, n))
        else:
            scored, summary = score_table(table, clf, score_column=score_column, text_column=text, path=data)
    finally:
        if ray_run is not None:
            clf.close()
    write_table(scored, out)
    if summary.replaced:
        console.print(f"note: replaced {summary.replaced} existing values of column {score_column!r}",
                      highlight=False)
    console.print(f"{summary.line()}; {time.perf_counter() - started:.1f} s; wrote {out}", highlight=False,
                  soft_wrap=True)


def classifiers_list() -> None:
    """List the registered classifiers (kind, source, how the score is computed, known training data) and the judge
    templates."""
    from rich.table import Table

    from toxiforge.classifiers.judge_templates import ALIASES, DEFAULT_TEMPLATE, TEMPLATES
    from toxiforge.classifiers.registry import classifier_catalog

    table = Table(title="Classifiers (-c NAME; also a model directory or a hub id owner/name)")
    for column in ("name", "kind", "source", "score", "description", "known training data"):
        table.add_column(column, ratio=1 if column in ("score", "description", "known training data") else None)
    for row in classifier_catalog():
        table.add_row(*row)
    console.print(table)
    templates = Table(title=f"Judge templates (--judge-template NAME or a JSON FILE; default {DEFAULT_TEMPLATE})")
    for column in ("name", "render", "unsafe / safe", "policy", "description"):
        templates.add_column(column, ratio=1 if column == "description" else None)
    for t in TEMPLATES.values():
        policy = "--judge-policy" if t.takes_policy else "-"
        templates.add_row(t.name, t.render, f"{t.unsafe} / {t.safe}", policy, t.description)
    for alias, target in ALIASES.items():
        templates.add_row(alias, "", "", "", f"the same as {target}")
    console.print(templates)


def register(app: typer.Typer) -> None:
    """Add classify and classifiers to ``app``."""
    app.command("classify")(classify)
    app.command("classifiers")(classifiers_list)
