"""``generate --method alice`` as a whole command: today's code vs an older checkout, one thread each and then the
whole machine each (issue 57's "Show it works").

Both versions run the same command (the paper's settings: 10 beams, 100 candidates, 30 tokens) on the same
``--prompts`` toxigen-dev prompts (asian, black, jewish, muslim x both labels), attacking the same classifier
(``--classifier DIR``, default the MiniLM of ``_common.train_minilm`` trained into ``--work``), each in its own
process, the versions taking turns ``--repeats`` times:

* **one thread**: ``OMP_NUM_THREADS=1`` for both; today's code with ``--workers 1``;
* **machine**: no thread limit (torch takes every core); the older code as a user ran it (one process, default
  shards); today's code with its default ``--workers`` (one process per core) and ``--shard-size`` prompts/cores,
  so that every worker has a shard.

Per mode and version: the median wall seconds and CPU seconds (the process and its children) per statement,
statements/s, the ratio of today's statements/s to the older code's, how many statements equal the older code's
(by prompt), and the load average at each run's start. Rows are kept under ``--work`` for a validator.

    mkdir -p /tmp/toxiforge-469b914 && git archive 469b914 src | tar -x -C /tmp/toxiforge-469b914
    python benchmarks/alice_generate_versions.py --old-src /tmp/toxiforge-469b914/src --classifier DIR
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

from _common import DEMONSTRATIONS, REPO, add_repeats, add_work, parser, table_head, table_row, train_minilm

GROUPS = "asian,black,jewish,muslim"


def run(version: str, src: Path, mode: str, folder: Path, out: Path, prompts: int) -> dict:
    """One whole ``generate`` command; its wall and CPU seconds, rows and the load at its start."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(src)}
    for name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env.pop(name, None)
        if mode == "one-thread":
            env[name] = "1"
    command = [sys.executable, "-m", "toxiforge", "generate", "--method", "alice", "-d", str(DEMONSTRATIONS),
               "--groups", GROUPS, "--labels", "toxic,benign", "-n", str(max(1, prompts // 8)), "-c", str(folder),
               "--device", "cpu", "-o", str(out), "--no-summary", "--no-progress"]
    if version == "new":
        cores = os.cpu_count() or 1
        command += ["--workers", "1"] if mode == "one-thread" else ["--shard-size", str(-(-prompts // cores))]
    shutil.rmtree(out, ignore_errors=True)
    load = os.getloadavg()[0]
    started, before = time.perf_counter(), os.times()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    wall, after = time.perf_counter() - started, os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    sys.path.insert(0, str(REPO / "src"))
    from toxiforge.records import read_rows

    rows = {x.prompt: x.generation for x in read_rows(out)}
    return {"wall": wall, "cpu": cpu, "rows": rows, "load": load}


def main() -> None:
    options = parser(__doc__)
    add_work(options, "/tmp/alice-generate-versions")
    add_repeats(options, 2)
    options.add_argument("--old-src", type=Path, required=True, help="the older checkout's src folder")
    options.add_argument("--classifier", type=Path, help="the classifier folder (default: train the MiniLM)")
    options.add_argument("--prompts", type=int, default=16, help="prompts, a multiple of 8 (default: 16)")
    options.add_argument("--modes", default="one-thread,machine", help="one-thread, machine or both (default)")
    args = options.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(REPO / "src"))
    folder = args.classifier or train_minilm(args.work / "minilm")
    sources = {"old": args.old_src.resolve(), "new": (REPO / "src").resolve()}
    results: dict[str, dict[str, list[dict]]] = {}
    for mode in args.modes.split(","):
        results[mode] = {"old": [], "new": []}
        for repeat in range(args.repeats):
            for version in (("old", "new") if repeat % 2 == 0 else ("new", "old")):
                r = run(version, sources[version], mode, folder, args.work / f"{mode}-{version}", args.prompts)
                results[mode][version].append(r)
                print(f"{mode} {version} #{repeat}: {len(r['rows'])} statements, {r['wall']:.1f} s wall, "
                      f"{r['cpu']:.1f} CPU s, load {r['load']:.2f}", flush=True)
    print(table_head(["mode", "code", "wall s / statement", "CPU s / statement", "statements/s", "today / older",
                      "statements equal to the older code's", "load at starts"], "llrrrrrl"))
    summary = {}
    for mode, by in results.items():
        rate = {}
        for version in ("old", "new"):
            runs = by[version]
            n = len(runs[0]["rows"])
            wall = statistics.median(r["wall"] for r in runs)
            rate[version] = n / wall
            same = min(sum(r["rows"].get(p) == g for p, g in by["old"][0]["rows"].items()) for r in runs)
            summary[f"{mode}-{version}"] = {"statements": n, "wall": [r["wall"] for r in runs],
                                            "cpu": [r["cpu"] for r in runs], "same": same,
                                            "load": [r["load"] for r in runs]}
            ratio = f"{rate['new'] / rate['old']:.2f}x" if version == "new" else "1.00x"
            print(table_row(mode, "today" if version == "new" else "older", f"{wall / n:.2f}",
                            f"{statistics.median(r['cpu'] for r in runs) / n:.2f}", f"{n / wall:.3f}", ratio,
                            f"{same}/{n}", ", ".join(f"{r['load']:.2f}" for r in runs)))
    (args.work / "versions.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
