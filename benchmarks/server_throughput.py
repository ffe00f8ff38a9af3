"""Statements/s of top-k through an OpenAI-compatible server vs the in-process transformers backend.

Same model (the embedded SmolLM2-135M: its Q4_1 GGUF served by llama-cpp-python's server, and the same GGUF
dequantized to fp32 in-process), same prompts and settings (top-k 40, temperature 0.9, at most 30 new tokens, stop
at a newline), both through the job behind ``toxiforge generate`` (shards, manifest). One run, side by side, with
the ratio. Statements/s = statements / wall-clock seconds, model load and server start excluded.

    python benchmarks/server_throughput.py                      # starts llama_cpp.server on a free port
    python benchmarks/server_throughput.py --url http://127.0.0.1:8080/v1 --model-name m --concurrency 8
      (an existing server, e.g. llama.cpp's `llama-server -m m.gguf --parallel 8`)

llama-cpp-python's server decodes one request at a time (it has no parallel slots), so ``--concurrency`` only
overlaps HTTP and queueing there; llama.cpp's C++ ``llama-server --parallel N`` and vLLM batch concurrent
requests.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from toxiforge.decoding import TopKConfig, TopKDecoder
from toxiforge.models import load_language_model
from toxiforge.models.embedded import smollm2_gguf
from toxiforge.models.openai_lm import OpenAILM
from toxiforge.pipeline import GenerationPlan, JobConfig, run_generation


def start_server(threads: int, log: Path) -> tuple[subprocess.Popen, str]:
    import httpx

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()),
                             "--model_alias", "smollm2", "--host", "127.0.0.1", "--port", str(port),
                             "--n_ctx", "4096", "--n_threads", str(threads), "--verbose", "False"],
                            stdout=open(log, "wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"llama_cpp.server exited; see {log}")
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.terminate()
    raise SystemExit("llama_cpp.server did not start in 300 s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=16, help="in-process batch size")
    parser.add_argument("--concurrency", type=int, default=4, help="requests in flight to the server")
    parser.add_argument("--threads", type=int, default=2, help="server threads and in-process torch threads")
    parser.add_argument("--url", help="an existing server's base URL (default: start llama_cpp.server)")
    parser.add_argument("--model-name", default=None, help="model name on --url")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    per_cell = max(1, args.prompts // 4)
    plan = GenerationPlan.grid(["asian", "women", "middle_east", "physical_disability"], ["benign"], per_cell, seed=0)
    decoder = TopKDecoder(TopKConfig())
    tmp = Path(tempfile.mkdtemp(prefix="server-bench-"))
    proc = None
    try:
        if args.url:
            url, name = args.url, args.model_name
        else:
            proc, url = start_server(args.threads, tmp / "server.log")
            name = "smollm2"
        server = OpenAILM.open(f"openai:{url}" + (f"#{name}" if name else ""), concurrency=args.concurrency)
        served = run_generation(plan, server, tmp / "server", decoder=decoder, progress=False,
                                config=JobConfig(batch_size=max(args.batch_size, args.concurrency)))
        server.close()
        if proc is not None:  # free the cores for the in-process side
            proc.terminate()
            proc.wait()
            proc = None
        local = load_language_model("smollm2-135m", dtype="float32", device="cpu")
        inproc = run_generation(plan, local, tmp / "local", decoder=decoder, progress=False,
                                config=JobConfig(batch_size=args.batch_size))
    finally:
        if proc is not None:
            proc.terminate()
    s_rate = served.rows_written / served.seconds
    l_rate = inproc.rows_written / inproc.seconds
    print(f"statements: {served.rows_written} (server) / {inproc.rows_written} (in-process), {args.threads} threads")
    print(f"server      ({url}, concurrency {args.concurrency}): {s_rate:.3f} statements/s ({served.seconds:.1f} s)")
    print(f"in-process  (transformers fp32, batch {args.batch_size}): {l_rate:.3f} statements/s "
          f"({inproc.seconds:.1f} s)")
    print(f"ratio server / in-process: {s_rate / l_rate:.2f}x")


if __name__ == "__main__":
    main()
