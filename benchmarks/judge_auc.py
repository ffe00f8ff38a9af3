"""ROC AUC on toxigen-dev's human-written sentences: the embedded SmolLM2-135M as a judge beside profanity-check and
a fine-tuned MiniLM.

    python benchmarks/judge_auc.py                  # needs ../shared/data/toxigen-dev; CPU, a few minutes
    python benchmarks/judge_auc.py --epochs 5 --work /tmp/judge-auc

The data are upstream's toxigen-dev demonstration files (hate_* = 1, neutral_* = 0, every group). Rows:

* ``judge:smollm2-135m`` with the humanval template in the model's chat template (``-c judge:smollm2-135m``);
* the same question as plain text, the path ``bench classify`` takes (P(unsafe) = softmax over " Yes"/" No");
* ``profanity-check``;
* MiniLM (the embedded all-MiniLM-L6-v2) fine-tuned with ``toxiforge.training`` by 2-fold cross-fitting over
  groups: trained on half of the groups, scored on the other half, and the other way round, so every sentence is
  scored by a model that never saw its group. The AUC is over the pooled out-of-fold scores.
"""

from __future__ import annotations

import os
import time

import numpy as np

import _common


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--data", default=str(_common.DEMONSTRATIONS), help="toxigen-dev's demonstrations folder")
    parser.add_argument("--epochs", type=float, default=5.0)
    _common.add_work(parser, "/tmp/judge-auc", "--out")
    args = parser.parse_args()

    from sklearn.metrics import roc_auc_score

    from toxiforge.bench.classify import demonstration_examples
    from toxiforge.classifiers import load_classifier
    from toxiforge.classifiers.judge import JudgeClassifier
    from toxiforge.models import load_language_model
    from toxiforge.records import is_toxic

    data = demonstration_examples(args.data)
    examples = data.examples
    texts, labels = [e.text for e in examples], np.array([e.label for e in examples])
    print(f"{len(examples)} sentences ({int(labels.sum())} hate), {len({e.group for e in examples})} groups; "
          f"load {os.getloadavg()[0]:.2f}")
    rows = []
    lm = load_language_model("smollm2-135m", device="cpu")
    for render in ("chat", "text"):
        started = time.perf_counter()
        p = JudgeClassifier(lm, "humanval", render=render).predict_proba(texts)
        rows.append((f"judge:smollm2-135m, humanval ({render})", roc_auc_score(labels, p),
                     time.perf_counter() - started, float(is_toxic(p).mean())))
    started = time.perf_counter()
    p = load_classifier("profanity-check").predict_proba(texts)
    rows.append(("profanity-check", roc_auc_score(labels, p), time.perf_counter() - started, float(is_toxic(p).mean())))

    groups = sorted({e.group for e in examples})
    folds = [set(groups[0::2]), set(groups[1::2])]
    scores = np.full(len(examples), np.nan)
    started = time.perf_counter()
    for k, held in enumerate(folds):
        train = [e for e in examples if e.group not in held]
        out = _common.fine_tune(args.work / f"fold{k}", train, reuse=False, epochs=args.epochs, batch_size=16,
                                eval_fraction=0.0, device="cpu")
        clf = load_classifier(out, device="cpu")
        index = [i for i, e in enumerate(examples) if e.group in held]
        scores[index] = clf.predict_proba([texts[i] for i in index])
    rows.append((f"MiniLM fine-tuned ({args.epochs:g} epochs, 2-fold by group)", roc_auc_score(labels, scores),
                 time.perf_counter() - started, float(is_toxic(scores).mean())))
    print(_common.table_head(["classifier", "ROC AUC", "predicted toxic (%)", "seconds"], "lrrr"))
    for name, auc, seconds, share in rows:
        print(_common.table_row(name, f"{auc:.3f}", f"{100 * share:.1f}", f"{seconds:.1f}"))
    print(f"load after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
