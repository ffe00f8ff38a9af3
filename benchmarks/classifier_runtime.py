"""--classifier-runtime on the CPU: the MiniLM classifier's speed and scores under torch, torch-int8, onnx and
onnx-int8, alone and inside ALICE (issue 57 item 1).

1. ``classify``: a MiniLM fine-tuned on ``../shared/data/toxigen-dev`` (``_common.train_minilm``,
   or ``--classifier DIR``) scores HateCheck's 3,728 test cases (``../shared/data/hatecheck``) and ALICE-shaped
   texts (each toxigen-dev sentence cut after 3, 6, ... words: the partial continuations a pruning round scores),
   with ``--threads`` torch / ONNX Runtime threads. The runtimes take turns (``--repeats`` rounds, the median
   of each); per runtime: texts/s, the ratio to torch, the largest |P(toxic) - torch's| and the share of texts
   whose decision (P > 0.5) changes.
2. ``alice`` (``--alice N``): ``toxiforge generate --method alice`` at the paper's settings on N toxigen-dev
   prompts with the same classifier, once per runtime, each in its own process limited to ``--threads``; prints
   seconds per statement and how many statements equal torch's, and writes the rows under ``--work`` (run
   ``toxiforge attack``'s validator or ``benchmarks/alice_keeper_yield.py`` on them for the confirmed rate).

    nice -n 5 python benchmarks/classifier_runtime.py --work /tmp/crt --threads 1 --alice 16
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

from _common import (
    DEMONSTRATIONS,
    REPO,
    SHARED_DATA,
    add_repeats,
    add_threads,
    add_work,
    parser,
    table_head,
    table_row,
    train_minilm,
)

HATECHECK = SHARED_DATA / "hatecheck" / "test_suite_cases.csv"
RUNTIMES = ("torch", "torch-int8", "onnx", "onnx-int8")


def texts_to_score() -> dict[str, list[str]]:
    from toxiforge.data.toxigen import load_demonstration_data

    sentences = [e.text for e in load_demonstration_data(DEMONSTRATIONS).examples]
    partial = [" ".join(s.split()[:n]) for s in sentences for n in range(3, len(s.split()) + 1, 3)]
    sets = {"alice-shaped": partial}
    if HATECHECK.is_file():
        from toxiforge.data.registry import load_spec

        sets["hatecheck"] = [e.text for e in load_spec(f"hatecheck:{HATECHECK}").examples]
    return sets


def classify(folder: Path, threads: int, repeats: int) -> None:
    import numpy as np
    import torch

    from toxiforge.classifiers.hf import HFClassifier

    torch.set_num_threads(threads)
    clfs = {r: HFClassifier.load(folder, device="cpu", runtime=r) for r in RUNTIMES}
    for name, texts in texts_to_score().items():
        seconds: dict[str, list[float]] = {r: [] for r in RUNTIMES}
        scores: dict[str, np.ndarray] = {}
        for _ in range(repeats):
            for r, clf in clfs.items():
                started = time.perf_counter()
                scores[r] = clf.predict_proba(texts)
                seconds[r].append(time.perf_counter() - started)
        base = statistics.median(seconds["torch"])
        print(f"\n{name}: {len(texts)} texts, {threads} thread(s), median of {repeats}, load {os.getloadavg()[0]:.1f}")
        print(table_head(["runtime", "texts/s", "vs torch", "max abs ΔP(toxic)", "decisions changed"], "lrrrr"))
        for r in RUNTIMES:
            median = statistics.median(seconds[r])
            delta = np.abs(scores[r] - scores["torch"])
            flipped = np.mean((scores[r] > 0.5) != (scores["torch"] > 0.5))
            print(table_row(r, f"{len(texts) / median:.1f}", f"{base / median:.2f}x", f"{delta.max():.2e}",
                            f"{flipped:.2%}"))


def alice(folder: Path, work: Path, threads: int, prompts: int) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    groups = "asian,black,jewish,muslim"  # 4 groups x 2 labels x n = prompts
    rows: dict[str, list[dict]] = {}
    for r in RUNTIMES:
        out = work / f"alice-{r}"
        command = [sys.executable, "-m", "toxiforge", "generate", "--method", "alice", "-d", str(DEMONSTRATIONS),
                   "--groups", groups, "--labels", "toxic,benign", "-n", str(max(1, prompts // 8)), "-c", str(folder),
                   "--classifier-runtime", r, "--device", "cpu", "-o", str(out), "--no-summary", "--no-progress"]
        shutil.rmtree(out, ignore_errors=True)
        started, cpu = time.perf_counter(), os.times()
        subprocess.run(command, check=True, env=env)
        wall, used = time.perf_counter() - started, os.times()
        child_cpu = (used.children_user - cpu.children_user) + (used.children_system - cpu.children_system)
        from toxiforge.records import read_rows

        rows[r] = [{"prompt": x.prompt, "generation": x.generation} for x in read_rows(out)]
        n = len(rows[r])
        print(f"{r}: {n} statements, {wall / n:.2f} s wall and {child_cpu / n:.2f} CPU s per statement, "
              f"load {os.getloadavg()[0]:.1f}", flush=True)
    for r in RUNTIMES[1:]:
        same = sum(a == b for a, b in zip(rows[r], rows["torch"]))
        print(f"{r}: {same}/{len(rows['torch'])} statements identical to torch's")
    (work / "alice.json").write_text(json.dumps(rows, indent=1))


def main() -> None:
    options = parser(__doc__)
    add_work(options, "/tmp/classifier-runtime")
    add_threads(options, 1)
    add_repeats(options, 5)
    options.add_argument("--classifier", type=Path, help="a classifier folder (default: train the MiniLM)")
    options.add_argument("--alice", type=int, default=0, help="prompts for the ALICE part (0: skip it)")
    options.add_argument("--skip-classify", action="store_true")
    args = options.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    folder = args.classifier or train_minilm(args.work / "minilm")
    if not args.skip_classify:
        classify(folder, args.threads, args.repeats)
    if args.alice:
        alice(folder, args.work, args.threads, args.alice)


if __name__ == "__main__":
    main()
