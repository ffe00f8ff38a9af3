"""Pruned ALICE with several prompts in one batch: time, texts scored and classifier calls (docs/benchmarks.md,
issue 34, "the price of fixed batches").

The classifier is the embedded all-MiniLM-L6-v2 with a random 2-class head (as ``alice_step_profile.py``), the LM
the embedded SmolLM2; 10 beams × 100 candidates; placeholder prompts. Compare two checkouts with
``PYTHONPATH=<checkout>/src``.

    OMP_NUM_THREADS=1 python benchmarks/alice_prune_batches.py STEPS PROMPTS
"""

from __future__ import annotations

import time

import _common

LINES = ["a plain line of placeholder text", "another neutral line about group alpha", "the weather was mild today",
         "people in group beta like music", "numbers such as one two three", "a list of neutral statements"]


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("steps", type=int, nargs="?", default=15, help="ALICE steps (max new tokens; default: 15)")
    parser.add_argument("prompts", type=int, nargs="?", default=6, help="prompts in the batch (default: 6)")
    args = parser.parse_args()
    steps, n_prompts = args.steps, args.prompts
    from toxiforge.decoding.alice import alice_search
    from toxiforge.decoding.alice_config import AliceConfig
    from toxiforge.decoding.pruning import PruningStats
    from toxiforge.models import load_language_model

    clf = _common.random_head_minilm()
    calls = []
    score = clf.class_log_probs
    clf.class_log_probs = lambda texts: calls.append(len(texts)) or score(texts)  # type: ignore[method-assign]
    lm = load_language_model()
    prompts = ["".join(f"- {line}\n" for line in LINES[i % 6:] + LINES[:i % 6]) + "-" for i in range(n_prompts)]
    alice_search(lm, prompts[:1], [1], AliceConfig(max_new_tokens=1), classifier=clf)  # warm-up
    calls.clear()
    stats = PruningStats()
    started = time.perf_counter()
    alice_search(lm, prompts, [1] * n_prompts, AliceConfig(max_new_tokens=steps), classifier=clf,
                 pruning_stats=stats)
    total = time.perf_counter() - started
    print(f"{n_prompts} prompts, {steps} steps: {total:.1f} s; classifier calls {len(calls)}, texts {stats.scored} "
          f"of {stats.eligible} eligible; texts per step {stats.calls_by_step}")


if __name__ == "__main__":
    main()
