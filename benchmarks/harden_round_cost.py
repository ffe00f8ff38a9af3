"""What one ``toxiforge harden`` round costs on this machine's cores, per phase, and how to spend the cores (issue 55
item 1): one process with every core as torch threads, or one worker per core.

1. ``jobs``: whole ``toxiforge generate`` commands (model loads and Ray's start included, as a harden round pays
   them once per job) on toxigen-dev prompts, each side in its own process, sides alternating ``--repeats`` times:

   * ``process``: ``--workers 1``, in-process, ``--threads`` torch threads (default: every core);
   * ``workers``: ``--workers W`` (W = cores), W processes of this machine with one torch thread each
     (pipeline/processes.py; the default since issue 55);
   * ``ray``: ``--ray --workers W --cpus-per-worker 1`` (one torch thread per worker), a local Ray instance, workers
     at the driver's niceness (``RAY_worker_niceness=0``: Ray nices them to 15 by default, which on a shared
     machine measures the other jobs, not Ray).

   Both sides use the same ``--shard-size`` (a shard is a worker's unit, so W workers need W shards) and
   ``--batch-size``. Jobs: ALICE at the paper's settings against ``--classifier`` (``--alice N`` prompts) and the
   top-k control (``--topk N``). Per side: wall seconds per statement (median) and whether every statement equals
   the first side's (same ``row_id``, same text): the choice of side must not change the rows.
2. ``phases`` (``--phases``): in this process, with ``--threads`` threads, the two phases of a round that are not
   generation: training (``train_classifier``, the MiniLM on ``--train-rows`` toxigen-dev rows, one epoch:
   examples/s) and scoring (the classifier's ``predict_proba`` on ``--score-rows`` texts: texts/s).
3. The projection of a round of ``--per-arm`` statements per arm from the measured rates (the job's own seconds
   per statement, plus each job's start once): two ALICE attacks of that size (one per arm's classifier), a top-k
   pool of twice it, two trainings of ``--epochs`` epochs on ``--data-rows`` + the round's additions, and the
   scoring of ``--measure-rows`` texts by each arm's classifier.

Measured for docs/harden.md ("What a round of 1,000 or 5,000 statements costs"):

    python benchmarks/harden_round_cost.py --classifier /work/runs/crt/minilm --alice 16 --topk 32 --repeats 3 \\
        --phases --work /tmp/round-cost

On a GPU (issue 57 item 3; every job and phase on the device, one process):

    python benchmarks/harden_round_cost.py --device cuda --sides process --alice 64 --topk 128 --repeats 1 \\
        --phases --train-rows 2000 --score-rows 8000 --work /tmp/round-cost-gpu
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _common

GROUPS = "asian,black,jewish,muslim"  # 4 groups x 2 labels: n = prompts / 8 per cell


def job_command(method: str, prompts: int, side: str, args, out: Path) -> tuple[list[str], dict[str, str]]:
    """The ``toxiforge generate`` command of one side, and its environment."""
    cores = args.cores
    command = [sys.executable, "-m", "toxiforge", "generate", "--method", method, "-d", str(_common.DEMONSTRATIONS),
               "--groups", GROUPS, "--labels", "toxic,benign", "-n", str(max(1, prompts // 8)),
               "--device", args.device,
               "--shard-size", str(args.shard_size), "--batch-size", str(args.batch_size), "-o", str(out),
               "--no-summary", "--no-progress", "--seed", str(args.seed)]
    if method == "alice":
        command += ["-c", str(args.classifier)]
    threads = args.threads or cores
    if side == "process":
        command += ["--workers", "1"]
    elif side == "workers":
        command += ["--workers", str(cores)]
        threads = 1
    else:
        command += ["--ray", "--workers", str(cores), "--cpus-per-worker", "1"]
        threads = 1
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
           "RAY_worker_niceness": "0", "PYTHONPATH": os.pathsep.join([str(_common.REPO / "src"),
                                                                       os.environ.get("PYTHONPATH", "")])}
    return command, env


def run_jobs(method: str, prompts: int, args) -> dict[str, list[tuple[float, float]]]:
    """Per side, each run's (job seconds per statement, seconds outside the job: start, imports, model loads)."""
    from toxiforge.records import read_rows

    sides = args.sides
    wall: dict[str, list[float]] = {s: [] for s in sides}
    runs: dict[str, list[tuple[float, float]]] = {s: [] for s in sides}
    reference: dict[str, str] | None = None
    for repeat in range(args.repeats):
        for side in sides if repeat % 2 == 0 else sides[::-1]:  # A B, B A, ...: drift hits both alike
            out = args.work / f"{method}-{side}-{repeat}"
            shutil.rmtree(out, ignore_errors=True)
            command, env = job_command(method, prompts, side, args, out)
            load = os.getloadavg()[0]
            started = time.perf_counter()
            subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
            seconds = time.perf_counter() - started
            rows = {r.row_id: r.generation for r in read_rows(out)}
            job = json.loads((out / "manifest.json").read_text())["last_call"]["seconds"]
            wall[side].append(seconds / len(rows))
            runs[side].append((job / len(rows), seconds - job))
            same = "" if reference is None else f", rows equal to the first side's: {rows == reference}"
            if reference is not None and rows != reference:
                differ = sum(reference.get(k) != v for k, v in rows.items())
                same += f" ({differ} of {len(rows)} differ)"
            reference = reference or rows
            print(f"  {method} repeat {repeat} {side}: {len(rows)} statements, {seconds:.1f} s wall "
                  f"({job:.1f} s in the job), {seconds / len(rows):.2f} s/statement, load before {load:.1f}"
                  f"{same}", flush=True)
    for side in sides:
        print(f"{method}, {side}: median {statistics.median(wall[side]):.2f} s wall per statement "
              f"({', '.join(f'{v:.2f}' for v in wall[side])}); in the job "
              f"{statistics.median(r[0] for r in runs[side]):.2f} s per statement, "
              f"{statistics.median(r[1] for r in runs[side]):.0f} s outside it", flush=True)
    return runs


def phases(args) -> tuple[float, float]:
    """Training examples/s (one epoch) and scoring texts/s, in this process with ``--threads`` threads."""
    _common.set_torch_threads(args.threads or args.cores)
    from toxiforge.classifiers import load_classifier
    from toxiforge.data.toxigen import load_demonstration_data
    from toxiforge.training.trainer import TrainConfig, train_classifier

    rows = load_demonstration_data(_common.DEMONSTRATIONS).examples
    rows = (rows * (args.train_rows // len(rows) + 1))[:args.train_rows]
    out = args.work / "phase-train"
    shutil.rmtree(out, ignore_errors=True)
    load = os.getloadavg()[0]
    started = time.perf_counter()
    train_classifier(rows, out, TrainConfig(epochs=1, batch_size=32, eval_fraction=0.0, device=args.device),
                     progress=False)
    train_rate = len(rows) / (time.perf_counter() - started)
    print(f"training: {len(rows)} rows x 1 epoch, {train_rate:.1f} examples/s (model load and save included), "
          f"load before {load:.1f}", flush=True)
    clf = load_classifier(str(args.classifier), device=args.device)
    texts = [e.text for e in rows][:args.score_rows]
    texts = (texts * (args.score_rows // len(texts) + 1))[:args.score_rows]
    load = os.getloadavg()[0]
    started = time.perf_counter()
    clf.predict_proba(texts)
    score_rate = len(texts) / (time.perf_counter() - started)
    print(f"scoring: {len(texts)} texts, {score_rate:.1f} texts/s, load before {load:.1f}", flush=True)
    return train_rate, score_rate


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--classifier", type=Path, default=None,
                        help="the attacked classifier (default: _common.train_minilm into --work/minilm)")
    parser.add_argument("--alice", type=int, default=16, help="ALICE prompts per job (0: skip)")
    parser.add_argument("--topk", type=int, default=32, help="top-k prompts per job (0: skip)")
    parser.add_argument("--sides", default="process,workers,ray", help="comma-separated: process, workers, ray")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores to use (default: all)")
    parser.add_argument("--shard-size", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--phases", action="store_true", help="also time training and scoring")
    parser.add_argument("--device", default="cpu", help="where every job and phase runs (cuda: use --sides process)")
    parser.add_argument("--train-rows", type=int, default=400)
    parser.add_argument("--score-rows", type=int, default=2000)
    parser.add_argument("--per-arm", type=int, default=1000, help="the projected round's statements per arm")
    parser.add_argument("--data-rows", type=int, default=2000, help="the projected run's --data rows")
    parser.add_argument("--epochs", type=float, default=3.0, help="the projected run's training epochs")
    parser.add_argument("--measure-rows", type=int, default=2000,
                        help="texts each arm's classifier scores to be measured (eval sets + guard slice)")
    _common.add_threads(parser, None, "torch threads of the in-process side and --phases (default: --cores)")
    _common.add_repeats(parser, 3)
    _common.add_seed(parser)
    _common.add_work(parser, "/tmp/harden-round-cost")
    args = parser.parse_args()
    args.sides = [s.strip() for s in args.sides.split(",") if s.strip()]
    if unknown := set(args.sides) - {"process", "workers", "ray"}:
        parser.error(f"--sides {', '.join(sorted(unknown))}: use process, workers and/or ray")
    if args.device != "cpu" and args.sides != ["process"]:
        parser.error(f"--device {args.device}: the workers and ray sides split the CPU cores; pass --sides process")
    args.work.mkdir(parents=True, exist_ok=True)
    if args.classifier is None:
        args.classifier = _common.train_minilm(args.work / "minilm")
    print(f"{args.cores} cores, load {os.getloadavg()}, shard {args.shard_size}, batch {args.batch_size}, "
          f"{args.repeats} repeats", flush=True)
    alice = run_jobs("alice", args.alice, args) if args.alice else {}
    topk = run_jobs("top-k", args.topk, args) if args.topk else {}
    if not args.phases:
        return
    train_rate, score_rate = phases(args)
    if not (alice and topk):
        return
    n = args.per_arm
    print(f"\nprojected round of {n} statements per arm ({args.data_rows} --data rows, {args.epochs:g} epochs, "
          f"{args.measure_rows} texts measured per classifier), hours on {args.cores} cores:")
    for side in args.sides:
        if not (alice.get(side) and topk.get(side)):
            continue
        a, a_start = (statistics.median(r[i] for r in alice[side]) for i in (0, 1))
        t, t_start = (statistics.median(r[i] for r in topk[side]) for i in (0, 1))
        cost = {"ALICE attacks (2N)": 2 * (n * a + a_start), "top-k pool (2N)": 2 * n * t + t_start,
                "training (2 arms)": 2 * args.epochs * (args.data_rows + n) / train_rate,
                "scoring (2 arms)": 2 * args.measure_rows / score_rate}
        parts = ", ".join(f"{k} {v / 3600:.2f}" for k, v in cost.items())
        print(f"  {side}: {parts}; total {sum(cost.values()) / 3600:.2f} h")


if __name__ == "__main__":
    main()
