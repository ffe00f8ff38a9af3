"""Commands: harden (ALICE against a classifier, retrain on what fooled it, repeat; toxiforge/harden/) and
harden-seeds (runs of it with other seeds read together; harden/seeds.py)."""

from __future__ import annotations

from pathlib import Path

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import console, group_names, load_lm, split_list
from toxiforge.models.embedded import DEFAULT_LM

RECIPE_HELP = ("Unset training options follow C_0's training_log.json (toxiforge trained it); given ones must agree "
               "with it and fill what it lacks (a -c directory without a log needs --base-model, --epochs or "
               "--max-steps, --train-batch-size, --lr, --eval-fraction and --debias).")


def harden_command(
    data: list[str] = typer.Option(..., "--data", help="The classifier's training data (dataset specs, as for "
                                                        "`train`); the statements of each round join it."),
    out: Path = typer.Option(..., "-o", "--out", help="Output directory (round-N/ folders, report.md/json/png)."),
    rounds: int = typer.Option(2, "--rounds", help="Hardening rounds after round 0."),
    classifier: str | None = typer.Option(
        None, "--classifier", "-c", help="Starting classifier directory (a sequence classifier, e.g. from "
                                         "`toxiforge train`), or judge:MODEL (attacked and measured in round 0; "
                                         "the rounds train from --base-model). Default: train one on --data from "
                                         "--base-model."),
    judge_template: str | None = opt.JUDGE_TEMPLATE,
    judge_policy: str | None = opt.JUDGE_POLICY,
    judge_concurrency: int | None = opt.JUDGE_CONCURRENCY,
    classifier_runtime: str | None = opt.CLASSIFIER_RUNTIME,
    toxic_label: str | None = opt.TOXIC_LABEL,
    eval_data: list[str] | None = typer.Option(None, "--eval", help="Labelled sets measured every round (AUC, "
                                                                    "FPR_NOI): human-written text, never trained on."),
    base_model: str | None = typer.Option(None, "--base-model", help="Encoder every round trains from (default: "
                                                                     "C_0's, else the embedded MiniLM)."),
    add: str = typer.Option("flipped", "--add", help="flipped: the statements that fooled the classifier join the "
                                                     "training data; all: every attack statement; balanced: the "
                                                     "flipped ones, each group topped up with the attack's other "
                                                     "statements of its scarcer label (the control arm matched "
                                                     "group by group)."),
    validate_with: str | None = typer.Option(
        None, "--validate-with", help="A classifier other than -c (a directory, judge:MODEL, profanity-check, ...) "
                                      "that stands in for the paper's human validation: only statements it gives "
                                      "their prompt label join either arm; flip rates are also reported among them. "
                                      "'people': your annotators validate them, in an annotation study per round "
                                      "(harden stops until they have labelled it; then --resume)."),
    min_annotators: int = typer.Option(3, "--min-annotators", help="With --validate-with people: annotations per "
                                                                   "statement; its label is their majority."),
    annotation_form: str = typer.Option("short", "--annotation-form", help="With --validate-with people: short (is "
                                                                           "it hateful? yes/no) or full (the paper's "
                                                                           "nine questions)."),
    annotation_db: str | None = typer.Option(None, "--annotation-db", help="With --validate-with people: the study "
                                                                           "database (a path or postgresql:// URL; "
                                                                           "default: -o/annotation.db)."),
    wait_for_people: float | None = typer.Option(None, "--wait-for-people", help="With --validate-with people: "
                                                                                 "check the study every this many "
                                                                                 "seconds until it is annotated, "
                                                                                 "instead of stopping."),
    accept_partial: bool = typer.Option(False, "--accept-partial", help="With --validate-with people --resume: go "
                                                                       "on before every statement has "
                                                                       "--min-annotators answers, with the majority "
                                                                       "of the answers in (the report says so)."),
    transfer: bool = typer.Option(True, "--transfer/--no-transfer", help="Also attack C_0 once more (never trained "
                                                                         "on) and report every round's flip rate on "
                                                                         "that fixed set."),
    attacks: str = typer.Option("alice", "--attacks", help="Attack families whose statements that fooled the "
                                                           "classifier join the ALICE arm's training (alice, "
                                                           "obfuscate, substitute; comma-separated)."),
    eval_attacks: str | None = typer.Option(None, "--eval-attacks", help="Attack families measured every round on "
                                                                         "a fixed held-out set (toxic rows of "
                                                                         "--eval) and never trained on."),
    eval_attack_n: int = typer.Option(100, "--eval-attack-n", help="Toxic --eval statements in the held-out set "
                                                                   "the families attack every round."),
    max_eval_overlap: float = typer.Option(0.05, "--max-eval-overlap", help="The share of --data rows that may be "
                                                                            "--eval rows (case and whitespace "
                                                                            "folded); above it harden refuses. They "
                                                                            "are left out of training either way."),
    init: str = typer.Option("base", "--init", help="base: each classifier trained from --base-model on the union; "
                                                    "continue: trained on from the previous round's, on the union, "
                                                    "at a lower learning rate (--continue-lr-scale); from -c, "
                                                    "compared on the rows C_0's training held out (docs/harden.md)."),
    continue_lr_scale: float | None = typer.Option(None, "--continue-lr-scale", help="With --init continue: the "
                                                   "share of C_0's learning rate a continued round trains at "
                                                   "(default 0.1; not yet measured)."),
    added_weight: float = typer.Option(1.0, "--added-weight", help="Loss weight of every added statement, both "
                                                                   "arms (a weight-K row counts as K copies in its "
                                                                   "batch; 1: as any other row)."),
    groups: str = typer.Option("all", "--groups", help="Comma-separated groups or aliases; 'all' = ToxiGen's 13."),
    labels: str = typer.Option("toxic,benign", "--labels", help="Prompt labels attacked (both directions)."),
    per_cell: int = typer.Option(10, "-n", "--per-cell", help="Attack statements per group × label and round."),
    measure_per_cell: int | None = typer.Option(None, "--measure-n", help="Statements per group × label of the "
                                                "attacks that only measure: the control arm's, and the ALICE arm's "
                                                "in the last round (the first M of the round's -n prompts; "
                                                "default: -n)."),
    demonstrations: str | None = typer.Option(None, "--demonstrations", "-d", help="Demonstrations (as generate)."),
    prompts: str | None = typer.Option(None, "--prompts", help="Upstream prompt file(s), used line by line (the "
                                                               "same lines every round)."),
    k: int = typer.Option(5, "-k", help="Demonstrations per prompt."),
    seed: int = typer.Option(0, "--seed", help="Round r's attack uses seed + r."),
    model: str = typer.Option(DEFAULT_LM, "--model", help="Language model, as for generate (openai:URL#MODEL for "
                                                          "a server)."),
    dtype: str = typer.Option("auto", "--dtype", help="auto, float32 or bfloat16."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (LM, classifiers, training)."),
    beams: int | None = opt.BEAMS,
    candidates: int | None = opt.CANDIDATES,
    lambda_lm: float | None = opt.LAMBDA_LM,
    lambda_clf: float | None = opt.LAMBDA_CLF,
    classifier_top_extensions: int | None = opt.CLASSIFIER_TOP_EXTENSIONS,
    keep_label_with: str | None = opt.KEEP_LABEL_WITH,
    lambda_keep: float | None = opt.LAMBDA_KEEP,
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", help="Token budget per statement."),
    temperature: float | None = typer.Option(None, "--temperature", help="Temperature (ALICE and top-k)."),
    epochs: float | None = typer.Option(None, "--epochs", help=f"Training epochs per round. {RECIPE_HELP}"),
    max_steps: int | None = typer.Option(None, "--max-steps", help="Training steps per round (-1: all epochs)."),
    train_batch_size: int | None = typer.Option(None, "--train-batch-size", help="Training batch size."),
    learning_rate: float | None = typer.Option(None, "--learning-rate", "--lr"),
    max_length: int | None = typer.Option(None, "--max-length", help="Truncate training texts to this many "
                                                                     "tokens."),
    eval_fraction: float | None = typer.Option(None, "--eval-fraction", help="Share of the training rows each "
                                                                             f"round holds out. {RECIPE_HELP}"),
    debias: str | None = typer.Option(None, "--debias", help="The rounds' objective: none (cross-entropy), "
                                                             f"learned-mixin or learned-mixin+h. {RECIPE_HELP}"),
    bias_only: str | None = typer.Option(None, "--bias-only", help="With --debias: the bias-only model, as for "
                                                                   "`train` (refitted on each round's rows)."),
    entropy_weight: float | None = typer.Option(None, "--entropy-weight", help="With --debias learned-mixin+h: "
                                                                               "its entropy penalty."),
    calibrate: bool = typer.Option(True, "--calibrate/--no-calibrate", help="Move each round's threshold after "
                                                                           "training so that on each --eval set and "
                                                                           "the guard slice it calls no more benign "
                                                                           "rows toxic than round 0, over all of "
                                                                           "them and over those naming a group "
                                                                           "(written into the model; "
                                                                           "docs/harden.md)."),
    keep_going: bool = typer.Option(False, "--keep-going", help="Warn about a round whose classifier is degenerate "
                                                                "or worse than round 0 instead of stopping."),
    guard_slice: bool = typer.Option(True, "--guard-slice/--no-guard-slice", help="Keep a stratified 15% slice of "
                                                                                "--data (at least 100 rows) apart, "
                                                                                "never trained on, and check every "
                                                                                "round on it (always without "
                                                                                "--eval)."),
    auc_tolerance: float = typer.Option(0.01, "--auc-tolerance", help="A round is worse when its paired ROC AUC "
                                                                      "difference to round 0 lies wholly below "
                                                                      "-this (the one rule for worse, with "
                                                                      "--fpr-tolerance; 1: that side off)."),
    fpr_tolerance: float = typer.Option(0.02, "--fpr-tolerance", help="A round is worse when its paired difference "
                                                                      "to round 0 in an error rate (FPR, FNR, "
                                                                      "FPR_NOI or over-blocking) lies wholly above "
                                                                      "+this (0.02: 2 points; 1: that side off)."),
    ship_margin: float = typer.Option(0.0, "--ship-margin", help="A round ships only when its paired ROC AUC "
                                                                 "gain over round 0 on the guard slice, with "
                                                                 "intervals simultaneous over every round and arm, "
                                                                 "has its lower end above +this (default 0: "
                                                                 "better beyond noise; else C_0; 1: never ship a "
                                                                 "round). A margin the slice cannot detect is "
                                                                 "refused at the start."),
    guard_slice_size: int | None = typer.Option(None, "--guard-slice-size", help="Rows of the guard slice "
                                                                                 "(default: 15% of --data, at "
                                                                                 "least 100); harden refuses a "
                                                                                 "slice too small to detect "
                                                                                 "--ship-margin and says the size "
                                                                                 "that would."),
    label_rule: str = typer.Option("sum", "--label-rule", help="ToxiGen annotated eval labels: sum or max."),
    batch_size: int = typer.Option(16, "--batch-size", help="Prompts decoded together."),
    shard_size: int = typer.Option(128, "--shard-size", help="Rows per shard file (the resume unit)."),
    resume: bool = typer.Option(False, "--resume", help="Continue a run in -o at its first unfinished step."),
    external_training: bool = typer.Option(
        False, "--external-training", help="Stop where models are to be trained and print the `toxiforge train` "
                                           "commands that train them (run them, e.g. under torchrun, then --resume)."),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show progress bars."),
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
    """Attack a classifier with ALICE, retrain it on the statements that fooled it, repeat; an equal-size top-k
    control arm each round; AUC, FPR_NOI and a fresh attack's flip rate per round (docs/harden.md)."""
    from toxiforge.decoding import decoder_config
    from toxiforge.errors import InputError
    from toxiforge.harden.config import AttackPlan, HardenConfig
    from toxiforge.harden.guard import TrainingPending
    from toxiforge.harden.loop import Harden
    from toxiforge.harden.people import AnnotationPending
    from toxiforge.models import API_PREFIX
    from toxiforge.pipeline import Generator, JobConfig
    from toxiforge.training.trainer import TrainConfig

    if demonstrations and prompts:
        raise InputError("--demonstrations and --prompts were both given", hint="use one prompt source")
    shared = {"temperature": temperature, "max_new_tokens": max_new_tokens}
    alice = decoder_config("alice", {**shared, "num_beams": beams, "candidates": candidates,
                                     "lambda_lm": lambda_lm, "lambda_clf": lambda_clf,
                                     "classifier_top_extensions": classifier_top_extensions,
                                     "keep_label_with": keep_label_with, "lambda_keep": lambda_keep})
    source, prompt_source = prompts or demonstrations, "prompts" if prompts else "demonstrations"
    attack = AttackPlan(groups=tuple(group_names(groups, split_list(labels), source, prompt_source)),
                        labels=tuple(split_list(labels)), per_cell=per_cell, source=source,
                        prompt_source=prompt_source, k=k, seed=seed)
    given = {"base_model": base_model, "epochs": epochs, "max_steps": max_steps, "batch_size": train_batch_size,
             "learning_rate": learning_rate, "max_length": max_length, "eval_fraction": eval_fraction,
             "debias": debias, "bias_only": bias_only, "entropy_weight": entropy_weight}
    train = TrainConfig(seed=seed, device=device)
    config = HardenConfig(rounds=rounds, attack=attack, alice=alice, topk=decoder_config("top-k", shared),
                          train=train, data=tuple(v for d in data for v in split_list(d)),
                          eval=tuple(v for e in eval_data or [] for v in split_list(e)),
                          classifier=classifier, add=add, init=init, label_rule=label_rule, device=device,
                          classifier_options=opt.classifier_options(judge_template, judge_policy, toxic_label,
                                                                    judge_concurrency, classifier_runtime),
                          validate_with=validate_with, transfer=transfer,
                          train_options={k: v for k, v in given.items() if v is not None},
                          annotation_form=annotation_form, min_annotators=min_annotators, annotation_db=annotation_db,
                          attacks=tuple(split_list(attacks)), eval_attacks=tuple(split_list(eval_attacks or "")),
                          eval_attack_n=eval_attack_n, max_eval_overlap=max_eval_overlap,
                          guard_slice=guard_slice, auc_tolerance=auc_tolerance, fpr_tolerance=fpr_tolerance,
                          ship_margin=ship_margin, guard_slice_size=guard_slice_size, added_weight=added_weight,
                          continue_lr_scale=continue_lr_scale, measure_per_cell=measure_per_cell,
                          calibrate=calibrate)
    api = model.startswith(API_PREFIX)
    options = {"concurrency": concurrency, "api_key_env": api_key_env} if api else {"dtype": dtype, "device": device}
    if api and batch_size < concurrency:
        batch_size = concurrency  # a batch's requests are the ones in flight (as generate)
    ray_run = opt.ray_config(ray, ray_address, workers, cpus_per_worker, gpus_per_worker, ray_resources, ray_spread,
                             ray_placement_timeout)
    processes, threads = opt.local_workers(workers, model, device) if ray_run is None else (1, 1)
    generator = Generator(model=model, model_options=options, load=load_lm, device=device, progress=progress,
                          ray=ray_run, workers=processes, threads=threads,
                          job=JobConfig(batch_size=batch_size, shard_size=shard_size))
    job = Harden(config, out, generator, progress=progress, external_training=external_training, keep_going=keep_going,
                 wait=wait_for_people, accept_partial=accept_partial,
                 say=lambda message: console.print(f"[bold]>[/] {message}", highlight=False, soft_wrap=True))
    job.prepare(resume)  # every bad-input error before a model loads
    if api:
        fitted = generator.fit(alice)
        if fitted.candidates != alice.candidates:
            raise InputError(f"{model} returns at most {fitted.candidates} log-probabilities per token",
                             hint=f"pass --candidates {fitted.candidates}")
    try:
        report = job.run(resume)
    except TrainingPending as stop:
        console.print(f"stopped: {len(stop.commands)} model(s) to train. Run (under torchrun --nproc_per_node=N -m "
                      "for several GPUs):", highlight=False, soft_wrap=True)
        for command in stop.commands:
            console.print(command, markup=False, highlight=False, soft_wrap=True)
        console.print("then rerun this command with --resume.", highlight=False)
        return
    except AnnotationPending as stop:
        if stop.interrupted:
            console.print("stopped waiting (Ctrl-C); everything so far is saved and the study stays open.",
                          highlight=False)
        for line in stop.lines:
            console.print(line, markup=False, highlight=False, soft_wrap=True)
        if stop.interrupted:
            raise typer.Exit(130) from None
        return
    console.print((out / "report.md").read_text(encoding="utf-8"), markup=False, highlight=False, soft_wrap=True)
    console.print(f"{len(job.steps)} steps run, {len(report['rounds'])} rounds reported", highlight=False)


def harden_seeds_command(
    runs: list[Path] = typer.Argument(..., help="The -o directories of one harden command run with different --seed."),
    out: Path | None = typer.Option(None, "-o", "--out", help="Also write harden-seeds.md, .json and .png (the "
                                                             "flip rates and AUC per round) into this directory."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace harden-seeds.* files already in -o."),
) -> None:
    """Read harden runs that differ only in --seed as one experiment: flip rates pooled over the runs, each run's
    change from round 0 and gap to the control with their mean's t interval over the runs, which is the seed noise;
    AUC per run; the arms compared prompt by prompt when the runs recorded it (docs/harden.md)."""
    import json

    from toxiforge._io import atomic_write_text, require_new_files
    from toxiforge.harden.seeds import SEEDS_JSON, SEEDS_MD, SEEDS_PNG, combine, markdown, plot

    if out is not None:
        require_new_files(*(out / name for name in (SEEDS_JSON, SEEDS_MD, SEEDS_PNG)), overwrite=overwrite)
    combined = combine(runs)
    text = markdown(combined)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out / SEEDS_JSON, json.dumps(combined, indent=2) + "\n")
        atomic_write_text(out / SEEDS_MD, text)
        plot(combined, out / SEEDS_PNG)
    console.print(text, markup=False, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add ``toxiforge harden`` and ``toxiforge harden-seeds`` to ``app``."""
    app.command("harden")(harden_command)
    app.command("harden-seeds")(harden_seeds_command)
