"""ALICE statements/s against a fine-tuned MiniLM classifier: today's code vs an older checkout, same rows.

Trains a MiniLM toxicity classifier on ``../shared/data/toxigen-dev`` (the human-written sentences, with
``toxiforge train``'s function, unless ``--classifier DIR`` gives one), builds prompts from the same data, and runs
ALICE at the paper's settings (10 beams, 100 candidates, every candidate eligible, λL = λC = 0.5, 30 tokens)
one prompt at a time, in a subprocess per code version (``PYTHONPATH=<src>``), each limited to ``--threads``
CPU threads. It asserts that both versions return the same statements (token ids, texts, finish reasons;
scores to 1e-5) and prints statements/s and the ratio, for the MiniLM classifier and for profanity-check.

    mkdir -p /tmp/toxiforge-8d4342c && git archive 8d4342c src | tar -x -C /tmp/toxiforge-8d4342c
    nice -n 5 python benchmarks/alice_classifier_speed.py --old-src /tmp/toxiforge-8d4342c/src --work /tmp/acs

``--old-prompts`` limits how many prompts the old code runs (it takes minutes per statement); the new code
runs those prompts ``--repeats`` times and the medians are compared. ``--max-new-tokens`` (default 30, the
paper's) shortens both searches alike when the machine is too busy for full ones.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import _common


def benchmark_prompts(n: int, seed: int = 0, groups: list[str] | None = None) -> list[dict]:
    """``n`` prompts alternating benign and toxic, over the groups in turn (5 demonstrations each)."""
    from toxiforge.demonstrations.prompts import build_prompts
    from toxiforge.demonstrations.sets import load_demonstrations

    sets = load_demonstrations(_common.DEMONSTRATIONS)
    names = sorted({g for g, _ in sets if groups is None or g in groups})
    out = []
    for i in range(n):
        group, label = names[(i // 2) % len(names)], i % 2
        prompt = build_prompts(sets[(group, label)], i // (2 * len(names)) + 1, k=5, seed=seed)[-1]
        out.append({"text": prompt.text, "group": group, "label": label})
    return out


def worker(args: argparse.Namespace) -> None:
    """Run ALICE on each prompt with the code on ``sys.path``; write rows and times as JSON."""
    _common.set_torch_threads(args.threads)
    from toxiforge.classifiers import load_classifier
    from toxiforge.decoding.alice_config import AliceConfig
    from toxiforge.decoding.alice_decoder import AliceDecoder
    from toxiforge.models import load_language_model

    lm = load_language_model()
    clf = load_classifier(args.worker)
    decoder = AliceDecoder(clf, AliceConfig(max_new_tokens=args.max_new_tokens))
    prompts = json.loads(Path(args.prompts_file).read_text())
    decoder.decode(lm, [prompts[0]["text"]], [0], [prompts[0]["label"]], [prompts[0]["group"]])  # warm-up, checks
    rows, seconds = [], []
    for repeat in range(args.repeats):
        for p in prompts:
            started = time.perf_counter()
            samples = decoder.decode(lm, [p["text"]], [0], [p["label"]], [p["group"]])[0]
            seconds.append(time.perf_counter() - started)
            if repeat == 0:
                rows.append([[s.raw_output, list(s.token_ids), s.finish_reason, s.score] for s in samples])
    Path(args.out).write_text(json.dumps({"rows": rows, "seconds": seconds, "load": os.getloadavg()}))


def run_version(src: Path, classifier: str, prompts_file: Path, out: Path, repeats: int, threads: int,
                max_new_tokens: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src), "HF_HUB_OFFLINE": "1"}
    subprocess.run([sys.executable, __file__, "--worker", classifier, "--prompts-file", str(prompts_file),
                    "--out", str(out), "--repeats", str(repeats), "--threads", str(threads), "--max-new-tokens",
                    str(max_new_tokens)], env=env, check=True)
    return json.loads(out.read_text())


def same_rows(a: list, b: list) -> bool:
    return all(len(x) == len(y) and all(s[:3] == t[:3] and abs(s[3] - t[3]) <= 1e-5 for s, t in zip(x, y))
               for x, y in zip(a, b)) and len(a) == len(b)


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--old-src", type=Path, help="src/ of the checkout to compare with (e.g. main at 8d4342c)")
    _common.add_work(parser, "alice-classifier-speed")
    parser.add_argument("--classifier", type=Path, help="a fine-tuned classifier directory (default: train one)")
    parser.add_argument("--old-prompts", type=int, default=2)
    parser.add_argument("--profanity-prompts", type=int, default=6)
    _common.add_repeats(parser, 3, help="runs of the new code over the same prompts; medians compared")
    _common.add_threads(parser, 2)
    parser.add_argument("--max-new-tokens", type=int, default=30, help="the paper's 30; fewer for a quick run")
    parser.add_argument("--only", nargs="+", default=["minilm", "profanity-check"],
                        choices=["minilm", "profanity-check"])
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--prompts-file", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    new_src = Path(__file__).resolve().parents[1] / "src"
    args.work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    _common.set_torch_threads(args.threads)
    clf_dir = args.classifier or (_common.train_minilm(args.work / "minilm-toxigen-dev") if "minilm" in args.only
                                  else "-")
    print(f"classifier: {clf_dir} (ready after {time.perf_counter() - started:.0f} s)", flush=True)
    for name, classifier, n in (("MiniLM", str(clf_dir), args.old_prompts),
                                ("profanity-check", "profanity-check", args.profanity_prompts)):
        if name.lower() not in args.only:
            continue
        prompts_file = args.work / f"prompts-{n}.json"
        prompts_file.write_text(json.dumps(benchmark_prompts(n)))
        tag = "minilm" if name == "MiniLM" else "profanity"
        new = run_version(new_src, classifier, prompts_file, args.work / f"new-{tag}.json", args.repeats, args.threads,
                          args.max_new_tokens)
        old = run_version(args.old_src, classifier, prompts_file, args.work / f"old-{tag}.json", 1, args.threads,
                          args.max_new_tokens) if args.old_src else None
        new_med = statistics.median(new["seconds"])
        line = f"{name}: new {1 / new_med:.4f} statements/s (median {new_med:.1f} s of {len(new['seconds'])}, " \
               f"load {new['load'][0]:.1f})"
        if old is not None:
            old_med = statistics.median(old["seconds"])
            identical = same_rows(old["rows"], new["rows"])
            line += f"; old {1 / old_med:.4f} statements/s (median {old_med:.1f} s of {len(old['seconds'])}, load " \
                    f"{old['load'][0]:.1f}); ratio {old_med / new_med:.1f}x; rows identical: {identical}"
        print(line, flush=True)
        if old is not None:
            assert identical, f"{name}: the two versions returned different rows"


if __name__ == "__main__":
    main()
