"""Time the similarity-controlled split at ToxiGen's scale, and MiniLM's embedding throughput separately.

Split: synthetic unit-norm embeddings (dim 384, like all-MiniLM-L6-v2) for train + test rows (default
274,000 + 10,000), stratified over 13 groups × 2 labels × 2 methods, with ``--planted`` near-duplicate pairs
(cosine ≈ 0.95) so some training rows really are removed. Times ``split_embeddings`` (test draw, chunked
274,000 × 10,000 similarity maxima, removal) once embeddings exist; the issue's target is < 60 s on 2 cores.

Embedding: the embedded all-MiniLM-L6-v2 encodes ``--embed-sentences`` neutral synthetic sentences; prints
sentences/s and the time that rate implies for the whole dataset. ``--skip-embed`` leaves it out.

    python benchmarks/split_scale.py                       # 274,000 × 10,000, then MiniLM throughput
    python benchmarks/split_scale.py --train 27400 --test 1000 --skip-embed      # a quick check
"""

from __future__ import annotations

import time

import numpy as np

import _common


def synthetic(n: int, dim: int, planted: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    emb = rng.standard_normal((n, dim), dtype=np.float32)
    pairs = rng.choice(n, size=(planted, 2), replace=False)
    emb[pairs[:, 1]] = emb[pairs[:, 0]] + 0.33 * rng.standard_normal((planted, dim), dtype=np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return emb


def bench_split(args) -> None:
    import torch

    from toxiforge.analysis.split import max_similarity, split_embeddings

    n = args.train + args.test
    started = time.perf_counter()
    emb = synthetic(n, args.dim, args.planted, args.seed)
    rng = np.random.default_rng(args.seed + 1)
    strata = list(zip(rng.integers(0, 13, n).tolist(), rng.integers(0, 2, n).tolist(),
                      rng.integers(0, 2, n).tolist()))
    print(f"synthetic embeddings {n:,} × {args.dim} (float32, {emb.nbytes / 2**20:.0f} MiB), {args.planted:,} "
          f"planted near-duplicate pairs: made in {time.perf_counter() - started:.1f} s (not timed below)")
    print(f"torch threads: {torch.get_num_threads()}")

    started = time.perf_counter()
    result = split_embeddings(emb, strata, args.test, threshold=args.threshold, seed=args.seed,
                              chunk_rows=args.chunk_rows)
    split_s = time.perf_counter() - started
    s = result.summary()
    print(f"split: {s['train']:,} train × {s['test']:,} test in {split_s:.1f} s "
          f"(target < 60 s); removed {s['removed']:,} rows with cosine > {args.threshold}; "
          f"max cross similarity {s['max_cross_similarity']:.4f} after ({s['max_similarity_before']:.4f} before)")
    flops = 2 * (n - args.test) * args.test * args.dim
    train, test = emb[result.train[:20000]], emb[result.test]
    started = time.perf_counter()
    max_similarity(train, test, chunk_rows=args.chunk_rows)
    part = time.perf_counter() - started
    print(f"similarity kernel alone: {20000 * args.test * args.dim * 2 / part / 1e9:.1f} GFLOP/s "
          f"(whole split does {flops / 1e12:.2f} TFLOP)")


def bench_embed(args) -> None:
    from toxiforge.analysis.embeddings import embed_texts, load_encoder
    from toxiforge.models import DEFAULT_ENCODER

    subjects = ["the library", "a garden", "the river", "a bakery", "the museum", "a bicycle", "the train station",
                "a choir", "the market", "a chess club"]
    verbs = ["opens early on", "is busy on", "hosts a quiet event on", "closes late on", "gets many visitors on"]
    days = ["Mondays", "Tuesdays", "weekends", "holidays", "rainy afternoons", "sunny mornings"]
    texts = [f"{subjects[i % 10]} {verbs[(i // 10) % 5]} {days[(i // 50) % 6]}, says neighbour number {i}."
             for i in range(args.embed_sentences)]
    started = time.perf_counter()
    encoder = load_encoder(DEFAULT_ENCODER, batch_size=args.embed_batch)
    load_s = time.perf_counter() - started
    embed_texts(texts[:64], encoder)  # warm-up
    started = time.perf_counter()
    embed_texts(texts, encoder)
    seconds = time.perf_counter() - started
    rate = len(texts) / seconds
    total = args.train + args.test
    print(f"MiniLM (embedded all-MiniLM-L6-v2, CPU, batch {args.embed_batch}): loaded in {load_s:.1f} s; "
          f"{len(texts):,} sentences in {seconds:.1f} s = {rate:.0f} sentences/s; "
          f"{total:,} statements would take ~{total / rate / 60:.1f} min")


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--train", type=int, default=274_000)
    parser.add_argument("--test", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--planted", type=int, default=2_000, help="near-duplicate pairs (cosine ~0.95)")
    parser.add_argument("--threshold", type=float, default=0.7)
    parser.add_argument("--chunk-rows", type=int, default=2048)
    _common.add_seed(parser)
    parser.add_argument("--embed-sentences", type=int, default=2_000)
    parser.add_argument("--embed-batch", type=int, default=128)
    parser.add_argument("--skip-embed", action="store_true")
    args = parser.parse_args()
    bench_split(args)
    if not args.skip_embed:
        bench_embed(args)


if __name__ == "__main__":
    main()
