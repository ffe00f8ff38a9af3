"""Command: classify (add a classifier's P(toxic) column to a dataset)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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
    workers: int = opt.RAY_WORKERS,
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
    from toxiforge.classifiers.judge_templates import ALIASES, DEFAULT_TEMPLATE, TEMPLATES
    from toxiforge.classifiers.registry import classifier_catalog

    print_listing("Classifiers (-c NAME; also a model directory or a hub id owner/name)",
                  ("name", "kind", "source", "score", "description", "known training data"), classifier_catalog())
    templates = [(t.name, t.render, f"{t.unsafe} / {t.safe}", "--judge-policy" if t.takes_policy else "-",
                  t.description) for t in TEMPLATES.values()]
    templates += [(alias, "-", "-", "-", f"the same as {target}") for alias, target in ALIASES.items()]
    print_listing(f"Judge templates (--judge-template NAME or a JSON FILE; default {DEFAULT_TEMPLATE})",
                  ("name", "render", "unsafe / safe", "policy", "description"), templates)


# A listing's lines wrap at the terminal's width, or here when it is wider or there is none (a pipe, a file):
# rich's six-column table cut the names one types at 80-100 columns (toxigen-r...) and, piped, wrote 2,000-character
# lines.
PLAIN_WIDTH = 100


def print_listing(title: str, header: Sequence[str], rows: Iterable[Sequence[str]]) -> None:
    """``rows`` under ``header``, whose first column is the name one types, as one block per row: ``name (second:
    ...; third: ...)`` on its first line (the name whole, first, so ``grep`` finds it), then one indented line per
    other column, wrapped at :data:`PLAIN_WIDTH` or the terminal's width when it is narrower."""
    import textwrap

    width = min(console.width, PLAIN_WIDTH)
    lines = [title]
    for name, second, third, *rest in rows:
        lines += ["", *textwrap.wrap(f"{name} ({header[1]}: {second}; {header[2]}: {third})", width,
                                     subsequent_indent="    ", break_long_words=False, break_on_hyphens=False)]
        for column, value in zip(header[3:], rest, strict=True):
            lines += textwrap.wrap(f"{column}: {value}", width, initial_indent="  ", subsequent_indent="    ",
                                   break_long_words=False, break_on_hyphens=False)
    console.print("\n".join(lines) + "\n", highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add classify and classifiers to ``app``."""
    app.command("classify")(classify)
    app.command("classifiers")(classifiers_list)
