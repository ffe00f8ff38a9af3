"""Commands: bias datamap, bias aflite, bias relabel and experiment debias (Zhou et al. 2021 §3, §6).

The ``bias`` command group belongs to ``cli/bias.py``; this module only defines the command functions, and
``cli/bias.py`` adds them to its group with :func:`register_bias_commands`, ``cli/training.py`` the experiment
with :func:`register_experiment_commands`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from toxiforge.cli._app import console, err_console, split_list
from toxiforge.models.embedded import DEFAULT_ENCODER, DEFAULT_LM

_DATA_HELP = ("Dataset spec [NAME=][KIND:]PATH (KIND: toxigen-annotated, toxigen-train, toxiforge, sbf, ihc, dynahate, "
              "table); several separated by commas are concatenated.")


def _load_examples(data: str, label_column: str | None, text_column: str | None):
    from toxiforge.data import load_specs

    datasets = load_specs(split_list(data), label_column=label_column, text_column=text_column)
    return [e for d in datasets for e in d.examples]


def datamap_command(
    data: str = typer.Argument(..., help=_DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output folder: dynamics.parquet, easy|ambiguous|hard.parquet, "
                                                     "datamap.png, datamap.json."),
    base_model: str = typer.Option(DEFAULT_ENCODER, "--base-model", help="Encoder whose training dynamics "
                                   "are recorded (see `toxiforge train --help`)."),
    tokenizer: str | None = typer.Option(None, "--tokenizer"),
    epochs: int = typer.Option(3, "--epochs", help="Whole epochs to record (at least 2)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Default 32."),
    learning_rate: float | None = typer.Option(None, "--learning-rate", "--lr", help="Default 2e-5."),
    max_length: int | None = typer.Option(None, "--max-length", help="Default 128."),
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
    rows = _load_examples(data, label_column, text_column)
    # options left unset keep TrainConfig's defaults (passing None crashed the Trainer, or lifted the length cap)
    given: dict[str, Any] = {k: v for k, v in (("batch_size", batch_size), ("learning_rate", learning_rate),
                                               ("max_length", max_length)) if v is not None}
    config = TrainConfig(base_model=base_model, tokenizer=tokenizer, epochs=epochs, seed=seed, device=device, **given)
    console.print(f"recording training dynamics of {base_model} on {len(rows)} rows for {epochs} epochs",
                  highlight=False, soft_wrap=True)
    result = run_datamap(rows, out, config, fraction=fraction, pool_fraction=pool_fraction,
                         model_dir=out / "model" if keep_model else None, progress=progress, console=err_console,
                         overwrite=overwrite)
    sizes = ", ".join(f"{r} {n}" for r, n in result.log["sizes"].items())
    console.print(f"wrote {out}/dynamics.parquet, datamap.png and the regions ({sizes} rows) after "
                  f"{result.log['train_seconds']:.1f} s of training", highlight=False, soft_wrap=True)


def aflite_command(
    data: str = typer.Argument(..., help=_DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output folder: aflite.parquet (the subset), scores.parquet, "
                                                     "aflite.json."),
    target_size: int | None = typer.Option(None, "--target-size", "-n", help="AFLite's n: filter down to this "
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
    from toxiforge.bias.subsets import subset_size

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
    console.print(f"kept {len(result.kept)} of {len(rows)} rows{note}; wrote {len(subset)} to {out / 'aflite.parquet'}"
                  f". Embedding {embed_seconds:.1f} s, filtering {result.seconds:.1f} s", highlight=False,
                  soft_wrap=True)


def relabel_command(
    data: str = typer.Argument(..., help=_DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output table (.parquet, .csv or .jsonl): text, label (new), "
                                                     "group, old_label, p_aae, translation, relabeled, ...; the "
                                                     "run manifest goes beside it as NAME.manifest.json."),
    classifier: str = typer.Option(..., "--classifier", "-c", help="Classifier that judges the translations "
                                   "(registry name, model directory or hub id; Zhou et al.: the vanilla model)."),
    lm: str = typer.Option(DEFAULT_LM, "--lm", help="Language model that translates (embedded name, .gguf, "
                           "directory or hub id)."),
    aae_threshold: float = typer.Option(0.5, "--aae-threshold", help="Candidates: p(AAE) above this."),
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
    device: str = typer.Option("auto", "--device"),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing output file."),
) -> None:
    """Dialect-aware relabeling (Zhou et al. §6): translate AAE examples, relabel by the classifier's verdict."""
    import json
    import time

    import numpy as np

    from toxiforge._io import atomic_write_text
    from toxiforge.bias.dialect import aae_probability, load_dialect_model
    from toxiforge.bias.measure import predictions_from_column
    from toxiforge.bias.relabel import lm_translator, relabel, relabel_manifest, relabeled_table, translation_config
    from toxiforge.classifiers import load_classifier
    from toxiforge.data import load_specs
    from toxiforge.errors import InputError
    from toxiforge.models import load_language_model
    from toxiforge.records import write_table

    if out.exists() and not overwrite:
        raise InputError("output file exists", path=out, hint="choose another -o or pass --overwrite")
    if aae_column and dialect_model:
        raise InputError("--aae-column and --dialect-model both given", hint="pass one source of p(AAE)")
    datasets = load_specs(split_list(data), label_column=label_column, text_column=text_column)
    rows = [e for d in datasets for e in d.examples]
    if aae_column:
        p_aae = np.concatenate([predictions_from_column(d, aae_column, option="--aae-column", what="p(AAE)",
                                                        missing=True) for d in datasets])
        aae_source = f"column {aae_column}"
    else:
        p_aae = aae_probability([e.text for e in rows], load_dialect_model(dialect_model))
        aae_source = f"Blodgett et al. model{f' from {dialect_model}' if dialect_model else ''}"
    manifest_path = out.with_name(f"{out.stem}.manifest.json")
    started = time.perf_counter()
    with console.status(f"loading {lm} and {classifier}"):
        model = load_language_model(lm, device=device)
        judge = load_classifier(classifier, device=device)
    loaded = time.perf_counter()
    seed = 0  # greedy decoding never draws from it; recorded because every generated row names its seed
    with console.status(f"translating the examples with p(AAE) > {aae_threshold:g}"):
        translate = lm_translator(model, max_new_tokens=max_new_tokens, batch_size=batch_size, seed=seed)
        result = relabel(rows, p_aae=p_aae, translate=translate, classify=judge.predict_proba,
                         aae_threshold=aae_threshold, direction=direction)
    done = time.perf_counter()
    method = (f"relabel: translated by {lm} (few-shot, greedy), judged by {classifier}, direction {direction}, "
              f"p(AAE) from {aae_source}")
    write_table(relabeled_table(rows, result, method=method, model=lm, seed=seed), out)
    settings = {"data": data, "out": str(out), "method": method, "lm": model.describe(),
                "classifier": judge.describe(), "decoding": translation_config(max_new_tokens).to_dict(),
                "seed": seed, "batch_size": batch_size, "direction": direction, "aae_threshold": aae_threshold,
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
    bias_app.command("datamap")(datamap_command)
    bias_app.command("aflite")(aflite_command)
    bias_app.command("relabel")(relabel_command)



def method_names(text: str) -> tuple[str, ...]:
    """``--methods`` values as the experiment's method names, case-insensitively like every other choice (unknown
    names pass through for the experiment's own check, which lists the choices)."""
    from toxiforge.bias.experiment import METHODS

    by_key = {m.lower(): m for m in METHODS}
    return tuple(by_key.get(m.lower(), m) for m in split_list(text))


def experiment_debias_command(
    train: list[str] = typer.Option(..., "--train", help="Training data: " + _DATA_HELP),
    eval_data: list[str] = typer.Option(..., "--eval", help="Evaluation data (measured with `bias measure`): "
                                        + _DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output folder: debias.md, debias.json (and models/ with "
                                                     "--keep-models)."),
    runs: int | None = typer.Option(None, "--runs", help="Runs per method (seeds SEED, SEED+1, ...); tables give "
                                                         "mean ± s.d. (default 3; 1 with --smoke)."),
    methods: str | None = typer.Option(None, "--methods", help="Comma-separated subset of: Vanilla, LMIXIN-ONI, "
                                       "LMIXIN-TOXTRIG, Random, AFLite, DataMaps-Easy, DataMaps-Ambiguous, "
                                       "DataMaps-Hard, AAE-relabeled (default: all)."),
    relabeled: str | None = typer.Option(None, "--relabeled", help="Relabeled training data from `toxiforge bias "
                                         "relabel` (the AAE-relabeled row; left out without it)."),
    base_model: str = typer.Option(DEFAULT_ENCODER, "--base-model", help="Encoder to fine-tune."),
    epochs: float | None = typer.Option(None, "--epochs", help="Epochs per model (default 3; DataMaps needs 2 or "
                                        "more)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Default 32."),
    learning_rate: float | None = typer.Option(None, "--learning-rate", "--lr", help="Default 2e-5."),
    max_length: int | None = typer.Option(None, "--max-length", help="Default 128."),
    fraction: float = typer.Option(0.33, "--fraction", help="Subset size of Random, AFLite and DataMaps."),
    aflite_ensemble: int | None = typer.Option(None, "--aflite-ensemble", help="AFLite's m (default 64)."),
    encoder: str = typer.Option(DEFAULT_ENCODER, "--encoder", help="AFLite's frozen sentence encoder."),
    smoke: bool = typer.Option(False, "--smoke", help="Small CPU settings: 1 run per method, 2 epochs, max length "
                               "64, batch 16, lr 5e-5, AFLite m 16 (override any with its option)."),
    lexicon: Path | None = typer.Option(None, "--lexicon", help="CSV term,category replacing TOXTRIG lists (bias-only "
                                        "models and measures)."),
    dialect_model: Path | None = typer.Option(None, "--dialect-model", help="twitteraae model folder (default: "
                                              "the cache of `bias dialect fetch`; without one, AAE cells are empty)."),
    label_column: str | None = typer.Option(None, "--label-column"),
    text_column: str | None = typer.Option(None, "--text-column"),
    seed: int = typer.Option(0, "--seed"),
    keep_models: bool = typer.Option(False, "--keep-models", help="Keep every trained model under OUT/models."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Write into a non-empty -o."),
) -> None:
    """Zhou et al.'s comparison: vanilla, LMIXIN-ONI/-TOXTRIG, random, AFLite, DataMaps (Tables 1, 2 and 4)."""
    from toxiforge._io import require_empty_dir
    from toxiforge.bias.experiment import METHODS, DebiasSettings, run_debias_experiment
    from toxiforge.bias.measure import find_dialect_model
    from toxiforge.data import load_specs
    from toxiforge.data.examples import LabeledData
    from toxiforge.training.trainer import TrainConfig

    def pick(value, default, small):  # --smoke changes only the options not given
        return value if value is not None else (small if smoke else default)

    require_empty_dir(out, overwrite)
    specs = [s for value in train for s in split_list(value)]
    rows = [e for d in load_specs(specs, label_column=label_column, text_column=text_column) for e in d.examples]
    held = load_specs([s for value in eval_data for s in split_list(value)], text_column=text_column)
    evaluation = LabeledData(name="+".join(d.name for d in held), examples=[e for d in held for e in d.examples],
                             layout="+".join(d.layout for d in held), source=", ".join(d.source for d in held))
    again = [e for d in load_specs(split_list(relabeled), label_column=label_column, text_column=text_column)
             for e in d.examples] if relabeled else None
    config = TrainConfig(base_model=base_model, epochs=pick(epochs, 3.0, 2.0),
                         batch_size=pick(batch_size, 32, 16),
                         learning_rate=pick(learning_rate, 2e-5, 5e-5),
                         max_length=pick(max_length, 128, 64), eval_fraction=0.0, seed=seed, device="cpu"
                         if smoke else "auto")
    chosen = method_names(methods) if methods else METHODS
    settings = DebiasSettings(train=config, runs=pick(runs, 3, 1), methods=chosen, fraction=fraction,
                              aflite_ensemble=pick(aflite_ensemble, 64, 16), encoder=encoder,
                              lexicon=str(lexicon) if lexicon else None, keep_models=keep_models)
    model, source = find_dialect_model(dialect_model)
    with console.status("starting") as status:
        result = run_debias_experiment(rows, evaluation, out, settings, relabeled=again, dialect_model=model,
                                       dialect_source=source, overwrite=overwrite, on_step=status.update)
    for note in result["notes"]:
        console.print(f"note: {note}", highlight=False, soft_wrap=True)
    console.print(f"{len(result['runs'])} models trained and measured in {result['seconds']:.0f} s; wrote "
                  f"{out / 'debias.md'} and {out / 'debias.json'}", highlight=False, soft_wrap=True)


def register_experiment_commands(experiment_app: typer.Typer) -> None:
    """Add ``debias`` to the ``experiment`` command group."""
    experiment_app.command("debias")(experiment_debias_command)
