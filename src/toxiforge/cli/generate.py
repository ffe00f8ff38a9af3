"""Commands: demonstrations, prompts, groups, generate, summary."""

from __future__ import annotations

from pathlib import Path

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import App, console, group_names, load_lm, split_list
from toxiforge.models.embedded import DEFAULT_LM

demonstrations_app = App(help="Demonstration sets: fetch upstream's, inspect.", no_args_is_help=True)
prompts_app = App(help="ToxiGen-style prompts from demonstrations.", no_args_is_help=True)


# --- demonstrations and prompts -------------------------------------------------------------------------------


@demonstrations_app.command("fetch")
def demonstrations_fetch(
    dest: Path = typer.Option(..., "--dest", help="New or empty folder to write demonstrations/ and prompts/ to."),
    commit: str | None = typer.Option(None, "--commit", help="Upstream commit (default: the pinned one)."),
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
    source: Path | None = typer.Argument(None, help="Checkout, demonstrations/ or prompts/ folder, file or "
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
    demonstrations: Path | None = typer.Option(
        None, "--demonstrations", "-d",
        help="Checkout, demonstrations/ or prompts/ folder, file or table (default: the shipped benign sets)."),
    groups: str = typer.Option(..., "--groups", help="Comma-separated target groups (names or aliases, e.g. "
                                                     "'middle eastern'); 'all' = ToxiGen's 13."),
    labels: str = typer.Option(..., "--labels", help="Comma-separated: toxic (hate), benign (neutral)."),
    n: int = typer.Option(1000, "-n", "--per-cell", help="Prompts per group × label (generate --prompts makes one "
                                                         "statement from each)."),
    k: int = typer.Option(5, "-k", help="Demonstrations per prompt (distinct within a prompt)."),
    seed: int = typer.Option(0, "--seed", help="Random seed; the same seed gives the same prompts."),
    output: Path = typer.Option(..., "-o", "--out", help="Prompt file to write (upstream's format), or an "
                                                            "existing folder: writes FOLDER/{hate,neutral}_GROUP_1k.txt"
                                                            ", the name generate --prompts FOLDER reads."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output file."),
) -> None:
    """Build N prompts of K demonstrations per group × label, written one per line like upstream's."""
    from toxiforge.demonstrations.prompts import build_prompts, label_name, write_prompt_file
    from toxiforge.demonstrations.sets import get_set, load_demonstrations, load_shipped_benign
    from toxiforge.errors import InputError
    from toxiforge.groups import TOXIGEN_GROUP_NAMES

    if n < 1:
        raise InputError(f"-n {n} builds no prompts", hint="use -n 1 or more")
    sets = load_shipped_benign() if demonstrations is None else load_demonstrations(demonstrations)
    group_names = list(TOXIGEN_GROUP_NAMES) if groups.strip().lower() == "all" else split_list(groups)
    cells = [get_set(sets, group, label) for group in group_names for label in split_list(labels)]
    if not cells:
        raise InputError("no group or no label given", hint="e.g. --groups asian --labels benign")
    if len(cells) > 1 and not output.is_dir():
        raise InputError(f"{len(cells)} group × label cells need one prompt file each", path=output,
                         hint="give -o an existing folder (one FOLDER/{hate,neutral}_GROUP_1k.txt per cell), or "
                              "one group and one label")
    for demo_set in cells:
        prompts = build_prompts(demo_set, n, k=k, seed=seed)
        path = output / f"{'hate' if demo_set.label else 'neutral'}_{demo_set.group}_1k.txt" if output.is_dir() \
            else output  # a folder: the name `generate --prompts FOLDER` looks for
        write_prompt_file(prompts, path, overwrite=overwrite)
        console.print(f"[green]Wrote[/] {len(prompts)} {label_name(demo_set.label)} prompts for {demo_set.group} "
                      f"(k={k}, seed={seed}, from {len(demo_set)} demonstrations) to {path}", highlight=False)
    source = output if len(cells) > 1 else path
    console.print(f"generate from them: toxiforge generate -o runs/{source.stem} --prompts {source} --groups "
                  f"{','.join(dict.fromkeys(s.group for s in cells))} --labels "
                  f"{','.join(dict.fromkeys(label_name(s.label) for s in cells))} -n {n}", highlight=False,
                  soft_wrap=True)


# --- generation ------------------------------------------------------------------------------------------------


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


def generate(
    out: Path = typer.Option(..., "-o", "--out", help="Output directory (shards + manifest.json)."),
    groups: str = typer.Option("all", "--groups", help="Comma-separated groups or aliases; 'all' = ToxiGen's 13."),
    labels: str | None = typer.Option(
        None, "--labels", help="Comma-separated: toxic,benign. Default: both with --demonstrations/--prompts, "
                               "benign with the shipped sets."),
    per_cell: int = typer.Option(10, "-n", "--per-cell", help="Statements per group × label."),
    demonstrations: str | None = typer.Option(
        None, "--demonstrations", "-d", help="Demonstrations (upstream checkout, folder, file or table). "
                                             "Default: toxiforge's shipped benign sets."),
    prompts: str | None = typer.Option(None, "--prompts", help="Upstream prompt file(s) to use line by line."),
    k: int = typer.Option(5, "-k", help="Demonstrations per prompt (paper: 5)."),
    seed: int = typer.Option(0, "--seed", help="Seed for prompts and sampling."),
    method: str = typer.Option("top-k", "--method", help="Decoding method: top-k or alice."),
    classifier: str | None = typer.Option(
        None, "--classifier", "-c", help="Toxicity classifier: ALICE attacks it; with top-k it only scores rows. "
                                         "Registry name (profanity-check, toxigen-roberta, ...), dir or hub id."),
    judge_template: str | None = opt.JUDGE_TEMPLATE,
    judge_policy: str | None = opt.JUDGE_POLICY,
    judge_concurrency: int | None = opt.JUDGE_CONCURRENCY,
    classifier_runtime: str | None = opt.CLASSIFIER_RUNTIME,
    toxic_label: str | None = opt.TOXIC_LABEL,
    model: str = typer.Option(
        DEFAULT_LM, "--model", help="Embedded name, hub id, model dir, .gguf file, or openai:BASE_URL[#MODEL] "
                                    "(an OpenAI-compatible server)."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32 or bfloat16."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    # Decoding settings: None = the method's default (its config holds the paper's values and checks them all).
    top_k: int | None = typer.Option(None, "--top-k", help="top-k: sample from the k most likely tokens (paper: 40)."),
    temperature: float | None = typer.Option(None, "--temperature", help="Temperature (paper: 0.9)."),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", help="Token budget per statement (paper: 30)."),
    batch_size: int = typer.Option(16, "--batch-size", help="Prompts decoded together."),
    shard_size: int = typer.Option(128, "--shard-size", help="Rows per shard file (the resume unit)."),
    fmt: str = typer.Option("parquet", "--format", help="parquet, jsonl or csv."),
    beams: int | None = opt.BEAMS,
    candidates: int | None = opt.CANDIDATES,
    lambda_lm: float | None = opt.LAMBDA_LM,
    lambda_clf: float | None = opt.LAMBDA_CLF,
    classifier_top_n: int | None = typer.Option(
        None, "--classifier-top-n", help="ALICE: score the classifier on each beam's best N candidates only."),
    classifier_top_extensions: int | None = opt.CLASSIFIER_TOP_EXTENSIONS,
    keep_label_with: str | None = opt.KEEP_LABEL_WITH,
    lambda_keep: float | None = opt.LAMBDA_KEEP,
    no_repeat_ngram: int | None = typer.Option(
        None, "--no-repeat-ngram", help="ALICE: ban repeating an n-gram of the generated tokens (default 3; 0 = off)."),
    alice_mode: str | None = typer.Option(
        None, "--alice-mode", help="ALICE: auto (from the prompt label, the default), false-negatives or "
                                   "false-positives."),
    num_return: int | None = typer.Option(
        None, "--num-return", help="ALICE: rows per prompt, the N best finished hypotheses (1..--beams; default 1). "
                                   "Column hypothesis_rank: 0 = best."),
    resume: bool = typer.Option(False, "--resume", help="Continue a killed run in --out."),
    summary: bool = typer.Option(True, "--summary/--no-summary", help="Print a per-group summary at the end."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    concurrency: int = opt.CONCURRENCY,
    api_key_env: str | None = opt.API_KEY_ENV,
    ray: bool = opt.RAY,
    ray_address: str | None = opt.RAY_ADDRESS,
    workers: int | None = opt.WORKERS,
    cpus_per_worker: float = opt.CPUS_PER_WORKER,
    gpus_per_worker: float = opt.GPUS_PER_WORKER,
    ray_resources: str | None = opt.RAY_RESOURCES,
    ray_spread: bool = opt.RAY_SPREAD,
    ray_placement_timeout: float = opt.RAY_PLACEMENT_TIMEOUT,
) -> None:
    """Generate ToxiGen-style statements for groups × labels into a sharded, resumable dataset."""
    from toxiforge.decoding import decoder_config
    from toxiforge.errors import InputError
    from toxiforge.models import API_PREFIX
    from toxiforge.pipeline import GenerationPlan, Generator, JobConfig

    if demonstrations and prompts:
        raise InputError("--demonstrations and --prompts were both given", hint="use one prompt source")
    opt.check_model_options(dtype, device)
    # the method's config checks every value (and refuses settings of another method) before a model loads
    decoding = decoder_config(method, {
        "temperature": temperature, "max_new_tokens": max_new_tokens, "top_k": top_k, "num_beams": beams,
        "candidates": candidates, "lambda_lm": lambda_lm, "lambda_clf": lambda_clf,
        "classifier_top_n": classifier_top_n, "classifier_top_extensions": classifier_top_extensions,
        "no_repeat_ngram_size": no_repeat_ngram, "mode": alice_mode, "num_return": num_return,
        "keep_label_with": keep_label_with, "lambda_keep": lambda_keep})
    if keep_label_with is not None:
        from toxiforge.attacks.validation import check_keeper

        check_keeper(keep_label_with, classifier)
    source = prompts or demonstrations
    prompt_source = "prompts" if prompts else "demonstrations"
    label_names = split_list(labels) if labels else (["toxic", "benign"] if source else ["benign"])
    plan = GenerationPlan.grid(group_names(groups, label_names, source, prompt_source), label_names, per_cell,
                               source=source, prompt_source=prompt_source, k=k, seed=seed)
    plan.expand()  # validate the prompt source before loading the models
    api = {"concurrency": concurrency, "api_key_env": api_key_env} if model.startswith(API_PREFIX) else {}
    alice = decoding.method == "alice"
    if api and alice:
        api["top_logprobs"] = decoding.candidates  # the server may allow fewer: capped below
    if api and batch_size < concurrency:
        batch_size = concurrency  # a batch's requests are the ones in flight
    ray_run = opt.ray_config(ray, ray_address, workers, cpus_per_worker, gpus_per_worker, ray_resources, ray_spread,
                             ray_placement_timeout)
    processes, threads = opt.local_workers(workers, model, device) if ray_run is None else (1, 1)
    generator = Generator(model=model, model_options=api or {"dtype": dtype, "device": device}, load=load_lm,
                          device=device, job=JobConfig(batch_size=batch_size, shard_size=shard_size, format=fmt),
                          ray=ray_run, workers=processes, threads=threads, progress=progress)
    generator.check(plan, decoding, out, resume)  # the output folder and a resume's plan, before a model loads
    if api:  # a server: cheap to open here, to check it
        lm = generator.language_model()
        fitted = generator.fit(decoding)
        if fitted != decoding:
            console.print(f"note: {lm.name} returns at most {fitted.candidates} log-probabilities per token, so "
                          f"ALICE ranks {fitted.candidates} candidates per beam (not {decoding.candidates})")
            decoding = fitted
        if not alice and not lm.honours_top_k:
            console.print(f"note: {lm.name} ({lm.owned_by or 'unknown server'}) may ignore top_k (vLLM and llama.cpp "
                          "apply it); check the server's documentation")
        if ray_run is not None:
            lm.close()  # each Ray worker opens its own client
    result = generator.run(plan, decoding, out, classifier=classifier,
                           classifier_options=opt.classifier_options(judge_template, judge_policy, toxic_label,
                                                                     judge_concurrency, classifier_runtime))
    clf_name = result.manifest["config"]["classifier"]
    counts = result.manifest["counts"]
    console.print(f"wrote {result.rows_written} rows in {result.seconds:.1f} s ({counts['rows']} in the dataset; "
                  f"{counts['parse_errors']} unparsed, kept with a parse_error) to {out}")
    if counts["scored"]:
        console.print(f"{clf_name} disagreed with the prompt label (label flip) on {counts['fooled']}/"
                      f"{counts['scored']} statements ({counts['fooled'] / counts['scored']:.1%})")
    if counts.get("kept_scored"):
        console.print(f"the keeper {keep_label_with} gives the prompt's label to {counts['kept']}/"
                      f"{counts['kept_scored']} statements; {counts['fooled_and_kept']} of them fooled "
                      f"{clf_name} (not validation: check them with a classifier the search never saw)",
                      highlight=False, soft_wrap=True)
    if summary:
        _print_summary([out])


def _print_summary(data: list[Path], examples: int = 2, score_column: str | None = None) -> None:
    from toxiforge.analysis.summary import attack_lines, load_summary_rows, render_summary, summarize

    rows, notes = load_summary_rows(data, score_column)
    render_summary(summarize(rows, examples=examples), console=console)
    for line in attack_lines(data):
        console.print(line, highlight=False, soft_wrap=True)
    for note in notes:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)


def summary_command(
    data: list[Path] = typer.Argument(..., help="Dataset files or generation output directories (combined)."),
    examples: int = typer.Option(2, "--examples", help="Examples shown per group."),
    human: Path | None = typer.Option(None, "--human", help="An annotated file (toxiforge or ToxiGen annotated / "
                                         "annotations): fool rates against its human labels, joined by text."),
    score_column: str | None = typer.Option(
        None, "--score-column", help="Classifier scores for the label flips (default: those made during generation, "
                                     "else a column added by `toxiforge classify`, e.g. roberta_prediction)."),
) -> None:
    """Per group × label × method: count, mean length, unparsed rows (parse_error), label flips (classifier vs
    prompt label), examples; with --human, the paper's fool rate (classifier vs human label) per method and prompt
    label."""
    _print_summary(data, examples, score_column)
    if human is not None:
        from toxiforge.analysis.human_validation import human_labels, human_validation, render_human_validation
        from toxiforge.records import read_rows

        results, unmatched = human_validation((r for p in data for r in read_rows(p)), human_labels(human))
        render_human_validation(results, unmatched, str(human), console=console)


def register(app: typer.Typer) -> None:
    """Add groups, generate and summary, then the demonstrations and prompts groups, to ``app``."""
    app.command("groups")(groups_list)
    app.command("generate")(generate)
    app.command("summary")(summary_command)
    app.add_typer(demonstrations_app, name="demonstrations")
    app.add_typer(prompts_app, name="prompts")
