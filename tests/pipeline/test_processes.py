"""The generation job in worker processes of this machine (``--workers``, issue 55 item 1): the rows equal the
in-process job's, either runner resumes the other's run, a worker that cannot load or dies is reported, and the
default uses every core on the CPU. A tiny random Llama saved to a folder each worker loads."""

from __future__ import annotations

import os
from functools import partial

import pytest

from toxiforge.decoding import TopKConfig, TopKDecoder, make_decoder
from toxiforge.errors import InputError
from toxiforge.pipeline import GenerationPlan, JobConfig, run_generation
from toxiforge.pipeline.processes import WorkerDied, run_generation_processes, usable_cores
from toxiforge.pipeline.ray_runner import WorkerSetup
from toxiforge.records import COLUMNS, read_rows

FAST = TopKConfig(max_new_tokens=6)
CONTENT = [c for c in COLUMNS if c not in ("timestamp", "run_id")]
JOB = JobConfig(batch_size=3, shard_size=4)


def plan():
    return GenerationPlan.grid(["asian", "women"], ["benign"], 5, seed=3)  # 10 items: shards of 4, 4 and 2


def content(rows):
    return sorted(({c: getattr(r, c) for c in CONTENT} for r in rows), key=lambda r: r["row_id"])


def setup_for(tiny_llama_dir):
    # picklable by reference, as a spawned worker needs: the model folder and toxiforge's own make_decoder
    return WorkerSetup(str(tiny_llama_dir), partial(make_decoder, FAST), model_options={"device": "cpu"})


def test_workers_finish_an_in_process_run_with_its_rows(tiny_llama_dir, tmp_path, monkeypatch):
    import torch

    import toxiforge.pipeline.processes as processes
    from toxiforge.models.transformers_lm import TransformersLM

    lm = TransformersLM.load(tiny_llama_dir, device="cpu")
    threads = torch.get_num_threads()
    torch.set_num_threads(max(2, threads))  # in-process with several threads, the workers with one each
    try:
        full = run_generation(plan(), lm, tmp_path / "full", decoder=TopKDecoder(FAST), config=JOB, progress=False)

        def crash(index, path):
            if index == 0:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            run_generation(plan(), lm, tmp_path / "run", decoder=TopKDecoder(FAST), config=JOB, progress=False,
                           on_shard=crash)
    finally:
        torch.set_num_threads(threads)
    # the driver looks for dead workers between every message: one that got no shard and ended is no death
    monkeypatch.setattr(processes, "POLL_SECONDS", 0.05)
    result = run_generation_processes(plan(), setup_for(tiny_llama_dir), tmp_path / "run", config=JOB, workers=2,
                                      resume=True, progress=False)
    assert result.rows_written == 6 and len(result.shards) == 3  # shards 1 and 2 in the workers
    assert content(read_rows(tmp_path / "run")) == content(read_rows(tmp_path / "full"))
    assert result.manifest["status"] == "complete" and result.manifest["config"] == full.manifest["config"]


def test_the_progress_line_moves_per_batch_not_per_shard(tiny_llama_dir, tmp_path, monkeypatch):
    """An ALICE shard of 128 statements takes a worker ~10 min on a CPU core: the line must not wait for it."""
    from contextlib import contextmanager

    import toxiforge.pipeline.processes as processes

    advanced = []

    @contextmanager
    def recording_bar(enabled, total, done, verb="generating"):
        yield advanced.append

    monkeypatch.setattr(processes, "progress_bar", recording_bar)
    run_generation_processes(plan(), setup_for(tiny_llama_dir), tmp_path / "out", config=JOB, workers=2)
    assert sorted(advanced) == [1, 1, 2, 3, 3]  # shards of 4, 4, 2 in batches of 3: one advance per batch
    assert len(read_rows(tmp_path / "out")) == 10


def test_a_worker_that_cannot_load_its_model_fails_with_the_error(tmp_path):
    setup = WorkerSetup(str(tmp_path / "missing-model"), partial(make_decoder, FAST), model_options={"device": "cpu"})
    with pytest.raises(InputError):
        run_generation_processes(plan(), setup, tmp_path / "out", config=JOB, workers=1, progress=False)
    assert not (tmp_path / "out" / "manifest.json").exists()


def test_a_worker_that_dies_is_named_with_how(tmp_path):
    with pytest.raises(WorkerDied, match=r"exited with status 3.*--resume"):
        run_generation_processes(plan(), partial(os._exit, 3), tmp_path / "out", config=JOB, workers=1,
                                 progress=False)


def test_the_default_uses_every_core_on_the_cpu():
    from toxiforge.cli._options import local_workers

    cores = usable_cores()
    assert local_workers(None, "smollm2-135m", "cpu") == (cores, 1)
    assert local_workers(1, "smollm2-135m", "cpu") == (1, cores)  # one process with every core as threads
    assert local_workers(None, "openai:http://127.0.0.1:9/v1#m", "cpu")[0] == 1  # the server does the work
    assert local_workers(None, "smollm2-135m", "cuda")[0] == 1
