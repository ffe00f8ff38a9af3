"""Command: audit (several classifiers side by side on several datasets: accuracy, groups, HateCheck, lexical and
dialect bias, calibration, with bootstrap intervals; docs/audit.md)."""

from __future__ import annotations

from pathlib import Path

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import console, group_names, load_lm, split_list
from toxiforge.models.embedded import DEFAULT_LM


def audit(
    classifier: list[str] = typer.Option(..., "--classifier", "-c", help="Classifier to audit, repeatable: a "
                                         "registry name, judge:MODEL, a model directory or a hub id; NAME=SPEC "
                                         "names its column. The first is the baseline of the comparison."),
    on: list[str] = typer.Option(..., "--on", help="Dataset spec, repeatable or comma-separated: "
                                 "[NAME=][KIND:]PATH, e.g. hatecheck:test_suite_cases.csv, davidson:labeled_data.csv, "
                                 "humanval:annotated_test.parquet, table:mine.csv, a toxiforge run "
                                 "(docs/training.md)."),
    text_column: str | None = opt.TEXT_COLUMN,
    label_column: str | None = opt.LABEL_COLUMN,
    out: Path = typer.Option(..., "-o", "--out", help="Output folder: report.html, report.md, report.json, "
                             "figures/ and the score cache scores/."),
    resume: bool = typer.Option(False, "--resume", help="Reuse the scores cached in OUT (a stopped audit, or one "
                                "more -c: only what is missing is scored) and rewrite the report."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty OUT, scoring everything "
                                   "again."),
    bootstrap: int = typer.Option(1000, "--bootstrap", help="Bootstrap resamples for the 95% intervals (0: none)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the bootstrap resamples (the same rows for every "
                             "classifier), of the --family section's sample of flagged rows and their edit "
                             "positions, and of the ALICE vs top-k section's prompts and sampling."),
    judge_template: str | None = opt.JUDGE_TEMPLATE,
    judge_policy: str | None = opt.JUDGE_POLICY,
    judge_concurrency: int | None = opt.JUDGE_CONCURRENCY,
    classifier_runtime: str | None = opt.CLASSIFIER_RUNTIME,
    toxic_label: str | None = opt.TOXIC_LABEL,
    lexicon: str | None = typer.Option(None, "--lexicon", help="TOXTRIG lexicon, as `bias measure` takes it."),
    oi_list: Path | None = typer.Option(None, "--oi-list", help="Zhou et al.'s word_based_bias_list.csv (OI), "
                                        "as `bias measure` takes it."),
    dialect_model: Path | None = typer.Option(None, "--dialect-model", help="twitteraae model folder for the AAE "
                                              "slice (default: the cached copy, if any)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Texts per classifier batch."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (transformers classifiers)."),
    dtype: str = typer.Option("auto", "--dtype", help="auto (float32), float32 or bfloat16."),
    family: str | None = typer.Option(None, "--family", help="Attack section: attack families, comma-separated: "
                                      "obfuscate, substitute, alice (as `attack --family`, docs/attacks.md); each "
                                      "attacks the toxic rows a classifier flags."),
    attack_n: int = typer.Option(100, "--attack-n", help="Flagged toxic rows attacked per classifier and dataset "
                                 "(a seeded sample)."),
    attack_prompts: str | None = typer.Option(None, "--attack-prompts", help="ALICE vs top-k section: upstream "
                                              "prompt file(s) (or -d); each classifier is attacked with ALICE from "
                                              "the prompts that top-k also decodes."),
    demonstrations: str | None = typer.Option(None, "--demonstrations", "-d", help="ALICE vs top-k section: "
                                              "demonstrations the prompts are built from (as generate)."),
    per_cell: int = typer.Option(10, "-n", "--per-cell", help="ALICE vs top-k section: statements per group × "
                                 "label and decoder."),
    groups: str = typer.Option("all", "--groups", help="ALICE vs top-k section: comma-separated groups or aliases; "
                               "'all': every group of the prompt source."),
    prompt_labels: str = typer.Option("toxic,benign", "--prompt-labels", help="ALICE vs top-k section: the labels "
                                      "of the prompts decoded (toxic, benign). The datasets of --on are audited "
                                      "with all their rows."),
    k: int = typer.Option(5, "-k", help="ALICE vs top-k section: demonstrations per prompt."),
    model: str = typer.Option(DEFAULT_LM, "--model", help="ALICE vs top-k section: language model, as for generate "
                              "(openai:URL#MODEL for a server)."),
    validate_with: str | None = typer.Option(None, "--validate-with", help="ALICE vs top-k section: a classifier "
                                             "other than every -c (and than --keep-label-with) that validates the "
                                             "statements (as harden's): validated and confirmed flip rates."),
    beams: int | None = opt.BEAMS,
    candidates: int | None = opt.CANDIDATES,
    lambda_lm: float | None = opt.LAMBDA_LM,
    lambda_clf: float | None = opt.LAMBDA_CLF,
    classifier_top_extensions: int | None = opt.CLASSIFIER_TOP_EXTENSIONS,
    keep_label_with: str | None = opt.KEEP_LABEL_WITH,
    lambda_keep: float | None = opt.LAMBDA_KEEP,
    max_new_tokens: int | None = typer.Option(None, "--max-new-tokens", help="ALICE vs top-k section: token budget "
                                              "per statement."),
    temperature: float | None = typer.Option(None, "--temperature", help="ALICE vs top-k section: temperature."),
    ray: bool = opt.RAY,
    ray_address: str | None = opt.RAY_ADDRESS,
    workers: int = opt.RAY_WORKERS,
    cpus_per_worker: float = opt.CPUS_PER_WORKER,
    gpus_per_worker: float = opt.GPUS_PER_WORKER,
    gate: bool = typer.Option(False, "--gate", help="Release check: exit 1 when a classifier is worse than the first "
                              "on a gated metric (its paired 95% interval wholly beyond the tolerance on the worse "
                              "side), printing one line per failed check; exit 3 when a gated metric was measured "
                              "on no dataset (nothing to pass). The verdict tops report.md/.html/.json."),
    gate_metric: list[str] = typer.Option([], "--gate-metric", help="With --gate, repeatable: NAME[:TOLERANCE], NAME "
                                          "a comparison metric (roc_auc, fnr, fpr, final_score, over_blocking, "
                                          "fpr.aae, ece, ...) or a section (accuracy, lexical); tolerance in the "
                                          "metric's units (default 0.01). Default: every metric at 0.01."),
    junit: Path | None = typer.Option(None, "--junit", help="With --gate: write the checks as JUnit XML (one "
                                      "testcase per candidate x dataset x metric) for CI; an old file there is "
                                      "removed when scoring starts."),
    model_card: Path | None = typer.Option(None, "--model-card", help="The folder of one -c (e.g. from toxiforge "
                                           "train): add the audit's results to its model card README.md "
                                           "(model-index metadata and an Audit section; a rerun replaces them)."),
) -> None:
    """Audit classifiers on datasets and write one report (HTML, Markdown, JSON, PNG figures); --gate makes it a
    release check."""
    from toxiforge._io import require_empty_dir
    from toxiforge.audit.card import card_classifier, update_model_card
    from toxiforge.audit.gate import check_gate, check_junit, parse_rules, run_gate, write_junit
    from toxiforge.audit.prompt_attacks import PromptAttack, check_source
    from toxiforge.audit.report import write_report
    from toxiforge.audit.run import AuditSettings, ClassifierSpec, interruption, run_audit
    from toxiforge.data import load_specs
    from toxiforge.decoding import decoder_config
    from toxiforge.errors import InputError
    from toxiforge.models import API_PREFIX
    from toxiforge.pipeline import Generator
    from toxiforge.pipeline.plan import GenerationPlan

    opt.check_model_options(dtype, device)
    opt.check_resume(resume, overwrite)
    if (gate_metric or junit) and not gate:
        raise InputError(f"{'--gate-metric' if gate_metric else '--junit'} sets up the release check, which is off",
                         hint="add --gate")
    rules = parse_rules(gate_metric) if gate else []
    if gate:
        check_gate(len(classifier), bootstrap)
    if junit is not None:
        check_junit(junit)
    prompt_attack = None
    source = check_source(attack_prompts, demonstrations)
    if source is None and (keep_label_with or lambda_keep is not None):
        raise InputError("--keep-label-with and --lambda-keep steer the ALICE vs top-k section's ALICE, which needs a "
                         "prompt source", hint="add --attack-prompts FILE or -d DEMONSTRATIONS (with -n)")
    if source is None and validate_with:
        raise InputError("--validate-with validates the ALICE vs top-k section's statements, which needs a prompt "
                         "source", hint="add --attack-prompts FILE or -d DEMONSTRATIONS (with -n)")
    if source is not None:
        shared = {"temperature": temperature, "max_new_tokens": max_new_tokens}
        alice = decoder_config("alice", {**shared, "num_beams": beams, "candidates": candidates,
                                         "lambda_lm": lambda_lm, "lambda_clf": lambda_clf,
                                         "classifier_top_extensions": classifier_top_extensions,
                                         "keep_label_with": keep_label_with, "lambda_keep": lambda_keep})
        label_list = split_list(prompt_labels)
        plan = GenerationPlan.grid(group_names(groups, label_list, source[0], source[1]), label_list, per_cell,
                                   source=source[0], prompt_source=source[1], k=k, seed=seed)
        lm_options = {"dtype": dtype, "device": device} if not model.startswith(API_PREFIX) else {}
        prompt_attack = PromptAttack(plan, alice, decoder_config("top-k", shared),
                                     Generator(model=model, model_options=lm_options, load=load_lm, device=device),
                                     validate_with, device)
    require_empty_dir(out, resume or overwrite, option="-o", flag="--resume (reuse its scores) or --overwrite")
    options = {"device": device, "dtype": dtype, "batch_size": batch_size,
               **opt.classifier_options(judge_template, judge_policy, toxic_label,
                                        judge_concurrency, classifier_runtime)}
    settings = AuditSettings(n_boot=bootstrap, seed=seed, resume=resume,
                             classifier_options={k: v for k, v in options.items() if v is not None},
                             lexicon=lexicon, oi_list=oi_list, dialect_model=dialect_model,
                             ray=opt.ray_config(ray, ray_address, workers, cpus_per_worker, gpus_per_worker),
                             attacks=tuple(split_list(family)) if family else (), attack_n=attack_n,
                             prompt_attack=prompt_attack)
    specs = [ClassifierSpec.parse(c) for c in classifier]
    if model_card is not None:
        card_classifier(specs, model_card)  # a folder that no -c is: refused before scoring
    datasets = load_specs(opt.dataset_specs(on), text_column=text_column, label_column=label_column)
    result = run_audit(specs, datasets, out, settings,
                       log=lambda line: console.print(line, highlight=False, soft_wrap=True),
                       progress=console if console.is_terminal else None, also_clear=[junit] if junit else [])
    verdict = run_gate(result, rules) if gate else None
    with interruption(out, result.cache):   # Ctrl-C while the report is written: scores kept, --resume writes it
        paths = write_report(result, out, verdict)
    seconds = result.seconds
    console.print(f"scoring {seconds['scoring']:.1f} s, metrics {seconds['metrics']:.1f} s", highlight=False)
    for kind, path in paths.items():
        console.print(f"wrote {kind}: {path}", highlight=False)
    if model_card is not None:
        console.print(f"wrote the audit into the model card: {update_model_card(result, model_card, out)}",
                      highlight=False, soft_wrap=True)
    if verdict is not None:
        for line in verdict.lines():
            console.print(line, highlight=False, soft_wrap=True)
        if junit is not None:
            console.print(f"wrote JUnit XML: {write_junit(verdict, junit)}", highlight=False)
        if verdict.exit_code:
            raise typer.Exit(verdict.exit_code)


def register(app: typer.Typer) -> None:
    """Add audit to ``app``."""
    app.command("audit")(audit)
