"""Command: experiment debias -- Zhou et al.'s (2021) whole comparison in one run (Tables 1, 2 and 4).

``cli/training.py`` adds it to the ``experiment`` group with :func:`register_experiment_commands`.
"""

from __future__ import annotations

from pathlib import Path

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import console, split_list
from toxiforge.cli.debias import (
    BATCH_SIZE,
    BF16,
    DATA_HELP,
    LEARNING_RATE,
    MAX_LENGTH,
    PAPER_SETTINGS,
    WARMUP_RATIO,
    WEIGHT_DECAY,
    training_settings,
)
from toxiforge.errors import InputError
from toxiforge.models.embedded import DEFAULT_ENCODER, DEFAULT_LM


def experiment_debias_command(
    train: list[str] = typer.Option(..., "--train", help="Training data: " + DATA_HELP),
    eval_data: list[str] | None = typer.Option(None, "--eval", help="Evaluation data (measured with `bias "
                                               "measure`): " + DATA_HELP + " Or --test-fraction."),
    test_fraction: float | None = typer.Option(None, "--test-fraction", help="Hold out this share of --train, "
                                               "stratified by label and seeded by --seed, as the evaluation data "
                                               "(instead of --eval; the split is recorded in debias.json)."),
    out: Path = typer.Option(..., "-o", "--out", help="Output folder: debias.md, debias.json (and models/ with "
                                                     "--keep-models)."),
    runs: int | None = typer.Option(None, "--runs", help="Runs per method (seeds SEED, SEED+1, ...); tables give "
                                                         "mean ± s.d. (default 3; 1 with --smoke)."),
    methods: str | None = typer.Option(None, "--methods", help="Comma-separated subset of: Vanilla, LMIXIN-ONI, "
                                       "LMIXIN-TOXTRIG, LMIXIN-Dialect, Random, AFLite, DataMaps-Easy, "
                                       "DataMaps-Ambiguous, DataMaps-Hard, AAE-relabeled (default: all; any case)."),
    train_rows: int | None = typer.Option(None, "--train-rows", help="Train on about this many of the training "
                                          "rows (label shares kept, seeded by --seed; after --test-fraction, so "
                                          "the evaluation rows do not change): the size knob of a time budget."),
    relabeled: str | None = typer.Option(None, "--relabeled", help="Relabeled training data from `toxiforge bias "
                                         "relabel` (the AAE-relabeled row; or --relabel)."),
    relabel: bool = typer.Option(False, "--relabel", help="Make the AAE-relabeled data in the run: translate the "
                                 "toxic AAE training rows with --relabel-model, judge them with the first Vanilla "
                                 "model (Zhou et al. §6); writes OUT/relabeled.parquet."),
    relabel_model: str | None = typer.Option(None, "--relabel-model", help="Translator for --relabel (implies it): "
                                             "embedded name, .gguf, directory, hub id or openai:BASE_URL#MODEL "
                                             "(default: the embedded SmolLM2)."),
    relabel_translations: Path | None = typer.Option(None, "--relabel-translations", help="Reuse the translations "
                                                     "of an earlier run (its relabeled.parquet, or `bias relabel`'s "
                                                     "output): texts found there are not translated again."),
    relabel_batch_size: int = typer.Option(8, "--relabel-batch-size", help="Translations decoded together."),
    relabel_dtype: str = typer.Option("auto", "--relabel-dtype", help="The translator's weights: auto, float32 or "
                                      "bfloat16 (about 2.5x faster on CPUs with bfloat16 units)."),
    base_model: str = typer.Option(DEFAULT_ENCODER, "--base-model", help="Encoder to fine-tune."),
    epochs: float | None = typer.Option(None, "--epochs", help="Epochs per model (default 3; DataMaps needs 2 or "
                                        "more)."),
    batch_size: int | None = BATCH_SIZE,
    learning_rate: float | None = LEARNING_RATE,
    max_length: int | None = MAX_LENGTH,
    warmup_ratio: float | None = WARMUP_RATIO,
    weight_decay: float | None = WEIGHT_DECAY,
    paper_settings: bool = PAPER_SETTINGS,
    bf16: bool = BF16,
    fraction: float = typer.Option(0.33, "--fraction", help="Subset size of Random, AFLite and DataMaps."),
    aae_threshold: float | None = typer.Option(None, "--aae-threshold", help="AAE rows of the evaluation: p(AAE) "
                                               "above this (default: AAE is the most probable dialect, as upstream)."),
    redraw_subsets: bool = typer.Option(False, "--redraw-subsets", help="Draw new Random/AFLite/DataMaps subsets "
                                        "in every run (default: one subset per method, drawn with --seed, as "
                                        "upstream; runs vary the training seed)."),
    aflite_ensemble: int | None = typer.Option(None, "--aflite-ensemble", help="AFLite's m (default 64)."),
    encoder: str = typer.Option(DEFAULT_ENCODER, "--encoder", help="AFLite's frozen sentence encoder."),
    smoke: bool = typer.Option(False, "--smoke", help="Small CPU settings: 1 run per method, 2 epochs, max length "
                               "64, batch 16, lr 5e-5, AFLite m 16 (override any with its option)."),
    lexicon: str | None = typer.Option(None, "--lexicon", help="upstream (Zhou et al.'s own word list for all three "
                                       "categories: paper mode) or a CSV term,category replacing TOXTRIG lists "
                                       "(bias-only models and measures)."),
    oi_list: Path | None = typer.Option(None, "--oi-list", help="Upstream's word_based_bias_list.csv or its folder "
                                        "(kept in the cache once given; default: the cached copy)."),
    dialect_model: Path | None = typer.Option(None, "--dialect-model", help="twitteraae model folder (default: "
                                              "the cache of `bias dialect fetch`; without one, AAE cells are empty)."),
    label_column: str | None = typer.Option(None, "--label-column"),
    text_column: str | None = typer.Option(None, "--text-column"),
    seed: int = typer.Option(0, "--seed"),
    keep_models: bool = typer.Option(False, "--keep-models", help="Keep every trained model under OUT/models."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o."),
    resume: bool = typer.Option(False, "--resume", help="Go on with a stopped run in -o (the same command): only "
                                "the models it did not measure are trained; the translations made are kept."),
) -> None:
    """Zhou et al.'s comparison: vanilla, LMIXIN-ONI/-TOXTRIG, random, AFLite, DataMaps (Tables 1, 2 and 4)."""
    from toxiforge._io import require_empty_dir
    from toxiforge.bias.experiment import METHODS, DebiasSettings, run_debias_experiment
    from toxiforge.bias.experiment_split import stratified_split, stratified_subsample
    from toxiforge.bias.lexicon import load_bias_lexicon
    from toxiforge.bias.measure import find_dialect_model
    from toxiforge.bias.relabel import experiment_relabeler, read_translations
    from toxiforge.data import check_column_options, load_specs
    from toxiforge.data.examples import LabeledData
    from toxiforge.training.trainer import TrainConfig

    def pick(value, default, small):  # --smoke changes only the options not given
        return value if value is not None else (small if smoke else default)

    opt.check_model_options(relabel_dtype, dtype_flag="--relabel-dtype")
    opt.check_resume(resume, overwrite)
    require_empty_dir(out, overwrite or resume, flag="--overwrite (start again) or --resume (go on)")
    if (eval_data is None) == (test_fraction is None):
        raise InputError("give the evaluation data as --eval DATA or as --test-fraction F of --train, not "
                         + ("both" if eval_data else "neither"), hint="e.g. --test-fraction 0.2")
    relabel = relabel or relabel_model is not None or relabel_translations is not None
    if relabel and relabeled:
        raise InputError("--relabeled and --relabel both given", hint="pass --relabeled FILE (made before) or "
                         "--relabel (made in this run)")
    given = training_settings(paper=paper_settings, epochs=epochs, batch_size=batch_size,
                              learning_rate=learning_rate, max_length=max_length, warmup=warmup_ratio,
                              weight_decay=weight_decay)
    config = TrainConfig(**{"base_model": base_model, "eval_fraction": 0.0, "seed": seed,
                            "device": "cpu" if smoke else "auto", "epochs": pick(None, 3.0, 2.0),
                            "batch_size": pick(None, 32, 16), "learning_rate": pick(None, 2e-5, 5e-5),
                            "max_length": pick(None, 128, 64), "bf16": bf16, **given})
    chosen = tuple(split_list(methods)) if methods else METHODS
    # checked before any data is read or model trained (methods, epochs)
    settings = DebiasSettings(train=config, runs=pick(runs, 3, 1), methods=chosen, fraction=fraction,
                              aflite_ensemble=pick(aflite_ensemble, 64, 16), encoder=encoder, lexicon=lexicon,
                              keep_models=keep_models, redraw_subsets=redraw_subsets, aae_threshold=aae_threshold)
    lex = load_bias_lexicon(lexicon, oi_list=oi_list)  # a bad list fails here, and a given --oi-list is cached
    for category, info in lex.describe().items():
        console.print(f"{category.upper()}: {info['terms']} entries ({info['regex']} regular expressions), "
                      f"{info['source']}", highlight=False, soft_wrap=True)
    specs = opt.dataset_specs(train)
    loaded = load_specs(specs, label_column=label_column, text_column=text_column, check_columns=False)
    rows = [e for d in loaded for e in d.examples]
    split = None
    if test_fraction is not None:
        rows, test_rows, split = stratified_split(rows, test_fraction, seed)
        held = [LabeledData(name=f"{'+'.join(d.name for d in loaded)}-test", examples=test_rows,
                            layout="+".join(d.layout for d in loaded), source=", ".join(d.source for d in loaded))]
        console.print(f"split: {len(rows)} training and {len(test_rows)} evaluation rows ({test_fraction:g} of "
                      f"each label held out, seed {seed})", highlight=False, soft_wrap=True)
    else:
        held = load_specs(opt.dataset_specs(eval_data), label_column=label_column,
                          text_column=text_column, check_columns=False)
    check_column_options([*loaded, *held], text_column=text_column, label_column=label_column)
    if train_rows is not None:
        available = len(rows)
        rows = stratified_subsample(rows, train_rows, seed)
        if split is not None:
            split.update({"train_rows": len(rows), "train_rows_of": available})
        console.print(f"training on {len(rows)} of {available} rows", highlight=False, soft_wrap=True)
    evaluation = LabeledData(name="+".join(d.name for d in held), examples=[e for d in held for e in d.examples],
                             layout="+".join(d.layout for d in held), source=", ".join(d.source for d in held))
    # `bias relabel` writes text and the new label in columns "text" and "label"
    again = [e for d in load_specs(split_list(relabeled), label_column="label", text_column="text")
             for e in d.examples] if relabeled else None
    model, source = find_dialect_model(dialect_model)
    console.print(f"dialect model: {source}", highlight=False, soft_wrap=True)
    relabeler = None
    if relabel and "AAE-relabeled" in settings.methods:
        if model is None:
            raise InputError(f"--relabel needs the dialect model ({source})", hint="run `toxiforge bias dialect "
                             "fetch`, or pass --dialect-model DIR")
        known = read_translations(relabel_translations) if relabel_translations else None
        relabeler = experiment_relabeler(relabel_model or DEFAULT_LM, dialect_model=model,
                                         aae_threshold=aae_threshold, translations=known,
                                         batch_size=relabel_batch_size, device=config.device,
                                         dtype=relabel_dtype)
    with console.status("starting") as status:
        result = run_debias_experiment(rows, evaluation, out, settings, relabeled=again, relabeler=relabeler,
                                       dialect_model=model, dialect_source=source, overwrite=overwrite, split=split,
                                       resume=resume, on_step=status.update)
    for note in result["notes"]:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)
    console.print(f"{len(result['runs'])} models trained and measured in {result['seconds']:.0f} s; wrote "
                  f"{out / 'debias.md'} and {out / 'debias.json'}", highlight=False, soft_wrap=True)


def register_experiment_commands(experiment_app: typer.Typer) -> None:
    """Add ``debias`` to the ``experiment`` command group."""
    experiment_app.command("debias")(experiment_debias_command)
