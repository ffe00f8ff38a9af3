"""Commands: bias datamap, bias aflite and bias relabel (Zhou et al. 2021 §3, §6), and the training options they
share with ``experiment debias`` (``cli/experiment_debias.py``).

The ``bias`` command group belongs to ``cli/bias.py``; this module only defines the command functions, and
``cli/bias.py`` adds them to its group with :func:`register_bias_commands`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import console, err_console, split_list
from toxiforge.errors import InputError
from toxiforge.models.embedded import DEFAULT_ENCODER, DEFAULT_LM

DATA_HELP = ("Dataset spec [NAME=][KIND:]PATH (KIND: toxigen-annotated, toxigen-train, toxiforge, sbf, ihc, dynahate, "
              "hatecheck, davidson (#hate: hate speech only), table); several separated by commas are concatenated.")


def training_settings(*, paper: bool = False, **given: Any) -> dict[str, Any]:
    """TrainConfig overrides from CLI options: the options given (not None), over Zhou et al.'s settings when
    ``paper`` (:data:`~toxiforge.training.trainer.PAPER_SETTINGS`)."""
    from toxiforge.training.trainer import PAPER_SETTINGS

    out: dict[str, Any] = dict(PAPER_SETTINGS) if paper else {}
    out.update({k: v for k, v in given.items() if v is not None})
    for key in ("warmup", "weight_decay"):
        if key in out and not 0 <= out[key] < 1:
            option = "--warmup-ratio" if key == "warmup" else "--weight-decay"
            raise InputError(f"{option} must be in [0, 1), got {out[key]}", hint=f"e.g. {option} 0 (the paper's)")
    return out


# Training options train, bias datamap and experiment debias share (None = the command's default).
WARMUP_RATIO = typer.Option(None, "--warmup-ratio", help="Share of the steps with a linear learning-rate warm-up "
                                                          "(default 0.06; the paper: 0, HF's default).")
WEIGHT_DECAY = typer.Option(None, "--weight-decay", help="AdamW weight decay (default 0.01; the paper: 0, HF's "
                                                         "default).")
PAPER_SETTINGS = typer.Option(False, "--paper-settings", help="Zhou et al.'s training settings (HF defaults with lr "
                              "1e-5, batch 8: no warm-up, no weight decay, 3 epochs); options given explicitly still "
                              "win.")
BATCH_SIZE = typer.Option(None, "--batch-size", help="Default 32.")
LEARNING_RATE = typer.Option(None, "--learning-rate", "--lr", help="Default 2e-5.")
MAX_LENGTH = typer.Option(None, "--max-length", help="Default 128.")
BF16 = typer.Option(False, "--bf16", help="bfloat16 mixed precision: GPUs, and CPUs with bfloat16 units (AMX: "
                    "MiniLM trained 2.0-2.5x faster than float32 on this project's CPU, docs/training.md).")


def _load_examples(data: str, label_column: str | None, text_column: str | None):
    from toxiforge.data import load_specs

    datasets = load_specs(split_list(data), label_column=label_column, text_column=text_column)
    return [e for d in datasets for e in d.examples]


def datamap_command(
    data: str = typer.Argument(..., help=DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output folder: dynamics.parquet, easy|ambiguous|hard.parquet, "
                                                     "datamap.png, datamap.json."),
    base_model: str = typer.Option(DEFAULT_ENCODER, "--base-model", help="Encoder whose training dynamics "
                                   "are recorded (see `toxiforge train --help`)."),
    tokenizer: str | None = typer.Option(None, "--tokenizer"),
    epochs: int = typer.Option(3, "--epochs", help="Whole epochs to record (at least 2)."),
    batch_size: int | None = BATCH_SIZE,
    learning_rate: float | None = LEARNING_RATE,
    max_length: int | None = MAX_LENGTH,
    warmup_ratio: float | None = WARMUP_RATIO,
    weight_decay: float | None = WEIGHT_DECAY,
    paper_settings: bool = PAPER_SETTINGS,
    fraction: float = typer.Option(0.33, "--fraction", help="Size of each region's subset (share of the data)."),
    pool_fraction: float = typer.Option(0.5, "--pool-fraction", help="Each region is cut to this share first, "
                                        "then sampled down to --fraction with the original label ratio."),
    label_column: str | None = typer.Option(None, "--label-column"),
    text_column: str | None = typer.Option(None, "--text-column"),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("auto", "--device"),
    keep_model: bool = typer.Option(False, "--keep-model", help="Also save the trained model in OUT/model."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o."),
    progress: bool = typer.Option(True, "--progress/--no-progress"),
) -> None:
    """DataMaps (Swayamdipta et al. 2020): train, record per-example training dynamics, write the regions."""
    from toxiforge._io import require_empty_dir
    from toxiforge.bias.datamaps import run_datamap
    from toxiforge.training.trainer import TrainConfig

    require_empty_dir(out, overwrite)
    # options left unset keep TrainConfig's defaults (passing None crashed the Trainer, or lifted the length cap)
    given = training_settings(paper=paper_settings, batch_size=batch_size, learning_rate=learning_rate,
                              max_length=max_length, warmup=warmup_ratio, weight_decay=weight_decay)
    given["epochs"] = epochs
    rows = _load_examples(data, label_column, text_column)
    config = TrainConfig(base_model=base_model, tokenizer=tokenizer, seed=seed, device=device, **given)
    console.print(f"recording training dynamics of {base_model} on {len(rows)} rows for {epochs} epochs",
                  highlight=False, soft_wrap=True)
    result = run_datamap(rows, out, config, fraction=fraction, pool_fraction=pool_fraction,
                         model_dir=out / "model" if keep_model else None, progress=progress, console=err_console,
                         overwrite=overwrite)
    sizes = ", ".join(f"{r} {n}" + (f" ({result.log['top_ups'][r]} top-ups from outside the region, which lacked a "
                                    "label)" if result.log["top_ups"][r] else "")
                      for r, n in result.log["sizes"].items())
    console.print(f"wrote {out}/dynamics.parquet, datamap.png and the regions ({sizes} rows) after "
                  f"{result.log['train_seconds']:.1f} s of training", highlight=False, soft_wrap=True)


def aflite_command(
    data: str = typer.Argument(..., help=DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output folder: aflite.parquet (the subset), scores.parquet, "
                                                     "aflite.json."),
    target_size: int | None = typer.Option(None, "--target-size", help="AFLite's n: filter down to this "
                                              "many rows (default: half the data, as Zhou et al.)."),
    fraction: float | None = typer.Option(0.33, "--fraction", help="Then sample the survivors down to this share "
                                             "of the data with the original label ratio (Zhou et al.); 1 keeps "
                                             "all survivors."),
    ensemble_size: int = typer.Option(64, "--ensemble-size", "-m", help="Linear models per iteration (m)."),
    train_size: int | None = typer.Option(None, "--train-size", "-t", help="Training rows per model (t; "
                                             "default: half the target size)."),
    cut_size: int | None = typer.Option(None, "--cut-size", "-k", help="Rows removed per iteration (k; default: "
                                           "5% of the data)."),
    threshold: float = typer.Option(0.75, "--threshold", "--tau", help="Only rows at least this predictable go."),
    classifier: str = typer.Option("ridge", "--classifier", help="ridge (fast, default) or logistic (the paper's)."),
    encoder: str = typer.Option(DEFAULT_ENCODER, "--encoder", help="Sentence encoder for the frozen embeddings "
                                "(the embedded MiniLM, a sentence-transformers hub id or directory)."),
    label_column: str | None = typer.Option(None, "--label-column"),
    text_column: str | None = typer.Option(None, "--text-column"),
    seed: int = typer.Option(0, "--seed"),
    device: str = typer.Option("cpu", "--device", help="Device of the encoder."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o."),
) -> None:
    """AFLite (Le Bras et al. 2020): drop the rows linear models on frozen embeddings predict too easily."""
    import time

    from toxiforge._io import require_empty_dir
    from toxiforge.analysis.embeddings import embed_texts, load_encoder
    from toxiforge.bias.aflite import AFLiteConfig, run_aflite
    from toxiforge.bias.subsets import count_outside, subset_size

    require_empty_dir(out, overwrite)
    rows = _load_examples(data, label_column, text_column)
    config = AFLiteConfig(target_size=target_size or len(rows) // 2, ensemble_size=ensemble_size,
                          train_size=train_size, cut_size=cut_size, threshold=threshold, classifier=classifier,
                          seed=seed)
    started = time.perf_counter()
    with console.status(f"embedding {len(rows)} texts with {encoder}"):
        embeddings = embed_texts([e.text for e in rows], load_encoder(encoder, device=device))
    embed_seconds = time.perf_counter() - started

    def show(step: dict) -> None:
        console.print(f"iteration {step['iteration']}: {step['rows']} rows, {step['eligible']} at least "
                      f"{threshold:g} predictable, {step['removed']} removed", highlight=False)

    size = None if fraction is None or fraction >= 1 else subset_size(len(rows), fraction)
    result, subset = run_aflite(rows, out, config, embeddings=embeddings, subset_size=size,
                                embed_seconds=embed_seconds, encoder=encoder, overwrite=overwrite, on_iteration=show)
    note = " (stopped early: fewer than k rows reached the threshold)" if result.stopped_early else ""
    extra = count_outside(subset, result.kept)
    if extra:
        note += (f"; the survivors lacked a label, so {extra} rows removed last fill the subset (top-ups, recorded "
                 "in aflite.json)")
    console.print(f"kept {len(result.kept)} of {len(rows)} rows{note}; wrote {len(subset)} to {out / 'aflite.parquet'}"
                  f". Embedding {embed_seconds:.1f} s, filtering {result.seconds:.1f} s", highlight=False,
                  soft_wrap=True)


def relabel_command(
    data: str = typer.Argument(..., help=DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output table (.parquet, .csv or .jsonl): text, label (new), "
                                                     "group, old_label, p_aae, translation, relabeled, ...; the "
                                                     "run manifest goes beside it as NAME.manifest.json."),
    classifier: str = typer.Option(..., "--classifier", "-c", help="Classifier that judges the translations "
                                   "(registry name, model directory or hub id; Zhou et al.: the vanilla model)."),
    judge_template: str | None = opt.JUDGE_TEMPLATE,
    judge_policy: str | None = opt.JUDGE_POLICY,
    judge_concurrency: int | None = opt.JUDGE_CONCURRENCY,
    classifier_runtime: str | None = opt.CLASSIFIER_RUNTIME,
    toxic_label: str | None = opt.TOXIC_LABEL,
    lm: str = typer.Option(DEFAULT_LM, "--lm", help="Language model that translates (embedded name, .gguf, "
                           "directory or hub id)."),
    aae_threshold: float | None = typer.Option(None, "--aae-threshold", help="Candidates: p(AAE) above this "
                                                  "(default: AAE is the text's most probable dialect, as `bias "
                                                  "measure`, upstream and the paper; --aae-column needs it)."),
    direction: str = typer.Option("toxic-to-benign", "--direction", help="toxic-to-benign (Zhou et al.: only "
                                  "toxic examples whose translation is judged benign) or any."),
    dialect_model: Path | None = typer.Option(None, "--dialect-model", help="twitteraae model folder (default: the "
                                              "cache of `toxiforge bias dialect fetch`)."),
    aae_column: str | None = typer.Option(None, "--aae-column", help="Column of DATA's table(s) with precomputed "
                                          "p(AAE) in [0, 1] (another dialect identifier's; empty cell: no "
                                          "estimate), instead of the dialect model."),
    max_new_tokens: int = typer.Option(48, "--max-new-tokens", help="Longest translation, in tokens."),
    batch_size: int = typer.Option(8, "--batch-size", help="Translations decoded together."),
    label_column: str | None = typer.Option(None, "--label-column"),
    text_column: str | None = typer.Option(None, "--text-column"),
    dtype: str = typer.Option("auto", "--dtype", help="The translator's weights: auto, float32 or bfloat16 (about "
                              "2.5x faster on CPUs with bfloat16 units, docs/debias-davidson.md)."),
    device: str = typer.Option("auto", "--device"),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output file."),
) -> None:
    """Dialect-aware relabeling (Zhou et al. §6): translate AAE examples, relabel by the classifier's verdict."""
    import json
    import time

    import numpy as np

    from toxiforge._io import atomic_write_text, require_new_files
    from toxiforge.bias.dialect import predict_dialects
    from toxiforge.bias.measure import find_dialect_model, predictions_from_column
    from toxiforge.bias.relabel import lm_translator, relabel, relabel_manifest, relabeled_table, translation_config
    from toxiforge.classifiers import load_classifier
    from toxiforge.data import load_specs
    from toxiforge.models import load_language_model
    from toxiforge.records import write_table

    opt.check_model_options(dtype, device)
    require_new_files(out, out.with_name(f"{out.stem}.manifest.json"), overwrite=overwrite)
    if aae_column and dialect_model:
        raise InputError("--aae-column and --dialect-model both given", hint="pass one source of p(AAE)")
    if aae_column and aae_threshold is None:
        raise InputError("--aae-column gives p(AAE) alone, and the default rule (AAE is the most probable of the "
                         "four dialects) needs all four", hint="add --aae-threshold, e.g. --aae-threshold 0.5")
    datasets = load_specs(split_list(data), label_column=label_column, text_column=text_column)
    rows = [e for d in datasets for e in d.examples]
    if aae_column:
        p_dialect = np.concatenate([predictions_from_column(d, aae_column, option="--aae-column", what="p(AAE)",
                                                            missing=True) for d in datasets])
        aae_source = f"column {aae_column}"
    else:
        dialects, aae_source = find_dialect_model(dialect_model)
        if dialects is None:
            raise InputError(f"no dialect model: {aae_source}", hint="run `toxiforge bias dialect fetch`, or pass "
                             "--dialect-model DIR (e.g. ../shared/data/twitteraae) or --aae-column")
        p_dialect = predict_dialects([e.text for e in rows], dialects)
    rule = "AAE the most probable dialect" if aae_threshold is None else f"p(AAE) > {aae_threshold:g}"
    manifest_path = out.with_name(f"{out.stem}.manifest.json")
    started = time.perf_counter()
    with console.status(f"loading {lm} and {classifier}"):
        model = load_language_model(lm, dtype=dtype, device=device)
        judge = load_classifier(classifier, device=device,
                                **opt.classifier_options(judge_template, judge_policy, toxic_label,
                                                         judge_concurrency, classifier_runtime))
    loaded = time.perf_counter()
    seed = 0  # greedy decoding never draws from it; recorded because every generated row names its seed
    with console.status(f"translating the examples with {rule}"):
        translate = lm_translator(model, max_new_tokens=max_new_tokens, batch_size=batch_size, seed=seed)
        result = relabel(rows, p_aae=p_dialect, translate=translate, classify=judge.predict_proba,
                         aae_threshold=aae_threshold, direction=direction)
    done = time.perf_counter()
    method = (f"relabel: translated by {lm} (few-shot, greedy), judged by {classifier}, direction {direction}, "
              f"p(AAE) from {aae_source}")
    write_table(relabeled_table(rows, result, method=method, model=lm, seed=seed), out)
    settings = {"data": data, "out": str(out), "method": method, "lm": model.describe(),
                "classifier": judge.describe(), "decoding": translation_config(max_new_tokens).to_dict(),
                "seed": seed, "batch_size": batch_size, "direction": direction, "aae_rule": rule,
                "aae_source": aae_source, "seconds": {"load": round(loaded - started, 2),
                                                      "translate_and_judge": round(done - loaded, 2)}}
    atomic_write_text(manifest_path, json.dumps(relabel_manifest(result, settings), indent=2, default=str) + "\n")
    translated = sum(t is not None for t in result.translations)
    failed = sum(e is not None for e in result.errors)
    console.print(f"{translated} of {len(rows)} examples translated ({failed} failed translations kept their "
                  f"label: see translation_error), {int(result.relabeled.sum())} relabeled in "
                  f"{done - loaded:.1f} s; wrote {out} and {manifest_path.name}",
                  highlight=False, soft_wrap=True)


def register_bias_commands(bias_app: typer.Typer) -> None:
    """Add ``datamap``, ``aflite`` and ``relabel`` to the ``bias`` command group."""
    # click's listing keeps a docstring's first sentence, which "et al." ends: each says its own short help
    bias_app.command("datamap", short_help="Training dynamics: easy, ambiguous and hard subsets (DataMaps).")(
        datamap_command)
    bias_app.command("aflite", short_help="Drop the rows linear models predict too easily (AFLite).")(aflite_command)
    bias_app.command("relabel", short_help="Translate AAE examples and relabel them by a classifier.")(
        relabel_command)
