"""Statements/s of the generation job on Ray (1 and 2 workers) vs in-process, and Ray's overhead at 1 worker.

Same model (the embedded SmolLM2-135M, fp32, CPU), plan, settings (the paper's top-k) and batch/shard sizes; every
side uses 1 torch thread per process (``--cpus-per-worker 1``). Ray runs on a local instance started here
(``num_cpus`` = 2). Seconds are the job's own (the manifest's ``last_call``): model load and Ray start-up
excluded for every side. Overhead at 1 worker = in-process rate / Ray rate - 1 (target: under 10%).

    python benchmarks/ray_overhead.py --prompts 32
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--shard-size", type=int, default=8)
    args = parser.parse_args()

    import ray
    import torch

    from toxiforge.decoding import TopKDecoder
    from toxiforge.models import load_language_model
    from toxiforge.pipeline import GenerationPlan, JobConfig, run_generation
    from toxiforge.pipeline.ray_runner import RayConfig, WorkerSetup, run_generation_ray
    from toxiforge.records import read_rows

    torch.set_num_threads(1)
    plan = GenerationPlan.grid(["asian", "women", "middle_east", "physical_disability"], ["benign"],
                               max(1, args.prompts // 4), seed=0)
    job = JobConfig(batch_size=args.batch_size, shard_size=args.shard_size)
    tmp = Path(tempfile.mkdtemp(prefix="ray-bench-"))
    lm = load_language_model("smollm2-135m", dtype="float32", device="cpu")
    local = run_generation(plan, lm, tmp / "local", decoder=TopKDecoder(), config=job, progress=False)
    del lm
    os.environ["RAY_worker_niceness"] = "0"  # Ray nices its workers to 15 by default; compare like with like
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    setup = WorkerSetup("smollm2-135m", lambda clf: TopKDecoder(), model_options={"dtype": "float32",
                                                                                   "device": "cpu"})
    results = {}
    for workers in (1, 2):
        results[workers] = run_generation_ray(plan, setup, tmp / f"ray{workers}", config=job, progress=False,
                                              ray_config=RayConfig(workers=workers, cpus_per_worker=1))
    ray.shutdown()
    same = all(sorted((r.row_id, r.raw_output) for r in read_rows(tmp / f"ray{w}"))
               == sorted((r.row_id, r.raw_output) for r in read_rows(tmp / "local")) for w in (1, 2))
    rate = {"in-process": local.rows_written / local.seconds}
    rate.update({f"ray {w} worker{'s' if w > 1 else ''}": r.rows_written / r.seconds for w, r in results.items()})
    print(f"{local.rows_written} statements, batch {args.batch_size}, shard {args.shard_size}, 1 torch thread each")
    for name, value in rate.items():
        print(f"{name:>14}: {value:.3f} statements/s")
    print(f"Ray overhead at 1 worker: {rate['in-process'] / rate['ray 1 worker'] - 1:+.1%}")
    print(f"speed-up at 2 workers vs in-process: {rate['ray 2 workers'] / rate['in-process']:.2f}x")
    print(f"rows identical to in-process: {same}")


if __name__ == "__main__":
    main()
