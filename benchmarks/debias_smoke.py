"""A CPU smoke run of Zhou et al.'s comparison on real text: upstream ToxiGen demonstrations (toxigen-dev).

The human-written hate/neutral statements in ``../shared/data/toxigen-dev/demonstrations`` are split 2:1
(stratified, seeded) into training and evaluation rows. Trained on the training rows (embedded MiniLM, few
epochs): Vanilla, LMIXIN-groups (LEARNED-MIXIN+H against the ``groups`` bias-only model: which target groups a
text mentions, a neutral-identity-mention bias close to the paper's NOI), and on 33% subsets with the original
label ratio: Random, AFLite (MiniLM embeddings), DataMaps easy / ambiguous / hard. Reported per model: accuracy
and toxic-class F1 on the evaluation rows, FPR on evaluation rows that mention a group term (FPR_group), and
Pearson's R between "mentions a group term" and the label in the model's training rows (Table 1's R).
One run per model (Zhou et al. report the mean and s.d. of 3); the numbers are a smoke test of the pipeline on
233 statements, not a replication.

    python benchmarks/debias_smoke.py [--epochs 3] [--seed 0]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "toxigen-dev" / "demonstrations"


def main() -> None:
    from toxiforge.analysis.embeddings import embed_texts, load_encoder
    from toxiforge.bias.aflite import AFLiteConfig, aflite
    from toxiforge.bias.bias_only import bias_only_probabilities
    from toxiforge.bias.datamaps import DataMapRecorder, region_subset
    from toxiforge.bias.metrics import pearson_r
    from toxiforge.bias.subsets import keep_label_ratio, random_subset, subset_size
    from toxiforge.classifiers import load_classifier
    from toxiforge.data import Example
    from toxiforge.demonstrations.sets import load_demonstrations
    from toxiforge.groups import groups_mentioned
    from toxiforge.training.debias import train_debiased
    from toxiforge.training.trainer import TrainConfig, split_heldout, train_classifier

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--lr", type=float, default=5e-5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    started = time.perf_counter()
    rows = [Example(text, s.label, s.group) for s in load_demonstrations(DATA).values() for text in s.sentences]
    train, test = split_heldout(rows, 1 / 3, args.seed)
    labels = np.array([e.label for e in train])
    mention = np.array([bool(groups_mentioned(e.text)) for e in train], dtype=float)
    test_mention = np.array([bool(groups_mentioned(e.text)) for e in test])
    config = TrainConfig(epochs=args.epochs, batch_size=16, learning_rate=args.lr, max_length=64, eval_fraction=0.0,
                         device="cpu", seed=args.seed)
    size = subset_size(len(train), 0.33)
    subsets: dict[str, np.ndarray] = {"Random": random_subset(labels, size, seed=args.seed)}
    embeddings = embed_texts([e.text for e in train], load_encoder())
    kept = aflite(embeddings, labels, AFLiteConfig(target_size=len(train) // 2, seed=args.seed)).kept
    subsets["AFLite"] = keep_label_ratio(kept, labels, min(size, len(kept)), seed=args.seed)
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        recorder = DataMapRecorder(len(train))
        train_classifier(train, Path(tmp) / "Vanilla", config, progress=False, callbacks=[recorder])
        dynamics = recorder.dynamics()
        for region in ("easy", "ambiguous", "hard"):
            subsets[f"DataMaps-{region.capitalize()}"] = region_subset(dynamics, labels, region, seed=args.seed)
        probs = bias_only_probabilities("groups", train)
        train_debiased(train, Path(tmp) / "LMIXIN-groups", config, bias_probs=probs, bias_only="groups",
                       progress=False)
        for name, index in subsets.items():
            train_classifier([train[i] for i in index], Path(tmp) / name, config, progress=False)
        y = np.array([e.label for e in test])
        for name in ["Vanilla", "LMIXIN-groups", *subsets]:
            pred = load_classifier(Path(tmp) / name, device="cpu").predict_proba([e.text for e in test]) > 0.5
            tp, fp = int((pred & (y == 1)).sum()), int((pred & (y == 0)).sum())
            fn = int((~pred & (y == 1)).sum())
            benign_mention = (y == 0) & test_mention
            index = subsets.get(name, np.arange(len(train)))
            results[name] = {"acc": float((pred == y).mean()), "f1": 2 * tp / max(1, 2 * tp + fp + fn),
                             "fpr_group": float(pred[benign_mention].mean()) if benign_mention.any() else None,
                             "r_group": pearson_r(mention[index], labels[index]), "n_train": int(len(index))}
    print(f"toxigen-dev: {len(train)} training rows ({int(labels.sum())} hate), {len(test)} evaluation rows, "
          f"{int(((y == 0) & test_mention).sum())} benign evaluation rows mention a group term; MiniLM, "
          f"{args.epochs} epochs, lr {args.lr:g}, seed {args.seed}; {time.perf_counter() - started:.0f} s\n")
    print("| model | train rows | R_group (train) | Acc. | F1 | FPR_group |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        cells = [f"{100 * r['acc']:.1f}", f"{100 * r['f1']:.1f}",
                 "n/a" if r["fpr_group"] is None else f"{100 * r['fpr_group']:.1f}"]
        rr = "n/a" if r["r_group"] is None else f"{r['r_group']:.4f}"
        print(f"| {name} | {r['n_train']} | {rr} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
