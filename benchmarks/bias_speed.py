"""Time TOXTRIG tagging at ToxiGen's scale, and the vectorised dialect model against a per-document loop.

Tagging: ``--n`` (default 250,000) synthetic statements of 8-30 words (a neutral vocabulary, with about one word
in twenty drawn from identity terms, hashtags, @mentions, URLs, hyphenated phrases and look-alike words such as
"class" and "Scunthorpe") are tagged with the default lexicon (NOI + ONI, and OI when fetched) plus three stand-in
OI terms. The issue's target: 250,000 statements in under 10 s on one CPU core (the tagger is pure Python + ``re``
and uses one core). Prints the median of ``--repeats`` runs, wall-clock and CPU time of this process
(``time.process_time``: on a shared machine the CPU time is what one dedicated core would need; the wall clock
also counts waiting for the core), and the ratio of the CPU time to the target.

Dialect: a synthetic model of ``--vocab`` words (random counts, upstream's file format is not needed here) and
``--docs`` texts; times :func:`toxiforge.bias.dialect.predict_dialects` against
:func:`~toxiforge.bias.dialect.predict_dialects_loop`, the same inference one document and one token at a time (the
way upstream's ``predict.py`` runs; the reference tests/bias/test_dialect.py checks against too), checks they agree,
and prints the speed-up.

    python benchmarks/bias_speed.py                    # 250,000 statements, 3 repeats; dialect on 20,000 texts
    python benchmarks/bias_speed.py --n 25000 --repeats 1 --docs 2000     # a quick check
"""

from __future__ import annotations

import random
import statistics
import time

import numpy as np

import _common

NEUTRAL = ("the of and to in a is that for it as was with be by on not this are or from at which but have an "
           "they you were her she there been one all would their has more when if some what so out up about into "
           "than them can only other new time could these two may then do first any my now such like our over "
           "even most made after also did many before must through back years where much your way well down "
           "should because each just those people how too city school water music market history family").split()
SPECIAL = ["#GoodMorning", "@someone", "https://example.org/a/b", "well-known", "class", "Scunthorpe", "zorblax",
           "quuxes", "blorf-like"]


def statements(n: int, seed: int) -> list[str]:
    from toxiforge.bias.lexicon import shipped_noi_terms

    rng = random.Random(seed)
    identity = shipped_noi_terms()
    out = []
    for _ in range(n):
        words = []
        for _ in range(rng.randint(8, 30)):
            r = rng.random()
            words.append(rng.choice(identity) if r < 0.03 else rng.choice(SPECIAL) if r < 0.05
                         else rng.choice(NEUTRAL))
        out.append(" ".join(words).capitalize() + rng.choice([".", "!", "?", ""]))
    return out


def bench_tagging(args) -> None:
    from toxiforge.bias.lexicon import load_bias_lexicon

    texts = statements(args.n, args.seed)
    started = time.perf_counter()
    base = load_bias_lexicon()
    lexicon = load_bias_lexicon({"noi": base.terms["noi"], "oi": ["zorblax", "quux", "blorf"],
                                 "oni": base.terms["oni"]})
    compiled = time.perf_counter() - started
    times, cpu = [], []
    for _ in range(args.repeats):
        started, started_cpu = time.perf_counter(), time.process_time()
        tags = lexicon.tag(texts)
        times.append(time.perf_counter() - started)
        cpu.append(time.process_time() - started_cpu)
    median, median_cpu = statistics.median(times), statistics.median(cpu)
    shares = ", ".join(f"{k} {100 * v.mean():.1f}%" for k, v in tags.items())
    print(f"tagging: {args.n:,} statements, {sum(len(t) for t in texts) / len(texts):.0f} chars on average; "
          f"lexicon {sum(len(v) for v in lexicon.terms.values())} entries compiled in {compiled:.2f} s")
    print(f"  wall {', '.join(f'{t:.2f}' for t in times)} s (median {median:.2f}); CPU "
          f"{', '.join(f'{t:.2f}' for t in cpu)} s (median {median_cpu:.2f} = {args.n / median_cpu:,.0f} "
          f"statements per CPU second); tagged: {shares}")
    per_250k = 250_000 * median_cpu / args.n
    print(f"  target 10 s for 250,000 on one core: {per_250k:.2f} CPU s ({per_250k / 10:.2f} x the target)")


def bench_dialect(args) -> None:
    from toxiforge.bias.dialect import DialectModel, predict_dialects, predict_dialects_loop, tokenize

    rng = np.random.default_rng(args.seed)
    words = [f"w{i}" for i in range(args.vocab)]
    counts = rng.gamma(0.3, 50.0, size=(args.vocab, 4))
    wordprobs = (counts + 1) / counts.sum(0)
    model = DialectModel(vocab={w: i for i, w in enumerate(words)},
                         likelihood=wordprobs / wordprobs.sum(1, keepdims=True))
    zipf = 1.0 / np.arange(1, args.vocab + 1)
    zipf /= zipf.sum()
    texts = [" ".join(rng.choice(words, size=int(rng.integers(5, 30)), p=zipf)) for _ in range(args.docs)]
    tokens = [tokenize(t) for t in texts]
    started = time.process_time()
    fast = predict_dialects(tokens, model)
    t_fast = time.process_time() - started
    started = time.process_time()
    slow = predict_dialects_loop(tokens, model)
    t_slow = time.process_time() - started
    assert np.allclose(fast, slow, equal_nan=True, atol=1e-12), "vectorised and loop disagree"
    print(f"dialect: {args.docs:,} texts, vocabulary {args.vocab:,}: vectorised {t_fast:.2f} CPU s "
          f"({args.docs / t_fast:,.0f} texts per CPU second), per-document loop {t_slow:.2f} CPU s; "
          f"speed-up {t_slow / t_fast:.1f}x; "
          f"results equal within 1e-12")


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--n", type=int, default=250_000, help="statements to tag")
    _common.add_repeats(parser, 3, help="timed tagging runs; the median is reported (default: 3)")
    parser.add_argument("--docs", type=int, default=20_000)
    parser.add_argument("--vocab", type=int, default=60_000)
    _common.add_seed(parser)
    parser.add_argument("--skip-dialect", action="store_true")
    args = parser.parse_args()
    bench_tagging(args)
    if not args.skip_dialect:
        bench_dialect(args)


if __name__ == "__main__":
    main()
