"""The generation job and classifier scoring on a Ray cluster (``toxiforge generate|classify ... --ray``).

Ray does the scheduling; toxiforge adds no scheduler of its own. ``run_generation_ray`` runs the plan of
:func:`~toxiforge.pipeline.job.run_generation`: the driver expands the plan and writes the manifest
(:func:`~toxiforge.pipeline.job.open_job`), a ``ray.util.ActorPool`` of ``workers`` actors, each of which loads
the models once (:class:`WorkerSetup`), takes the missing shards one at a time and returns each shard's rows to
the driver, which writes the shard file (atomic rename, as in-process), shows progress per finished shard and
completes the manifest (:func:`~toxiforge.pipeline.job.finish_job`). Workers never touch the output directory,
so nodes need no shared filesystem and a relative ``-o`` means the driver's folder (distilabel's Ray pipeline
also gathers rows on the driver); a shard's rows are text, a few hundred kB.

Placement: every worker is one bundle of a placement group (``cpus_per_worker``, ``gpus_per_worker`` and any
custom ``resources``); ``spread`` asks for one worker per node (``STRICT_SPREAD``), e.g. for a worker per node that
talks to that node's own inference server (``--model openai:http://127.0.0.1:8000/v1``). When the cluster cannot
place every worker within ``placement_timeout`` seconds the run stops with an error naming what is missing,
instead of waiting for ever. Each worker's library versions go into the manifest (``worker_versions``).

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
from typing import Any, NoReturn

from toxiforge.errors import InputError, ToxiforgeError
from toxiforge.pipeline.job import (
    JobConfig,
    JobModels,
    JobResult,
    _progress,
    finish_job,
    library_versions,
    marks_interruption,
    open_job,
    shard_rows,
)
from toxiforge.pipeline.plan import GenerationPlan, WorkItem
from toxiforge.records import write_rows


@dataclass(frozen=True)
class RayConfig:
    """Where and how wide: ``address`` None starts a local Ray instance (or joins ``$RAY_ADDRESS``)."""

    address: str | None = None
    workers: int = 1
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    max_restarts: int = 3        # a dead worker is restarted this often (its shard is retried)
    num_cpus: int | None = None  # CPUs of a local instance (None: all)
    resources: dict[str, float] = field(default_factory=dict)  # custom Ray resources per worker
    spread: bool = False         # one worker per node (STRICT_SPREAD); else workers pack where they fit
    placement_timeout: float = 120.0  # seconds to wait for the cluster to place every worker

    def __post_init__(self) -> None:
        if self.workers < 1:
            raise InputError(f"workers={self.workers} must be at least 1", hint="use --workers 1 or more")
        if self.cpus_per_worker <= 0 or self.gpus_per_worker < 0:
            raise InputError("--cpus-per-worker must be > 0 and --gpus-per-worker >= 0",
                             hint="use --cpus-per-worker 1 --gpus-per-worker 0 (CPU) or 1 (one GPU each)")
        if self.max_restarts < 0:
            raise InputError("max_restarts must be >= 0", hint="use 3")
        if any(not (v > 0) for v in self.resources.values()):
            raise InputError(f"--ray-resources {self.resources}: every amount must be > 0",
                             hint="e.g. --ray-resources llm_server=1")
        if not self.placement_timeout > 0:
            raise InputError("placement_timeout must be > 0", hint="use 120 (seconds)")

    def bundle(self) -> dict[str, float]:
        """What one worker asks the cluster for."""
        wanted = {"CPU": self.cpus_per_worker, **self.resources}
        if self.gpus_per_worker:
            wanted["GPU"] = self.gpus_per_worker
        return wanted

    @property
    def torch_threads(self) -> int:
        return max(1, int(self.cpus_per_worker))


def parse_resources(spec: str | None) -> dict[str, float]:
    """``"NAME=AMOUNT,..."`` (``--ray-resources``) as a dict; ``{}`` for None or ""."""
    out: dict[str, float] = {}
    for part in (spec or "").split(","):
        if not part.strip():
            continue
        name, sep, amount = part.partition("=")
        try:
            value = float(amount)
        except ValueError:
            value = float("nan")
        if not sep or not name.strip() or not value > 0:
            raise InputError(f"--ray-resources {spec!r}: {part.strip()!r} is not NAME=AMOUNT with AMOUNT > 0",
                             hint="e.g. --ray-resources llm_server=1,memory_gb=8")
        out[name.strip()] = value
    return out


def _ray():
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs the `ray` package", hint="pip install 'toxiforge[ray]'") from None
    return ray


def connect(config: RayConfig) -> bool:
    """Join or start Ray; True when this call started it (so the caller shuts it down)."""
    ray = _ray()
    if config.address not in (None, "auto", "local"):
        _check_reachable(config.address)
    if ray.is_initialized():
        return False
    options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": "WARNING"}
    if config.address is None and config.num_cpus is not None:
        options["num_cpus"] = config.num_cpus
    try:
        ray.init(address=config.address, **options)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as exc:
        raise InputError(f"cannot connect to the Ray cluster at {config.address or 'the local default'}: "
                         f"{str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
                         hint="start it (`ray start --head`) and pass its address, e.g. --ray 10.0.0.1:6379, or "
                              "pass --ray alone for a local instance") from None
    return True


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast on an address nothing listens on (``ray.init`` itself retries it for minutes)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"ray://{address}")
    try:
        port = parts.port or 6379
        host = parts.hostname
    except ValueError:
        host = None
    if not host:
        raise InputError(f"--ray-address {address!r} is not HOST:PORT", hint="e.g. --ray-address 10.0.0.1:6379")
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise InputError(f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}",
                         hint="start it (`ray start --head`) and pass the address it prints, or pass --ray alone "
                              "for a local instance") from None


def unwrap(exc: BaseException) -> BaseException:
    """The toxiforge error inside a Ray task or actor error (its ``cause`` chain), so that the CLI prints one line,
    not a remote traceback; ``exc`` itself when there is none."""
    inner = exc
    for _ in range(5):
        cause = getattr(inner, "cause", None)
        if not isinstance(cause, BaseException) or cause is inner:
            break
        inner = cause
    return inner if isinstance(inner, ToxiforgeError) else exc


def _call(ref_or_refs):
    ray = _ray()
    try:
        return ray.get(ref_or_refs)
    except Exception as exc:  # noqa: BLE001  -- Ray wraps remote errors; surface the toxiforge one
        _reraise(exc)


def _reraise(exc: BaseException) -> NoReturn:
    inner = unwrap(exc)
    if inner is exc:
        raise exc
    raise inner from None


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


def _missing(config: RayConfig) -> str:
    """What the cluster lacks for ``config.workers`` bundles (totals, and nodes for spread)."""
    ray = _ray()
    bundle, total = config.bundle(), ray.cluster_resources()
    short = [f"{key} {amount * config.workers:g} (the cluster has {total.get(key, 0):g})"
             for key, amount in bundle.items() if amount * config.workers > total.get(key, 0)]
    if config.spread:
        fits = sum(all(node.get("Resources", {}).get(k, 0) >= v for k, v in bundle.items())
                   for node in ray.nodes() if node.get("Alive"))
        if fits < config.workers:
            short.append(f"{config.workers} nodes that each hold {bundle} (--ray-spread; {fits} do)")
    return "; ".join(short) or f"{config.workers} × {bundle} free at once (other tasks hold part of the cluster)"


def _actors(cls, args: tuple, config: RayConfig) -> tuple[list, Any]:
    """``config.workers`` actors of ``cls``, one per bundle of a placement group; (actors, group)."""
    ray = _ray()
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    group = placement_group([config.bundle()] * config.workers,
                            strategy="STRICT_SPREAD" if config.spread else "PACK")
    try:
        ray.get(group.ready(), timeout=config.placement_timeout)
    except ray.exceptions.GetTimeoutError:
        missing = _missing(config)
        remove_placement_group(group)
        raise InputError(f"the Ray cluster could not place {config.workers} workers in "
                         f"{config.placement_timeout:g} s: it lacks {missing}",
                         hint="add nodes or resources, or ask for fewer (--workers, --cpus-per-worker, "
                              "--gpus-per-worker, --ray-resources, --ray-spread)") from None
    remote = ray.remote(cls)
    custom = {"resources": dict(config.resources)} if config.resources else {}
    actors = [remote.options(num_cpus=config.cpus_per_worker, num_gpus=config.gpus_per_worker, **custom,
                             max_restarts=config.max_restarts,
                             max_task_retries=config.max_restarts,
                             scheduling_strategy=PlacementGroupSchedulingStrategy(
                                 group, placement_group_bundle_index=i)).remote(*args)
              for i in range(config.workers)]
    return actors, group


def _release(actors: list, group) -> None:
    ray = _ray()
    from ray.util.placement_group import remove_placement_group

    for actor in actors:
        ray.kill(actor)
    if group is not None:
        remove_placement_group(group)


def run_generation_ray(plan: GenerationPlan, setup: WorkerSetup | Callable[[], tuple], out_dir: str | Path, *,
                       config: JobConfig = JobConfig(), ray_config: RayConfig = RayConfig(), resume: bool = False,
                       progress: bool = True) -> JobResult:
    """:func:`~toxiforge.pipeline.job.run_generation` on Ray (see the module docstring).

    ``setup`` is a :class:`WorkerSetup` or any picklable callable returning ``(lm, decoder, classifier)``; each
    worker calls it once."""
    from toxiforge.pipeline.job import check_output_dir

    plan.expand()  # bad input fails before Ray starts
    check_output_dir(out_dir, resume)
    build = setup.build if isinstance(setup, WorkerSetup) else setup
    started_ray = connect(ray_config)
    ray = _ray()
    actors: list = []
    group = None
    try:
        actors, group = _actors(GenerationWorker, (build, ray_config.torch_threads), ray_config)
        models = _call([a.models.remote() for a in actors])[0]  # all loaded; a model that cannot load fails here
        versions = _call([a.versions.remote() for a in actors])
        job = open_job(plan, models, out_dir, config, resume)
        recorded = job.manifest.setdefault("worker_versions", [])
        recorded.extend(v for v in versions if v not in recorded)
        started = time.perf_counter()
        written = 0
        run_id = job.manifest["run_id"]
        pool = ray.util.ActorPool(actors)
        with marks_interruption(job), _progress(progress, total=len(job.items), done=job.done_items) as advance:
            tasks = pool.map_unordered(
                lambda actor, i: actor.run_shard.remote(i, job.shards[i], run_id, config.batch_size), job.todo)
            while True:
                try:
                    index, rows = next(tasks)
                except StopIteration:
                    break
                except Exception as exc:  # noqa: BLE001
                    _reraise(exc)
                write_rows(rows, job.shard_file(index))  # on the driver: workers need no access to out_dir
                written += len(rows)
                advance(len(job.shards[index]))
        return finish_job(job, written, time.perf_counter() - started)
    finally:
        _release(actors, group)
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

    Each call splits its texts into ``chunk_size`` pieces that the actors score in parallel; results come back
    in order. Call :meth:`close` (or use ``with``) to free the actors."""

    def __init__(self, build: Callable[[], Any], ray_config: RayConfig = RayConfig(), chunk_size: int = 512):
        if chunk_size < 1:
            raise InputError(f"chunk_size={chunk_size} must be at least 1", hint="use 512")
        self.chunk_size = chunk_size
        self._started_ray = connect(ray_config)
        self._actors: list = []
        self._group = None
        try:
            self._actors, self._group = _actors(ClassifierWorker, (build, ray_config.torch_threads), ray_config)
            info = _call(self._actors[0].info.remote())
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
        ray = _ray()
        texts = list(texts)
        chunks = [texts[i:i + self.chunk_size] for i in range(0, len(texts), self.chunk_size)]
        pool = ray.util.ActorPool(self._actors)
        try:
            return list(pool.map(lambda actor, chunk: getattr(actor, method).remote(chunk), chunks))
        except Exception as exc:  # noqa: BLE001
            _reraise(exc)

    def predict_proba(self, texts: Sequence[str]):
        import numpy as np

        parts = self._map("predict_proba", texts)
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float64)

    def class_log_probs(self, texts: Sequence[str]):
        import torch

        parts = self._map("class_log_probs", texts)
        return torch.cat(parts) if parts else torch.zeros((0, self.num_classes))

    def close(self) -> None:
        _release(self._actors, self._group)
        self._actors, self._group = [], None
        if self._started_ray:
            _ray().shutdown()
            self._started_ray = False

    def __enter__(self) -> RayClassifier:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["ClassifierWorker", "GenerationWorker", "RayClassifier", "RayConfig", "WorkerSetup", "connect",
           "parse_resources", "run_generation_ray", "unwrap"]
