"""Examples/s of ``toxiforge train`` vs a plain transformers ``Trainer`` script, same model, data and settings.

Both sides fine-tune the same base model (default: the embedded all-MiniLM-L6-v2) on the same synthetic
placeholder statements for the same number of epochs with the same batch size, learning rate, sequence length,
seed and device, without evaluation (``--eval-fraction 0`` on the toxiforge side). The plain script is what a user
would write: load model + tokenizer, tokenize with ``datasets.map``, ``Trainer(...).train()``, ``save_model``.
The toxiforge side is the library call behind ``toxiforge train`` (rich progress bar on, training log written).

After one untimed warm-up run (``--no-warmup`` skips it; the first training in a process pays one-time setup
costs that would otherwise count against whichever side runs first), two numbers per side, one run each: the
training loop's examples/s (``train_samples_per_second`` of ``Trainer.train``) and end-to-end examples/s (model
load + tokenization + training + saving). The ratio is toxiforge / plain; ~1 means no overhead (ours must stay
within 10%).

    python benchmarks/train_throughput.py                      # embedded MiniLM, 320 examples, 1 epoch, CPU
    python benchmarks/train_throughput.py --n 5000 --epochs 2 --device cuda --base-model roberta-large
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import _common
from toxiforge.models import DEFAULT_ENCODER

if TYPE_CHECKING:
    from toxiforge.data import Example


def plain_trainer(examples: list[Example], source: str, tok_source: str, args: argparse.Namespace,
                  out: Path) -> dict:
    """The plain script: what a user writes with transformers alone."""
    import datasets
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
        set_seed,
    )

    started = time.perf_counter()
    set_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(tok_source)
    model = AutoModelForSequenceClassification.from_pretrained(source, num_labels=2)
    ds = datasets.Dataset.from_dict({"text": [e.text for e in examples], "label": [e.label for e in examples]})
    ds = ds.map(lambda b: tokenizer(b["text"], truncation=True, max_length=args.max_length), batched=True,
                remove_columns=["text"])
    training_args = TrainingArguments(
        output_dir=str(out / "checkpoints"), num_train_epochs=args.epochs, per_device_train_batch_size=args.batch_size,
        learning_rate=args.learning_rate, weight_decay=0.01, warmup_steps=0.06, seed=args.seed, data_seed=args.seed,
        save_strategy="no", eval_strategy="no", report_to="none", logging_steps=10, use_cpu=args.device == "cpu",
        dataloader_pin_memory=args.device != "cpu", disable_tqdm=True)
    trainer = Trainer(model=model, args=training_args, train_dataset=ds, processing_class=tokenizer,
                      data_collator=DataCollatorWithPadding(tokenizer))
    metrics = trainer.train().metrics
    trainer.save_model(str(out / "model"))
    total = time.perf_counter() - started
    return {"loop": metrics["train_samples_per_second"], "end_to_end": len(examples) * args.epochs / total,
            "seconds": total, "train_runtime": metrics["train_runtime"]}


def toxiforge_train(examples: list[Example], args: argparse.Namespace, out: Path) -> dict:
    from toxiforge.training.trainer import TrainConfig, train_classifier

    started = time.perf_counter()
    config = TrainConfig(base_model=args.base_model, epochs=args.epochs, batch_size=args.batch_size,
                         learning_rate=args.learning_rate, max_length=args.max_length, seed=args.seed,
                         eval_fraction=0.0, device=args.device)
    result = train_classifier(examples, out, config, progress=True)
    total = time.perf_counter() - started
    return {"loop": result.log["train_examples_per_second"], "end_to_end": len(examples) * args.epochs / total,
            "seconds": total, "train_runtime": result.log["train_runtime"]}


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--base-model", default=DEFAULT_ENCODER)
    parser.add_argument("--n", type=int, default=320, help="training examples")
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--learning-rate", type=float, default=2e-5)
    parser.add_argument("--max-length", type=int, default=64)
    _common.add_seed(parser)
    parser.add_argument("--device", default="cpu", help="cpu or cuda (auto = cuda when available)")
    parser.add_argument("--order", default="plain-first", choices=["plain-first", "toxiforge-first"])
    parser.add_argument("--no-warmup", action="store_true",
                        help="skip the untimed warm-up run (the first training in a process pays one-time costs)")
    args = parser.parse_args()

    import transformers.trainer  # noqa: F401  (import cost paid before either timer starts)

    from toxiforge._hf import quiet_transformers
    from toxiforge.training.trainer import resolve_base_model

    quiet_transformers()
    examples = _common.placeholder_examples(args.n)
    source, tok_source = resolve_base_model(args.base_model)
    with tempfile.TemporaryDirectory() as tmp:
        if not args.no_warmup:  # untimed: one-time kernel/allocator setup would otherwise count against side one
            plain_trainer(examples, source, tok_source, args, Path(tmp) / "warmup")
        runs = {}
        order = ["plain", "toxiforge"] if args.order == "plain-first" else ["toxiforge", "plain"]
        for side in order:
            if side == "plain":
                runs[side] = plain_trainer(examples, source, tok_source, args, Path(tmp) / "plain")
            else:
                runs[side] = toxiforge_train(examples, args, Path(tmp) / "toxiforge")
    print(f"\n{args.base_model}: {args.n} examples x {args.epochs:g} epoch(s), batch {args.batch_size}, "
          f"max_length {args.max_length}, device {args.device}, order {args.order}")
    print(f"{'':12} {'loop ex/s':>10} {'end-to-end ex/s':>16} {'train s':>8} {'total s':>8}")
    for side in ("plain", "toxiforge"):
        r = runs[side]
        print(f"{side:12} {r['loop']:10.2f} {r['end_to_end']:16.2f} {r['train_runtime']:8.2f} {r['seconds']:8.2f}")
    print(f"ratio toxiforge/plain: training loop {runs['toxiforge']['loop'] / runs['plain']['loop']:.3f}, "
          f"end to end {runs['toxiforge']['end_to_end'] / runs['plain']['end_to_end']:.3f}")


if __name__ == "__main__":
    main()
