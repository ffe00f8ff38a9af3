"""AFLite filtering time on N x D embeddings (default 250,000 x 384, the size the issue names), on the CPU.

The embeddings are synthetic (Gaussian, with a label-carrying direction in part of the rows, so predictability
varies and AFLite has something to remove); embedding real text is timed separately by ``toxiforge bias aflite``
and by ``--embed N`` here (N texts through the embedded MiniLM, reported as texts/s). Parameters are the command's
defaults: m = 64, target n = N/2, t = n/2, k = 5% of N, tau = 0.75, ridge classifiers. The target is under
5 minutes for 250,000 x 384.

    python benchmarks/aflite_scale.py                    # 250,000 x 384
    python benchmarks/aflite_scale.py --rows 50000 --embed 512
"""

from __future__ import annotations

import os
import time

import numpy as np

import _common


def synthetic(rows: int, dim: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, rows)
    X = rng.standard_normal((rows, dim)).astype(np.float32)
    easy = rng.random(rows) < 0.5
    X[easy, 0] += np.where(y[easy] == 1, 2.0, -2.0)
    return X, y


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--rows", type=int, default=250_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--ensemble-size", type=int, default=64)
    parser.add_argument("--classifier", default="ridge")
    parser.add_argument("--embed", type=int, default=0, help="Also time the embedded MiniLM on this many texts.")
    _common.add_seed(parser)
    args = parser.parse_args()
    from toxiforge.bias.aflite import AFLiteConfig, aflite

    X, y = synthetic(args.rows, args.dim, args.seed)
    config = AFLiteConfig(target_size=args.rows // 2, ensemble_size=args.ensemble_size, classifier=args.classifier,
                          seed=args.seed)
    cpu = time.process_time()
    result = aflite(X, y, config, on_iteration=lambda s: print(
        f"  iteration {s['iteration']}: {s['rows']} rows, removed {s['removed']}, {s['seconds']:.1f} s", flush=True))
    print(f"{time.strftime('%Y-%m-%d')} AFLite {args.rows} x {args.dim}, m={args.ensemble_size}, "
          f"{args.classifier}: {result.seconds:.1f} s wall, {time.process_time() - cpu:.1f} s CPU (all threads) for "
          f"{len(result.history)} iterations, kept {len(result.kept)}"
          f"{' (stopped early)' if result.stopped_early else ''}; load average {os.getloadavg()[0]:.1f}")
    if args.embed:
        from toxiforge.analysis.embeddings import embed_texts, load_encoder

        texts = [f"placeholder statement number {i} about the weekend and music" for i in range(args.embed)]
        encoder = load_encoder()
        started = time.perf_counter()
        embed_texts(texts, encoder)
        seconds = time.perf_counter() - started
        print(f"embedding {args.embed} texts with the embedded MiniLM: {seconds:.1f} s "
              f"({args.embed / seconds:.0f} texts/s; {args.rows} would take ~{args.rows / args.embed * seconds:.0f} s)")


if __name__ == "__main__":
    main()
