"""Tokens/s of the embedded SmolLM2 GGUF through llama-cpp-python's server: two builds of llama-cpp-python side by side.

``make llama-cpp`` builds llama-cpp-python without native-CPU code (``GGML_NATIVE=OFF``: AVX2/FMA/F16C, no AVX-512 or
AMX), because a native build died by SIGILL on a cloud VM. This measures what that costs: the same server command on
the same GGUF, once with this virtualenv's llama-cpp-python and once with another build installed elsewhere
(``pip install --target DIR --no-deps WHEEL``), started one after the other and measured alternately.

* prompt tokens/s: a ~100-token prompt, 1 new token (a new leading word each time, so no cached prefix is reused);
* generation tokens/s: 48 new tokens, greedy, after a short prompt (tokens from the server's ``usage``).

Each side's server runs with ``--threads`` threads. Medians over ``--repeats`` alternating rounds are printed, with
each side's ratio to this venv's build.

A native build on an AMX-advertising VM dies by SIGILL in ggml's AMX matrix multiply (``tileloadd`` in
``ggml_backend_amx_mul_mat``), which runs through llama.cpp's "extra buffer types"; ``--other-no-extra-bufts``
starts the other build with ``use_extra_bufts`` off (its AVX-512 kernels, no AMX and no weight repacking), and
``--also-no-extra-bufts`` adds this venv's build in that mode, so that the two differ in the build alone.

    python benchmarks/llama_build_speed.py --other-site /tmp/llama-native --other-name native \
        --other-no-extra-bufts --also-no-extra-bufts --repeats 5
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import _common

WORDS = ("Morning", "Evening", "Today", "Later", "Meanwhile", "Elsewhere", "Again", "Finally", "Also", "Still")
PROMPT = (" report for the coastal towns: light rain in the morning, a dry afternoon and a cool, clear evening with"
          " a gentle wind from the west. The harbour stays open, the ferries run on time and the market opens at"
          " eight. Visitors are asked to bring a coat, since the temperature drops quickly after sunset, and to"
          " check the timetable before they travel.")


# llama_cpp.server with llama_model_params.use_extra_bufts off (the server has no option for it).
NO_EXTRA_BUFTS = ("import runpy, llama_cpp.llama_cpp as c; d = c.llama_model_default_params\n"
                  "def params():\n    p = d(); p.use_extra_bufts = False; return p\n"
                  "c.llama_model_default_params = params; runpy.run_module('llama_cpp.server', run_name='__main__')")


def start(site: str | None, extra_bufts: bool, threads: int, log: Path) -> tuple[subprocess.Popen, str]:
    from toxiforge._net import free_port
    from toxiforge.models.embedded import smollm2_gguf

    port = free_port()
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = site + os.pathsep + env.get("PYTHONPATH", "")
    server = ["-m", "llama_cpp.server"] if extra_bufts else ["-c", NO_EXTRA_BUFTS]
    return _common.start_server([sys.executable, *server, "--model", str(smollm2_gguf()), "--model_alias", "smollm2",
                                 "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads",
                                 str(threads), "--verbose", "False"], port, log, env=env, what="llama_cpp.server")


def timed(url: str, prompt: str, max_tokens: int) -> tuple[int, float]:
    import httpx

    started = time.perf_counter()
    r = httpx.post(f"{url}/completions", json={"model": "smollm2", "prompt": prompt, "max_tokens": max_tokens,
                                               "temperature": 0.0}, timeout=600)
    r.raise_for_status()
    usage = r.json()["usage"]
    return usage["prompt_tokens" if max_tokens == 1 else "completion_tokens"], time.perf_counter() - started


def measure(url: str, round_: int) -> tuple[float, float]:
    tokens, seconds = timed(url, WORDS[round_ % len(WORDS)] + PROMPT, 1)
    prompt_rate = tokens / seconds
    tokens, seconds = timed(url, f"{WORDS[round_ % len(WORDS)]}: a list of ten colours.\n1.", 48)
    return prompt_rate, tokens / seconds


def installed_from(site: str | None) -> str:
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = site
    return subprocess.run([sys.executable, "-c", "import llama_cpp; print(llama_cpp.__file__)"], env=env,
                          capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--other-site", required=True, help="a folder holding another llama-cpp-python build")
    parser.add_argument("--other-name", default="other", help="its name in the table")
    parser.add_argument("--other-no-extra-bufts", action="store_true", help="run the other build without extra "
                                                                            "buffer types (no AMX, no repacking)")
    parser.add_argument("--also-no-extra-bufts", action="store_true", help="add this venv's build in that mode")
    _common.add_threads(parser, 1, help="threads of each side's server (default: 1)")
    _common.add_repeats(parser, 5, help="alternating rounds; medians printed (default: 5)")
    args = parser.parse_args()
    sides = {"this venv": (None, True)}
    if args.also_no_extra_bufts:
        sides["this venv, no extra bufts"] = (None, False)
    other = args.other_name + (", no extra bufts" if args.other_no_extra_bufts else "")
    sides[other] = (args.other_site, not args.other_no_extra_bufts)
    for name, (site, _) in sides.items():
        print(f"{name}: {installed_from(site)}")
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
    with tempfile.TemporaryDirectory() as tmp:
        servers = {name: start(site, extra, args.threads, Path(tmp) / f"{i}.log")
                   for i, (name, (site, extra)) in enumerate(sides.items())}
        try:
            for _, url in servers.values():
                measure(url, 99)  # warm-up: first-request allocations
            for r in range(args.repeats):
                for name, (_, url) in servers.items():
                    results[name].append(measure(url, r))
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(30)
    print(f"\nmedians over {args.repeats} alternating rounds, {args.threads} thread(s):")
    print(f"{'build':<34} {'prompt tok/s':>13} {'gen tok/s':>10} {'prompt ratio':>13} {'gen ratio':>10}")
    med = {name: (statistics.median(p for p, _ in rows), statistics.median(g for _, g in rows))
           for name, rows in results.items()}
    p0, g0 = med["this venv"]
    for name, (p, g) in med.items():
        print(f"{name:<34} {p:>13.1f} {g:>10.1f} {p / p0:>12.2f}x {g / g0:>9.2f}x")


if __name__ == "__main__":
    main()
