"""Judge classifier speed: items/s with and without prefix reuse, and ALICE seconds per statement against the judge
vs against a MiniLM classifier, side by side in one run.

    python benchmarks/judge_speed.py                           # embedded SmolLM2 judge (humanval), CPU
    python benchmarks/judge_speed.py --items 32 --repeats 3 --prompts 2 --max-new-tokens 10

Part 1 scores ``--items`` statements (the neutral sentences of ../shared/data/toxigen-dev, else placeholder
sentences) with ``JudgeClassifier`` twice per repeat, ``reuse_prefix`` on and off, and reports the medians.
Part 2 runs ALICE (toxiforge's defaults, 10 beams, with ``--max-new-tokens`` and ``--classifier-top-extensions``
to keep CPU runs short) on ``--prompts`` benign prompts against the judge and against MiniLM (the embedded
all-MiniLM-L6-v2 with a classification head: ``--minilm DIR`` for a fine-tuned one, else a random head, which
costs the same time), and reports seconds per statement for each.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from typing import TYPE_CHECKING

import _common
from toxiforge.models import DEFAULT_LM

if TYPE_CHECKING:
    from toxiforge.classifiers.judge import JudgeClassifier


def statements(n: int) -> list[str]:
    dev = _common.DEMONSTRATIONS
    files = sorted(dev.glob("*/neutral_*_sentences.txt")) if dev.is_dir() else []
    lines = [line.strip().lstrip("- ").strip() for f in files for line in f.read_text().splitlines() if line.strip()]
    if len(lines) < n:
        lines += [f"placeholder statement number {i} about the weather and music" for i in range(n - len(lines))]
    return lines[:n]


def minilm(path: str | None):
    if path:
        from toxiforge.classifiers import load_classifier

        return load_classifier(path, device="cpu")
    return _common.random_head_minilm(name="minilm (random head)")


def speed(judges: dict[bool, JudgeClassifier], args: argparse.Namespace) -> None:
    """Part 1: items/s with and without prefix reuse, medians of ``args.repeats`` alternating runs."""
    import torch

    texts = statements(args.items)
    backend = judges[True].backend
    lengths = [len(backend.encode(backend.prompt(t))) for t in texts]
    print(f"judge {judges[True].name}, template {args.template} ({backend.render}), {len(texts)} statements, "
          f"prompt {min(lengths)}-{max(lengths)} tokens of which {len(backend.prefix)} shared; batch "
          f"{args.batch_size}; torch threads {torch.get_num_threads()}; load {os.getloadavg()[0]:.2f}")
    judges[True].predict_proba(texts[:2])  # warm-up
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(args.repeats):
        for reuse in (True, False):
            started = time.perf_counter()
            judges[reuse].predict_proba(texts)
            times[reuse].append(time.perf_counter() - started)
    for reuse in (True, False):
        med = statistics.median(times[reuse])
        print(f"  prefix reuse {'on ' if reuse else 'off'}: {len(texts) / med:6.2f} items/s (median {med:.1f} s of "
              f"{', '.join(f'{t:.1f}' for t in times[reuse])})")
    print(f"  speed-up {statistics.median(times[False]) / statistics.median(times[True]):.2f}x; "
          f"load after {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--model", default=DEFAULT_LM)
    parser.add_argument("--template", default="humanval")
    parser.add_argument("--items", type=int, default=32, help="statements for part 1 (0: skip it)")
    parser.add_argument("--batch-size", type=int, default=16)
    _common.add_repeats(parser, 3)
    parser.add_argument("--prompts", type=int, default=2, help="ALICE prompts per classifier (0: skip part 2)")
    parser.add_argument("--max-new-tokens", type=int, default=10)
    parser.add_argument("--classifier-top-extensions", type=int, default=10)
    parser.add_argument("--minilm", default=None, help="a fine-tuned MiniLM directory (default: random head)")
    args = parser.parse_args()
    from toxiforge.classifiers.judge import JudgeClassifier
    from toxiforge.decoding.alice import alice_search
    from toxiforge.decoding.alice_config import AliceConfig
    from toxiforge.models import load_language_model
    from toxiforge.pipeline import GenerationPlan

    lm = load_language_model(args.model, device="cpu")
    judges = {reuse: JudgeClassifier(lm, args.template, batch_size=args.batch_size, reuse_prefix=reuse)
              for reuse in (True, False)}
    if args.items > 0:
        speed(judges, args)
    if args.prompts < 1:
        return

    plan = GenerationPlan.grid(["asian", "women"], ["benign"], max(1, args.prompts), seed=0)
    items = plan.expand()[:args.prompts]
    prompts, groups = [i.prompt for i in items], [i.group for i in items]
    config = AliceConfig(max_new_tokens=args.max_new_tokens, classifier_top_extensions=args.classifier_top_extensions)
    print(f"ALICE: {len(prompts)} benign prompts -> toxic class, beams {config.num_beams}, max {config.max_new_tokens} "
          f"tokens, classifier on the {config.classifier_top_extensions} best extensions per step")
    for name, clf in (("judge", judges[True]), ("minilm", minilm(args.minilm))):
        scored: list[int] = []
        score = clf.class_log_probs

        def counted(texts, score=score, scored=scored):
            scored.append(len(texts))
            return score(texts)

        clf.class_log_probs = counted  # count the texts ALICE asks the classifier about
        started = time.perf_counter()
        out = alice_search(lm, prompts, [clf.toxic_index] * len(prompts), config, classifier=clf, groups=groups)
        seconds = time.perf_counter() - started
        tokens = sum(len(h[0].token_ids) for h in out)
        print(f"  {name:7s} {seconds / len(prompts):7.1f} s/statement ({seconds:.1f} s, {tokens} tokens, "
              f"{sum(scored)} texts scored by the classifier; load {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
