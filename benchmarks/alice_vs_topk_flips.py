"""Does ALICE fool a neural classifier more often than top-k? Label flips on groups the classifier never saw.

1. Fine-tune the embedded MiniLM (``toxiforge train``'s function) on the human-written sentences of half the
   ``../shared/data/toxigen-dev`` groups (``--train-groups``; default every other group in sorted order).
2. For the other groups, build prompts (5 demonstrations each) from benign and from toxic sentences and generate
   with top-k (k 40, T 0.9) and with ALICE (the paper's settings, steering against that classifier), writing
   every statement to ``statements.jsonl`` as it comes (a later run with the same ``--work`` continues).
3. Score every statement with the classifier. A flip is a statement from a benign prompt that the classifier
   calls toxic (P(toxic) > 0.5, ``toxiforge.records.is_toxic``), or one from a toxic prompt that it calls benign.
   Print flips per method and prompt label with Wilson 95% intervals, and the statements' perplexity under the LM
   (median).

    nice -n 5 python benchmarks/alice_vs_topk_flips.py --work /tmp/flips -n 40
    python benchmarks/alice_vs_topk_flips.py --work /tmp/flips --report      # tables from what is there
    nice -n 5 python benchmarks/alice_vs_topk_flips.py --work /tmp/flips -n 16 --lambda-clf 0.8 --methods alice
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import _common


def method_key(method: str, lambda_clf: float) -> str:
    return method if method == "top-k" else f"ALICE λC={lambda_clf:g}"


def generate(args: argparse.Namespace, clf_dir: Path, eval_groups: list[str], out: Path) -> None:
    from toxiforge.classifiers import load_classifier
    from toxiforge.decoding.alice_config import AliceConfig
    from toxiforge.decoding.alice_decoder import AliceDecoder
    from toxiforge.decoding.topk import TopKDecoder
    from toxiforge.decoding.types import postprocess
    from toxiforge.models import load_language_model

    lm, clf = load_language_model(), load_classifier(str(clf_dir))
    decoders = {"top-k": TopKDecoder(),
                "alice": AliceDecoder(clf, AliceConfig(lambda_clf=args.lambda_clf))}  # λL stays 0.5
    by_key = {method_key(method, args.lambda_clf): decoders[method] for method in args.methods}
    with out.open("a") as sink:
        for start, total, key, label, batch, prompts in _common.pending_batches(out, list(by_key), eval_groups,
                                                                                args.n, args.batch, args.seed):
            started = time.perf_counter()
            samples = by_key[key].decode(lm, prompts, [args.seed + j for j, _, _ in batch], [label] * len(batch),
                                         [g for _, _, g in batch])
            seconds = (time.perf_counter() - started) / len(batch)
            texts = [postprocess(s[0].raw_output).text for s in samples]
            probs = clf.predict_proba(texts)
            for (j, _, g), text, p in zip(batch, texts, probs):
                sink.write(json.dumps({"method": key, "label": label, "index": j, "group": g, "text": text,
                                       "p_toxic": float(p), "seconds": seconds}) + "\n")
            sink.flush()
            print(f"{key} label {label}: {start + len(batch)}/{total} ({seconds:.1f} s/statement)", flush=True)


def report(out: Path, lm_name: str | None) -> None:
    from toxiforge.intervals import proportion_interval
    from toxiforge.records import is_toxic

    rows = [json.loads(line) for line in out.read_text().splitlines()]
    ppl = _common.perplexities(lm_name, {r["text"] for r in rows if r["text"]}) if lm_name is not None else {}
    print(_common.table_head(["method", "prompts", "statements", "flips", "flip rate [95% CI]", "median P(toxic)",
                              "median perplexity"], "llrrlrr"))
    for method in sorted({r["method"] for r in rows}, key=lambda m: (m != "top-k", m)):
        for label in (0, 1):
            sel = [r for r in rows if r["method"] == method and r["label"] == label]
            if not sel:
                continue
            flips = sum(is_toxic(r["p_toxic"]) != bool(label) for r in sel)
            low, high = proportion_interval(flips, len(sel))
            med_ppl = statistics.median([ppl[r["text"]] for r in sel if r["text"] in ppl]) if ppl else float("nan")
            print(f"| {method} | {'toxic' if label else 'benign'} | {len(sel)} | {flips} | {flips / len(sel):.0%} "
                  f"[{low:.0%}, {high:.0%}] | {statistics.median(r['p_toxic'] for r in sel):.2f} | {med_ppl:.1f} |")


def main() -> None:
    parser = _common.parser(__doc__)
    _common.add_work(parser, "alice-vs-topk")
    parser.add_argument("-n", type=int, default=40, help="statements per method and prompt label")
    parser.add_argument("--methods", nargs="+", default=["top-k", "alice"], choices=["top-k", "alice"])
    parser.add_argument("--lambda-clf", type=float, default=0.5)
    parser.add_argument("--train-groups", nargs="+", help="default: every other group in sorted order")
    parser.add_argument("--batch", type=int, default=4, help="prompts decoded together")
    _common.add_threads(parser, 2)
    _common.add_seed(parser)
    parser.add_argument("--report", action="store_true", help="only print the tables of what is there")
    parser.add_argument("--perplexity-lm", default="smollm2-135m", help="LM for perplexity ('' to skip)")
    args = parser.parse_args()
    train_groups, eval_groups = _common.group_split(args.train_groups)
    args.work.mkdir(parents=True, exist_ok=True)
    out = args.work / "statements.jsonl"
    if not args.report:
        print(f"classifier trained on {train_groups}; statements for {eval_groups}", flush=True)
        _common.set_torch_threads(args.threads)
        clf_dir = _common.train_minilm(args.work / "minilm-half", train_groups)
        generate(args, clf_dir, eval_groups, out)
    report(out, args.perplexity_lm or None)


if __name__ == "__main__":
    main()
