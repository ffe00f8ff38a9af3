"""Overhead of DataMaps' training-dynamics recording over plain ``toxiforge train``: same model, data, settings.

Both sides call :func:`toxiforge.training.trainer.train_classifier` with the same config and data (no held-out
split, no evaluation); the DataMaps side adds the :class:`~toxiforge.bias.datamaps.DataMapRecorder` callback
(and computes the dynamics afterwards). Runs alternate plain / datamap ``--repeats`` times after one untimed
warm-up; the figure is the median of the per-pair ratios of the training loop's wall time (``train_seconds``).
The target is at most 1.05 (5% overhead). CPU seconds (``time.process_time``) are reported beside wall time: on a
shared machine they are the steadier figure.

    python benchmarks/datamap_overhead.py                        # embedded MiniLM, 256 rows, 2 epochs, CPU
    python benchmarks/datamap_overhead.py --n 2000 --epochs 3 --device cuda --base-model roberta-large
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import _common

if TYPE_CHECKING:
    from toxiforge.data import Example
    from toxiforge.training.trainer import TrainConfig


def run(examples: list[Example], config: TrainConfig, datamap: bool, folder: Path) -> tuple[float, float]:
    """Wall seconds of the training loop and CPU seconds of the whole call (this process, all threads)."""
    from toxiforge.bias.datamaps import DataMapRecorder
    from toxiforge.training.trainer import train_classifier

    callbacks = [DataMapRecorder(len(examples))] if datamap else []
    cpu = time.process_time()
    result = train_classifier(examples, folder, config, progress=False, callbacks=callbacks, overwrite=True)
    if datamap:
        callbacks[0].dynamics()
    return float(result.log["train_seconds"]), time.process_time() - cpu


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--base-model", default="all-minilm-l6-v2")
    parser.add_argument("--n", type=int, default=256)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=32)
    _common.add_repeats(parser, 3, help="plain/datamap pairs after a warm-up; the median ratio is reported")
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    from toxiforge.training.trainer import TrainConfig

    examples = _common.placeholder_examples(args.n)
    config = TrainConfig(base_model=args.base_model, epochs=args.epochs, batch_size=args.batch_size,
                         max_length=args.max_length, eval_fraction=0.0, device=args.device)
    with tempfile.TemporaryDirectory() as tmp:
        run(examples, config, False, Path(tmp) / "warmup")
        ratios, cpu_ratios = [], []
        for i in range(args.repeats):
            plain, plain_cpu = run(examples, config, False, Path(tmp) / f"plain{i}")
            mapped, mapped_cpu = run(examples, config, True, Path(tmp) / f"datamap{i}")
            ratios.append(mapped / plain)
            cpu_ratios.append(mapped_cpu / plain_cpu)
            print(f"pair {i}: plain {plain:.2f} s ({plain_cpu:.2f} CPU s), datamap {mapped:.2f} s "
                  f"({mapped_cpu:.2f} CPU s), ratio {mapped / plain:.3f} (CPU {mapped_cpu / plain_cpu:.3f})",
                  flush=True)
    print(f"{time.strftime('%Y-%m-%d')} {args.base_model} n={args.n} epochs={args.epochs} "
          f"batch={args.batch_size} max_length={args.max_length} device={args.device}: "
          f"median datamap/plain ratio {statistics.median(ratios):.3f} wall (min {min(ratios):.3f}, max "
          f"{max(ratios):.3f}), {statistics.median(cpu_ratios):.3f} CPU (min {min(cpu_ratios):.3f}, max "
          f"{max(cpu_ratios):.3f}) over {args.repeats} pairs; load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
