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


def _split(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@app.command("groups")
def groups_list() -> None:
    """List the target groups (ToxiGen's 13, upstream's community groups) with their aliases."""
    from rich.table import Table

    from toxiforge.groups import all_groups

    table = Table(title="Target groups")
    for column in ("name", "kind", "category"):
        table.add_column(column, no_wrap=True)
    table.add_column("display")
    table.add_column("aliases", ratio=1)
    for g in all_groups():
        table.add_row(g.name, g.kind, g.category, g.display, ", ".join(g.aliases))
    console.print(table)


@app.command("generate")
def generate(
    out: Path = typer.Option(..., "-o", "--out", help="Output directory (shards + manifest.json)."),
    groups: str = typer.Option("all", "--groups", help="Comma-separated groups or aliases; 'all' = ToxiGen's 13."),
    labels: Optional[str] = typer.Option(
        None, "--labels", help="Comma-separated: toxic,benign. Default: both with --demonstrations/--prompts, "
                               "benign with the shipped sets."),
    per_cell: int = typer.Option(10, "-n", "--per-cell", help="Statements per group × label."),
    demonstrations: Optional[str] = typer.Option(
        None, "--demonstrations", "-d", help="Demonstrations (upstream checkout, folder, file or table). "
                                             "Default: toxiforge's shipped benign sets."),
    prompts: Optional[str] = typer.Option(None, "--prompts", help="Upstream prompt file(s) to use line by line."),
    k: int = typer.Option(5, "-k", help="Demonstrations per prompt (paper: 5)."),
    seed: int = typer.Option(0, "--seed", help="Seed for prompts and sampling."),
    method: str = typer.Option("top-k", "--method", help="Decoding method: top-k or alice."),
    classifier: Optional[str] = typer.Option(
        None, "--classifier", "-c", help="Toxicity classifier: ALICE attacks it; with top-k it only scores rows. "
                                         "Registry name (profanity-check, toxigen-roberta, ...), dir or hub id."),
    model: str = typer.Option("smollm2-135m", "--model", help="Embedded name, hub id, model dir or .gguf file."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32 or bfloat16."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    top_k: int = typer.Option(40, "--top-k", help="Sample from the k most likely tokens (paper: 40)."),
    temperature: float = typer.Option(0.9, "--temperature", help="Sampling temperature (paper: 0.9)."),
    max_new_tokens: int = typer.Option(30, "--max-new-tokens", help="Token budget per statement (paper: 30)."),
    batch_size: int = typer.Option(16, "--batch-size", help="Prompts decoded together."),
    shard_size: int = typer.Option(128, "--shard-size", help="Rows per shard file (the resume unit)."),
    fmt: str = typer.Option("parquet", "--format", help="parquet, jsonl or csv."),
    beams: int = typer.Option(10, "--beams", help="ALICE: beams (paper: 10)."),
    candidates: int = typer.Option(100, "--candidates", help="ALICE: candidate tokens per beam (paper: 100)."),
    lambda_lm: float = typer.Option(0.5, "--lambda-lm", help="ALICE: weight of the LM term (paper: 0.5)."),
    lambda_clf: float = typer.Option(0.5, "--lambda-clf", help="ALICE: weight of the classifier term (paper: 0.5)."),
    classifier_top_n: Optional[int] = typer.Option(
        None, "--classifier-top-n", help="ALICE: score the classifier on each beam's best N candidates only."),
    no_repeat_ngram: int = typer.Option(3, "--no-repeat-ngram", help="ALICE: ban repeated n-grams (0 = off)."),
    alice_mode: str = typer.Option("auto", "--alice-mode",
                                   help="ALICE: auto (from the prompt label), false-negatives or false-positives."),
    resume: bool = typer.Option(False, "--resume", help="Continue a killed run in --out."),
    summary: bool = typer.Option(True, "--summary/--no-summary", help="Print a per-group summary at the end."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Generate ToxiGen-style statements for groups × labels into a sharded, resumable dataset."""
    from toxiforge.decoding import AliceConfig, AliceDecoder, TopKConfig, TopKDecoder
    from toxiforge.errors import InputError
    from toxiforge.groups import TOXIGEN_GROUP_NAMES
    from toxiforge.pipeline import GenerationPlan, JobConfig, check_output_dir, run_generation

    if demonstrations and prompts:
        raise InputError("--demonstrations and --prompts were both given", hint="use one prompt source")
    method = method.strip().lower()
    if method not in ("top-k", "alice"):
        raise InputError(f"unknown --method {method!r}", hint="use top-k or alice")
    if method == "alice" and classifier is None:
        raise InputError("--method alice needs --classifier",
                         hint="name the classifier to attack, e.g. --classifier profanity-check (works offline)")
    group_names = list(TOXIGEN_GROUP_NAMES) if groups.strip().lower() == "all" else _split(groups)
    source = prompts or demonstrations
    label_names = _split(labels) if labels else (["toxic", "benign"] if source else ["benign"])
    plan = GenerationPlan.grid(group_names, label_names, per_cell, source=source,
                               prompt_source="prompts" if prompts else "demonstrations", k=k, seed=seed)
    if method == "alice":
        alice = AliceConfig(lambda_lm=lambda_lm, lambda_clf=lambda_clf, num_beams=beams, candidates=candidates,
                            temperature=temperature, max_new_tokens=max_new_tokens, classifier_top_n=classifier_top_n,
                            no_repeat_ngram_size=no_repeat_ngram, mode=alice_mode)  # type: ignore[arg-type]
    else:
        topk = TopKConfig(top_k=top_k, temperature=temperature, max_new_tokens=max_new_tokens)
    job = JobConfig(batch_size=batch_size, shard_size=shard_size, format=fmt)
    plan.expand()  # validate the prompt source before loading the models
    check_output_dir(out, resume)
    clf = None
    if classifier is not None:
        from toxiforge.classifiers import load_classifier

        clf = load_classifier(classifier, device=device)
    decoder = AliceDecoder(clf, alice) if method == "alice" else TopKDecoder(topk)
    lm = _load_lm(model, dtype, device)
    result = run_generation(plan, lm, out, decoder=decoder, config=job, resume=resume, progress=progress,
                            classifier=clf)
    counts = result.manifest["counts"]
    console.print(f"wrote {result.rows_written} rows in {result.seconds:.1f} s "
                  f"({counts['rows']} in the dataset, {counts['parse_errors']} flagged) to {out}")
    if counts["scored"]:
        console.print(f"{clf.name} fooled on {counts['fooled']}/{counts['scored']} statements "
                      f"({counts['fooled'] / counts['scored']:.1%})")
    if summary:
        _print_summary([out])


def _load_lm(model: str, dtype: str, device: str):
    import time

    from toxiforge.models import load_language_model

    started = time.perf_counter()
    with console.status(f"loading {model}"):
        lm = load_language_model(model, dtype=dtype, device=device)
    console.print(f"loaded {model} ({lm.describe()['dtype']}, {lm.device}) in {time.perf_counter() - started:.1f} s")
    return lm


def _print_summary(data: list[Path], examples: int = 2) -> None:
    from toxiforge.analysis.summary import render_summary, summarize
    from toxiforge.records import read_rows

    rows = [row for path in data for row in read_rows(path)]
    render_summary(summarize(rows, examples=examples), console=console)


@app.command("summary")
def summary_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (combined)."),
    examples: int = typer.Option(2, "--examples", help="Examples shown per group."),
) -> None:
    """Per group × label × method: count, mean length, flagged rows, classifier fool rate, examples."""
    _print_summary(data, examples)


# --- classifiers -----------------------------------------------------------------------------------------------


@app.command("classify")
def classify(
    data: Path = typer.Argument(..., help="A dataset file (.parquet/.jsonl/.csv) or a generation output directory."),
    classifier: str = typer.Option(
        ..., "--classifier", "-c", help="toxigen-roberta, toxigen-hatebert, toxdect-roberta, profanity-check "
                                        "(offline), a model directory or a hub id (owner/name)."),
    column: Optional[str] = typer.Option(
        None, "--column", help="Score column to add (default: roberta_prediction for toxigen-roberta, else "
                               "<classifier>_score). An existing column of that name is replaced."),
    text_column: Optional[str] = typer.Option(None, "--text-column", help="Text to score (default: generation, "
                                                                          "else text)."),
    output: Optional[Path] = typer.Option(
        None, "-o", "--output", help="Output file; its suffix picks the format (default: DATA.scored.<ext>, or "
                                     "DIR/scored.parquet for a generation directory)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output file."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Texts per classifier batch "
                                                                        "(default: the backend's)."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (transformers classifiers)."),
    dtype: str = typer.Option("auto", "--dtype", help="auto (float32), float32 or bfloat16."),
    toxic_index: Optional[int] = typer.Option(None, "--toxic-index", help="Column of the toxic class (default: "
                                                                          "from the model's labels)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Add a P(toxic) column from a classifier to every row of DATA and write the result."""
    import time

    from toxiforge.classifiers import default_score_column, load_classifier
    from toxiforge.classifiers.scoring import default_output_path, pick_text_column, score_table, write_table
    from toxiforge.errors import InputError
    from toxiforge.records import read_table

    out = output if output is not None else default_output_path(data)
    if out.exists() and not overwrite:
        raise InputError("output file exists", path=out, hint="pass --overwrite, or choose another -o")
    table = read_table(data)
    text = pick_text_column(table.column_names, text_column, path=data)  # fail before loading a model
    score_column = column or default_score_column(classifier)
    started = time.perf_counter()
    with console.status(f"loading {classifier}"):
        clf = load_classifier(classifier, device=device, dtype=dtype, batch_size=batch_size,
                              toxic_index=toxic_index)
    console.print(f"loaded {clf.name} in {time.perf_counter() - started:.1f} s", highlight=False)
    started = time.perf_counter()
    if progress and table.num_rows >= 1000 and console.is_terminal:
        from rich.progress import Progress

        with Progress(console=console, transient=True) as bar:
            task = bar.add_task(f"scoring with {clf.name}", total=table.num_rows)
            scored, summary = score_table(table, clf, score_column=score_column, text_column=text, path=data,
                                          on_progress=lambda n: bar.advance(task, n))
    else:
        scored, summary = score_table(table, clf, score_column=score_column, text_column=text, path=data)
    write_table(scored, out)
    if summary.replaced:
        console.print(f"note: replaced {summary.replaced} existing values of column {score_column!r}",
                      highlight=False)
    console.print(f"{summary.line()}; {time.perf_counter() - started:.1f} s; wrote {out}", highlight=False,
                  soft_wrap=True)


# --- analysis (stats, split, perplexity, mentions, report) -----------------------------------------------------


def _analysis_progress(enabled: bool):
    """A transient rich progress bar (disabled off a terminal or with --no-progress)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, transient=True, disable=not (enabled and console.is_terminal))


def _lexicon_options(profanity_list: Optional[Path], exclude_list: Optional[Path], keep_ambiguous: bool):
    from toxiforge.analysis.implicit import load_lexicon

    return load_lexicon(profanity_list, ambiguous=not keep_ambiguous, exclude=exclude_list or ())


_PROFANITY_HELP = "Profanity list file, one entry per line (default: better-profanity's word list)."
_EXCLUDE_HELP = "File of lexicon entries to ignore (one per line), on top of the ambiguous terms."
_AMBIGUOUS_HELP = "Keep the ambiguous entries (e.g. 'bloody') that are dropped by default, as the paper did."


@app.command("stats")
def stats_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (toxiforge or "
                                                "ToxiGen; read as one)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the statistics as JSON to this file."),
    markdown_out: Optional[Path] = typer.Option(None, "--markdown", help="Also write the Markdown to this file."),
    profanity_list: Optional[Path] = typer.Option(None, "--profanity-list", help=_PROFANITY_HELP),
    exclude_list: Optional[Path] = typer.Option(None, "--exclude-list", help=_EXCLUDE_HELP),
    keep_ambiguous: bool = typer.Option(False, "--keep-ambiguous", help=_AMBIGUOUS_HELP),
) -> None:
    """Table 1/2 statistics (count, characters, % implicit per group × label; % hate class) and duplicates."""
    from toxiforge.analysis.stats import compute_stats, write_stats

    stats = compute_stats(data, lexicon=_lexicon_options(profanity_list, exclude_list, keep_ambiguous))
    console.print(stats.to_markdown(), markup=False, highlight=False, soft_wrap=True)
    for path in write_stats(stats, markdown=markdown_out, json_path=json_out):
        console.print(f"wrote {path}", highlight=False)


@app.command("split")
def split_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (read as one)."),
    test_size: int = typer.Option(..., "--test-size", help="Rows in the test set (before --on-conflict move)."),
    threshold: float = typer.Option(0.7, "--threshold", help="No train row may have cosine > this with a test row."),
    seed: int = typer.Option(0, "--seed", help="Seed of the test-set draw."),
    model: str = typer.Option("all-minilm-l6-v2", "--model", help="Sentence encoder: the embedded "
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
) -> None:
    """Stratified test set; no training statement with cosine > --threshold to a test statement (§4.2)."""
    from toxiforge.analysis.dataset import load_data
    from toxiforge.analysis.split import check_output_dir, check_threshold, similarity_split, write_split
    from toxiforge.errors import InputError

    check_threshold(threshold)
    check_output_dir(out, overwrite)
    if fmt not in ("parquet", "jsonl", "csv"):
        raise InputError(f"unknown --format {fmt!r}", hint="use parquet, jsonl or csv")
    d = load_data(data, need=())
    with _analysis_progress(progress) as bar:
        embed_task = bar.add_task(f"embedding with {model}", total=len(d))
        split_task = bar.add_task("comparing with the test set", total=None)
        result, d = similarity_split(d, test_size, threshold=threshold, seed=seed, model=model, device=device,
                                     batch_size=batch_size, allocation=allocation,  # type: ignore[arg-type]
                                     on_conflict=on_conflict,  # type: ignore[arg-type]
                                     on_embed_progress=lambda n: bar.advance(embed_task, n),
                                     on_split_progress=lambda n: bar.advance(split_task, n))
    written = write_split(result, d, out, fmt=fmt, overwrite=overwrite)
    console.print(result.line(), highlight=False, soft_wrap=True)
    console.print(f"embeddings: {len(d):,} statements in {result.embed_seconds:.1f} s ({result.encoder}, loaded in "
                  f"{result.load_seconds:.1f} s); split "
                  f"{result.split_seconds:.1f} s; wrote " + ", ".join(p.name for p in written.values())
                  + f" to {out}", highlight=False, soft_wrap=True)


@app.command("perplexity")
def perplexity_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (read as one)."),
    lm: str = typer.Option("smollm2-135m", "--lm", help="Reference LM: embedded name, hub id (gpt2, as the paper), "
                                                         "model dir or .gguf file."),
    max_ppl: float = typer.Option(500.0, "--max-ppl", help="Drop statements above this perplexity from the table."),
    batch_size: int = typer.Option(16, "--batch-size", help="Statements per forward pass."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32 or bfloat16."),
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="Write the rows with a perplexity column."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Write the table as JSON to this file."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Per-statement perplexity under a reference LM; mean per group × method (ToxiGen Appendix C)."""
    from toxiforge._io import atomic_write_text
    from toxiforge.analysis.dataset import load_data
    from toxiforge.analysis.perplexity import dataset_perplexity, write_scores
    from toxiforge.errors import InputError

    if not max_ppl > 0:
        raise InputError(f"--max-ppl {max_ppl} must be > 0", hint="e.g. --max-ppl 500")
    d = load_data(data, need=())
    model = _load_lm(lm, dtype, device)
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


@app.command("mentions")
def mentions_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (read as one)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the numbers as JSON to this file."),
) -> None:
    """Share of statements naming their target group per group × method (Table 6), and other groups named."""
    from toxiforge._io import atomic_write_text
    from toxiforge.analysis.mentions import mention_stats

    result = mention_stats(data)
    console.print(result.to_markdown(), markup=False, highlight=False, soft_wrap=True)
    if json_out is not None:
        console.print(f"wrote {atomic_write_text(json_out, result.to_json() + chr(10))}", highlight=False)


@app.command("report")
def report_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (read as one)."),
    out: Path = typer.Option(..., "-o", "--out", help="Directory for report.html and report.json."),
    lm: str = typer.Option("smollm2-135m", "--lm", help="Reference LM for perplexity."),
    perplexity: bool = typer.Option(True, "--perplexity/--no-perplexity", help="Compute perplexity (slowest step)."),
    max_ppl: float = typer.Option(500.0, "--max-ppl", help="Drop statements above this perplexity."),
    batch_size: int = typer.Option(16, "--batch-size", help="Statements per LM forward pass."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32 or bfloat16."),
    profanity_list: Optional[Path] = typer.Option(None, "--profanity-list", help=_PROFANITY_HELP),
    exclude_list: Optional[Path] = typer.Option(None, "--exclude-list", help=_EXCLUDE_HELP),
    keep_ambiguous: bool = typer.Option(False, "--keep-ambiguous", help=_AMBIGUOUS_HELP),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
) -> None:
    """One offline HTML page: statistics, mentions and perplexity tables with plots."""
    from toxiforge.analysis.dataset import load_data
    from toxiforge.analysis.report import build_report
    from toxiforge.errors import InputError

    if perplexity and not max_ppl > 0:
        raise InputError(f"--max-ppl {max_ppl} must be > 0", hint="e.g. --max-ppl 500")
    lexicon = _lexicon_options(profanity_list, exclude_list, keep_ambiguous)
    d = load_data(data)  # bad input fails before the LM loads
    model = _load_lm(lm, dtype, device) if perplexity else None
    report = build_report(d, out, lm=model, max_ppl=max_ppl, batch_size=batch_size, lexicon=lexicon,
                          progress=progress and console.is_terminal, console=console)
    console.print(report.stats.table1().markdown(), markup=False, highlight=False, soft_wrap=True)
    if report.perplexity is not None:
        console.print(report.perplexity.line(), highlight=False)
    console.print(f"wrote {report.html_path} and {report.json_path}", highlight=False)


# --- training and evaluation -----------------------------------------------------------------------------------


experiment_app = typer.Typer(help="The paper's experiments as commands (Table 4 / Table 7).", no_args_is_help=True)
app.add_typer(experiment_app, name="experiment")


def _specs(values: list[str]) -> list[str]:
    """Dataset specs from repeated options, each possibly comma-separated."""
    return [v for value in values for v in _split(value)]


def _train_config(base_model: str, tokenizer: Optional[str], epochs: float, max_steps: int, batch_size: int,
                  learning_rate: float, max_length: int, seed: int, eval_fraction: float,
                  early_stopping: Optional[int], device: str, bf16: bool):
    from toxiforge.training.trainer import TrainConfig

    return TrainConfig(base_model=base_model, tokenizer=tokenizer, epochs=epochs, max_steps=max_steps,
                       batch_size=batch_size, learning_rate=learning_rate, max_length=max_length, seed=seed,
                       eval_fraction=eval_fraction, early_stopping=early_stopping, device=device, bf16=bf16)


_BASE_MODEL_HELP = ("Encoder to fine-tune: all-minilm-l6-v2 (embedded, offline), hatebert, toxdect-roberta, a model "
                    "directory or a hub id.")
_DATA_HELP = ("Dataset spec [NAME=][KIND:]PATH or KIND:hub; KIND is toxigen-annotated (humanval), toxigen-train, "
              "toxiforge, sbf, ihc, dynahate or table; without KIND the layout is told from the columns. Repeat "
              "the option or separate with commas.")


@app.command("train")
def train_command(
    data: list[str] = typer.Option(..., "--data", help="Training data: " + _DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output model directory."),
    base_model: str = typer.Option("all-minilm-l6-v2", "--base-model", help=_BASE_MODEL_HELP),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="Tokenizer (default: the base model's)."),
    subset: str = typer.Option("all", "--subset", help="all, alice, top-k (downsampled to the ALICE size) or "
                                                       "both (ALICE + that top-k sample)."),
    label_column: Optional[str] = typer.Option(None, "--label-column",
                                               help="Label column (default: prompt_label, the proxy label)."),
    text_column: Optional[str] = typer.Option(None, "--text-column", help="Text column of plain tables."),
    eval_data: Optional[list[str]] = typer.Option(None, "--eval", help="Evaluated after each epoch (default: "
                                                                       "--eval-fraction of the training data)."),
    eval_fraction: float = typer.Option(0.1, "--eval-fraction", help="Share held out for evaluation when no --eval."),
    epochs: float = typer.Option(3.0, "--epochs"),
    max_steps: int = typer.Option(-1, "--max-steps", help="Stop after this many steps (-1: run all epochs)."),
    batch_size: int = typer.Option(32, "--batch-size", help="Per-device batch size."),
    learning_rate: float = typer.Option(2e-5, "--learning-rate", "--lr"),
    max_length: int = typer.Option(128, "--max-length", help="Truncate texts to this many tokens."),
    seed: int = typer.Option(0, "--seed"),
    early_stopping: Optional[int] = typer.Option(None, "--early-stopping",
                                                 help="Stop after N epochs without a better eval AUC."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (multi-GPU: run under torchrun)."),
    bf16: bool = typer.Option(False, "--bf16", help="bfloat16 mixed precision (GPU)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Fine-tune an encoder for binary toxicity on ToxiGen/toxiforge data (Trainer; torchrun/accelerate ready)."""
    from rich.table import Table

    from toxiforge.data import load_specs
    from toxiforge.training.subsets import normalize_subset, select_subset
    from toxiforge.training.trainer import _check_output_dir, train_classifier

    subset = normalize_subset(subset)
    _check_output_dir(out, overwrite)
    datasets = load_specs(_specs(data), label_column=label_column, text_column=text_column)
    rows = select_subset([e for d in datasets for e in d.examples], subset, seed=seed)
    held = [e for d in load_specs(_specs(eval_data), text_column=text_column) for e in d.examples] \
        if eval_data else None
    config = _train_config(base_model, tokenizer, epochs, max_steps, batch_size, learning_rate, max_length, seed,
                           eval_fraction, early_stopping, device, bf16)
    toxic = sum(e.label for e in rows)
    console.print(f"training {base_model} on {len(rows)} rows ({toxic} toxic, {len(rows) - toxic} benign; "
                  f"subset {subset})", highlight=False, soft_wrap=True)
    result = train_classifier(rows, out, config, eval_examples=held, progress=progress, overwrite=overwrite,
                              console=err_console, data_sources=[d.source for d in datasets])
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


def _print_evaluation(report, title: str) -> None:
    from rich.table import Table

    table = Table(title=title)
    for col, justify in (("dataset", "left"), ("slice", "left"), ("n", "right"), ("toxic", "right"),
                         ("ROC AUC", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for r in report.results:
        table.add_row(r.data.name, "all", str(r.auc.n), str(r.auc.toxic), r.auc.cell(3))
        for kind, slices in (("method", r.by_method), ("group", r.by_group)):
            for key, auc in slices.items():
                table.add_row("", f"{kind}: {key}", str(auc.n), str(auc.toxic), auc.cell(3))
    console.print(table)
    for label, reason in report.undefined():
        console.print(f"[yellow]note:[/] {label}: AUC {reason}", highlight=False, soft_wrap=True)


@app.command("evaluate")
def evaluate_command(
    classifier: str = typer.Option(..., "--classifier", "-c", help="Registry name (toxigen-roberta, "
                                   "profanity-check, ...), a model directory (e.g. from toxiforge train) or hub id."),
    on: list[str] = typer.Option(..., "--on", help="Evaluation data: " + _DATA_HELP),
    out: Path = typer.Option(Path("evaluation"), "-o", "--out", help="Report folder (evaluation.json, "
                                                                     "evaluation.md, roc.png; replaced)."),
    label_rule: str = typer.Option("sum", "--label-rule", help="ToxiGen annotated labels: sum "
                                   "(toxicity_ai + toxicity_human > 5.5, upstream) or max (max > 3, the paper)."),
    text_column: Optional[str] = typer.Option(None, "--text-column", help="Text column of plain tables."),
    label_column: Optional[str] = typer.Option(None, "--label-column", help="Label column of plain tables."),
    split: Optional[str] = typer.Option(None, "--split", help="Split for hub sources and DynaHate (default test)."),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Texts per classifier batch."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
) -> None:
    """ROC AUC of a classifier per dataset, per group and per generation method (Table 7); JSON, Markdown, PNG."""
    from toxiforge.classifiers import load_classifier
    from toxiforge.data import load_specs
    from toxiforge.training.evaluate import evaluate, write_report

    datasets = load_specs(_specs(on), label_rule=label_rule, text_column=text_column, label_column=label_column,
                          split=split)
    with console.status(f"loading {classifier}"):
        clf = load_classifier(classifier, device=device, batch_size=batch_size)
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
    base_model: str = typer.Option("all-minilm-l6-v2", "--base-model", help=_BASE_MODEL_HELP),
    tokenizer: Optional[str] = typer.Option(None, "--tokenizer", help="Tokenizer (default: the base model's)."),
    zero_shot: Optional[str] = typer.Option(None, "--zero-shot", help="Classifier for the 'None' column (default: "
                                            "the base model if it already is a classifier)."),
    label_column: Optional[str] = typer.Option(None, "--label-column", help="Training label (default prompt_label)."),
    label_rule: str = typer.Option("sum", "--label-rule", help="ToxiGen annotated labels: sum or max."),
    eval_fraction: float = typer.Option(0.1, "--eval-fraction", help="Share of each variant held out per epoch."),
    epochs: float = typer.Option(3.0, "--epochs"),
    max_steps: int = typer.Option(-1, "--max-steps"),
    batch_size: int = typer.Option(32, "--batch-size"),
    learning_rate: float = typer.Option(2e-5, "--learning-rate", "--lr"),
    max_length: int = typer.Option(128, "--max-length"),
    seed: int = typer.Option(0, "--seed"),
    early_stopping: Optional[int] = typer.Option(None, "--early-stopping"),
    device: str = typer.Option("auto", "--device"),
    bf16: bool = typer.Option(False, "--bf16"),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o."),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """Zero-shot plus fine-tuned on ALICE, top-k and ALICE + top-k, each on every eval set (paper Tables 4, 7)."""
    import time

    from toxiforge.data import load_specs
    from toxiforge.training.experiment import run_table4

    started = time.perf_counter()
    train_sets = load_specs(_specs(train), label_column=label_column)
    eval_sets = load_specs(_specs(eval_data), label_rule=label_rule)
    config = _train_config(base_model, tokenizer, epochs, max_steps, batch_size, learning_rate, max_length, seed,
                           eval_fraction, early_stopping, device, bf16)
    table = run_table4(train_sets, eval_sets, out, config, zero_shot=zero_shot, progress=progress,
                       overwrite=overwrite, console=err_console, device=device,
                       on_stage=lambda msg: console.print(f"[bold]>[/] {msg}", highlight=False))
    console.print(table.markdown(), markup=False, highlight=False, soft_wrap=True)
    console.print(f"wrote {out / 'table4.md'} and {out / 'table4.json'} in {time.perf_counter() - started:.1f} s",
                  highlight=False, soft_wrap=True)


# --- annotation ------------------------------------------------------------------------------------------------

annotate_app = typer.Typer(help="Human validation: the ToxiGen annotation study as a web app.", no_args_is_help=True)
annotate_study_app = typer.Typer(help="Create annotation studies.", no_args_is_help=True)
annotate_app.add_typer(annotate_study_app, name="study")
app.add_typer(annotate_app, name="annotate")
DB_OPTION = typer.Option("annotation.db", "--db", help="SQLite file path or database URL (postgresql://...)")


@annotate_app.command("serve")
def annotate_serve(db: str = DB_OPTION, host: str = typer.Option("127.0.0.1", "--host"),
                   port: int = typer.Option(8000, "--port")) -> None:
    """Run the annotation web app (annotator links /a/TOKEN, admin link /admin/login/TOKEN)."""
    from toxiforge.annotation.app import serve

    serve(db, host=host, port=port)


@annotate_study_app.command("create")
def annotate_study_create(
    data: Path = typer.Argument(..., help="toxiforge dataset (file or generation directory) or ToxiGen file"),
    db: str = DB_OPTION,
    name: Optional[str] = typer.Option(None, "--name", help="study name (default: the dataset's name)"),
    per_item: int = typer.Option(3, "--per-item", help="annotators per statement"),
    sample: Optional[int] = typer.Option(None, "--sample", help="number of statements (default: all)"),
    stratify: str = typer.Option("", "--stratify", help="comma-separated subset of group,label,method"),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Create a study from a dataset; prints the study id and its admin token (shown once)."""
    from toxiforge.annotation.sampling import items_from_table, stratified_sample
    from toxiforge.annotation.store import Store

    strata = tuple(s.strip() for s in stratify.split(",") if s.strip())
    items = stratified_sample(items_from_table(data), sample, stratify=strata, seed=seed)
    store = Store(db)
    study, admin_token = store.create_study(name or data.stem, items, per_item=per_item, source=str(data))
    console.print(f"study {study.id} ({study.name}): {len(items)} statements x {per_item} annotators", highlight=False)
    console.print(f"admin link (keep it private, shown once): /admin/login/{admin_token}", highlight=False,
                  soft_wrap=True)


@annotate_app.command("invite")
def annotate_invite(study: str = typer.Option(..., "--study", help="study id or name"), db: str = DB_OPTION,
                    n: int = typer.Option(1, "-n", help="number of annotators"),
                    base_url: str = typer.Option("http://127.0.0.1:8000", "--base-url")) -> None:
    """Create annotators and print one private link per annotator."""
    from toxiforge.annotation.store import Store

    store = Store(db)
    for token in store.invite(store.study(study).id, n):
        console.print(f"{base_url.rstrip('/')}/a/{token}", highlight=False, soft_wrap=True)


@annotate_app.command("agreement")
def annotate_agreement(study: str = typer.Option(..., "--study", help="study id or name"), db: str = DB_OPTION,
                       as_json: bool = typer.Option(False, "--json")) -> None:
    """Fleiss' kappa, Krippendorff's alpha and the paper's agreement percentages."""
    import json

    from toxiforge.annotation.agreement import study_agreement
    from toxiforge.annotation.store import Store

    store = Store(db)
    stats = study_agreement(store, store.study(study).id)
    text = json.dumps(stats.to_dict(), indent=2) if as_json else "\n".join(stats.lines())
    console.print(text, markup=False, highlight=False, soft_wrap=True)


@annotate_app.command("export")
def annotate_export(study: str = typer.Option(..., "--study", help="study id or name"), db: str = DB_OPTION,
                    fmt: str = typer.Option("annotated", "--format", help="annotated or annotations"),
                    out: Path = typer.Option(..., "-o", "--output", help=".csv, .jsonl or .parquet")) -> None:
    """Write the study in ToxiGen's annotated (per item) or annotations (per response) layout."""
    from toxiforge.annotation.export import export_study
    from toxiforge.annotation.store import Store

    store = Store(db)
    path, n = export_study(store, store.study(study).id, out, fmt)
    console.print(f"wrote {n} rows to {path}", highlight=False, soft_wrap=True)


def main() -> None:
    try:
        app()
    except ToxiforgeError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
