"""Ray cluster plumbing for :mod:`toxiforge.pipeline.ray_runner`: where workers go (:class:`RayConfig`, a placement
group), joining or starting the cluster (:func:`connect`), and Ray's remote errors back as toxiforge's (:func:`unwrap`).

Placement: every worker is one bundle of a placement group (``cpus_per_worker``, ``gpus_per_worker`` and any
custom ``resources``); ``spread`` asks for one worker per node (``STRICT_SPREAD``), e.g. for a worker per node that
talks to that node's own inference server (``--model openai:http://127.0.0.1:8000/v1``). When the cluster cannot
place every worker within ``placement_timeout`` seconds the run stops with an error naming what is missing,
instead of waiting for ever.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from toxiforge._proc import exit_description
from toxiforge.errors import InputError, ToxiforgeError


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


def import_ray():
    try:
        import ray
    except ImportError:
        raise InputError("--ray needs the `ray` package", hint="pip install 'toxiforge[ray]'") from None
    return ray


def connect(config: RayConfig) -> bool:
    """Join or start Ray; True when this call started it (so the caller shuts it down)."""
    ray = import_ray()
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


class WorkerDied(ToxiforgeError, RuntimeError):
    """A Ray worker process died (after Ray's restarts and retries, where allowed)."""


# Python's faulthandler (which Ray enables in its workers) writes this line to the worker's .err log before a fatal
# signal takes the process; SIGKILL (the out-of-memory killer) leaves no line.
_FAULT = re.compile(r"Fatal Python error: (Illegal instruction|Segmentation fault|Bus error|Aborted|"
                    r"Floating-point exception)")
_FAULT_SIGNAL = {"Illegal instruction": signal.SIGILL, "Segmentation fault": signal.SIGSEGV,
                 "Bus error": signal.SIGBUS, "Aborted": signal.SIGABRT, "Floating-point exception": signal.SIGFPE}


def worker_death(exc: BaseException, logs: Path | None = None) -> str | None:
    """How the worker behind Ray's error ``exc`` died, in words (None when ``exc`` is no worker death). Ray says only
    that the process is gone; its pid leads to the worker's log under ``logs`` (the session's log folder), where a
    fatal signal left Python's fault line. Without one the usual cause is SIGKILL from the out-of-memory killer."""
    ray = import_ray()
    if not isinstance(exc, (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError)):
        return None
    pid = re.search(r"\bpid[=:] ?(\d+)", str(exc))
    logs = logs if logs is not None else _session_logs()
    found = None
    if pid and logs is not None:
        for log in sorted(logs.glob(f"worker-*-{pid.group(1)}.err")):
            match = _FAULT.search(log.read_text(errors="replace"))
            if match:
                found = (match.group(1), log)
    who = f"a Ray worker (pid {pid.group(1)})" if pid else "a Ray worker"
    if found is not None:
        return f"{who} {exit_description(-_FAULT_SIGNAL[found[0]])}; see {found[1]}"
    where = f"; its log is under {logs}" if logs is not None else ""
    return (f"{who} died and Ray does not say how. With no fault line in its log the usual cause is SIGKILL: "
            f"{exit_description(-signal.SIGKILL).removeprefix('was killed by ')}{where}")


def _session_logs() -> Path | None:
    ray = import_ray()
    try:
        return Path(ray._private.worker.global_worker.node.get_logs_dir_path())
    except Exception:  # noqa: BLE001  -- not connected, or a client connection without local logs
        return None


def ray_get(ref_or_refs):
    """``ray.get``, raising the toxiforge error inside a remote one (:func:`reraise`)."""
    ray = import_ray()
    try:
        return ray.get(ref_or_refs)
    except Exception as exc:  # noqa: BLE001  -- Ray wraps remote errors; surface the toxiforge one
        reraise(exc)


def reraise(exc: BaseException) -> NoReturn:
    """Raise the toxiforge error inside ``exc`` (:func:`unwrap`) without Ray's traceback; a dead worker as a
    :class:`WorkerDied` naming how it died (:func:`worker_death`); else ``exc`` itself."""
    inner = unwrap(exc)
    if inner is exc:
        death = worker_death(exc)
        if death is not None:
            raise WorkerDied(death) from exc
        raise exc
    raise inner from None


def _missing(config: RayConfig) -> str:
    """What the cluster lacks for ``config.workers`` bundles (totals, and nodes for spread)."""
    ray = import_ray()
    bundle, total = config.bundle(), ray.cluster_resources()
    short = [f"{key} {amount * config.workers:g} (the cluster has {total.get(key, 0):g})"
             for key, amount in bundle.items() if amount * config.workers > total.get(key, 0)]
    if config.spread:
        fits = sum(all(node.get("Resources", {}).get(k, 0) >= v for k, v in bundle.items())
                   for node in ray.nodes() if node.get("Alive"))
        if fits < config.workers:
            short.append(f"{config.workers} nodes that each hold {bundle} (--ray-spread; {fits} do)")
    return "; ".join(short) or f"{config.workers} × {bundle} free at once (other tasks hold part of the cluster)"


def start_actors(cls, args: tuple, config: RayConfig) -> tuple[list, Any]:
    """``config.workers`` actors of ``cls``, one per bundle of a placement group; (actors, group)."""
    ray = import_ray()
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


def release_actors(actors: list, group) -> None:
    """Kill the actors of :func:`start_actors` and free their placement group (``group`` None: none was made)."""
    ray = import_ray()
    from ray.util.placement_group import remove_placement_group

    for actor in actors:
        ray.kill(actor)
    if group is not None:
        remove_placement_group(group)


__all__ = ["RayConfig", "connect", "import_ray", "parse_resources", "ray_get", "release_actors", "reraise",
           "start_actors", "unwrap"]
