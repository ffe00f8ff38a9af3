"""`toxiforge bias relabel` on real sentences with a stand-in p(AAE): what the translations look like.

No dialect model can be downloaded offline, so this marks candidates with a stand-in p(AAE) column: ``--n`` rows
chosen at random (``numpy.random.default_rng(seed).choice``) get 0.9, the rest 0.1. The figures therefore cover
translation, judging and the written dataset, not dialect detection (the chosen sentences are not AAE).

    python benchmarks/relabel_real_text.py prepare ../shared/data/toxigen-dev /tmp/relabel/dev.parquet
    OMP_NUM_THREADS=1 toxiforge bias relabel /tmp/relabel/dev.parquet -o /tmp/relabel/any.parquet \\
        -c profanity-check --aae-column p_aae_standin --direction any --device cpu
    python benchmarks/relabel_real_text.py stats /tmp/relabel/any.parquet -c profanity-check

``prepare`` also writes the rows not picked (``dev-rest.parquet``), to train a judge that has not seen the
candidates.

``stats`` prints, over the translated rows: failed translations by reason, empty ones, ones with the same words as
the input (case and punctuation aside), longer than 2x or shorter than half the input (characters), with the
prompt's scaffolding, labels changed each way, and whether the judge's verdict on the translation differs from
its verdict on the original sentence (if it never does, the translation did not change any label). Keep the
data and outputs outside the repository (the sentences are upstream's).
"""

from __future__ import annotations

import collections
import re
from pathlib import Path

import numpy as np

import _common


def prepare(data: str, out: str, n: int, seed: int) -> None:
    import pyarrow as pa

    from toxiforge.data import load_spec
    from toxiforge.records import write_table

    examples = load_spec(data).examples
    chosen = set(np.random.default_rng(seed).choice(len(examples), size=n, replace=False).tolist())
    write_table(pa.table({"text": [e.text for e in examples], "label": [e.label for e in examples],
                          "group": [e.group for e in examples],
                          "p_aae_standin": [0.9 if i in chosen else 0.1 for i in range(len(examples))]}), out)
    rest = Path(out).with_name(f"{Path(out).stem}-rest{Path(out).suffix}")  # training data for a judge
    others = [e for i, e in enumerate(examples) if i not in chosen]
    write_table(pa.table({"text": [e.text for e in others], "label": [e.label for e in others],
                          "group": [e.group for e in others]}), rest)
    print(f"wrote {len(examples)} rows, {n} marked as candidates "
          f"({sum(examples[i].label for i in chosen)} of them toxic), to {out}; the other rows to {rest}")


def _words(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", "", text.lower()).split())


def stats(path: str, classifier: str | None) -> None:
    from toxiforge.bias.relabel import SCAFFOLDING
    from toxiforge.records import read_table

    rows = [r for r in read_table(path).to_pylist() if r["translation"] is not None]
    count: collections.Counter = collections.Counter()
    for r in rows:
        source, out = r["text"], r["translation"]
        count["empty"] += not out.strip()
        count["same words as the input"] += _words(out) == _words(source)
        count["longer than 2x the input"] += len(out) > 2 * len(source)
        count["shorter than half the input"] += len(out) < 0.5 * len(source)
        count["prompt scaffolding"] += any(part in out.lower() for part in SCAFFOLDING)
        if r["translation_error"] is not None:
            count[f"failed: {r['translation_error']}"] += 1
        count[f"label {r['old_label']} -> {r['label']}"] += 1
    print(f"{len(rows)} translated rows")
    for key, value in sorted(count.items()):
        print(f"  {key}: {value}")
    judged = [r for r in rows if r["translation_p_toxic"] is not None]
    if classifier and judged:
        from toxiforge.classifiers import load_classifier

        original = load_classifier(classifier).predict_proba([r["text"] for r in judged])
        translated = np.array([r["translation_p_toxic"] for r in judged])
        differ = int(((original > 0.5) != (translated > 0.5)).sum())
        print(f"  {classifier}: verdict on the translation differs from the verdict on the original in {differ} of "
              f"{len(judged)}; median |P(toxic) change| {float(np.median(np.abs(original - translated))):.4f}; "
              f"originals judged toxic: {int((original > 0.5).sum())}")


def main() -> None:
    parser = _common.parser(__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("data")
    p.add_argument("out")
    p.add_argument("--n", type=int, default=40)
    _common.add_seed(p)
    s = sub.add_parser("stats")
    s.add_argument("table")
    s.add_argument("-c", "--classifier", help="the judge, to compare its verdicts on the original sentences")
    args = parser.parse_args()
    if args.command == "prepare":
        prepare(args.data, args.out, args.n, args.seed)
    else:
        stats(args.table, args.classifier)


if __name__ == "__main__":
    main()
