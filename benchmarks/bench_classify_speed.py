"""Classification mode: toxiforge's items/s against lm-evaluation-harness's HFLM on the same requests and model.

All sides score the same (context, " No"/" Yes") requests of :func:`toxiforge.bench.classify.classify_requests`
with the same model object at the same batch size: ``toxiforge judge``, the path ``bench classify`` and
``-c judge:MODEL`` take (``JudgeClassifier`` with the humanval template as plain text: one forward pass per text
gives both words), ``toxiforge loglik`` (``TransformersLM.loglikelihood``, one request per answer), and the
harness's ``HFLM(pretrained=model, tokenizer=tokenizer).loglikelihood(instances)``. Runs alternate (each side in
turn, repeated) so background load hits all alike; the medians are compared. The largest per-request difference
of the log-likelihoods from the harness's is printed as a check, per side. Wall and process CPU time are both
reported (CPU time is steadier on a shared machine), with the load average before and after.

Items are the toxigen-dev demonstrations (hate and neutral sentences, every group, in file order, the first
``--items``); without them, placeholder sentences.

    HF_HUB_OFFLINE=1 python benchmarks/bench_classify_speed.py --items 96 --repeats 3
"""

from __future__ import annotations

import os
import statistics
import time

import _common
from toxiforge.models.embedded import DEFAULT_LM


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--model", default=DEFAULT_LM)
    parser.add_argument("--items", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=16)
    _common.add_repeats(parser, 3)
    _common.add_threads(parser, None)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from lm_eval.api.instance import Instance
    from lm_eval.models.huggingface import HFLM

    from toxiforge.bench.classify import classify_requests, demonstration_examples
    from toxiforge.classifiers.judge import JudgeClassifier
    from toxiforge.models import load_language_model

    torch.manual_seed(0)
    _common.set_torch_threads(args.threads)
    if _common.DEMONSTRATIONS.is_dir():
        texts, source = demonstration_examples(_common.DEMONSTRATIONS).texts[:args.items], "toxigen-dev demonstrations"
    else:
        texts, source = [f"placeholder statement {i} about group alpha" for i in range(args.items)], "placeholders"
    lm = load_language_model(args.model, dtype="float32", device="cpu")
    requests = classify_requests(texts)
    instances = [Instance(request_type="loglikelihood", doc={}, arguments=r, idx=i) for i, r in enumerate(requests)]
    harness = HFLM(pretrained=lm.model, tokenizer=lm.tokenizer, batch_size=args.batch_size)
    judge = JudgeClassifier(lm, "humanval", render="text", batch_size=args.batch_size)

    def by_judge():  # per text: log P(" Yes"), log P(" No") -> in request order (No, Yes)
        lp = judge.decision_scores(texts).logprobs
        return [float(x) for pair in zip(lp[:, 1], lp[:, 0]) for x in pair]

    def by_loglikelihood():
        return [x.logprob for x in lm.loglikelihood(requests, batch_size=args.batch_size)]

    def by_harness():
        return [x[0] for x in harness.loglikelihood(instances, disable_tqdm=True)]

    sides = {"toxiforge judge": by_judge, "toxiforge loglik": by_loglikelihood, "lm-eval HFLM": by_harness}
    reference = by_harness()  # warm-up, and the agreement check
    diffs = {name: max(abs(x - y) for x, y in zip(fn(), reference)) for name, fn in sides.items()}
    print("warm-up done; max |log-likelihood difference| from lm-eval: "
          + ", ".join(f"{name} {d:.2e}" for name, d in diffs.items()), flush=True)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.repeats):
        for name, fn in sides.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - started)
            cpu[name].append(time.process_time() - cpu_started)
            print(f"  run: {name} {times[name][-1]:.2f} s wall, {cpu[name][-1]:.2f} s CPU", flush=True)
    print(f"{len(texts)} items ({len(requests)} requests) from {source}; {args.model} float32 on CPU "
          f"({torch.get_num_threads()} threads), batch size {args.batch_size}, {args.repeats} runs each, alternating; "
          f"load average (1 min) {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    rates, cpu_rates = {}, {}
    for name, ts in times.items():
        rates[name] = len(texts) / statistics.median(ts)
        cpu_rates[name] = len(texts) / statistics.median(cpu[name])
        print(f"  {name:16s} median {statistics.median(ts):6.2f} s wall -> {rates[name]:6.2f} items/s; "
              f"median {statistics.median(cpu[name]):6.2f} s CPU -> {cpu_rates[name]:6.2f} items per CPU-s  "
              f"(wall runs: {', '.join(f'{t:.2f}' for t in ts)} s)")
    for name in ("toxiforge judge", "toxiforge loglik"):
        print(f"  ratio {name} / lm-eval: {rates[name] / rates['lm-eval HFLM']:.2f}x wall, "
              f"{cpu_rates[name] / cpu_rates['lm-eval HFLM']:.2f}x CPU   max |log-likelihood difference|: "
              f"{diffs[name]:.2e}")


if __name__ == "__main__":
    main()
