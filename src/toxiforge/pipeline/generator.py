"""Run several generation jobs with one set of models: the language model is loaded (or the server opened) once,
each job names its decoder settings and the classifier it scores with (ALICE attacks it).

:class:`Generator` makes the calls ``toxiforge generate`` makes: :func:`~toxiforge.pipeline.job.run_generation`
with :func:`~toxiforge.decoding.make_decoder` in this process (``workers`` 1),
:func:`~toxiforge.pipeline.processes.run_generation_processes` in ``workers`` processes, or
:func:`~toxiforge.pipeline.ray_runner.run_generation_ray` with a
:class:`~toxiforge.pipeline.ray_runner.WorkerSetup` when ``ray`` is set. ``toxiforge harden`` runs one job per
attack through it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from toxiforge.models.embedded import DEFAULT_LM
from toxiforge.pipeline.job import JobConfig, JobResult
from toxiforge.pipeline.plan import GenerationPlan


@dataclass
class Generator:
    """``model`` and ``model_options`` as :func:`~toxiforge.models.load_language_model` takes them (``dtype`` and
    ``device``, or an ``openai:`` server's ``concurrency``/``api_key_env``); ``load`` a function with its
    signature to load it instead (the CLI's prints the load time); ``lm`` a model already loaded (tests,
    notebooks); ``device`` the classifiers'; ``ray`` a :class:`~toxiforge.pipeline.ray_runner.RayConfig` to run
    on Ray; ``workers`` > 1 (without ``ray``) runs each job in that many processes of this machine, each loading the
    models once per job, with ``threads`` torch threads each (pipeline/processes.py)."""

    model: str = DEFAULT_LM
    model_options: dict[str, Any] = field(default_factory=dict)
    device: str = "auto"
    job: JobConfig = field(default_factory=JobConfig)
    ray: Any = None
    workers: int = 1
    threads: int = 1
    progress: bool = False
    lm: Any = None
    load: Callable[..., Any] | None = None

    def language_model(self) -> Any:
        """The language model, loaded on first use and kept."""
        if self.lm is None:
            from toxiforge.models import load_language_model

            self.lm = (self.load or load_language_model)(self.model, **self.model_options)
        return self.lm

    def fit(self, decoding: Any) -> Any:
        """``decoding`` with ALICE's candidates capped at what an ``openai:`` server returns per token (as
        ``generate`` does); unchanged for other models."""
        from toxiforge.models import API_PREFIX

        if getattr(decoding, "method", None) != "alice" or not self.model.startswith(API_PREFIX):
            return decoding
        lm = self.language_model()
        return replace(decoding, candidates=min(decoding.candidates, lm.top_logprobs()))

    def check(self, plan: GenerationPlan, decoding: Any, out: str | Path, resume: bool) -> None:
        """Refuse, before any model loads, what :meth:`run` would refuse only after loading them: an output folder
        that cannot be written, and a ``resume`` whose plan (groups, labels, -n, prompt source, k, seed), shard
        size, format or top-k decoding differ from the run's (ALICE's settings name its classifier, so they, the
        model and the classifier are compared once those load)."""
        # job.py's own resume check, given the part of the run's fingerprint that needs no model (issue 33)
        from toxiforge.decoding import make_decoder
        from toxiforge.pipeline.manifest import prepare_dir

        known: dict[str, Any] = {"plan": plan.to_dict(), "shard_size": self.job.shard_size, "format": self.job.format}
        if getattr(decoding, "method", None) != "alice":
            decoder = make_decoder(decoding)
            known.update(method=decoder.method, decoding=decoder.settings(), num_return=decoder.num_return)
        prepare_dir(Path(out), known, resume)

    def _workers_for(self, plan: GenerationPlan, out: Path) -> int:
        """The processes worth starting for ``plan`` in ``out``: at most one per shard still to write (a worker has
        a shard at a time; one shard is decoded here, without a process's start and model loads)."""
        if self.workers <= 1:
            return 1
        from toxiforge.pipeline.manifest import shard_path

        shards = -(-len(plan.expand()) // self.job.shard_size)
        todo = sum(not shard_path(out, i, self.job.format).exists() for i in range(shards))
        return max(1, min(self.workers, todo))

    def run(self, plan: GenerationPlan, decoding: Any, out: str | Path, *, classifier: Any = None,
            classifier_name: str | None = None, classifier_options: dict[str, Any] | None = None,
            label: str = "generating") -> JobResult:
        """Generate ``plan`` with the decoder of ``decoding`` (a config from
        :func:`~toxiforge.decoding.decoder_config`) into ``out``, resuming a run already there; ``classifier``
        (a path or registry name, loaded as ``classifier_name`` with ``classifier_options``, e.g. a judge's
        ``template``; or, in this process, a classifier already loaded) scores every row and is the one ALICE
        attacks; ``label`` names the job on its progress line.

        In this process the classifier loads before the language model (when ``lm`` is not loaded yet), so a bad
        classifier fails before a slow model load; on Ray each worker loads both."""
        from toxiforge.decoding import make_decoder

        out = Path(out)
        resume = out.exists() and any(out.iterdir())
        decoder_for = partial(make_decoder, decoding)
        options = {k: v for k, v in {"device": self.device, "name": classifier_name, **(classifier_options or {})}
                   .items() if v is not None}
        workers = self._workers_for(plan, out)
        if self.ray is not None or workers > 1:
            from toxiforge.pipeline.ray_runner import WorkerSetup, run_generation_ray

            if classifier is not None and not isinstance(classifier, (str, Path)):
                raise TypeError("with workers, pass the classifier's spec (each worker loads it), not a loaded "
                                "classifier")
            setup = WorkerSetup(self.model, decoder_for, None if classifier is None else str(classifier),
                                model_options=self.model_options, classifier_options=options)
            if self.ray is None:
                from toxiforge.pipeline.processes import run_generation_processes

                return run_generation_processes(plan, setup, out, config=self.job, workers=workers,
                                                threads=self.threads, resume=resume, progress=self.progress,
                                                label=label)
            return run_generation_ray(plan, setup, out, config=self.job, ray_config=self.ray, resume=resume,
                                      progress=self.progress, label=label)
        from toxiforge.pipeline.job import run_generation

        clf = classifier if classifier is not None and not isinstance(classifier, (str, Path)) else None
        if isinstance(classifier, (str, Path)):
            from toxiforge.classifiers import load_classifier

            clf = load_classifier(classifier, **options)
        return run_generation(plan, self.language_model(), out, decoder=decoder_for(clf), config=self.job,
                              resume=resume, progress=self.progress, classifier=clf, label=label)
