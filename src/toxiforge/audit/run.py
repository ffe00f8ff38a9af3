"""``toxiforge audit`` as a library call: classifiers × datasets -> cached scores -> sections -> comparison.

:func:`run_audit` checks everything it can before any scoring (the datasets load and have labels, the classifier
specs and their options are valid, names are unique, the output folder may be written), then scores each
(classifier, dataset) pair through :class:`~toxiforge.audit.scores.ScoreCache` (a classifier is loaded only when
one of its pairs is not cached yet), and computes every section from the scores. Before scoring starts, the
report a previous audit left in the folder is removed (:func:`~toxiforge.audit.report.clear_report`), so a stopped
audit never leaves an old report looking current, and so are the scores recorded for a ``-c`` under an earlier
digest (its folder retrained: :meth:`~toxiforge.audit.scores.ScoreCache.remove_stale`). Ctrl-C anywhere in the
audit (a classifier loading, scoring, an attack, the metrics; :func:`interruption`) or a classifier that fails
mid-run keeps each finished pair (and the finished chunks of the one in progress) and says how many of this
audit's pairs are finished and to rerun with ``--resume``; a resumed audit says where each pair in progress restarts
(its row) and reports each cached classifier's ``describe()`` from its cached scores' record, without loading it.
Scoring shows a bar of rows done, rows/s and ETA per pair on a terminal, and a line with the rate per pair elsewhere
(a CI log).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge.audit.compare import compare
from toxiforge.audit.metrics import accuracy_section, calibration_section, group_section, reliability
from toxiforge.audit.scores import ScoreCache, classifier_digest, dataset_digest
from toxiforge.audit.sections import LexicalContext, has_functional_tests, hatecheck_section, lexical_section
from toxiforge.data.examples import LabeledData
from toxiforge.errors import InputError, Interrupted, ToxiforgeError
from toxiforge.intervals import Resampler
from toxiforge.records import TOXIC_THRESHOLD

RESUME_HINT = "rerun the same command with --resume: finished (classifier, dataset) pairs are not scored again"


@dataclass(frozen=True)
class ClassifierSpec:
    """A ``-c`` value: ``NAME=SPEC`` names the report column, else the spec is its own name."""

    name: str
    spec: str

    @classmethod
    def parse(cls, text: str) -> ClassifierSpec:
        head, sep, rest = text.partition("=")
        if sep and head.strip() and not any(c in head for c in ":/\\") and not Path(text).exists():
            if not rest.strip():
                raise InputError(f"no classifier after the name in {text!r}", hint="write -c NAME=SPEC")
            return cls(head.strip(), rest.strip())
        return cls(text.strip(), text.strip())


@dataclass
class AuditSettings:
    n_boot: int = 1000
    seed: int = 0
    threshold: float = TOXIC_THRESHOLD
    resume: bool = False
    classifier_options: dict[str, Any] = field(default_factory=dict)   # load_classifier keyword arguments
    lexicon: str | None = None
    oi_list: Path | None = None
    dialect_model: Path | None = None
    ray: Any = None  # a RayConfig: each classifier scores on a pool of Ray actors (`classify --ray`'s backend)
    attacks: tuple[str, ...] = ()  # attack families of the attack section (audit/attacks.py)
    attack_n: int = 100            # flagged toxic rows attacked per (classifier, dataset) at most
    prompt_attack: Any = None      # a PromptAttack: ALICE vs top-k from prompts per classifier (prompt_attacks.py)

    def __post_init__(self) -> None:
        if self.attack_n < 1:
            raise InputError(f"--attack-n {self.attack_n} must be at least 1", hint="e.g. --attack-n 100")
        if self.n_boot < 0:
            raise InputError(f"--bootstrap {self.n_boot} is negative", hint="use 0 (no intervals) or more, e.g. 1000")
        if not 0.0 <= self.threshold <= 1.0:
            raise InputError(f"--threshold {self.threshold} is outside [0, 1]", hint="use a probability, e.g. 0.5")


class AuditInterrupted(Interrupted):
    def __init__(self, kept: int, out: Path):
        super().__init__()
        self.kept, self.out = kept, out

    def line(self) -> str:
        return f"interrupted: {self.kept} finished (classifier, dataset) pairs kept in {self.out}; {RESUME_HINT}"


@contextmanager
def interruption(out: str | Path, cache: ScoreCache | None = None) -> Iterator[None]:
    """Ctrl-C inside the block becomes :class:`AuditInterrupted` (what was kept of the audit's pairs, ``cache``'s,
    and the --resume hint)."""
    try:
        yield
    except KeyboardInterrupt as exc:
        if isinstance(exc, Interrupted):
            raise
        raise AuditInterrupted((cache or ScoreCache(out)).finished(), Path(out)) from exc


@dataclass
class PairResult:
    """One classifier on one dataset: its scores and sections (name -> metrics)."""

    scores: np.ndarray
    sections: dict[str, Any]
    scored_now: bool


@dataclass
class AuditResult:
    classifiers: list[ClassifierSpec]
    datasets: list[LabeledData]
    pairs: dict[tuple[str, str], PairResult]   # (classifier name, dataset name)
    comparison: dict[str, dict[str, Any]]      # dataset -> classifier (not the first) -> section -> ...
    info: dict[str, dict[str, Any]]            # classifier name -> spec, digest, describe()
    settings: AuditSettings
    lexical_note: str
    seconds: dict[str, float]
    prompt_attacks: dict[str, dict[str, Any]] = field(default_factory=dict)  # classifier name -> section
    cache: ScoreCache | None = None            # the scores of this audit's pairs

    def pair(self, classifier: str, dataset: str) -> PairResult:
        return self.pairs[(classifier, dataset)]


def check_inputs(classifiers: Sequence[ClassifierSpec], datasets: Sequence[LabeledData], settings: AuditSettings
                 ) -> None:
    """Every error that can be found before scoring."""
    from toxiforge.classifiers.registry import check_classifier_options

    if not classifiers:
        raise InputError("no classifier to audit", hint="pass -c NAME (several -c compare them)")
    names = [c.name for c in classifiers]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise InputError(f"classifier name(s) {twice} given twice", hint="name each column: -c NAME=SPEC")
    for c in classifiers:
        check_classifier_options(c.spec, settings.classifier_options)


def run_audit(classifiers: Sequence[ClassifierSpec], datasets: Sequence[LabeledData], out: str | Path,
              settings: AuditSettings, *, loader: Callable[..., Any] | None = None,
              log: Callable[[str], None] = lambda line: None, progress: Any = None,
              also_clear: Sequence[Path] = ()) -> AuditResult:
    """Score (or read from the cache) and compute every section; ``loader`` is
    :func:`toxiforge.classifiers.load_classifier` unless given (tests pass fakes); ``log`` gets progress lines;
    ``progress``: a rich Console to draw each pair's scoring bar on (rows done, rows/s, ETA), None for none (a line
    with the rate after each pair instead); ``also_clear``: other outputs of this audit (the gate's JUnit file),
    removed with the old report once every input is checked."""
    cache = ScoreCache(out)
    with interruption(out, cache):
        return _run_audit(classifiers, datasets, out, settings, cache, loader=loader, log=log, progress=progress,
                          also_clear=also_clear)


def _run_audit(classifiers: Sequence[ClassifierSpec], datasets: Sequence[LabeledData], out: str | Path,
               settings: AuditSettings, cache: ScoreCache, *, loader: Callable[..., Any] | None,
               log: Callable[[str], None], progress: Any, also_clear: Sequence[Path]) -> AuditResult:
    from toxiforge.audit.report import clear_report
    from toxiforge.classifiers.registry import contamination, known_training_sets
    from toxiforge.classifiers.scoring import score_texts

    if loader is None:
        from toxiforge.classifiers import load_classifier

        loader = load_classifier
    if settings.ray is not None:
        from toxiforge.pipeline.ray_runner import RayClassifier

        local, config = loader, settings.ray
        loader = lambda spec, **options: RayClassifier(partial(local, spec, **options), config)  # noqa: E731
    check_inputs(classifiers, datasets, settings)
    if settings.attacks:
        from toxiforge.audit.attacks import AttackCache, attack_record, check_families, summarise

        settings.attacks = check_families(settings.attacks)
        attack_cache = AttackCache(out)
    prompt_attack = settings.prompt_attack
    if prompt_attack is not None:
        from toxiforge.audit import prompt_attacks as pa

        prompt_attack.check([c.spec for c in classifiers])
        outcomes = pa.OutcomeCache(out, prompt_attack)
    # every input is checked: from here on, OUT holds no report (nor the gate's JUnit) until this audit writes one
    clear_report(out, also_clear)
    prompt_sections: dict[str, dict[str, Any]] = {}
    attack_sections: dict[tuple[str, str], dict[str, Any]] = {}
    context = LexicalContext(settings.lexicon, settings.oi_list, settings.dialect_model)
    data_keys = {d.name: dataset_digest(d) for d in datasets}
    keys = {c.name: classifier_digest(c.spec, settings.classifier_options) for c in classifiers}
    cache.pairs = [(keys[c.name], data_keys[d.name]) for c in classifiers for d in datasets]
    for c in classifiers:   # scores of an earlier digest of the same -c (retrained, other options): never read again
        cache.remove_stale(c.spec, set(keys.values()))
    info: dict[str, dict[str, Any]] = {}
    all_scores: dict[tuple[str, str], tuple[np.ndarray, bool]] = {}
    started = time.perf_counter()
    for c in classifiers:
        key = keys[c.name]
        info[c.name] = {"spec": c.spec, "digest": key,
                        "trained_on": [t.describe() for t in known_training_sets(c.spec)]}
        clf = None

        def loaded(c: ClassifierSpec = c) -> Any:
            """The classifier, loaded on first need (an audit whose scores are all cached loads none)."""
            nonlocal clf
            if clf is None:
                clf = loader(c.spec, **settings.classifier_options)
                info[c.name]["describe"] = clf.describe()
            return clf

        try:
            for data in datasets:
                cached = cache.get(key, data_keys[data.name], len(data)) if settings.resume else None
                if cached is not None:
                    all_scores[(c.name, data.name)] = (cached, False)
                    info[c.name].setdefault("describe", cache.info(key, data_keys[data.name]).get("describe"))
                    log(f"{c.name} on {data.name}: {len(data)} scores from the cache")
                    continue
                scorer = loaded()
                where = f"{c.name} on {data.name}"
                kept = len(cache.partial(key, data_keys[data.name]))
                kept = kept if kept <= len(data) else 0   # the cache starts over on a longer partial file
                log(f"scoring {data.name} ({len(data)} rows) with {c.name}" + (
                    f": restarting at row {kept + 1} of {len(data)}, the {kept} rows scored before the stop are "
                    "kept" if kept else ""))
                try:
                    scores = scored_with_progress(cache, key, data_keys[data.name], data, scorer, kept, progress,
                                                  f"scoring {data.name} with {c.name}", log, {
                                                      "classifier": c.name, **info[c.name],
                                                      "dataset": data.describe()})
                except KeyboardInterrupt as exc:
                    raise AuditInterrupted(cache.finished(), Path(out)) from exc
                except ToxiforgeError as exc:
                    raise ToxiforgeError(f"{where}: {exc}; {cache.finished()} finished pairs are kept in {out}, "
                                         f"{RESUME_HINT}") from exc
                except Exception as exc:
                    rows = len(cache.partial(key, data_keys[data.name]))
                    raise ToxiforgeError(f"{where} failed after {rows} rows ({type(exc).__name__}: {exc}). Fix: "
                                         f"{cache.finished()} finished pairs and those {rows} rows are kept in {out}; "
                                         f"fix the classifier, then {RESUME_HINT}") from exc
                bad = int((~np.isfinite(scores) | (scores < 0) | (scores > 1)).sum())
                if bad:
                    raise InputError(f"{where}: {bad} scores are NaN or outside [0, 1]",
                                     hint="check the classifier: it must return P(toxic) per text")
                all_scores[(c.name, data.name)] = (scores, True)
            for data in datasets if settings.attacks else ():
                path = attack_cache.path(key, data_keys[data.name], settings.attacks, settings.attack_n, settings.seed,
                                         settings.threshold)
                record = attack_cache.get(path) if settings.resume else None
                if record is None:
                    log(f"attacking flagged toxic rows of {data.name} with {c.name}: {', '.join(settings.attacks)}")
                    record = attack_record(data, all_scores[(c.name, data.name)][0], loaded(), settings.attacks,
                                           n=settings.attack_n, seed=settings.seed, threshold=settings.threshold)
                    attack_cache.put(path, record)
                attack_sections[(c.name, data.name)] = summarise(record["outcomes"], record["candidates"],
                                                                 settings.n_boot, settings.seed)
            if prompt_attack is not None:
                found = outcomes.get(outcomes.path(key)) if settings.resume else None
                if found is None:
                    found = pa.attack_outcomes(prompt_attack, Path(out), loaded(), key, c.name,
                                               partial(score_texts, loaded()), log)
                    outcomes.put(outcomes.path(key), found)
                prompt_sections[c.name] = pa.summarise(found, settings.n_boot, settings.seed)
        finally:
            if settings.ray is not None and clf is not None:
                clf.close()  # the Ray actors of this classifier: each loads a model
    scoring = time.perf_counter() - started
    started = time.perf_counter()
    pairs = {k: PairResult(s, sections(next(d for d in datasets if d.name == k[1]), s, context, settings), now)
             for k, (s, now) in all_scores.items()}
    for pair, section in attack_sections.items():
        pairs[pair].sections["attacks"] = section
    for c in classifiers:   # a set that holds a classifier's known training data: its numbers are not held-out ones
        for data in datasets:
            if trained_on := contamination(c.spec, data.layout):
                pairs[(c.name, data.name)].sections["contaminated"] = trained_on
    comparison: dict[str, dict[str, Any]] = {}
    first = classifiers[0].name
    for data in datasets:
        comparison[data.name] = {c.name: compare(pairs[(first, data.name)].sections, pairs[(c.name, data.name)]
                                                 .sections) for c in classifiers[1:]}
    return AuditResult(list(classifiers), list(datasets), pairs, comparison, info, settings,
                       context.dialect_source, {"scoring": scoring, "metrics": time.perf_counter() - started},
                       prompt_sections, cache)


def scored_with_progress(cache: ScoreCache, key: str, data_key: str, data: LabeledData, scorer: Any, kept: int,
                         console: Any, label: str, log: Callable[[str], None], info: dict[str, Any]) -> np.ndarray:
    """One pair scored through the cache, ``kept`` rows already scored by a stopped run: a bar of rows done, rows/s
    and ETA on ``console`` (the generation jobs' :class:`~toxiforge.pipeline.job.progress_bar`), and without one a
    line with the rate when done."""
    from toxiforge.classifiers.scoring import score_texts
    from toxiforge.pipeline.job import progress_bar

    started = time.perf_counter()
    with progress_bar(console is not None, len(data), kept, verb=label, unit="rows", console=console) as advance:
        def predict(chunk: list[str]) -> np.ndarray:
            found = score_texts(scorer, chunk)
            advance(len(chunk))
            return found

        scores = cache.score(key, data_key, data.texts, predict, info)
    seconds = time.perf_counter() - started
    if console is None and len(data) > kept:
        log(f"{label}: {len(data) - kept} rows in {seconds:.1f} s ({(len(data) - kept) / max(seconds, 1e-9):.1f} "
            "rows/s)")
    return scores


def one_label_note(name: str, toxic: bool) -> str:
    """What a set of one label is audited with (an attack run of toxic statements: transfer, docs/attacks.md)."""
    if toxic:
        return (f"every row of {name} is toxic: ROC AUC, PR AUC, FPR at 95% TPR, FPR and the bias AUCs need benign "
                "rows too (n/a); FNR (toxic rows missed), accuracy (1 - FNR, the share flagged), F1, each group's "
                "FNR and calibration are measured")
    return (f"every row of {name} is benign: ROC AUC, PR AUC, FPR at 95% TPR, F1, FNR and the bias AUCs need toxic "
            "rows too (n/a); FPR (benign rows flagged), accuracy (1 - FPR, specificity), each group's FPR, the "
            "lexical FPRs and calibration are measured")


def sections(data: LabeledData, scores: np.ndarray, context: LexicalContext, settings: AuditSettings
             ) -> dict[str, Any]:
    """Every section of one (classifier, dataset) pair; the resamples depend on the dataset only, so every
    classifier on it sees the same ones (paired)."""
    y = np.asarray(data.labels, dtype=np.int64)
    resampler = Resampler(len(data), settings.n_boot, settings.seed)
    groups = [e.group for e in data.examples]
    out: dict[str, Any] = {"n": len(data), "toxic": int(y.sum()),
                           "accuracy": accuracy_section(y, scores, resampler, settings.threshold)}
    if len(set(y.tolist())) == 1:
        out["notes"] = [one_label_note(data.name, bool(y[0]))]
    if any(groups):
        by_group, final = group_section(y, scores, groups, resampler, settings.threshold)
        out["groups"] = {"by_group": by_group, "final_score": final}
    else:
        out["groups"] = {"note": f"{data.name} has no target groups"}
    if has_functional_tests(data):
        out["hatecheck"] = hatecheck_section(data, scores, resampler, settings.threshold)
    out["lexical"] = lexical_section(data, scores, context, settings.threshold, resampler)
    out["calibration"] = {**calibration_section(y, scores, resampler), "bins": reliability(y, scores)}
    return out
