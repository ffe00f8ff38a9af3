"""Command: attack (make a classifier miss the labels of given statements; toxiforge.attacks)."""

from __future__ import annotations

from pathlib import Path

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import console, load_lm, split_list
from toxiforge.models.embedded import DEFAULT_ENCODER, DEFAULT_LM


def attack_command(
    on: list[str] = typer.Option(..., "--on", help="Statements to attack: any dataset spec (humanval:FILE, "
                                                   "hatecheck:FILE, demonstrations:DIR, table:FILE, ...) or a "
                                                   "generation run folder; repeat or separate with commas for "
                                                   "several."),
    family: list[str] = typer.Option(..., "--family", metavar="<str>", help="One family per run: obfuscate "
                                     "(character edits), substitute (word substitution) or alice (ALICE generation)."),
    classifier: list[str] = typer.Option(..., "--classifier", "-c", metavar="<str>", help="The attacked classifier "
                                         "(one per run): a model directory, registry name, hub id or judge:MODEL."),
    out: Path = typer.Option(..., "-o", "--out", help="Output directory (shards + manifest.json)."),
    labels: str | None = typer.Option(None, "--labels", help="Attack only statements of these labels "
                                                             "(toxic,benign). Default: all."),
    max_edits: int | None = typer.Option(None, "--max-edits", help="obfuscate: character edits per statement "
                                                                   "(default 5)."),
    ops: str | None = typer.Option(None, "--ops", help="obfuscate: edits tried, comma-separated (default all: swap,"
                                                       "delete,leet,space_insert,space_delete,homoglyph,zero_width)."),
    min_similarity: float | None = typer.Option(
        None, "--min-similarity", help="substitute: sentence-embedding cosine to the original every change keeps, "
                                       "in (0, 1] (default 0.85)."),
    max_changed: float | None = typer.Option(None, "--max-changed", help="substitute: largest share of words that "
                                                                         "may change, in (0, 1] (default 0.2)."),
    candidates: int | None = typer.Option(None, "--candidates", help="substitute: neighbours tried per word "
                                                                     "(default 10); alice: candidate tokens per "
                                                                     "beam (paper: 100)."),
    beams: int | None = opt.BEAMS,
    keep_label_with: str | None = opt.KEEP_LABEL_WITH,
    lambda_keep: float | None = opt.LAMBDA_KEEP,
    encoder: str = typer.Option(DEFAULT_ENCODER, "--encoder", help="substitute: sentence encoder (embedded "
                                                                   "MiniLM, a directory or hub id)."),
    model: str = typer.Option(DEFAULT_LM, "--model", help="alice: language model, as for generate."),
    validate_with: str | None = typer.Option(
        None, "--validate-with", help="A classifier other than -c (and than alice's --keep-label-with) that checks "
                                      "each attacked statement keeps its label (columns validator_score, "
                                      "validator_agrees), as harden's."),
    seed: int = typer.Option(0, "--seed", help="Seed of each statement's random choices (each row gets its own "
                             "from it): obfuscate's edit positions, alice's sampling; substitute draws nothing."),
    judge_template: str | None = opt.JUDGE_TEMPLATE,
    judge_policy: str | None = opt.JUDGE_POLICY,
    judge_concurrency: int | None = opt.JUDGE_CONCURRENCY,
    classifier_runtime: str | None = opt.CLASSIFIER_RUNTIME,
    toxic_label: str | None = opt.TOXIC_LABEL,
    text_column: str | None = opt.TEXT_COLUMN,
    label_column: str | None = opt.LABEL_COLUMN,
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (classifier, encoder, model)."),
    dtype: str = typer.Option("auto", "--dtype", help="The attacked classifier's weights: auto (float32), float32 or "
                              "bfloat16 (faster on CPUs with bfloat16 matrix units, e.g. AMX; docs/attacks.md)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Texts per classifier batch (default: the "
                                          "classifier's own, 32 for transformers heads)."),
    shard_size: int = typer.Option(64, "--shard-size", help="Statements per shard file (the resume unit)."),
    fmt: str = typer.Option("parquet", "--format", help="parquet, jsonl or csv."),
    resume: bool = typer.Option(False, "--resume", help="Continue a killed run in --out."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace the run in --out (its manifest and shards)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar."),
    ray: bool = opt.RAY,
    ray_address: str | None = opt.RAY_ADDRESS,
    workers: int = opt.RAY_WORKERS,
    cpus_per_worker: float = opt.CPUS_PER_WORKER,
    gpus_per_worker: float = opt.GPUS_PER_WORKER,
) -> None:
    """Attack labelled statements with one family against a classifier; rows as generate's plus source, edits,
    queries, similarity, P(toxic) before/after, flipped and validator agreement."""
    from toxiforge.attacks.registry import Resources
    from toxiforge.attacks.runner import attack
    from toxiforge.pipeline.manifest import JobConfig

    opt.check_model_options(dtype, device, batch_size=batch_size)
    opt.check_resume(resume, overwrite)
    family_name = opt.single([f for value in family for f in split_list(value)], "--family", hint=(
        "attack runs one family per output folder: run it once per family, each with its own -o (`toxiforge summary "
        "DIR1 DIR2` reads them together), or use `audit -c CLASSIFIER --on DATA --family obfuscate,substitute`"))
    attacked = opt.single(classifier, "-c", hint=(
        "attack runs against one classifier: run it once per classifier, or check a run on other classifiers with "
        "`toxiforge audit -c A -c B --on RUN` (transfer)"))
    settings = {"max_edits": max_edits, "operations": None if ops is None else tuple(split_list(ops)),
                "min_similarity": min_similarity, "max_changed": max_changed, "candidates": candidates,
                "num_beams": beams, "keep_label_with": keep_label_with, "lambda_keep": lambda_keep}
    resources = Resources(encoder=encoder, model=model, device=device, load_lm=load_lm)
    result = attack(opt.dataset_specs(on), family_name, attacked, out, settings=settings,
                    labels=split_list(labels) if labels else None, seed=seed, validate_with=validate_with,
                    resources=resources,
                    job=JobConfig(shard_size=shard_size, format=fmt), resume=resume, overwrite=overwrite,
                    progress=progress, classifier_options={
                        **opt.classifier_options(judge_template, judge_policy, toxic_label,
                                                 judge_concurrency, classifier_runtime),
                        **({"dtype": dtype} if dtype != "auto" else {}), "batch_size": batch_size},
                    text_column=text_column, label_column=label_column,
                    ray=opt.ray_config(ray, ray_address, workers, cpus_per_worker, gpus_per_worker))
    c = result.manifest["counts"]
    console.print(f"wrote {result.rows_written} rows in {result.seconds:.1f} s to {out} ({c['rows']} in the run)",
                  highlight=False)
    rate = f" ({c['flip_rate']:.1%})" if c["flip_rate"] is not None else ""
    per = f", {c['queries_per_success']} queries per success" if c["queries_per_success"] is not None else ""
    console.print(f"{family_name}: {c['flipped']}/{c['attacked']} attacked statements flipped{rate}{per}; "
                  f"{c['skipped']} skipped (the classifier already gave them the other label)", highlight=False,
                  soft_wrap=True)
    if c["validated_flips"] is not None:
        console.print(f"--validate-with {validate_with} gives {c['validated_flips']} of the {c['flipped']} flipped "
                      "statements their source label", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add attack to ``app``."""
    app.command("attack")(attack_command)
