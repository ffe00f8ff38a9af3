"""What `toxiforge experiment debias` costs: training and scoring throughput of toxiforge's own trainer
(`train_classifier`, `load_classifier(...).predict_proba`) for the embedded MiniLM's architecture and for
RoBERTa-large (Zhou et al.'s model), on whatever device this runs on, and the hours a whole comparison takes.

Weights are random (throughput does not depend on them, and neither model's weights need the hub): each model is
built from its published configuration (all-MiniLM-L6-v2: 6 layers, hidden 384; RoBERTa-large: 24 layers,
hidden 1024, 355M parameters). Both use MiniLM's WordPiece tokenizer (``--tokenizer``; default: the embedded
encoder's), so a tweet has the same tokens for both; RoBERTa's own BPE gives tweets a similar length, and its
larger vocabulary only widens the embedding table, which costs little time. Rows are real tweets
(``--data``, default Davidson et al.), so the padding per batch is real.

    python benchmarks/debias_cost.py --device cuda --data davidson:PATH --out cost.json
    python benchmarks/debias_cost.py --device cpu --models minilm --rows 400

The comparison's cost counts example passes: per run, Vanilla, LMIXIN-ONI/-TOXTRIG/-Dialect and AAE-relabeled
train on all N training rows and Random, AFLite and the three DataMaps regions on 33% of them, each for the
given epochs; each of the 10 models then scores the evaluation rows. AFLite's linear models, the data map and the
translations of AAE-relabeled are left out (the run's own manifest times them).
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import _common

CONFIGS = {
    "minilm": ("bert", dict(hidden_size=384, num_hidden_layers=6, num_attention_heads=12, intermediate_size=1536,
                            max_position_embeddings=512)),
    "roberta-large": ("roberta", dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                      intermediate_size=4096, max_position_embeddings=514, type_vocab_size=1)),
}
FULL_MODELS, SUBSET_MODELS, SUBSET_SHARE = 5, 5, 0.33


def build(kind: str, tokenizer_dir: str, folder: Path) -> Path:
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

    family, sizes = CONFIGS[kind]
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = AutoConfig.for_model(family, vocab_size=len(tokenizer), num_labels=2,
                                  pad_token_id=tokenizer.pad_token_id, **sizes)
    model = AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def measure(kind: str, rows: list, eval_rows: list, args, batch_size: int, bf16: bool, work: Path) -> dict:
    from toxiforge.classifiers import load_classifier
    from toxiforge.training.trainer import TrainConfig, train_classifier

    base = build(kind, args.tokenizer, work / f"{kind}-base")
    config = TrainConfig(base_model=str(base), epochs=1.0, batch_size=batch_size, learning_rate=1e-5,
                         max_length=128, eval_fraction=0.0, device=args.device, bf16=bf16, logging_steps=50)
    out = work / f"{kind}-{batch_size}-{'bf16' if bf16 else 'fp32'}"
    train_classifier(rows[: batch_size * 4], out, config, progress=False)  # CUDA context, kernels, caches
    started = time.perf_counter()
    train_classifier(rows, out, config, progress=False, overwrite=True)
    train_s = time.perf_counter() - started
    clf = load_classifier(out, device=args.device)
    clf.predict_proba([e.text for e in eval_rows[:64]])
    started = time.perf_counter()
    clf.predict_proba([e.text for e in eval_rows])
    score_s = time.perf_counter() - started
    from transformers import AutoModelForSequenceClassification

    params = sum(p.numel() for p in AutoModelForSequenceClassification.from_pretrained(out).parameters())
    return {"model": kind, "params_m": round(params / 1e6, 1), "batch_size": batch_size,
            "precision": "bf16" if bf16 else "fp32", "train_rows": len(rows), "train_seconds": round(train_s, 2),
            "train_examples_per_s": round(len(rows) / train_s, 1), "score_rows": len(eval_rows),
            "score_examples_per_s": round(len(eval_rows) / score_s, 1)}


def comparison_hours(result: dict, *, n_train: int, n_eval: int, epochs: float, runs: int) -> float:
    passes = runs * epochs * n_train * (FULL_MODELS + SUBSET_MODELS * SUBSET_SHARE)
    scoring = runs * (FULL_MODELS + SUBSET_MODELS) * n_eval
    return (passes / result["train_examples_per_s"] + scoring / result["score_examples_per_s"]) / 3600


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--data", default="davidson:../shared/data/davidson2017/labeled_data.csv")
    parser.add_argument("--tokenizer", default=None, help="tokenizer folder (default: the embedded MiniLM's)")
    parser.add_argument("--models", default="minilm,roberta-large")
    parser.add_argument("--rows", type=int, default=4000, help="training rows per measurement (MiniLM: x4)")
    parser.add_argument("--runs-setting", default="minilm:32:fp32,minilm:16:fp32,minilm:32:bf16,"
                        "roberta-large:8:fp32,roberta-large:8:bf16,roberta-large:32:bf16")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.tokenizer is None:
        from toxiforge.models.embedded import embedded_encoder_dir

        args.tokenizer = str(embedded_encoder_dir())
    from toxiforge.data import load_specs

    examples = load_specs([args.data])[0].examples
    n_train, n_eval = round(0.8 * len(examples)), len(examples) - round(0.8 * len(examples))
    wanted = set(args.models.split(","))
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for setting in args.runs_setting.split(","):
            kind, batch, precision = setting.split(":")
            if kind not in wanted or (precision == "bf16" and args.device == "cpu"):
                continue
            n = args.rows * (4 if kind == "minilm" else 1)
            rows, eval_rows = examples[:n], examples[-2000:]
            result = measure(kind, rows, eval_rows, args, int(batch), precision == "bf16", Path(tmp))
            result["comparison_hours_3x3"] = round(comparison_hours(result, n_train=n_train, n_eval=n_eval,
                                                                    epochs=3, runs=3), 2)
            results.append(result)
            print(json.dumps(result), flush=True)
    import torch

    device = torch.cuda.get_device_name(0) if args.device.startswith("cuda") else f"cpu ({torch.get_num_threads()} "\
        "threads)"
    report = {"device": device, "torch": torch.__version__, "n_train": n_train, "n_eval": n_eval,
              "note": "comparison_hours_3x3: 10 methods (5 on all rows, 5 on 33%), 3 epochs, 3 runs, on a 80/20 "
                      "split of --data; AFLite, data map and translations not counted", "results": results}
    print(f"device: {device}")
    print(_common.table_head(["model", "batch", "precision", "train ex/s", "score ex/s", "whole comparison (h)"],
                             "lrlrrr"))
    for r in results:
        print(f"| {r['model']} ({r['params_m']}M) | {r['batch_size']} | {r['precision']} | "
              f"{r['train_examples_per_s']} | {r['score_examples_per_s']} | {r['comparison_hours_3x3']} |")
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
