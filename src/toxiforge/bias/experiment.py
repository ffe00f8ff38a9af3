"""Zhou et al.'s (2021) comparison as one run: ``toxiforge experiment debias --train DATA --eval DATA -o DIR``.

Per run (training seed ``seed + run``), on the training rows:

* **Vanilla** -- plain fine-tuning. Its training dynamics are recorded (:class:`DataMapRecorder`) and give the
  DataMaps regions, so the data map costs no extra training. Departure: Swayamdipta et al. map with a separate
  model; here the vanilla model of the first run is that model (same encoder and settings).
* **LMIXIN-ONI**, **LMIXIN-TOXTRIG**, **LMIXIN-Dialect** -- LEARNED-MIXIN+H against the ``oni`` / ``toxtrig`` /
  ``dialect`` bias-only models (:mod:`toxiforge.bias.bias_only`); skipped with a note when the training texts
  have no such word (or, for Dialect, when no dialect model is available).
* **Random**, **AFLite**, **DataMaps-Easy/-Ambiguous/-Hard** -- trained on 33% subsets with the original label
  ratio (:mod:`toxiforge.bias.subsets`). AFLite filters to half the data over frozen encoder embeddings, computed
  once for all runs. As upstream, each subset is drawn once (from ``seed``; DataMaps from the first run's
  vanilla dynamics) and every run trains on the same subset with its own training seed: the ± is the spread
  over training seeds. ``redraw_subsets=True`` draws new subsets in every run (with the run's seed), so the ±
  also covers the subset draw. When a region or AFLite's survivors lack a label, rows from outside fill it;
  their number is recorded per run (``top_ups``) and in the notes (the paper "could not downsample" then).
* **AAE-relabeled** -- trained on a relabeled copy of the training data (``toxiforge bias relabel``), when one is
  given (the data needs dialect signal for relabeling to change anything).

Each model is scored on the evaluation data and measured with :func:`toxiforge.bias.measure.measure_data`
(Tables 2 and 4: accuracy, F1, FPR and F1 per TOXTRIG category and AAE); each training set's own Pearson R of
the label with the categories (Table 1) is measured too. The tables give mean ± s.d. over the runs (sample s.d.,
``ddof=1``; one run has no s.d.). ``debias.json`` holds every run's numbers; ``debias.md`` the tables.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge.data.examples import Example, LabeledData
from toxiforge.errors import InputError
from toxiforge.records import TOXIC_THRESHOLD

METHODS: tuple[str, ...] = ("Vanilla", "LMIXIN-ONI", "LMIXIN-TOXTRIG", "LMIXIN-Dialect", "Random", "AFLite",
                            "DataMaps-Easy", "DataMaps-Ambiguous", "DataMaps-Hard", "AAE-relabeled")
BIAS_ONLY_OF = {"LMIXIN-ONI": "oni", "LMIXIN-TOXTRIG": "toxtrig", "LMIXIN-Dialect": "dialect"}
SUBSET_METHODS = ("Random", "AFLite", "DataMaps-Easy", "DataMaps-Ambiguous", "DataMaps-Hard")
@dataclass(frozen=True)
class DebiasSettings:
    """What the experiment trains. ``train`` is a :class:`~toxiforge.training.trainer.TrainConfig` (its seed is
    the first run's); the paper's scale is GPU work, the CLI's ``--smoke`` is a small CPU setting. Every model
    trains on all its rows (the evaluation data is ``--eval``): ``train``'s held-out share and early stopping
    are switched off here. DataMaps needs whole epochs, at least 2 (checked before anything trains)."""

    train: Any
    runs: int = 3
    methods: tuple[str, ...] = METHODS
    fraction: float = 0.33
    aflite_ensemble: int = 64
    encoder: str = "all-minilm-l6-v2"
    lexicon: str | None = None
    threshold: float = TOXIC_THRESHOLD
    aae_threshold: float | None = None  # AAE rows: most probable dialect (None, as upstream) or p(AAE) > this
    keep_models: bool = False
    redraw_subsets: bool = False

    def __post_init__(self) -> None:
        if self.runs < 1:
            raise InputError(f"--runs must be at least 1, got {self.runs}", hint="e.g. --runs 3")
        by_key = {m.lower(): m for m in METHODS}
        unknown = [m for m in self.methods if m.lower() not in by_key]
        if unknown:
            raise InputError(f"unknown methods {unknown}", hint=f"choose from {', '.join(METHODS)}")
        object.__setattr__(self, "methods", tuple(by_key[m.lower()] for m in self.methods))
        if self.aae_threshold is not None and not 0 <= self.aae_threshold < 1:
            raise InputError(f"--aae-threshold must be in [0, 1), got {self.aae_threshold}", hint="e.g. 0.5")
        if self.train is None:
            return
        if self.train.eval_fraction or self.train.early_stopping:
            object.__setattr__(self, "train", replace(self.train, eval_fraction=0.0, early_stopping=None))
        epochs = self.train.epochs
        if any(m.startswith("DataMaps") for m in self.methods) and (epochs < 2 or epochs != int(epochs)
                                                                    or self.train.max_steps != -1):
            raise InputError(f"DataMaps needs at least 2 whole epochs, got --epochs {epochs:g}",
                             hint="pass --epochs 2 or more (a whole number), or leave the DataMaps methods out")
        if not 0 < self.fraction <= 1:
            raise InputError(f"--fraction must be in (0, 1], got {self.fraction}", hint="the paper uses 0.33")


def _mean_sd(values: Sequence[float | None]) -> dict[str, float | None]:
    vals = [v for v in values if v is not None]
    if not vals:
        return {"mean": None, "sd": None, "n": 0}
    return {"mean": float(np.mean(vals)), "sd": float(np.std(vals, ddof=1)) if len(vals) > 1 else None,
            "n": len(vals)}


def _metric(record: dict, key: str, sub: str) -> float | None:
    value = record.get(key)
    return value.get(sub) if isinstance(value, dict) else value


def aggregate(runs: Sequence[dict]) -> dict[str, dict[str, dict]]:
    """Mean and s.d. over runs of every table cell: ``{method: {"key.sub": {"mean", "sd", "n"}}}``."""
    out: dict[str, dict[str, dict]] = {}
    from toxiforge.bias.experiment_report import TABLES

    cells = {(k, s) for table in TABLES for _, k, s in table.columns}
    for method in dict.fromkeys(r["method"] for r in runs):
        records = [r for r in runs if r["method"] == method]
        out[method] = {f"{k}.{s}" if s else k: _mean_sd([_metric(r, k, s) for r in records]) for k, s in cells}
    return out


def spread_label(runs: int, seed: int, redraw: bool) -> str:
    """What the ± of the tables is."""
    if runs == 1:
        return "one run, no s.d."
    if redraw:
        return f"mean ± s.d. over {runs} runs (seeds {seed}..{seed + runs - 1}), each drawing its own subsets"
    return (f"mean ± s.d. over {runs} training seeds ({seed}..{seed + runs - 1}) on one subset per method, drawn "
            f"with seed {seed}")


def _digest(index: np.ndarray) -> str:
    """A short fingerprint of a subset's row indices (equal subsets, equal digests)."""
    import hashlib

    return hashlib.sha1(np.asarray(index, dtype=np.int64).tobytes()).hexdigest()[:12]


def _measure(rows: Sequence[Example], name: str, lexicon: Any, dialect_model: Any,
             scores: np.ndarray | None = None, threshold: float = TOXIC_THRESHOLD,
             aae_threshold: float | None = None, *, flags: dict[str, np.ndarray] | None = None,
             p_dialect: np.ndarray | None = None) -> dict:
    from toxiforge.bias.measure import measure_data

    data = LabeledData(name=name, examples=list(rows), layout="subset", source=name)
    return measure_data(data, lexicon=lexicon, dialect_model=dialect_model, scores=scores, threshold=threshold,
                        aae_threshold=aae_threshold, flags=flags, p_dialect=p_dialect).report.to_json()


def run_debias_experiment(train: Sequence[Example], eval_data: LabeledData, out_dir: str | Path,
                          settings: DebiasSettings, *, relabeled: Sequence[Example] | None = None,
                          relabeler: Callable[[Sequence[Example], Any, Path], list[Example]] | None = None,
                          dialect_model: Any = None, dialect_source: str | None = None, overwrite: bool = False,
                          split: dict[str, Any] | None = None, resume: bool = False,
                          on_step: Callable[[str], None] | None = None) -> dict:
    """Train and measure every method ``settings.runs`` times; write ``debias.json``, ``debias.md`` and
    ``debias.png``. AAE-relabeled trains on ``relabeled``, or on what ``relabeler(train, classifier, out_dir)``
    returns, called once with the first run's Vanilla model (Zhou et al. judge the translations with the vanilla
    classifier). ``split`` (from :func:`stratified_split`) is recorded in ``debias.json``. ``resume`` goes on with
    a stopped run in ``out_dir`` (:mod:`toxiforge.bias.experiment_state`): only what is missing is trained."""
    from toxiforge._io import atomic_write_text, require_empty_dir
    from toxiforge.bias.aflite import AFLiteConfig, aflite, aflite_subset
    from toxiforge.bias.bias_only import bias_only_probabilities, dialect_bias
    from toxiforge.bias.datamaps import REGIONS, DataMapRecorder, region_pool, region_subset
    from toxiforge.bias.experiment_report import plot_methods, render_markdown
    from toxiforge.bias.experiment_split import aae_rule_counts, rule_fprs
    from toxiforge.bias.experiment_state import ExperimentState, rows_digest
    from toxiforge.bias.lexicon import default_bias_lexicon, load_bias_lexicon
    from toxiforge.bias.subsets import count_outside, random_subset, subset_size
    from toxiforge.classifiers import load_classifier
    from toxiforge.training.debias import train_debiased
    from toxiforge.training.trainer import train_classifier

    out = require_empty_dir(out_dir, overwrite or resume, flag="--overwrite (start again) or --resume (go on)")
    say = on_step or (lambda message: None)
    notes: list[str] = []
    train = list(train)
    labels = np.array([e.label for e in train])
    if len(np.unique(labels)) < 2:
        raise InputError("the training data has a single class", hint="give toxic and benign training rows")
    if relabeled is not None and relabeler is not None:
        raise InputError("both relabeled rows and a relabeler given", hint="pass one")
    methods = [m for m in settings.methods if m != "AAE-relabeled" or relabeled is not None or relabeler is not None]
    if "AAE-relabeled" in settings.methods and "AAE-relabeled" not in methods:
        notes.append("AAE-relabeled not run: no relabeled data (pass --relabel, or --relabeled FILE)")
    lexicon = load_bias_lexicon(settings.lexicon) if settings.lexicon else default_bias_lexicon()
    lexicon_spec = f":{settings.lexicon}" if settings.lexicon else ""
    state = ExperimentState.open(out, {
        "settings": asdict(settings), "train_rows": [len(train), rows_digest(train)],
        "eval_rows": [len(eval_data), rows_digest(eval_data.examples)], "split": split, "dialect": dialect_source,
        "relabel": "in the run" if relabeler is not None else rows_digest(relabeled) if relabeled else None}, resume)
    if resume and relabeler is not None and (out / "relabeled.manifest.json").exists():
        from toxiforge.data import load_specs

        say("reading the relabeled training data made before")
        (done,) = load_specs([str(out / "relabeled.parquet")], label_column="label", text_column="text")
        relabeled, relabeler = done.examples, None
    size = subset_size(len(train), settings.fraction)
    embeddings, embed_seconds = None, 0.0

    def embedded() -> np.ndarray:
        """The training texts' encoder embeddings for AFLite, computed on first need (not when resumed subsets
        are read)."""
        nonlocal embeddings, embed_seconds
        if embeddings is None:
            from toxiforge.analysis.embeddings import embed_texts, load_encoder

            say(f"embedding {len(train)} training texts with {settings.encoder}")
            started = time.perf_counter()
            embeddings = embed_texts([e.text for e in train], load_encoder(settings.encoder,
                                                                           device=settings.train.device))
            embed_seconds = time.perf_counter() - started
        return embeddings
    bias_probs: dict[str, np.ndarray] = {}
    for method, kind in BIAS_ONLY_OF.items():
        if method not in methods:
            continue
        try:
            if kind == "dialect":
                if dialect_model is None:
                    raise InputError(f"no dialect model ({dialect_source or 'none given'})")
                bias_probs[method] = dialect_bias("", examples=train, model=dialect_model)
            else:
                bias_probs[method] = bias_only_probabilities(kind + lexicon_spec, train)
        except InputError as exc:  # e.g. no ONI word in the training texts: nothing to debias against
            notes.append(f"{method} skipped: {exc}")
            methods.remove(method)
    if "LMIXIN-TOXTRIG" in methods and lexicon.toxtrig_note():
        notes.append(f"LMIXIN-TOXTRIG and the TOXTRIG cells: {lexicon.toxtrig_note()}")
    eval_texts = eval_data.texts
    eval_labels = np.array(eval_data.labels)
    device = settings.train.device
    # tags and dialects of the evaluation and training texts, computed once for every model measured on them
    eval_flags, train_flags = lexicon.tag(eval_texts), lexicon.tag([e.text for e in train])
    eval_p: np.ndarray | None = None
    train_p: np.ndarray | None = None
    aae_rules: dict[str, Any] | None = None
    if dialect_model is not None:
        from toxiforge.bias.dialect import predict_dialects

        eval_p, train_p = predict_dialects(eval_texts, dialect_model), predict_dialects([e.text for e in train],
                                                                                        dialect_model)
        aae_rules = {"used": "argmax (AAE the most probable dialect: Zhou et al., upstream)"
                     if settings.aae_threshold is None else f"p(AAE) > {settings.aae_threshold:g}",
                     "splits": aae_rule_counts({"evaluation": (eval_data.examples, eval_p),
                                                "training": (train, train_p)})}
    relabel_seconds = None
    subsets: dict[str, np.ndarray] = {}
    top_ups: dict[str, int] = {}
    started = time.perf_counter()
    reused = len(state.done)
    for run in range(settings.runs):
        seed = settings.train.seed + run
        config = replace(settings.train, seed=seed)
        folder = out / "models" / f"run{run}"
        pending = [m for m in methods if not state.measured(run, m)]
        draws = run == 0 or settings.redraw_subsets  # else every run trains on the first run's subsets
        saved = state.load_subsets(run if settings.redraw_subsets else 0)
        needs_map = draws and saved is None and any(m in SUBSET_METHODS for m in methods)
        relabel_now = run == 0 and relabeler is not None and "AAE-relabeled" in methods
        if not pending and not needs_map and not relabel_now:
            say(f"run {run + 1}/{settings.runs}: measured before")
            continue
        trained: dict[str, np.ndarray] = {}
        seconds: dict[str, float | None] = {}

        def fit(method: str, index: np.ndarray | None = None, callbacks: Sequence[Any] = (), *, run: int = run,
                folder: Path = folder, config: Any = config, trained: dict = trained, seconds: dict = seconds,
                again: bool = False, rows: Sequence[Example] | None = None) -> None:
            trained[method] = np.arange(len(train)) if index is None else index
            before = None if again else state.trained_seconds(folder / method)
            if before is not None:  # trained before a stop, not measured yet
                seconds[method] = before
                return
            say(f"run {run + 1}/{settings.runs}: training {method}")
            rows = rows if rows is not None else train if index is None else [train[i] for i in index]
            begun = time.perf_counter()
            if method in bias_probs:  # overwrite: a model a stop cut short is trained again
                train_debiased(rows, folder / method, config, bias_probs=bias_probs[method],
                               bias_only=BIAS_ONLY_OF[method] + lexicon_spec, progress=False, overwrite=True)
            else:
                train_classifier(rows, folder / method, config, progress=False, callbacks=callbacks, overwrite=True)
            seconds[method] = time.perf_counter() - begun
            state.save_seconds(folder / method, seconds[method])

        recorder = DataMapRecorder(len(train))
        if "Vanilla" in pending or needs_map or relabel_now:
            fit("Vanilla", callbacks=[recorder], again=needs_map)  # the data map needs its training dynamics
        if saved is not None:
            subsets, top_ups = saved
        elif draws:
            draw = seed if settings.redraw_subsets else settings.train.seed
            subsets, top_ups = {}, {}
            if "Random" in methods:
                subsets["Random"] = random_subset(labels, size, seed=draw)
            if "AFLite" in methods:
                result = aflite(embedded(), labels, AFLiteConfig(target_size=len(train) // 2,
                                                                 ensemble_size=settings.aflite_ensemble, seed=draw))
                subsets["AFLite"], top_ups["AFLite"] = aflite_subset(result, labels, size, seed=draw)
            regions = [r for r in REGIONS if f"DataMaps-{r.capitalize()}" in methods]
            for region in regions:
                dynamics = recorder.dynamics()
                name = f"DataMaps-{region.capitalize()}"
                subsets[name] = region_subset(dynamics, labels, region, fraction=settings.fraction, seed=draw)
                top_ups[name] = count_outside(subsets[name], region_pool(dynamics, region))
            state.save_subsets(run if settings.redraw_subsets else 0, subsets, top_ups)
        if relabel_now:
            assert relabeler is not None
            say("relabeling the training data: translating AAE rows, judged by run 1's Vanilla")
            begun = time.perf_counter()
            relabeled = relabeler(train, load_classifier(folder / "Vanilla", device=device), out)
            relabel_seconds = time.perf_counter() - begun
            relabeler = None
        for method in pending:
            if method in BIAS_ONLY_OF:
                fit(method)
            elif method in subsets:
                fit(method, subsets[method])
            elif method == "AAE-relabeled" and relabeled is not None:
                fit(method, rows=list(relabeled))
        for method in pending:
            if method == "AAE-relabeled" and relabeled is not None:  # else not in methods
                train_rows = list(relabeled)
            elif method in trained:
                train_rows = [train[i] for i in trained[method]]
            else:
                continue
            say(f"run {run + 1}/{settings.runs}: measuring {method}")
            scores = np.asarray(load_classifier(folder / method, device=device).predict_proba(eval_texts))
            report = _measure(eval_data.examples, eval_data.name, lexicon, dialect_model, scores,
                              settings.threshold, settings.aae_threshold, flags=eval_flags, p_dialect=eval_p)
            index = None if method == "AAE-relabeled" else trained.get(method)  # relabeled texts are not train's
            own = _measure(train_rows, method, lexicon, dialect_model,
                           flags=None if index is None else {k: v[index] for k, v in train_flags.items()},
                           p_dialect=None if index is None or train_p is None else train_p[index])
            state.record({"method": method, "run": run, "seed": seed, "n_train": len(train_rows),
                          "top_ups": top_ups.get(method, 0), "subset": _digest(trained[method])
                          if method in subsets else None, "train_r": own["pearson_r"],
                          "toxic_ratio": float(np.mean([e.label for e in train_rows])),
                          "accuracy": report["accuracy"], "f1": report["f1"], "fpr": report["fpr"],
                          "n_eval": report["n"], "n_benign_eval": report["n_benign"],
                          "fpr_aae_rules": None if eval_p is None else rule_fprs(
                              eval_labels, scores, eval_p, settings.threshold),
                          "train_seconds": seconds.get(method)})
        if not settings.keep_models:
            shutil.rmtree(folder, ignore_errors=True)
    records = state.records()
    for run in range(settings.runs) if settings.redraw_subsets else (0,):
        drawn, extras = state.load_subsets(run) or ({}, {})
        notes += [f"{name}{f' (run {run + 1})' if settings.redraw_subsets else ''}: {extra} of {len(drawn[name])} "
                  f"rows are top-ups from outside the {'survivors' if name == 'AFLite' else 'region'}, which lacked "
                  "a label" for name, extra in extras.items() if extra]
    if not settings.keep_models and (out / "models").exists():
        shutil.rmtree(out / "models")
    if dialect_model is not None and settings.aae_threshold is not None:
        notes.append(f"AAE rows (F1 AAE, FPR AAE): p(AAE) > {settings.aae_threshold:g}, not the most probable "
                     "dialect (Zhou et al.'s rule)")
    if dialect_model is None:
        notes.append(f"no dialect model ({dialect_source or 'none given'}): the AAE cells are empty")
    notes.append(lexicon.match_note())
    summary = aggregate(records)
    rule_fpr = {m: {rule: _mean_sd([r["fpr_aae_rules"][rule] for r in records if r["method"] == m])
                    for rule in (aae_rules or {}).get("splits", {}).get("evaluation", {})}
                for m in summary} if aae_rules else {}
    counts = {"n": records[0]["n_eval"], "n_benign": records[0]["n_benign_eval"]} if records else None
    manifest = {"settings": {**{k: v for k, v in asdict(settings).items() if k != "train"},
                             "train": asdict(settings.train)},
                "train_rows": len(train), "eval": eval_data.describe(), "split": split, "subset_size": size,
                "embed_seconds": embed_seconds, "relabel_seconds": relabel_seconds,
                "seconds": time.perf_counter() - started, "records_reused": reused,
                "lexicon": lexicon.describe(), "lexicon_match": lexicon.match,
                "dialect": dialect_source,
                "aae_rules": aae_rules, "notes": notes, "summary": summary, "fpr_aae_by_rule": rule_fpr,
                "runs": records}
    spread = spread_label(settings.runs, settings.train.seed, settings.redraw_subsets)
    manifest["spread"] = spread
    plot = None
    if records:
        plot = plot_methods(records, out / "debias.png").name
    atomic_write_text(out / "debias.json", json.dumps(manifest, indent=2, default=str))
    atomic_write_text(out / "debias.md", render_markdown(summary, runs=settings.runs, counts=counts, notes=notes,
                                                         spread=spread, aae_rules=aae_rules, rule_fpr=rule_fpr,
                                                         plot=plot))
    return manifest
