"""Statements/s of top-k through OpenAI-compatible servers vs the in-process transformers backend.

Same model (the embedded SmolLM2-135M: its Q4_1 GGUF served by the server, and the same GGUF dequantized to fp32
in-process), same prompts and settings (top-k 40, temperature 0.9, at most 30 new tokens, stop at a newline), all
through the job behind ``toxiforge generate`` (shards, manifest). The sides run alternately ``--repeats`` times in
one process, each into a fresh directory; the medians and their ratios are printed. Statements/s = statements /
the job's wall-clock seconds (model load and server start excluded).

Servers (each started here on a free port, with ``--threads`` threads, and stopped at the end):

* llama-cpp-python's server (``python -m llama_cpp.server``): one request at a time (no parallel slots), so
  ``--concurrency`` only overlaps HTTP and queueing;
* llama.cpp's own C++ server, with ``--llama-server PATH`` (the ``llama-server`` binary of a llama.cpp build):
  ``--parallel`` slots that decode concurrent requests together (continuous batching), as vLLM does.

    python benchmarks/server_throughput.py --repeats 3
    python benchmarks/server_throughput.py --llama-server ~/llama.cpp/build/bin/llama-server --parallel 8
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path

import _common


def llama_server(binary: str, threads: int, parallel: int, log: Path):
    from toxiforge._net import free_port
    from toxiforge.models.embedded import smollm2_gguf

    port = free_port()
    # -c is the context of all slots together: 2048 tokens per slot (a prompt of 5 demonstrations is ~150-300)
    return _common.start_server([binary, "-m", str(smollm2_gguf()), "--alias", "smollm2", "--host", "127.0.0.1",
                                 "--port", str(port), "-t", str(threads), "-tb", str(threads), "-np", str(parallel),
                                 "-c", str(2048 * parallel), "--no-webui", "--log-disable"], port, log)


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--prompts", type=int, default=16)
    _common.add_repeats(parser, 3)
    parser.add_argument("--batch-size", type=int, default=16, help="in-process batch size")
    parser.add_argument("--concurrency", type=int, default=8, help="requests in flight to each server")
    _common.add_threads(parser, 2, help="server threads and in-process torch threads (default: 2)")
    parser.add_argument("--llama-server", help="path of llama.cpp's llama-server binary (adds that side)")
    parser.add_argument("--parallel", type=int, default=8, help="llama-server's parallel slots")
    parser.add_argument("--no-python-server", action="store_true", help="skip llama-cpp-python's server")
    args = parser.parse_args()
    from toxiforge.decoding import TopKConfig, TopKDecoder
    from toxiforge.models import load_language_model
    from toxiforge.models.openai_lm import OpenAILM
    from toxiforge.pipeline import GenerationPlan, JobConfig, run_generation

    _common.set_torch_threads(args.threads)
    plan = GenerationPlan.grid(["asian", "women", "middle_east", "physical_disability"], ["benign"],
                               max(1, args.prompts // 4), seed=0)
    decoder = TopKDecoder(TopKConfig())
    tmp = Path(tempfile.mkdtemp(prefix="server-bench-"))
    procs, sides = [], {}
    try:
        if not args.no_python_server:
            proc, url = _common.llama_cpp_python(args.threads, tmp / "python-server.log")
            procs.append(proc)
            sides[f"llama-cpp-python server (1 slot), concurrency {args.concurrency}"] = (
                OpenAILM.open(f"openai:{url}#smollm2", concurrency=args.concurrency),
                JobConfig(batch_size=max(args.batch_size, args.concurrency)))
        if args.llama_server:
            proc, url = llama_server(args.llama_server, args.threads, args.parallel, tmp / "llama-server.log")
            procs.append(proc)
            sides[f"llama.cpp llama-server, {args.parallel} slots, concurrency {args.concurrency}"] = (
                OpenAILM.open(f"openai:{url}#smollm2", concurrency=args.concurrency),
                JobConfig(batch_size=max(args.batch_size, args.concurrency)))
        sides[f"in-process transformers fp32, batch {args.batch_size}"] = (
            load_language_model("smollm2-135m", dtype="float32", device="cpu"), JobConfig(batch_size=args.batch_size))
        rates: dict[str, list[float]] = {name: [] for name in sides}
        for repeat in range(args.repeats):  # alternate the sides: load changes hit them alike
            for i, (name, (lm, job)) in enumerate(sides.items()):
                result = run_generation(plan, lm, tmp / f"{repeat}-{i}", decoder=decoder, config=job, progress=False)
                rates[name].append(result.rows_written / result.seconds)
                print(f"  repeat {repeat}: {name}: {rates[name][-1]:.3f} statements/s ({result.seconds:.1f} s)",
                      flush=True)
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    base_name = list(medians)[-1]
    print(f"{len(plan.expand())} statements per run, {args.repeats} alternating repeats, {args.threads} threads; "
          "medians:")
    for name, value in medians.items():
        ratio = "" if name == base_name else f"  ({value / medians[base_name]:.2f}x in-process)"
        print(f"  {name}: {value:.3f} statements/s{ratio}")


if __name__ == "__main__":
    main()
