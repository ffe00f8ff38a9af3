"""Where an ALICE step's time goes with a transformer sequence classifier (docs/benchmarks.md, issue 22).

Times each part of ``alice_search`` (LM forward, KV-cache reorder, candidate-text decoding, classifier
tokenisation + padding, classifier forward, the rest) for one prompt at the paper's settings (10 beams, 100
candidates), ``STEPS`` steps. The classifier is a MiniLM (the embedded all-MiniLM-L6-v2) with a random
classification head, the same compute as a fine-tuned one, or the fine-tuned directory ``CLASSIFIER``.

    python benchmarks/alice_step_profile.py STEPS [prune|full] [CLASSIFIER]
"""

from __future__ import annotations

import collections
import inspect
import sys
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer, BertForSequenceClassification

import toxiforge.models.transformers_lm as tlm
from toxiforge.classifiers import load_classifier
from toxiforge.classifiers.hf import HFClassifier
from toxiforge.decoding.alice import AliceConfig, alice_search
from toxiforge.models import load_language_model
from toxiforge.models.embedded import embedded_encoder_dir

TIMES: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()


def timed(name, fn):
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES[name] += time.perf_counter() - started
            CALLS[name] += 1
    return wrapper


class TimedTokenizer:
    def __init__(self, tokenizer):
        self.tokenizer = tokenizer

    def __call__(self, *args, **kwargs):
        return timed("classifier tokenisation + padding", self.tokenizer)(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def main() -> None:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    prune = (sys.argv[2] if len(sys.argv) > 2 else "prune") == "prune"
    torch.manual_seed(0)
    if len(sys.argv) > 3:
        clf = load_classifier(sys.argv[3])
    else:
        folder = embedded_encoder_dir()
        model = BertForSequenceClassification.from_pretrained(folder, num_labels=2)
        model.config.architectures = ["BertForSequenceClassification"]
        clf = HFClassifier(model, AutoTokenizer.from_pretrained(folder))
    lm = load_language_model()
    clf.tokenizer = TimedTokenizer(clf.tokenizer)
    clf.model.forward = timed("classifier forward", clf.model.forward)
    clf.class_log_probs = timed("classifier total", clf.class_log_probs)
    lm.batch_decode = timed("LM batch_decode (candidate texts)", lm.batch_decode)
    tlm.TransformersSession._forward = timed("LM forward", tlm.TransformersSession._forward)
    tlm.TransformersSession.select = timed("LM KV-cache reorder", tlm.TransformersSession.select)
    options = {}
    if "prune" in inspect.signature(alice_search).parameters:  # an older checkout has no pruning
        from toxiforge.decoding.pruning import PruningStats

        options = {"prune": prune, "pruning_stats": PruningStats()}
    # the measured prompt: the first 5 benign toxigen-dev sentences about one group (placeholder text without them)
    source = Path(__file__).resolve().parents[1] / "../shared/data/toxigen-dev/demonstrations/race" \
        / "neutral_asian_sentences.txt"
    lines = [line.strip().lstrip("- ") for line in source.read_text().splitlines() if line.strip()][:5] \
        if source.is_file() else ["a plain line of placeholder text", "another neutral line about group alpha"]
    prompt = "".join(f"- {line}\n" for line in lines) + "-"
    alice_search(lm, [prompt], [1], AliceConfig(max_new_tokens=1), classifier=clf)  # warm-up
    TIMES.clear()
    CALLS.clear()
    started = time.perf_counter()
    alice_search(lm, [prompt], [1], AliceConfig(max_new_tokens=steps), classifier=clf, groups=["asian"], **options)
    total = time.perf_counter() - started
    print(f"prune={options.get('prune', 'n/a')}: {steps} steps, {total:.1f} s ({total / steps:.2f} s/step)")
    for name, seconds in sorted(TIMES.items(), key=lambda kv: -kv[1]):
        print(f"  {name:36s} {seconds:8.2f} s {100 * seconds / total:5.1f}%  calls {CALLS[name]}")
    parts = ("classifier total", "LM batch_decode (candidate texts)", "LM forward", "LM KV-cache reorder")
    print(f"  {'the rest (Python)':36s} {total - sum(TIMES[p] for p in parts):8.2f} s")
    if "pruning_stats" in options:
        stats = options["pruning_stats"]
        print(f"  pruning: {stats.scored} of {stats.eligible} eligible candidates scored, per step "
              f"{stats.calls_by_step}")


if __name__ == "__main__":
    main()
