"""Statements/s of the generation job on Ray (1 and 2 workers) vs in-process, and Ray's overhead at 1 worker.

Same model (the embedded SmolLM2-135M, fp32, CPU), plan, settings (the paper's top-k) and batch/shard sizes; every
side uses 1 torch thread per process (``--cpus-per-worker 1``). Ray runs on a local instance started here
(``num_cpus`` = 2). Seconds are the job's own (the manifest's ``last_call``): model load, Ray start-up and actor
start-up excluded for every side. The sides run alternately ``--repeats`` times; medians are printed.
Overhead at 1 worker = median in-process rate / median Ray rate - 1 (target: under 10%).

    python benchmarks/ray_overhead.py --prompts 32 --repeats 3
"""

from __future__ import annotations

import os
import statistics
import tempfile
from pathlib import Path

import _common


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--shard-size", type=int, default=8)
    _common.add_repeats(parser, 3)
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
    os.environ["RAY_worker_niceness"] = "0"  # Ray nices its workers to 15 by default; compare like with like
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    setup = WorkerSetup("smollm2-135m", lambda clf: TopKDecoder(), model_options={"dtype": "float32",
                                                                                   "device": "cpu"})
    names = {0: "in-process", 1: "ray 1 worker", 2: "ray 2 workers"}
    rates: dict[str, list[float]] = {name: [] for name in names.values()}
    same, reference = True, None
    try:
        for repeat in range(args.repeats):  # alternate the sides: load changes hit them alike
            for workers, name in names.items():
                out = tmp / f"{repeat}-{workers}"
                if workers == 0:
                    result = run_generation(plan, lm, out, decoder=TopKDecoder(), config=job, progress=False)
                else:
                    result = run_generation_ray(plan, setup, out, config=job, progress=False,
                                                ray_config=RayConfig(workers=workers, cpus_per_worker=1))
                rates[name].append(result.rows_written / result.seconds)
                print(f"  repeat {repeat}: {name}: {rates[name][-1]:.3f} statements/s ({result.seconds:.1f} s)",
                      flush=True)
                rows = sorted((r.row_id, r.raw_output) for r in read_rows(out))
                if workers == 0:
                    reference = rows  # each repeat's in-process rows
                same = same and rows == reference
    finally:
        ray.shutdown()
    median = {name: statistics.median(values) for name, values in rates.items()}
    print(f"{len(plan.expand())} statements, batch {args.batch_size}, shard {args.shard_size}, 1 torch thread each, "
          f"{args.repeats} alternating repeats; medians:")
    for name, value in median.items():
        print(f"{name:>14}: {value:.3f} statements/s")
    print(f"Ray overhead at 1 worker: {median['in-process'] / median['ray 1 worker'] - 1:+.1%}")
    print(f"speed-up at 2 workers vs in-process: {median['ray 2 workers'] / median['in-process']:.2f}x")
    print(f"rows identical to in-process in every run: {same}")


if __name__ == "__main__":
    main()
