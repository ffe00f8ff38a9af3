"""Commands: bench generate, bench classify, bench compare (benchmark an LM with ToxiGen)."""

from __future__ import annotations

from pathlib import Path

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import App, console, load_lm, split_list
from toxiforge.models.embedded import DEFAULT_LM

bench_app = App(help="Benchmark a language model with ToxiGen: % toxic continuations per group, and "
                             "HumanVal classification (lm-evaluation-harness's toxigen task).", no_args_is_help=True)


def register(app: typer.Typer) -> None:
    app.add_typer(bench_app, name="bench")


class _progress_bar:
    """A rich bar counting ``unit`` with a rate (a no-op when disabled); the context value is ``advance(n)``."""

    def __init__(self, enabled: bool, title: str, total: int, unit: str):
        self.enabled, self.title, self.total, self.unit = enabled, title, total, unit

    def __enter__(self):
        if not self.enabled:
            return lambda n: None
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(TextColumn(f"[bold]{self.title}"), BarColumn(), MofNCompleteColumn(),
                             TextColumn(self.unit),
                             TimeElapsedColumn(), console=console, transient=True)
        self._bar.start()
        task = self._bar.add_task(self.title, total=self.total)
        return lambda n: self._bar.advance(task, n)

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self._bar.stop()


@bench_app.command("classify")
def bench_classify(
    out: Path = typer.Option(..., "-o", "--out", help="New or empty folder for results.json, results.md and "
                                                      "items.parquet."),
    model: str = typer.Option(DEFAULT_LM, "--model", "-m", help="Embedded name, hub id, model dir or .gguf."),
    on: str | None = typer.Option(None, "--on", help="Data spec, e.g. humanval:annotated_test.parquet, "
                                                        "humanval:hub, table:mine.csv (toxiforge evaluate's specs)."),
    demonstrations: Path | None = typer.Option(
        None, "--demonstrations", "-d", help="Instead of --on: demonstration files as a labelled table (hate = 1, "
                                             "neutral = 0; not HumanVal)."),
    groups: str | None = typer.Option(None, "--groups", help="With --demonstrations: only these groups."),
    text_column: str | None = typer.Option(None, "--text-column", help="Text column of a table."),
    label_column: str | None = typer.Option(None, "--label-column", help="0/1 label column of a table."),
    limit: int | None = typer.Option(None, "--limit", help="Score only the first N items."),
    batch_size: int = typer.Option(16, "--batch-size", help="Sequences per forward pass."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32, bfloat16 or float16."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the content of a non-empty -o."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Ask the LM "Is the following statement hateful?" for each item; acc, acc_norm and ROC AUC."""
    from toxiforge._io import require_empty_dir
    from toxiforge.bench.classify import demonstration_examples, run_classify
    from toxiforge.data import load_spec
    from toxiforge.errors import InputError

    if (on is None) == (demonstrations is None):
        raise InputError("give exactly one of --on and --demonstrations", hint="e.g. --on humanval:hub")
    if limit is not None and limit < 1:
        raise InputError(f"--limit {limit} scores nothing", hint="use --limit 1 or more")
    opt.check_model_options(dtype, device)
    require_empty_dir(out, overwrite)
    if on is not None:
        data = load_spec(on, text_column=text_column, label_column=label_column)
    else:
        assert demonstrations is not None  # exactly one of --on and --demonstrations (checked above)
        data = demonstration_examples(demonstrations, groups=split_list(groups) if groups else None)
    if limit is not None:
        data.examples = data.examples[:limit]
    lm = load_lm(model, dtype, device)
    with _progress_bar(progress, "classifying", len(data), "items") as advance:
        result = run_classify(lm, data, batch_size=batch_size, on_progress=advance)
    result.write(out)
    console.print(result.markdown(), highlight=False)
    console.print(f"[green]Wrote[/] {out}/results.json, results.md and items.parquet", highlight=False)


@bench_app.command("generate")
def bench_generate(
    out: Path = typer.Option(..., "-o", "--out", help="Output folder: the job's shards and manifest, "
                                                      "continuations.parquet, results.json/.md, a chart."),
    model: str = typer.Option(DEFAULT_LM, "--model", "-m", help="Embedded name, hub id, model dir, .gguf or "
                                                                 "openai:BASE_URL[#MODEL]."),
    prompts: Path | None = typer.Option(None, "--prompts", help="Upstream's prompts/ folder (hate_<group>_1k.txt)."),
    demonstrations: Path | None = typer.Option(
        None, "--demonstrations", "-d", help="Instead of --prompts: build prompts from hate demonstrations."),
    groups: str | None = typer.Option(None, "--groups", help="Comma-separated groups, or 'all' for every group "
                                                                "in the source (default: open-instruct's 14)."),
    per_group: int = typer.Option(500, "-n", "--per-group", help="Prompts per group, one continuation each: "
                                                                 "statements per group (open-instruct: 500)."),
    select: str = typer.Option("first", "--select", help="Which N lines of a prompt file: first, or random "
                                                         "(open-instruct's seeded shuffle)."),
    select_seed: int | None = typer.Option(None, "--select-seed", help="With --select random (default 42, "
                                                                       "open-instruct's)."),
    k: int = typer.Option(6, "-k", help="With --demonstrations: demonstrations per prompt."),
    chat: bool = typer.Option(False, "--chat", help="open-instruct's chat format: 'Complete the following: ' + "
                                                    "prompt as the user turn, no newline stop (chat models)."),
    sample: bool = typer.Option(False, "--sample/--greedy", help="Top-k sampling with --seed instead of greedy."),
    top_k: int = typer.Option(40, "--top-k", help="With --sample."),
    temperature: float = typer.Option(0.9, "--temperature", help="With --sample."),
    seed: int = typer.Option(0, "--seed", help="Sampling and prompt-building seed."),
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", help="Most tokens per continuation "
                                                                            "(default 512, open-instruct's)."),
    classifier: str = typer.Option("toxigen-roberta", "--classifier", "-c",
                                   help="Registry name, model dir or hub id; profanity-check works offline."),
    judge_template: str | None = opt.JUDGE_TEMPLATE,
    judge_policy: str | None = opt.JUDGE_POLICY,
    judge_concurrency: int | None = opt.JUDGE_CONCURRENCY,
    classifier_runtime: str | None = opt.CLASSIFIER_RUNTIME,
    toxic_label: str | None = opt.TOXIC_LABEL,
    batch_size: int = typer.Option(16, "--batch-size", help="Prompts decoded together."),
    concurrency: int = opt.CONCURRENCY,
    api_key_env: str | None = opt.API_KEY_ENV,
    resume: bool = typer.Option(False, "--resume", help="Continue an interrupted run in -o."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32, bfloat16 or float16."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
) -> None:
    """Continue ToxiGen hate prompts with the LM and report % toxic continuations per group."""
    from toxiforge.bench.generate import GenerateConfig, chat_formatter, run_generate
    from toxiforge.bench.report import generate_markdown
    from toxiforge.classifiers import load_classifier
    from toxiforge.models import API_PREFIX
    from toxiforge.pipeline import check_output_dir

    defaults = {name: value for name, value in (("select_seed", select_seed), ("max_new_tokens", max_new_tokens))
                if value is not None}  # else GenerateConfig's (open-instruct's)
    config = GenerateConfig(groups=tuple(split_list(groups)) if groups else None, per_group=per_group,
                            prompts=str(prompts) if prompts else None,
                            demonstrations=str(demonstrations) if demonstrations else None, k=k, select=select,
                            sample=sample, top_k=top_k, temperature=temperature, seed=seed, classifier=classifier,
                            chat=chat, **defaults)
    opt.check_model_options(dtype, device)
    config.plan()  # bad groups or sources fail before anything loads
    check_output_dir(out, resume)
    remote = model.startswith(API_PREFIX)
    chat_format = chat_formatter(model) if chat and not remote else None  # a server applies its own template
    scorer = load_classifier(classifier, device=device,
                             **opt.classifier_options(judge_template, judge_policy, toxic_label,
                                                      judge_concurrency, classifier_runtime))
    if remote:
        lm = load_lm(model, dtype, device, concurrency=concurrency, api_key_env=api_key_env)
        batch_size = max(batch_size, concurrency)  # a batch's requests are the ones in flight
    else:
        lm = load_lm(model, dtype, device)
    result = run_generate(lm, config, out, classifier=scorer, batch_size=batch_size, resume=resume,
                          progress=progress, chat_format=chat_format)
    console.print(generate_markdown(result), highlight=False)
    console.print(f"[green]Wrote[/] {out}/results.json, results.md, toxic_by_group.png, continuations.parquet",
                  highlight=False)


@bench_app.command("compare")
def bench_compare(
    runs: list[Path] = typer.Argument(..., help="Output folders of toxiforge bench runs (one mode)."),
) -> None:
    """Print several models' bench results side by side."""
    from toxiforge.bench.report import compare_results

    console.print(compare_results(runs), highlight=False)
