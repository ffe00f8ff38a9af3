"""Statements/s of toxiforge's ALICE vs a re-implementation of upstream's algorithm, same LM/classifier/prompts.

The upstream-style reference (microsoft/TOXIGEN ``toxigen/alice.py``, re-written here for an open LM, not
copied) runs one prompt at a time and, every step, recomputes each beam's whole prefix (no KV cache) and calls
the classifier on that beam's candidates. Both sides use the same settings: 10 beams, at most 30 new tokens,
λL = λC = 0.5, temperature 0.9, prompt-token ban, no-repeat 3-grams over the generated tokens, and the
classifier scores the best ``classifier_top_n = 2 × beams`` candidates of each beam by LM score. One run each,
printed side by side.

    python benchmarks/alice_speed.py                          # embedded SmolLM2 + profanity-check, CPU
    python benchmarks/alice_speed.py --prompts 8 --reference-prompts 4
    python benchmarks/alice_speed.py --reference-prompts 0 --repeats 3   # toxiforge only: median of 3 runs

The reference takes minutes per prompt. To compare two versions of toxiforge on a shared machine, run the
toxiforge-only form of this script for both at the same time (``PYTHONPATH=<other checkout>/src``; only
``alice_search`` and ``AliceConfig`` are used on that path) and compare their medians.

The GPU measurement (1B Llama + roberta-large, random init, fraction of the bf16 FLOP bound) is
``benchmarks/alice_gpu_flops.py``.
"""

from __future__ import annotations

import inspect
import statistics
import time
from typing import TYPE_CHECKING

import _common
from toxiforge.models import DEFAULT_LM

if TYPE_CHECKING:
    from toxiforge.decoding.alice_config import AliceConfig


def upstream_style(lm, classifier, prompt: str, target: int, config: AliceConfig) -> tuple[int, ...]:
    """One prompt; per step and per beam: full forward over prompt + beam (no cache), classifier on the beam's
    best ``classifier_top_n`` candidates; keep the best ``num_beams`` continuations; stop at a newline."""
    import torch

    from toxiforge.decoding.scorers import exempt_from_prompt_ban, lm_scores, repeated_ngram_mask

    model, device = lm.model, lm.device
    prompt_ids = lm.encode(prompt)
    exempt = exempt_from_prompt_ban(lm.token_texts())
    banned = torch.zeros(lm.vocab_size, dtype=torch.bool)
    banned[sorted(set(prompt_ids))] = True
    banned &= ~exempt
    stop = lm.newline_mask().cpu()
    size = config.no_repeat_ngram_size
    beams: list[tuple[list[int], float]] = [([], 0.0)]
    finished: list[tuple[list[int], float]] = []
    n = config.classifier_top_n or config.candidates
    for step in range(config.max_new_tokens):
        pool = []
        for tokens, score in beams:
            ids = torch.tensor([prompt_ids + tokens], device=device)
            with torch.inference_mode():
                logits = model(input_ids=ids).logits[0, -1].float().cpu()
            scores = lm_scores(torch.log_softmax(logits, -1)[None], config.temperature)
            scores = scores.masked_fill(banned[None], float("-inf"))
            if size:
                scores = scores.masked_fill(repeated_ngram_mask(torch.tensor([tokens]), size, lm.vocab_size),
                                            float("-inf"))
            lm_top, ids_top = torch.topk(scores[0], n)
            texts = lm.batch_decode([tokens + [t] for t in ids_top.tolist()])
            clf = classifier.class_log_probs(texts)[:, target]
            for lp, cp, tok in zip(lm_top.tolist(), clf.tolist(), ids_top.tolist()):
                pool.append((tokens + [tok], score + config.lambda_lm * lp + config.lambda_clf * cp))
        pool.sort(key=lambda x: -x[1])
        beams = []
        for tokens, score in pool[:2 * config.num_beams]:
            if bool(stop[tokens[-1]]) or step + 1 == config.max_new_tokens:
                finished.append((tokens, score / len(tokens)))
            elif len(beams) < config.num_beams:
                beams.append((tokens, score))
        if len(finished) >= config.num_beams or not beams:
            break
    return tuple(max(finished, key=lambda x: x[1])[0])


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--model", default=DEFAULT_LM)
    parser.add_argument("--classifier", default="profanity-check")
    parser.add_argument("--prompts", type=int, default=8, help="prompts for toxiforge's ALICE (one batch)")
    parser.add_argument("--reference-prompts", type=int, default=4,
                        help="of those, run by the reference too (0: toxiforge only)")
    parser.add_argument("--repeats", type=int, default=1, help="timed toxiforge runs; the median is reported")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--dtype", default="auto")
    args = parser.parse_args()
    import torch

    from toxiforge.classifiers import load_classifier
    from toxiforge.decoding.alice import alice_search
    from toxiforge.decoding.alice_config import AliceConfig
    from toxiforge.models import load_language_model
    from toxiforge.pipeline import GenerationPlan

    lm = load_language_model(args.model, dtype=args.dtype, device=args.device)
    classifier = load_classifier(args.classifier)
    groups = ["asian", "women", "middle_east", "physical_disability"]
    plan = GenerationPlan.grid(groups, ["benign"], max(1, args.prompts // len(groups)), seed=0)
    items = plan.expand()[:args.prompts]
    prompts = [item.prompt for item in items]
    # the target groups (their names are exempt from the prompt ban) where this toxiforge's ALICE takes them: an
    # older checkout run with PYTHONPATH (see above) has no ``groups`` argument
    extra = ({"groups": [item.group for item in items]}
             if "groups" in inspect.signature(alice_search).parameters else {})
    target = classifier.toxic_index  # benign prompts -> false positives, as `make demo`
    config = AliceConfig(classifier_top_n=2 * AliceConfig().num_beams)
    print(f"LM {lm.name} ({lm.describe()['dtype']}, {lm.device}); classifier {classifier.name}; "
          f"torch threads {torch.get_num_threads()}; beams {config.num_beams}, classifier_top_n "
          f"{config.classifier_top_n}, max {config.max_new_tokens} tokens")

    alice_search(lm, prompts[:1], [target], config, classifier=classifier)  # warm-up
    times = []
    for _ in range(max(1, args.repeats)):
        started = time.perf_counter()
        ours = alice_search(lm, prompts, [target] * len(prompts), config, classifier=classifier, **extra)
        times.append(time.perf_counter() - started)
    ours_s = statistics.median(times)
    ours_rate = len(prompts) / ours_s
    print(f"toxiforge ALICE ({len(prompts)} prompts, one batch): {ours_rate:7.3f} statements/s (median "
          f"{ours_s:.1f} s of {', '.join(f'{t:.1f}' for t in times)})")
    if args.reference_prompts < 1:
        return
    ref_prompts = prompts[:args.reference_prompts]
    started = time.perf_counter()
    reference = [upstream_style(lm, classifier, p, target, config) for p in ref_prompts]
    ref_s = time.perf_counter() - started
    same = sum(tuple(h[0].token_ids) == r for h, r in zip(ours, reference))
    ref_rate = len(ref_prompts) / ref_s
    print(f"upstream-style reference ({len(ref_prompts)} prompts):  {ref_rate:7.3f} statements/s ({ref_s:.1f} s)")
    print(f"ratio: {ours_rate / ref_rate:.1f}x   (same statement on {same}/{len(ref_prompts)} shared prompts; the "
          "reference's simpler bookkeeping may pick a different finished beam)")

if __name__ == "__main__":
    main()
