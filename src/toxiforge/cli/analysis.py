"""Commands: stats, split, perplexity, mentions, report (paper §3.4, §4.2, Appendices C–D), and export (any
dataset toxiforge reads, as one file in the shared row schema)."""

from __future__ import annotations

from pathlib import Path

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import console, load_lm
from toxiforge.models.embedded import DEFAULT_ENCODER, DEFAULT_LM


def _analysis_progress(enabled: bool):
    """A transient rich progress bar (disabled off a terminal or with --no-progress)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True, disable=not (enabled and console.is_terminal))


def _lexicon_options(profanity_list: Path | None, exclude_list: Path | None, keep_ambiguous: bool):
    from toxiforge.analysis.implicit import load_lexicon

    return load_lexicon(profanity_list, ambiguous=not keep_ambiguous, exclude=exclude_list or ())


_TEXT_HELP = "Column holding the statements (default: generation, else text)."
_PROFANITY_HELP = "Profanity list file, one entry per line (default: better-profanity's word list)."
_EXCLUDE_HELP = "File of lexicon entries to ignore (one per line), on top of the ambiguous terms."
_AMBIGUOUS_HELP = "Keep the ambiguous entries (e.g. 'bloody') that are dropped by default, as the paper did."


def stats_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (toxiforge or "
                                                "ToxiGen; read as one)."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the statistics as JSON to this file."),
    markdown_out: Path | None = typer.Option(None, "--markdown", help="Also write the Markdown to this file."),
    profanity_list: Path | None = typer.Option(None, "--profanity-list", help=_PROFANITY_HELP),
    exclude_list: Path | None = typer.Option(None, "--exclude-list", help=_EXCLUDE_HELP),
    keep_ambiguous: bool = typer.Option(False, "--keep-ambiguous", help=_AMBIGUOUS_HELP),
    text_column: str | None = typer.Option(None, "--text-column", help=_TEXT_HELP),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing output files."),
) -> None:
    """Table 1/2 statistics (count, characters, % implicit per group × label; % hate class) and duplicates."""
    from toxiforge._io import require_new_files
    from toxiforge.analysis.stats import compute_stats, write_stats

    require_new_files(json_out, markdown_out, overwrite=overwrite)
    stats = compute_stats(data, lexicon=_lexicon_options(profanity_list, exclude_list, keep_ambiguous),
                          text_column=text_column)
    console.print(stats.to_markdown(), markup=False, highlight=False, soft_wrap=True)
    for path in write_stats(stats, markdown=markdown_out, json_path=json_out):
        console.print(f"wrote {path}", highlight=False)


def split_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (read as one)."),
    test_size: int = typer.Option(..., "--test-size", help="Rows in the test set (before --on-conflict move)."),
    threshold: float = typer.Option(0.7, "--threshold", help="No train row may have cosine > this with a test row."),
    seed: int = typer.Option(0, "--seed", help="Seed of the test-set draw."),
    model: str = typer.Option(DEFAULT_ENCODER, "--model", help="Sentence encoder: the embedded "
                                                                  "all-minilm-l6-v2, a hub id or a local dir."),
    out: Path = typer.Option(..., "-o", "--out", help="New or empty directory for train/test/removed + split.json."),
    allocation: str = typer.Option("proportional", "--allocation", help="Test rows per group × label × method "
                                                                        "stratum: proportional or equal."),
    on_conflict: str = typer.Option("drop", "--on-conflict", help="Train rows above the threshold: drop, or move "
                                                                  "them to the test set."),
    fmt: str = typer.Option("parquet", "--format", help="parquet, jsonl or csv."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o directory."),
    device: str = typer.Option("cpu", "--device", help="Encoder device: cpu, cuda or auto."),
    batch_size: int = typer.Option(128, "--batch-size", help="Encoder batch size."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
    text_column: str | None = typer.Option(None, "--text-column", help=_TEXT_HELP),
) -> None:
    """Stratified test set; no training statement with cosine > --threshold to a test statement (§4.2)."""
    from toxiforge._io import require_empty_dir
    from toxiforge.analysis.dataset import load_data
    from toxiforge.analysis.split import ALLOCATIONS, ON_CONFLICTS, check_threshold, similarity_split, write_split
    from toxiforge.errors import InputError, check_choice

    check_threshold(threshold)
    opt.check_model_options(device=device)
    if batch_size < 1:
        raise InputError(f"--batch-size {batch_size} must be at least 1", hint="e.g. --batch-size 128")
    require_empty_dir(out, overwrite)
    check_choice(fmt, ("parquet", "jsonl", "csv"), what="--format", hint="use parquet, jsonl or csv")
    allocation_checked = check_choice(allocation, ALLOCATIONS, what="allocation", hint="use proportional or equal")
    on_conflict_checked = check_choice(on_conflict, ON_CONFLICTS, what="on_conflict", hint="use drop or move")
    d = load_data(data, need=(), text_column=text_column)
    with _analysis_progress(progress) as bar:
        embed_task = bar.add_task(f"embedding with {model}", total=len(d))
        split_task = bar.add_task("comparing with the test set", total=None)
        result, d = similarity_split(d, test_size, threshold=threshold, seed=seed, model=model, device=device,
                                     batch_size=batch_size, allocation=allocation_checked,
                                     on_conflict=on_conflict_checked,
                                     on_embed_progress=lambda n: bar.advance(embed_task, n),
                                     on_split_progress=lambda n: bar.advance(split_task, n))
    written = write_split(result, d, out, fmt=fmt, overwrite=overwrite)
    console.print(result.line(), highlight=False, soft_wrap=True)
    console.print(f"embeddings: {len(d):,} statements in {result.embed_seconds:.1f} s ({result.encoder}, loaded in "
                  f"{result.load_seconds:.1f} s); split "
                  f"{result.split_seconds:.1f} s; wrote " + ", ".join(p.name for p in written.values())
                  + f" to {out}", highlight=False, soft_wrap=True)


def perplexity_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (read as one)."),
    lm: str = typer.Option(DEFAULT_LM, "--lm", help="Reference LM: embedded name, hub id (gpt2, as the paper), "
                                                         "model dir or .gguf file."),
    max_ppl: float = typer.Option(500.0, "--max-ppl", help="Drop statements above this perplexity from the table."),
    batch_size: int = typer.Option(16, "--batch-size", help="Statements per forward pass."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32 or bfloat16."),
    output: Path | None = typer.Option(None, "-o", "--out", help="Write the rows with a perplexity column."),
    json_out: Path | None = typer.Option(None, "--json", help="Write the table as JSON to this file."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing output files."),
) -> None:
    """Per-statement perplexity under a reference LM; mean per group × method (ToxiGen Appendix C)."""
    from toxiforge._io import atomic_write_text, require_new_files
    from toxiforge.analysis.dataset import load_data
    from toxiforge.analysis.perplexity import dataset_perplexity, write_scores
    from toxiforge.errors import InputError

    require_new_files(output, json_out, overwrite=overwrite)
    if not max_ppl > 0:
        raise InputError(f"--max-ppl {max_ppl} must be > 0", hint="e.g. --max-ppl 500")
    if batch_size < 1:
        raise InputError(f"--batch-size {batch_size} must be at least 1", hint="e.g. --batch-size 16")
    opt.check_model_options(dtype, device)
    d = load_data(data, need=())
    model = load_lm(lm, dtype, device)
    with _analysis_progress(progress) as bar:
        task = bar.add_task(f"perplexity under {lm}", total=len(d))
        result = dataset_perplexity(d, model, max_ppl=max_ppl, batch_size=batch_size,
                                    on_progress=lambda n: bar.advance(task, n))
    console.print(result.table().markdown(), markup=False, highlight=False, soft_wrap=True)
    console.print(f"{len(d):,} statements in {result.seconds:.1f} s", highlight=False)
    if output is not None:
        console.print(f"wrote {write_scores(result, d, output)}", highlight=False)
    if json_out is not None:
        console.print(f"wrote {atomic_write_text(json_out, result.to_json() + chr(10))}", highlight=False)


def mentions_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (read as one)."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the numbers as JSON to this file."),
    text_column: str | None = typer.Option(None, "--text-column", help=_TEXT_HELP),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing output files."),
) -> None:
    """Share of statements naming their target group per group × method (Table 6), and other groups named."""
    from toxiforge._io import atomic_write_text, require_new_files
    from toxiforge.analysis.mentions import mention_stats

    require_new_files(json_out, overwrite=overwrite)
    result = mention_stats(data, text_column=text_column)
    console.print(result.to_markdown(), markup=False, highlight=False, soft_wrap=True)
    if json_out is not None:
        console.print(f"wrote {atomic_write_text(json_out, result.to_json() + chr(10))}", highlight=False)


def report_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (read as one)."),
    out: Path = typer.Option(..., "-o", "--out", help="Directory for report.html and report.json."),
    lm: str = typer.Option(DEFAULT_LM, "--lm", help="Reference LM for perplexity."),
    perplexity: bool = typer.Option(True, "--perplexity/--no-perplexity", help="Compute perplexity (slowest step)."),
    max_ppl: float = typer.Option(500.0, "--max-ppl", help="Drop statements above this perplexity."),
    batch_size: int = typer.Option(16, "--batch-size", help="Statements per LM forward pass."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32 or bfloat16."),
    profanity_list: Path | None = typer.Option(None, "--profanity-list", help=_PROFANITY_HELP),
    exclude_list: Path | None = typer.Option(None, "--exclude-list", help=_EXCLUDE_HELP),
    keep_ambiguous: bool = typer.Option(False, "--keep-ambiguous", help=_AMBIGUOUS_HELP),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
    text_column: str | None = typer.Option(None, "--text-column", help=_TEXT_HELP),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o."),
) -> None:
    """One offline HTML page: statistics, mentions and perplexity tables with plots."""
    from toxiforge._io import require_empty_dir
    from toxiforge.analysis.dataset import load_data
    from toxiforge.analysis.report import build_report
    from toxiforge.errors import InputError

    if perplexity and not max_ppl > 0:
        raise InputError(f"--max-ppl {max_ppl} must be > 0", hint="e.g. --max-ppl 500")
    if perplexity and batch_size < 1:
        raise InputError(f"--batch-size {batch_size} must be at least 1", hint="e.g. --batch-size 16")
    opt.check_model_options(dtype, device)
    require_empty_dir(out, overwrite)
    lexicon = _lexicon_options(profanity_list, exclude_list, keep_ambiguous)
    d = load_data(data, text_column=text_column)  # bad input fails before the LM loads
    model = load_lm(lm, dtype, device) if perplexity else None
    report = build_report(d, out, lm=model, max_ppl=max_ppl, batch_size=batch_size, lexicon=lexicon,
                          progress=progress and console.is_terminal, console=console)
    console.print(report.stats.table1().markdown(), markup=False, highlight=False, soft_wrap=True)
    if report.perplexity is not None:
        console.print(report.perplexity.line(), highlight=False)
    console.print(f"wrote {report.html_path} and {report.json_path}", highlight=False)


def export_command(
    data: str = typer.Argument(..., help="Any dataset toxiforge reads, as a spec [NAME=][KIND:]PATH: a run, ToxiGen "
                                         "annotated/train, SBF, IHC, DynaHate, a demonstrations folder or a table "
                                         "(docs/training.md)."),
    output: Path = typer.Option(..., "-o", "--out", help="File to write: .parquet, .csv or .jsonl."),
    text_column: str | None = typer.Option(None, "--text-column", help="Text column of a plain table."),
    label_column: str | None = typer.Option(None, "--label-column", help="Label column (tables; toxiforge and "
                                                                         "ToxiGen train default to prompt_label)."),
    label_rule: str = typer.Option("sum", "--label-rule", help="ToxiGen annotated: sum (upstream) or max."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output file."),
) -> None:
    """Write a dataset as one file in toxiforge's row schema (text in generation, label in prompt_label, group,
    generation_method), which every command reads. A toxiforge run keeps all its columns."""
    from toxiforge._io import require_new_files
    from toxiforge.data import load_spec
    from toxiforge.data.examples import labeled_table
    from toxiforge.records import format_of, read_table, write_table

    format_of(output)
    require_new_files(output, overwrite=overwrite)
    labelled = load_spec(data, label_rule=label_rule, text_column=text_column, label_column=label_column)
    table = read_table(labelled.source) if labelled.layout == "toxiforge" else labeled_table(labelled)
    write_table(table, output)
    console.print(f"wrote {table.num_rows} rows of {labelled.name} ({labelled.layout}) to {output}",
                  highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add stats, split, perplexity, mentions, report and export to ``app``."""
    app.command("stats")(stats_command)
    app.command("split")(split_command)
    app.command("perplexity")(perplexity_command)
    app.command("mentions")(mentions_command)
    app.command("report")(report_command)
    app.command("export")(export_command)
