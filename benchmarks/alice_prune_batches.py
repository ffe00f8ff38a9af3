"""Pruned ALICE with several prompts in one batch: time, texts scored and classifier calls (docs/benchmarks.md,
issue 34, "the price of fixed batches").

The classifier is the embedded all-MiniLM-L6-v2 with a random 2-class head (as ``alice_step_profile.py``), the LM
the embedded SmolLM2; 10 beams × 100 candidates; placeholder prompts. Compare two checkouts with
``PYTHONPATH=<checkout>/src``.

    OMP_NUM_THREADS=1 python benchmarks/alice_prune_batches.py STEPS PROMPTS
"""

from __future__ import annotations

import sys
import time

import torch
from transformers import AutoTokenizer, BertForSequenceClassification

from toxiforge.classifiers.hf import HFClassifier
from toxiforge.decoding.alice import AliceConfig, alice_search
from toxiforge.decoding.pruning import PruningStats
from toxiforge.models import load_language_model
from toxiforge.models.embedded import embedded_encoder_dir

LINES = ["a plain line of placeholder text", "another neutral line about group alpha", "the weather was mild today",
         "people in group beta like music", "numbers such as one two three", "a list of neutral statements"]


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    n_prompts = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    torch.manual_seed(0)
    folder = embedded_encoder_dir()
    model = BertForSequenceClassification.from_pretrained(folder, num_labels=2)
    model.config.architectures = ["BertForSequenceClassification"]
    clf = HFClassifier(model, AutoTokenizer.from_pretrained(folder))
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
