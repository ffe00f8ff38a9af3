"""The generation job and classifier scoring on a Ray cluster (``toxiforge generate|classify ... --ray``).

Ray does the scheduling; toxiforge adds no scheduler of its own. ``run_generation_ray`` runs the plan of
:func:`~toxiforge.pipeline.job.run_generation`: the driver expands the plan and writes the manifest
(:func:`~toxiforge.pipeline.manifest.open_job`), a ``ray.util.ActorPool`` of ``workers`` actors, each of which loads
the models once (:class:`WorkerSetup`), takes the missing shards one at a time and returns each shard's rows to
the driver, which writes the shard file (atomic rename, as in-process), shows progress per finished shard and
completes the manifest (:func:`~toxiforge.pipeline.job.finish_job`). Workers never touch the output directory,
so nodes need no shared filesystem and a relative ``-o`` means the driver's folder (distilabel's Ray pipeline
also gathers rows on the driver); a shard's rows are text, a few hundred kB. Where the workers go and how the
cluster is joined (:class:`RayConfig`, placement groups, ``spread``): :mod:`toxiforge.pipeline.ray_cluster`. Each
worker's library versions go into the manifest (``worker_versions``).

Same shards, same batches, same per-row seeds: a Ray run writes the rows an in-process run writes, and
``--resume`` works on either. A worker that dies mid-shard is restarted by Ray (``max_restarts``) and the shard
retried (``max_task_retries``); a shard file appears only when complete, so nothing is lost or duplicated.

:class:`RayClassifier` is a classifier whose ``predict_proba``/``class_log_probs`` split texts across a pool of
actors that each load the classifier once; ``toxiforge classify --ray`` scores through it unchanged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toxiforge.errors import InputError, ToxiforgeError
from toxiforge.pipeline.job import JobResult, finish_job, marks_interruption, progress_bar, shard_rows
from toxiforge.pipeline.manifest import JobConfig, JobModels, library_versions, open_job
from toxiforge.pipeline.plan import GenerationPlan, WorkItem
from toxiforge.pipeline.ray_cluster import (
    RayConfig,
    connect,
    import_ray,
    parse_resources,
    ray_get,
    release_actors,
    reraise,
    start_actors,
    unwrap,
)
from toxiforge.records import write_rows


@dataclass(frozen=True)
class WorkerSetup:
    """What each worker loads once, as names and settings (picklable), not loaded models.

    ``make_decoder(classifier)`` builds the decoder from the worker's classifier (None without one), e.g.
    ``lambda clf: AliceDecoder(clf, config)``. Options go to
    :func:`~toxiforge.models.load_language_model` and :func:`~toxiforge.classifiers.load_classifier`."""

    model: str
    make_decoder: Callable[[Any], Any]
    classifier: str | None = None
    model_options: dict = field(default_factory=dict)
    classifier_options: dict = field(default_factory=dict)

    def build(self):
        """(lm, decoder, classifier) -- called once in each worker."""
        from toxiforge.models import load_language_model

        clf = None
        if self.classifier is not None:
            from toxiforge.classifiers import load_classifier

            clf = load_classifier(self.classifier, **self.classifier_options)
        lm = load_language_model(self.model, **self.model_options)
        return lm, self.make_decoder(clf), clf


class GenerationWorker:
    """A Ray actor: loads the models once (``build()``), then decodes shards and returns their rows."""

    def __init__(self, build: Callable[[], tuple], torch_threads: int):
        import torch

        torch.set_num_threads(torch_threads)
        # A constructor error reaches the driver only as Ray's ActorDiedError text; kept here, it is raised by
        # the first method call instead, where the driver gets the toxiforge error itself.
        self.error: ToxiforgeError | None = None
        try:
            self.lm, self.decoder, self.classifier = build()
        except ToxiforgeError as exc:
            self.error = exc

    def models(self) -> JobModels:
        if self.error is not None:
            raise self.error
        return JobModels.of(self.lm, self.decoder, self.classifier)

    def versions(self) -> dict:
        """This worker's library versions and node (for the manifest)."""
        import ray

        return {**library_versions(), "node": ray.get_runtime_context().get_node_id()}

    def run_shard(self, index: int, items: Sequence[WorkItem], run_id: str, batch_size: int) -> tuple[int, list]:
        rows = shard_rows(items, self.lm, self.decoder, run_id=run_id, batch_size=batch_size,
                          classifier=self.classifier)
        return index, rows


def run_generation_ray(plan: GenerationPlan, setup: WorkerSetup | Callable[[], tuple], out_dir: str | Path, *,
                       config: JobConfig = JobConfig(), ray_config: RayConfig = RayConfig(), resume: bool = False,
                       progress: bool = True, label: str = "generating") -> JobResult:
    """:func:`~toxiforge.pipeline.job.run_generation` on Ray (see the module docstring).

    ``setup`` is a :class:`WorkerSetup` or any picklable callable returning ``(lm, decoder, classifier)``; each
    worker calls it once."""
    from toxiforge.pipeline.manifest import check_output_dir

    plan.expand()  # bad input fails before Ray starts
    check_output_dir(out_dir, resume)
    build = setup.build if isinstance(setup, WorkerSetup) else setup
    started_ray = connect(ray_config)
    ray = import_ray()
    actors: list = []
    group = None
    try:
        actors, group = start_actors(GenerationWorker, (build, ray_config.torch_threads), ray_config)
        models = ray_get([a.models.remote() for a in actors])[0]  # all loaded; a model that cannot load fails here
        versions = ray_get([a.versions.remote() for a in actors])
        job = open_job(plan, models, out_dir, config, resume)
        recorded = job.manifest.setdefault("worker_versions", [])
        recorded.extend(v for v in versions if v not in recorded)
        started = time.perf_counter()
        written = 0
        run_id = job.manifest["run_id"]
        pool = ray.util.ActorPool(actors)
        with marks_interruption(job), progress_bar(progress, total=len(job.items), done=job.done_items,
                                                   verb=label) as advance:
            tasks = pool.map_unordered(
                lambda actor, i: actor.run_shard.remote(i, job.shards[i], run_id, config.batch_size), job.todo)
            while True:
                try:
                    index, rows = next(tasks)
                except StopIteration:
                    break
                except Exception as exc:  # noqa: BLE001
                    reraise(exc)
                write_rows(rows, job.shard_file(index))  # on the driver: workers need no access to out_dir
                written += len(rows)
                advance(len(job.shards[index]))
        return finish_job(job, written, time.perf_counter() - started)
    finally:
        release_actors(actors, group)
        if started_ray:
            ray.shutdown()


class ClassifierWorker:
    """A Ray actor holding one loaded classifier."""

    def __init__(self, build: Callable[[], Any], torch_threads: int):
        import torch

        torch.set_num_threads(torch_threads)
        self.error: ToxiforgeError | None = None  # raised by info(), as GenerationWorker does
        try:
            self.classifier = build()
        except ToxiforgeError as exc:
            self.error = exc

    def info(self) -> dict:
        if self.error is not None:
            raise self.error
        c = self.classifier
        return {"name": c.name, "num_classes": c.num_classes, "toxic_index": c.toxic_index,
                "benign_index": c.benign_index, "describe": c.describe()}

    def predict_proba(self, texts: Sequence[str]):
        import numpy as np

        return np.asarray(self.classifier.predict_proba(list(texts)), dtype=np.float64)

    def class_log_probs(self, texts: Sequence[str]):
        return self.classifier.class_log_probs(list(texts)).float().cpu()


class RayClassifier:
    """The ToxicityClassifier protocol over a pool of Ray actors (each loads the classifier once with ``build``).

    Each call splits its texts into pieces of at most ``chunk_size``, and at most an equal share per actor, that
    the actors score in parallel; results come back in order. Call :meth:`close` (or use ``with``) to free the
    actors."""

    def __init__(self, build: Callable[[], Any], ray_config: RayConfig = RayConfig(), chunk_size: int = 512):
        if chunk_size < 1:
            raise InputError(f"chunk_size={chunk_size} must be at least 1", hint="use 512")
        self.chunk_size = chunk_size
        self._started_ray = connect(ray_config)
        self._actors: list = []
        self._group = None
        try:
            self._actors, self._group = start_actors(ClassifierWorker, (build, ray_config.torch_threads), ray_config)
            info = ray_get(self._actors[0].info.remote())
        except BaseException:
            self.close()
            raise
        self.name, self.num_classes = info["name"], info["num_classes"]
        self.toxic_index, self.benign_index = info["toxic_index"], info["benign_index"]
        self._describe = {**info["describe"], "ray_workers": len(self._actors)}

    def describe(self) -> dict[str, Any]:
        """The remote classifier's provenance, plus the number of Ray workers scoring with it."""
        return dict(self._describe)

    def _map(self, method: str, texts: Sequence[str]) -> list:
        ray = import_ray()
        texts = list(texts)
        size = max(1, min(self.chunk_size, -(-len(texts) // len(self._actors))))  # every actor gets a share
        chunks = [texts[i:i + size] for i in range(0, len(texts), size)]
        pool = ray.util.ActorPool(self._actors)
        try:
            return list(pool.map(lambda actor, chunk: getattr(actor, method).remote(chunk), chunks))
        except Exception as exc:  # noqa: BLE001
            reraise(exc)

    def predict_proba(self, texts: Sequence[str]):
        import numpy as np

        parts = self._map("predict_proba", texts)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)

    def class_log_probs(self, texts: Sequence[str]):
        import torch

        parts = self._map("class_log_probs", texts)
        return torch.cat(parts) if parts else torch.zeros((0, self.num_classes))

    def close(self) -> None:
        release_actors(self._actors, self._group)
        self._actors, self._group = [], None
        if self._started_ray:
            import_ray().shutdown()
            self._started_ray = False

    def __enter__(self) -> RayClassifier:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["ClassifierWorker", "GenerationWorker", "RayClassifier", "RayConfig", "WorkerSetup", "connect",
           "parse_resources", "run_generation_ray", "unwrap"]
