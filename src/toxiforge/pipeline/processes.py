"""The generation job on this machine's cores: ``workers`` processes, each with its own models and one torch thread
per core it is given, taking the missing shards one at a time (``generate`` and ``harden`` use every core this way
by default: ``--workers``, cli/_options.py).

Why processes rather than torch's threads in one process (issue 55 item 1, ``benchmarks/harden_round_cost.py``,
docs/harden.md): the decoding steps of SmolLM2 and the MiniLM are small matrix products, each a parallel region the
threads of one process enter and leave together, so a thread held up by another job stalls its partner at every
region; processes of one thread each never wait for each other. Ray (``--ray``) does the same with a cluster's
scheduling and costs a Ray start per job; this needs nothing but the standard library. Not
:class:`concurrent.futures.ProcessPoolExecutor`: a model that fails to load in its initializer surfaces as a
bare ``BrokenProcessPool`` without the error (here the worker sends it back), and before Python 3.14 it cannot
stop a worker in the middle of a shard on Ctrl-C (here the driver kills them).

The driver expands the plan, writes the manifest (:func:`~toxiforge.pipeline.manifest.open_job`), hands the shards
out and writes each one (atomic rename, as in-process) when a worker returns its rows; the shards, batches and
per-row seeds are the in-process job's. Workers are started with ``spawn`` (a fork would copy torch's thread pool) and
die with the driver (Linux: ``PR_SET_PDEATHSIG``), so a kill -9 of the run stops them too: the shards on disk are
kept and ``--resume`` redoes only those the workers were decoding (one per worker at most).
"""

from __future__ import annotations

import multiprocessing
import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toxiforge._proc import exit_description
from toxiforge.errors import ToxiforgeError
from toxiforge.pipeline.job import JobResult, finish_job, marks_interruption, progress_bar, shard_rows
from toxiforge.pipeline.manifest import JobConfig, JobModels, check_output_dir, open_job
from toxiforge.pipeline.plan import GenerationPlan
from toxiforge.records import write_rows

POLL_SECONDS = 2.0  # how often the driver looks for a worker that died without a word (killed, out of memory)


class WorkerDied(ToxiforgeError, RuntimeError):
    """A worker process died (killed, out of memory) while the job still had shards for it."""


def _die_with_parent(parent: int) -> None:
    """Linux: SIGKILL this process when the process that started it (pid ``parent``) dies (a kill -9 of the run);
    at once if it died already, while this one was still importing."""
    import ctypes
    import os
    import signal
    import sys

    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        except OSError:
            pass  # no libc by that name: the worker then ends when it next reads the task queue (EOFError)
    if os.getppid() != parent:
        os._exit(1)


def _worker(build: Callable[[], tuple], threads: int, tasks: Any, results: Any, parent: int) -> None:
    """Load the models once, then decode the shards ``tasks`` hands out until it hands out None."""
    import signal

    _die_with_parent(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole group: the driver stops the workers
    import torch

    torch.set_num_threads(threads)
    try:
        lm, decoder, classifier = build()
        results.put(("models", JobModels.of(lm, decoder, classifier)))
    except Exception as exc:  # noqa: BLE001  -- the driver raises it, as its own
        results.put(("error", _portable(exc)))
        return
    while (task := tasks.get()) is not None:
        index, items, run_id, batch_size = task
        try:
            rows = shard_rows(items, lm, decoder, run_id=run_id, batch_size=batch_size, classifier=classifier,
                              advance=lambda n: results.put(("progress", n)))  # per batch, for the progress line
        except Exception as exc:  # noqa: BLE001
            results.put(("error", _portable(exc)))
            return
        results.put(("rows", index, rows))


def _portable(exc: BaseException) -> BaseException:
    """``exc`` if it survives pickling (toxiforge's errors do), else a ToxiforgeError with its text."""
    import pickle

    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001
        return ToxiforgeError(f"{type(exc).__name__}: {exc}")


class _Pool:
    """``workers`` processes of :func:`_worker` and their two queues; :meth:`close` ends them whatever happened."""

    def __init__(self, build: Callable[[], tuple], workers: int, threads: int):
        import os

        context = multiprocessing.get_context("spawn")
        self.tasks, self.results = context.Queue(), context.Queue()
        self.processes = [context.Process(target=_worker, args=(build, threads, self.tasks, self.results, os.getpid()),
                                          daemon=True, name=f"toxiforge-worker-{i}") for i in range(workers)]
        for p in self.processes:
            p.start()

    def get(self) -> tuple:
        """The next message of any worker; :class:`WorkerDied` when one died without a word."""
        while True:
            try:
                message = self.results.get(timeout=POLL_SECONDS)
            except queue.Empty:
                # a worker that got its None exits with status 0 while the others decode on
                dead = [p for p in self.processes if p.exitcode not in (None, 0)]
                if dead:
                    raise WorkerDied(f"generation worker {dead[0].name} (pid {dead[0].pid}) "
                                     f"{exit_description(dead[0].exitcode or 0)}; the shards written are kept: "
                                     "rerun the same command with --resume (fewer --workers if memory ran out)"
                                     ) from None
                if all(p.exitcode is not None for p in self.processes):
                    raise WorkerDied("every generation worker ended with shards still to write; the shards written "
                                     "are kept: rerun the same command with --resume") from None
                continue
            if message[0] == "error":
                raise message[1]
            return message

    def close(self) -> None:
        for p in self.processes:
            if p.is_alive():
                p.kill()
        for p in self.processes:
            p.join()
        self.tasks.close()
        self.results.close()


def run_generation_processes(plan: GenerationPlan, setup: Any, out_dir: str | Path, *,
                             config: JobConfig = JobConfig(), workers: int = 2, threads: int = 1,
                             resume: bool = False, progress: bool = True, label: str = "generating") -> JobResult:
    """:func:`~toxiforge.pipeline.job.run_generation` in ``workers`` processes of ``threads`` torch threads each
    (module docstring). ``setup`` is a :class:`~toxiforge.pipeline.ray_runner.WorkerSetup` or any picklable
    callable returning ``(lm, decoder, classifier)``; each worker calls it once."""
    plan.expand()  # bad input fails before a process starts
    check_output_dir(out_dir, resume)
    build = setup.build if hasattr(setup, "build") else setup
    pool = _Pool(build, workers, threads)
    try:
        models = [pool.get()[1] for _ in range(workers)][0]  # all loaded; a model that cannot load fails here
        job = open_job(plan, models, out_dir, config, resume)
        run_id, started, written = job.manifest["run_id"], time.perf_counter(), 0
        for index in job.todo:
            pool.tasks.put((index, job.shards[index], run_id, config.batch_size))
        for _ in range(workers):
            pool.tasks.put(None)
        with marks_interruption(job), progress_bar(progress, total=len(job.items), done=job.done_items,
                                                   verb=label) as advance:
            left = len(job.todo)
            while left:
                message = pool.get()
                if message[0] == "progress":  # a worker decoded a batch: the line moves between shards too
                    advance(message[1])
                    continue
                _, index, rows = message
                write_rows(rows, job.shard_file(index))  # only the driver writes to out_dir
                written += len(rows)
                left -= 1
        return finish_job(job, written, time.perf_counter() - started)
    finally:
        pool.close()


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system says it)."""
    import os

    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_workers(model: str, device: str) -> int:
    """``--workers``' default: every core on the CPU (one torch thread per worker, module docstring), 1 (this
    process) for an ``openai:`` server (``--concurrency`` spreads its load) or a GPU."""
    from toxiforge.models import API_PREFIX

    if model.startswith(API_PREFIX) or not device.lower().startswith(("cpu", "auto")):
        return 1
    if device.lower() == "auto":
        import torch

        if torch.cuda.is_available() or torch.backends.mps.is_available():
            return 1
    return usable_cores()
