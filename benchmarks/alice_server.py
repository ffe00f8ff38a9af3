"""ALICE through llama-cpp-python's server (``--model openai:URL#smollm2 --concurrency N``) vs in-process
(``--model smollm2-135m``): the same ``toxiforge generate --method alice`` command, the same prompts.

The server serves the embedded SmolLM2's Q4_1 GGUF (``_common.llama_cpp_python``: one request at a time,
no parallel slots; ``--server-cache`` starts it with ``--cache True``, its RAM cache of evaluated prompts); in-process
runs the same GGUF dequantized to fp32. Each side is one ``python -m toxiforge generate`` subprocess (the CLI raises
a server side's ``--batch-size`` to its ``--concurrency``), one after another, each server side on a fresh server.
Printed per side: wall seconds, the client's CPU seconds (user + sys of the subprocess), the server's over the run
(``/proc/PID/stat`` utime + stime before and after), the load average at start and end, and how many statements
equal the first side's, row for row (group, label, prompt).

    python benchmarks/alice_server.py -c MINILM -d ../shared/data/toxigen-dev -n 1 --concurrency 16 1
    python benchmarks/alice_server.py ... -- --beams 5 --max-new-tokens 10     # options for every generate command
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common


def generate(out: Path, model: list[str], args: argparse.Namespace, server_pid: int | None) -> dict:
    from toxiforge.records import read_rows

    command = [sys.executable, "-m", "toxiforge", "generate", "-o", str(out), "-d", args.data, "--method", "alice",
               "-c", args.classifier, "--groups", args.groups, "-n", str(args.per_cell), *model, "--no-progress",
               "--no-summary", *args.extra]
    before, load = resource.getrusage(resource.RUSAGE_CHILDREN), os.getloadavg()[0]
    server_before = _common.cpu_seconds(server_pid) if server_pid else 0.0
    started = time.perf_counter()
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": str(args.threads)})
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return {"wall": time.perf_counter() - started, "load": (load, os.getloadavg()[0]),
            "client_cpu": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
            "server_cpu": _common.cpu_seconds(server_pid) - server_before if server_pid else 0.0,
            "rows": {(r.group, r.prompt_label, r.prompt): r.generation for r in read_rows(out)}}


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("-c", "--classifier", required=True, help="the attacked classifier (a fine-tuned MiniLM dir)")
    parser.add_argument("-d", "--data", required=True, help="the demonstrations folder (toxigen-dev)")
    parser.add_argument("--groups", default="asian,muslim")
    parser.add_argument("-n", "--per-cell", type=int, default=1, help="prompts per group and label")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[16], help="one server run for each")
    _common.add_threads(parser, 1, help="server threads and every client's OMP_NUM_THREADS")
    parser.add_argument("--server-cache", action="store_true", help="start the server with --cache True")
    parser.add_argument("extra", nargs="*", help="after --: options for every generate command")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="alice-server-"))
    sides: list[int | None] = [*args.concurrency, None]  # None: in-process
    first = None
    for i, concurrency in enumerate(sides):
        proc = None
        if concurrency is None:
            side, model = "in-process", ["--model", "smollm2-135m"]
        else:  # a fresh server for each run: none starts with another run's prompts in its cache
            proc, url = _common.llama_cpp_python(args.threads, tmp / f"server-{i}.log",
                                         ("--cache", "True") if args.server_cache else ())
            side = f"server, concurrency {concurrency}"
            model = ["--model", f"openai:{url}#smollm2", "--concurrency", str(concurrency)]
        try:
            r = generate(tmp / str(i), model, args, proc and proc.pid)
        finally:
            if proc is not None:
                proc.terminate()
                proc.wait()
        first = first or r["rows"]
        same = sum(r["rows"].get(key) == text for key, text in first.items())
        print(f"{side}: {len(r['rows'])} statements, wall {r['wall']:.1f} s, client CPU {r['client_cpu']:.1f} s, "
              f"server CPU {r['server_cpu']:.1f} s, load {r['load'][0]:.1f}-{r['load'][1]:.1f}, "
              f"{same}/{len(first)} statements as the first side's", flush=True)
    print(f"rows in {tmp}")


if __name__ == "__main__":
    main()
