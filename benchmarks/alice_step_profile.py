"""Where an ALICE step's time goes on the CPU, per phase (docs/benchmarks.md, issues 22 and 47).

Times each phase of ``alice_search`` — LM forward, KV-cache reorder, LM log-softmax at the temperature, the token
constraints (prompt ban, no-repeat, require-text), candidate selection and beam bookkeeping, candidate-text
decoding, classifier tokenization, classifier forward, the rest of pruning — over ``--steps`` steps of a batch of
``--prompts`` prompts at the paper's settings (10 beams, 100 candidates), ``--repeats`` times, and prints each
phase's median. Prompts: 5 lines of each toxigen-dev demonstration file (hate and neutral alternately, so targets
of both classes share the batch; placeholder text when ``../shared/data`` is absent). The LM is the embedded
SmolLM2-135M, the classifier the embedded all-MiniLM-L6-v2 with a random 2-class head (a fine-tuned MiniLM's
compute) or the classifier ``--classifier`` names. Phases are found by name, so the script also profiles an
older checkout (``PYTHONPATH=<checkout>/src``); a phase that checkout lacks reads 0.

    OMP_NUM_THREADS=1 python benchmarks/alice_step_profile.py --steps 6 --prompts 8 --repeats 3
    OMP_NUM_THREADS=1 python benchmarks/alice_step_profile.py --steps 6 --prompts 1 --full   # every candidate
"""

from __future__ import annotations

import collections
import inspect
import statistics
import time
from typing import Any

import _common

TIMES: collections.Counter = collections.Counter()
CALLS: collections.Counter = collections.Counter()


def phases() -> dict[str, list[tuple[Any, str]]]:
    """Phase -> the (module or class, attribute) pairs timed as it; a missing attribute is skipped."""
    import toxiforge.decoding.alice as alice
    import toxiforge.decoding.scorers as scorers
    import toxiforge.models.transformers_lm as tlm

    return {
        "LM forward": [(tlm.TransformersSession, "_forward")],
        "LM KV-cache reorder": [(tlm.TransformersSession, "select")],
        "LM log-softmax / T": [(alice, "lm_scores")],
        "constraints": [(scorers.PromptTokenBan, "__call__"), (scorers.NoRepeatNGram, "__call__"),
                        (scorers.RequireText, "__call__"), (alice, "apply_constraints")],
        "beam bookkeeping": [(alice, name) for name in ("top_continuations", "record_finished", "next_beams",
                                                        "search_done", "step_candidates")],
        "pruning (all of it)": [(alice, "pruned_classifier_scores")],
    }


NESTED = ("candidate texts (LM batch_decode)", "classifier tokenization", "classifier forward", "classifier total")


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
        return timed("classifier tokenization", self.tokenizer)(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self.tokenizer, name)


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--prompts", type=int, default=8)
    _common.add_repeats(parser, 3, help="profiled runs; each phase's median is printed (default: 3)")
    parser.add_argument("--full", action="store_true", help="score every candidate (prune=False)")
    parser.add_argument("--classifier", help="a classifier name or folder (default: random-head MiniLM)")
    args = parser.parse_args()
    import torch

    import toxiforge.decoding.alice as alice
    from toxiforge.classifiers import load_classifier
    from toxiforge.models import load_language_model

    torch.manual_seed(0)
    clf = load_classifier(args.classifier) if args.classifier else _common.random_head_minilm()
    lm = load_language_model()
    targets_by_phase = phases()
    clf.tokenizer = TimedTokenizer(clf.tokenizer)
    clf.model.forward = timed("classifier forward", clf.model.forward)
    clf.class_log_probs = timed("classifier total", clf.class_log_probs)
    lm.batch_decode = timed("candidate texts (LM batch_decode)", lm.batch_decode)
    for phase, targets in targets_by_phase.items():
        for owner, attribute in targets:
            if attribute in vars(owner):
                setattr(owner, attribute, timed(phase, getattr(owner, attribute)))
    texts, labels = _common.demonstration_prompts(args.prompts)
    targets = [0 if label == 1 else 1 for label in labels]
    options = {"prune": not args.full} if "prune" in inspect.signature(alice.alice_search).parameters else {}
    stats = None
    if options:
        from toxiforge.decoding.pruning import PruningStats
    config = alice.AliceConfig(max_new_tokens=args.steps)
    alice.alice_search(lm, texts[:1], targets[:1], alice.AliceConfig(max_new_tokens=1), classifier=clf)  # warm-up
    runs: list[dict[str, float]] = []
    calls: dict[str, int] = {}
    for _ in range(args.repeats):
        TIMES.clear()
        CALLS.clear()
        if options:
            stats = options["pruning_stats"] = PruningStats()
        started = time.perf_counter()
        alice.alice_search(lm, texts, targets, config, classifier=clf, **options)
        total = time.perf_counter() - started
        measured = {name: TIMES[name] for name in [*targets_by_phase, *NESTED]}
        top = sum(measured[p] for p in targets_by_phase)
        measured["pruning: the rest (bookkeeping)"] = measured["pruning (all of it)"] - \
            measured["classifier total"] - measured["candidate texts (LM batch_decode)"]
        measured["classifier: the rest (transfers, sorting)"] = measured["classifier total"] - \
            measured["classifier tokenization"] - measured["classifier forward"]
        measured["the rest of the loop (Python, top-k)"] = total - top
        measured["total"] = total
        runs.append(measured)
        calls = dict(CALLS)
    print(f"{args.prompts} prompts, {args.steps} steps, prune={not args.full}, {args.repeats} runs, "
          f"torch threads {torch.get_num_threads()}: medians")
    order = ["total", "LM forward", "LM KV-cache reorder", "LM log-softmax / T", "constraints", "beam bookkeeping",
             "the rest of the loop (Python, top-k)", "pruning (all of it)", "candidate texts (LM batch_decode)",
             "classifier tokenization", "classifier forward", "classifier: the rest (transfers, sorting)",
             "pruning: the rest (bookkeeping)"]
    for name in order:
        values = [run[name] for run in runs]
        median = statistics.median(values)
        share = 100 * median / statistics.median(run["total"] for run in runs)
        print(f"  {name:44s} {median:8.3f} s {share:5.1f}%  ({' '.join(f'{v:.2f}' for v in values)})"
              f"  calls {calls.get(name, '-')}")
    print(f"  per step: {statistics.median(run['total'] for run in runs) / args.steps:.3f} s")
    if stats is not None:
        print(f"  last run: {stats.scored} of {stats.eligible} eligible texts scored, {stats.rounds} rounds, "
              f"{calls.get('classifier total', 0)} classifier calls")


if __name__ == "__main__":
    main()
