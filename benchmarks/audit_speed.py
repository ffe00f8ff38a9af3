"""``toxiforge audit``: its scoring items/s against a plain ``transformers.pipeline`` loop, and the report's own time.

1. **Scoring.** The same texts, the same MiniLM classifier directory, float32 on CPU, the same batch size: the
   audit's path (``ScoreCache.score`` over ``score_texts`` of the loaded ``-c DIR`` backend: length-sorted batches,
   a partial save every 1,024 rows, exactly what ``run_audit`` calls) against
   ``pipeline("text-classification", model=DIR)(texts, batch_size=B, truncation=True, top_k=None)``. Runs
   alternate (each side in turn, ``--repeats`` times) so background load hits both alike; medians compared. The
   largest difference between the two sides' P(toxic) is printed as a check.
2. **Report.** ``run_audit`` with 3 classifiers (the MiniLM directory, a second MiniLM head, profanity-check) on
   HateCheck (3,728 cases), ``--bootstrap`` resamples: the scoring seconds of that run, then the report's own time
   (every section with its intervals, the comparison, the figures, report.json/md/html: ``run_audit`` again with
   ``resume`` so every score comes from the cache, plus ``write_report``), ``--repeats`` times, median, as a share
   of the scoring time. Zhou et al.'s OI list and the dialect model come from ../shared/data when present.

Texts: HateCheck's ``test_suite_cases.csv`` from ../shared/data/hatecheck (placeholder sentences without it).
``--model DIR`` is a trained classifier (``toxiforge train ... -o DIR``); without it, two MiniLM heads are built
in-process from the embedded all-MiniLM-L6-v2 (untrained heads: the speed is the same, the scores are not
meaningful).

    HF_HUB_OFFLINE=1 nice -n 10 python benchmarks/audit_speed.py --model models/minilm-dev --repeats 3
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from functools import partial
from pathlib import Path

import numpy as np

import _common

HATECHECK = _common.SHARED_DATA / "hatecheck" / "test_suite_cases.csv"
OI_LIST = _common.SHARED_DATA / "toxic-debias" / "word_based_bias_list.csv"
DIALECT = _common.SHARED_DATA / "twitteraae"


def build_head(folder: Path, seed: int) -> Path:
    """The embedded all-MiniLM-L6-v2 with a fresh 2-class head (benign, toxic), saved to ``folder``."""
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from toxiforge.models.embedded import embedded_encoder_dir

    torch.manual_seed(seed)
    source = embedded_encoder_dir()
    model = AutoModelForSequenceClassification.from_pretrained(
        source, num_labels=2, id2label={0: "benign", 1: "toxic"}, label2id={"benign": 0, "toxic": 1})
    model.save_pretrained(folder)
    AutoTokenizer.from_pretrained(source).save_pretrained(folder)
    return folder


def load_data():
    from toxiforge.data import Example, LabeledData, load_hatecheck

    if HATECHECK.is_file():
        return load_hatecheck(HATECHECK), "HateCheck test_suite_cases.csv"
    examples = [Example(f"placeholder statement {i} about group alpha", i % 2, group="alpha")
                for i in range(3728)]
    return LabeledData("placeholders", examples, "table", "in-process"), "placeholder sentences"


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--model", type=Path, default=None, help="a classifier directory (default: built here)")
    parser.add_argument("--items", type=int, default=None, help="score only the first N texts in part 1")
    parser.add_argument("--batch-size", type=int, default=32)
    _common.add_repeats(parser, 3)
    parser.add_argument("--bootstrap", type=int, default=1000)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import pipeline

    from toxiforge.audit.report import write_report
    from toxiforge.audit.run import AuditSettings, ClassifierSpec, run_audit
    from toxiforge.audit.scores import ScoreCache
    from toxiforge.classifiers import load_classifier
    from toxiforge.classifiers.scoring import score_texts

    tmp = Path(tempfile.mkdtemp(prefix="audit-speed-"))
    model = args.model or build_head(tmp / "minilm-a", seed=0)
    other = build_head(tmp / "minilm-b", seed=1)
    data, source = load_data()
    texts = data.texts[:args.items] if args.items else data.texts

    # 1. scoring: the audit's path vs a plain pipeline loop
    clf = load_classifier(str(model), device="cpu", dtype="float32", batch_size=args.batch_size)
    pipe = pipeline("text-classification", model=str(model), device=-1, torch_dtype=torch.float32)
    toxic_label = pipe.model.config.id2label[clf.toxic_index]
    runs = iter(range(10**6))

    def by_audit() -> np.ndarray:
        cache = ScoreCache(tmp / f"cache-{next(runs)}")   # a fresh folder: every run scores
        return cache.score("clf", "data", texts, partial(score_texts, clf), {"benchmark": True})

    def by_pipeline() -> np.ndarray:
        out = pipe(texts, batch_size=args.batch_size, truncation=True, top_k=None)
        return np.array([next(d["score"] for d in row if d["label"] == toxic_label) for row in out])

    sides = {"audit scoring": by_audit, "pipeline loop": by_pipeline}
    diff = float(np.abs(by_audit() - by_pipeline()).max())   # warm-up and agreement check
    print(f"warm-up done; max |P(toxic) difference| audit vs pipeline: {diff:.2e}", flush=True)
    load_before = os.getloadavg()
    times: dict[str, list[float]] = {name: [] for name in sides}
    for _ in range(args.repeats):
        for name, fn in sides.items():
            started = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - started)
            print(f"  run: {name} {times[name][-1]:.2f} s", flush=True)
    print(f"{len(texts)} texts of {source}; {model} float32 on CPU ({torch.get_num_threads()} threads), batch "
          f"size {args.batch_size}, {args.repeats} runs each, alternating; load average (1 min) "
          f"{load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    rates = {name: len(texts) / statistics.median(ts) for name, ts in times.items()}
    for name, ts in times.items():
        print(f"  {name:14s} median {statistics.median(ts):6.2f} s -> {rates[name]:7.1f} items/s  "
              f"(runs: {', '.join(f'{t:.2f}' for t in ts)} s)")
    print(f"  ratio audit / pipeline: {rates['audit scoring'] / rates['pipeline loop']:.2f}x")

    # 2. the report's own time for 3 classifiers on HateCheck
    specs = [ClassifierSpec("minilm", str(model)), ClassifierSpec("minilm-b", str(other)),
             ClassifierSpec("profanity-check", "profanity-check")]
    out = tmp / "audit"
    settings = AuditSettings(n_boot=args.bootstrap, classifier_options={"device": "cpu", "dtype": "float32",
                                                                        "batch_size": args.batch_size},
                             oi_list=OI_LIST if OI_LIST.is_file() else None,
                             dialect_model=DIALECT if DIALECT.is_dir() else None)
    result = run_audit(specs, [data], out, settings)
    scoring = result.seconds["scoring"]
    settings.resume = True
    report: list[float] = []
    metrics: list[float] = []
    for _ in range(args.repeats):
        started = time.perf_counter()
        again = run_audit(specs, [data], out, settings)
        write_report(again, out)
        report.append(time.perf_counter() - started)
        metrics.append(again.seconds["metrics"])
    share = statistics.median(report) / scoring
    print(f"audit of 3 classifiers on {len(data)} {source} rows, {args.bootstrap} resamples: scoring "
          f"{scoring:.1f} s (loading included); report (sections + comparison + figures + files, from the cache) "
          f"median {statistics.median(report):.2f} s, of which sections {statistics.median(metrics):.2f} s "
          f"(runs: {', '.join(f'{t:.2f}' for t in report)} s) -> {100 * share:.1f}% of the scoring time; load "
          f"average (1 min) {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
