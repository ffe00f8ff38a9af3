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


def stratified_split(examples: Sequence[Example], fraction: float, seed: int
                     ) -> tuple[list[Example], list[Example], dict[str, Any]]:
    """``(train, test, record)``: a seeded label-stratified split holding out ``fraction`` of each label
    (:func:`~toxiforge.training.trainer.split_heldout_indices`, the split ``train`` uses), and what to record
    of it: the fraction, seed, sizes and the test rows' positions in ``examples``."""
    from toxiforge.training.trainer import split_heldout_indices

    if not 0 < fraction < 1:
        raise InputError(f"--test-fraction must be in (0, 1), got {fraction}", hint="e.g. --test-fraction 0.2")
    train_idx, test_idx = split_heldout_indices([e.label for e in examples], fraction, seed)
    if len(train_idx) < 2 or len(test_idx) < 2:
        raise InputError(f"a {fraction:g} split of {len(examples)} rows leaves {len(train_idx)} to train on and "
                         f"{len(test_idx)} to test", hint="give more rows or another --test-fraction")
    record = {"fraction": fraction, "seed": seed, "stratified_by": "label", "n_train": len(train_idx),
              "n_test": len(test_idx), "test_toxic": sum(examples[i].label for i in test_idx),
              "test_positions": sorted(test_idx)}
    return [examples[i] for i in train_idx], [examples[i] for i in test_idx], record


def stratified_subsample(examples: Sequence[Example], n: int, seed: int) -> list[Example]:
    """About ``n`` of ``examples`` (each label's share kept, seeded): the training size of a run that must fit a
    time budget, taken after :func:`stratified_split` so the evaluation rows stay the same."""
    from toxiforge.training.trainer import split_heldout_indices

    if not 2 <= n:
        raise InputError(f"--train-rows must be at least 2, got {n}", hint="e.g. --train-rows 2000")
    if n >= len(examples):
        return list(examples)
    _, kept = split_heldout_indices([e.label for e in examples], n / len(examples), seed)
    return [examples[i] for i in sorted(kept)]


def aae_rule_counts(splits: dict[str, tuple[Sequence[Example], np.ndarray]]) -> dict[str, Any]:
    """Rows each AAE selection rule takes (argmax, p(AAE) > 0.5, > 0.8) in each split, and its benign rows."""
    from toxiforge.bias.experiment_report import RULES
    from toxiforge.bias.metrics import aae_members

    out: dict[str, Any] = {}
    for name, (rows, p_dialect) in splits.items():
        labels = np.array([e.label for e in rows])
        out[name] = {}
        for rule, threshold in RULES:
            member = aae_members(p_dialect, threshold)
            out[name][rule] = {"n": int(member.sum()), "of": len(rows), "n_benign": int((member & (labels == 0)).sum())}
    return out


def _rule_fprs(labels: np.ndarray, scores: np.ndarray, p_dialect: np.ndarray, threshold: float) -> dict:
    from toxiforge.bias.experiment_report import RULES
    from toxiforge.bias.metrics import aae_members, false_positive_rate
    from toxiforge.records import is_toxic

    preds = is_toxic(scores, threshold).astype(np.int64)
    out = {}
    for rule, cut in RULES:
        member = aae_members(p_dialect, cut)
        out[rule] = false_positive_rate(labels[member], preds[member]) if member.any() else None
    return out


def run_debias_experiment(train: Sequence[Example], eval_data: LabeledData, out_dir: str | Path,
                          settings: DebiasSettings, *, relabeled: Sequence[Example] | None = None,
                          relabeler: Callable[[Sequence[Example], Any, Path], list[Example]] | None = None,
                          dialect_model: Any = None, dialect_source: str | None = None, overwrite: bool = False,
                          split: dict[str, Any] | None = None,
                          on_step: Callable[[str], None] | None = None) -> dict:
    """Train and measure every method ``settings.runs`` times; write ``debias.json``, ``debias.md`` and
    ``debias.png``. AAE-relabeled trains on ``relabeled``, or on what ``relabeler(train, classifier, out_dir)``
    returns, called once with the first run's Vanilla model (Zhou et al. judge the translations with the vanilla
    classifier). ``split`` (from :func:`stratified_split`) is recorded in ``debias.json``."""
    from toxiforge._io import atomic_write_text, require_empty_dir
    from toxiforge.bias.aflite import AFLiteConfig, aflite, aflite_subset
    from toxiforge.bias.bias_only import bias_only_probabilities, dialect_bias
    from toxiforge.bias.datamaps import REGIONS, DataMapRecorder, region_pool, region_subset
    from toxiforge.bias.experiment_report import plot_methods, render_markdown
    from toxiforge.bias.lexicon import default_bias_lexicon, load_bias_lexicon
    from toxiforge.bias.subsets import count_outside, random_subset, subset_size
    from toxiforge.classifiers import load_classifier
    from toxiforge.training.debias import train_debiased
    from toxiforge.training.trainer import train_classifier

    out = require_empty_dir(out_dir, overwrite)
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
    size = subset_size(len(train), settings.fraction)
    embeddings, embed_seconds = None, 0.0
    if "AFLite" in methods:
        from toxiforge.analysis.embeddings import embed_texts, load_encoder

        say(f"embedding {len(train)} training texts with {settings.encoder}")
        started = time.perf_counter()
        embeddings = embed_texts([e.text for e in train], load_encoder(settings.encoder, device=settings.train.device))
        embed_seconds = time.perf_counter() - started
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
    records: list[dict] = []
    subsets: dict[str, np.ndarray] = {}
    top_ups: dict[str, int] = {}
    started = time.perf_counter()
    for run in range(settings.runs):
        seed = settings.train.seed + run
        config = replace(settings.train, seed=seed)
        folder = out / "models" / f"run{run}"
        trained: dict[str, np.ndarray] = {}
        seconds: dict[str, float] = {}

        def fit(method: str, index: np.ndarray | None = None, callbacks: Sequence[Any] = (), *, run: int = run,
                folder: Path = folder, config: Any = config, trained: dict = trained,
                seconds: dict = seconds) -> None:
            say(f"run {run + 1}/{settings.runs}: training {method}")
            rows = train if index is None else [train[i] for i in index]
            begun = time.perf_counter()
            if method in bias_probs:
                train_debiased(rows, folder / method, config, bias_probs=bias_probs[method],
                               bias_only=BIAS_ONLY_OF[method] + lexicon_spec, progress=False)
            else:
                train_classifier(rows, folder / method, config, progress=False, callbacks=callbacks)
            seconds[method] = time.perf_counter() - begun
            trained[method] = np.arange(len(train)) if index is None else index

        recorder = DataMapRecorder(len(train))
        fit("Vanilla", callbacks=[recorder])
        if run == 0 and relabeler is not None and "AAE-relabeled" in methods:
            say("relabeling the training data: translating AAE rows, judged by run 1's Vanilla")
            begun = time.perf_counter()
            relabeled = relabeler(train, load_classifier(folder / "Vanilla", device=device), out)
            relabel_seconds = time.perf_counter() - begun
        if run == 0 or settings.redraw_subsets:  # else every run trains on the first run's subsets
            draw = seed if settings.redraw_subsets else settings.train.seed
            subsets, top_ups = {}, {}
            if "Random" in methods:
                subsets["Random"] = random_subset(labels, size, seed=draw)
            if embeddings is not None:
                result = aflite(embeddings, labels, AFLiteConfig(target_size=len(train) // 2,
                                                                 ensemble_size=settings.aflite_ensemble, seed=draw))
                subsets["AFLite"], top_ups["AFLite"] = aflite_subset(result, labels, size, seed=draw)
            regions = [r for r in REGIONS if f"DataMaps-{r.capitalize()}" in methods]
            for region in regions:
                dynamics = recorder.dynamics()
                name = f"DataMaps-{region.capitalize()}"
                subsets[name] = region_subset(dynamics, labels, region, fraction=settings.fraction, seed=draw)
                top_ups[name] = count_outside(subsets[name], region_pool(dynamics, region))
            for name, extra in top_ups.items():
                if extra:
                    notes.append(f"{name}{f' (run {run + 1})' if settings.redraw_subsets else ''}: {extra} of "
                                 f"{len(subsets[name])} rows are top-ups from outside the "
                                 f"{'survivors' if name == 'AFLite' else 'region'}, which lacked a label")
        for method in methods:
            if method in BIAS_ONLY_OF:
                fit(method)
            elif method in subsets:
                fit(method, subsets[method])
        for method in methods:
            if method == "AAE-relabeled" and relabeled is not None:  # else not in methods
                say(f"run {run + 1}/{settings.runs}: training {method}")
                begun = time.perf_counter()
                train_classifier(list(relabeled), folder / method, config, progress=False)
                seconds[method] = time.perf_counter() - begun
                train_rows = list(relabeled)
            elif method in trained:
                train_rows = [train[i] for i in trained[method]]
            else:
                continue
            say(f"run {run + 1}/{settings.runs}: measuring {method}")
            scores = np.asarray(load_classifier(folder / method, device=device).predict_proba(eval_texts))
            report = _measure(eval_data.examples, eval_data.name, lexicon, dialect_model, scores,
                              settings.threshold, settings.aae_threshold, flags=eval_flags, p_dialect=eval_p)
            index = trained.get(method)  # None: the relabeled rows, which are not the training rows' texts
            own = _measure(train_rows, method, lexicon, dialect_model,
                           flags=None if index is None else {k: v[index] for k, v in train_flags.items()},
                           p_dialect=None if index is None or train_p is None else train_p[index])
            records.append({"method": method, "run": run, "seed": seed, "n_train": len(train_rows),
                            "top_ups": top_ups.get(method, 0), "subset": _digest(trained[method])
                            if method in subsets else None, "train_r": own["pearson_r"],
                            "toxic_ratio": float(np.mean([e.label for e in train_rows])),
                            "accuracy": report["accuracy"], "f1": report["f1"], "fpr": report["fpr"],
                            "n_eval": report["n"], "n_benign_eval": report["n_benign"],
                            "fpr_aae_rules": None if eval_p is None else _rule_fprs(
                                eval_labels, scores, eval_p, settings.threshold),
                            "train_seconds": seconds.get(method)})
            with (out / "runs.jsonl").open("a") as log:  # each model as it is measured: a cut run keeps them
                log.write(json.dumps(records[-1], default=str) + "\n")
        if not settings.keep_models:
            shutil.rmtree(folder)
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
                "seconds": time.perf_counter() - started, "lexicon": lexicon.describe(), "lexicon_match": lexicon.match,
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
