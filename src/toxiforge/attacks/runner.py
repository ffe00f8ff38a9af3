"""What ``toxiforge attack`` calls: :func:`load_sources` (the statements of dataset specs or generation runs) and
:func:`attack`, which checks every input before any model loads, then runs :func:`~toxiforge.attacks.job.
run_attack`.

A family that attacks its statements ``together`` (``obfuscate``) is given a whole shard per call by
:func:`~toxiforge.attacks.job.run_attack`, one classifier call per step for all its statements: larger calls,
which a classifier sorts by length into fuller batches and ``ray`` splits evenly across its workers
(:class:`~toxiforge.pipeline.ray_runner.RayClassifier`). The others are given ``job.batch_size`` statements per
call: ALICE decodes them in one batched search (a pruning round scores every prompt's candidates in one classifier
call; its queries are still counted per statement, :mod:`toxiforge.attacks.alice`), not a whole shard, because
the language model holds every prompt's beams at once; ``substitute`` attacks them one after another, so for it
``job.batch_size`` only sets how often the progress bar moves."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toxiforge.attacks.base import Source
from toxiforge.attacks.job import AttackResult, run_attack, sources_digest
from toxiforge.attacks.registry import Resources, family_config, make_family
from toxiforge.errors import InputError
from toxiforge.pipeline.manifest import JobConfig, check_output_dir
from toxiforge.records import label_word, parse_label

if TYPE_CHECKING:
    from toxiforge.pipeline.ray_cluster import RayConfig

PROMPT_LAYOUTS = ("toxiforge", "toxigen-train")  # datasets whose rows keep the prompt that wrote them


def _prompts(data: Any) -> list[str | None] | None:
    """The ``prompt`` column lined up with ``data``'s examples, for generation runs and ToxiGen train files."""
    if data.layout not in PROMPT_LAYOUTS or not Path(data.source).exists():
        return None
    from toxiforge.data.examples import column, read_any_table

    prompts = column(read_any_table(data.source), "prompt")
    return [prompts[e.row] if e.row is not None else None for e in data.examples]


def load_sources(specs: Sequence[str], *, labels: Sequence[str | int] | None = None, seed: int = 0,
                 text_column: str | None = None, label_column: str | None = None) -> list[Source]:
    """The labelled statements of ``specs`` (any dataset spec, :func:`~toxiforge.data.load_specs`, or a
    generation run folder), those of ``labels`` only when given. Row ids are ``<dataset>/<i>`` (``i`` the
    statement's position in its dataset) and each row's seed is :func:`~toxiforge.pipeline.plan.row_seed` of
    ``seed``, the dataset and ``i``, so a source keeps its id and seed whatever else is attacked with it."""
    from toxiforge.data import load_specs
    from toxiforge.pipeline.plan import row_seed

    if not specs:
        raise InputError("no statements to attack", hint="give --on SPEC (a dataset spec or a generation run)")
    wanted = None if labels is None else {parse_label(label) for label in labels}
    sources = []
    for data in load_specs(list(specs), text_column=text_column, label_column=label_column):
        prompts = _prompts(data)
        for i, e in enumerate(data.examples):
            if wanted is not None and e.label not in wanted:
                continue
            sources.append(Source(row_id=f"{data.name}/{i:06d}", text=e.text, label=int(e.label), group=e.group,
                                  seed=row_seed(seed, data.name, int(e.label), i),
                                  prompt=None if prompts is None else prompts[i]))
    if not sources:
        which = "" if wanted is None else f" labelled {' or '.join(label_word(w) for w in sorted(wanted))}"
        raise InputError(f"{', '.join(specs)} holds no statement{which}", hint="check --on and --labels")
    return sources


def attack(on: Sequence[str], family: str, classifier: str, out: str | Path, *,
           settings: Mapping[str, Any] | None = None, labels: Sequence[str] | None = None, seed: int = 0,
           validate_with: str | None = None, resources: Resources | None = None, job: JobConfig = JobConfig(),
           resume: bool = False, overwrite: bool = False, progress: bool = False,
           classifier_options: Mapping[str, Any] | None = None, text_column: str | None = None,
           label_column: str | None = None, loaded_classifier: Any = None,
           ray: RayConfig | None = None) -> AttackResult:
    """Attack the statements of ``on`` with ``family`` (settings: its config fields, None = default) against
    ``classifier`` (any spec :func:`~toxiforge.classifiers.load_classifier` takes; ``loaded_classifier`` one
    already loaded under that name) into ``out``. ``ray`` (a :class:`~toxiforge.pipeline.ray_runner.RayConfig`)
    scores the attacked classifier on a pool of Ray actors that each load it once.

    Checked before any model loads, each an :class:`~toxiforge.errors.InputError` with the fix: the family and
    its settings, the output folder, the statements (readable, labelled, not empty), a validator that is the
    attacked classifier or ALICE's keeper, and a keeper that is the attacked classifier."""
    config = family_config(family, settings or {})
    check_output_dir(out, resume or overwrite)
    sources = load_sources(on, labels=labels, seed=seed, text_column=text_column, label_column=label_column)
    resources = resources or Resources()
    from toxiforge.attacks.validation import Validation, check_keeper

    keeper = getattr(config, "keep_label_with", None)  # ALICE's keeper (issue 50): other families have none
    check_keeper(keeper, classifier)
    Validation(validate_with).check(classifier, keeper)
    options = dict(classifier_options or {})
    from toxiforge.classifiers import load_classifier
    from toxiforge.classifiers.base import scoring_settings

    with ExitStack() as stack:  # a Ray pool closes when the run ends, however it ends
        if loaded_classifier is None:
            if ray is not None:
                from toxiforge.pipeline.ray_runner import RayClassifier

                loaded_classifier = stack.enter_context(RayClassifier(
                    partial(load_classifier, classifier, device=resources.device, **options), ray))
            else:
                loaded_classifier = load_classifier(classifier, device=resources.device, **options)
        attack_family = make_family(config, loaded_classifier, resources)
        validator = None
        if validate_with is not None:
            validator = load_classifier(validate_with, device=resources.device, name=validate_with)
        fingerprint = {"on": list(on), "labels": None if labels is None else list(labels), "seed": seed,
                       "sources": len(sources), "sources_sha256": sources_digest(sources), "family": config.family,
                       "settings": attack_family.settings(), "classifier": str(classifier),
                       "classifier_settings": scoring_settings(loaded_classifier), "validator": validate_with}
        return run_attack(sources, attack_family, out, classifier_name=loaded_classifier.name,
                          fingerprint=fingerprint, config=job, resume=resume, overwrite=overwrite,
                          validator=validator, progress=progress)


__all__ = ["attack", "load_sources"]
