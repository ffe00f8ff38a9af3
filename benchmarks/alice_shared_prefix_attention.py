"""Attention at ALICE's decoding step with the prompt's keys and values shared by its beams (issue 57, item 2;
docs/benchmarks.md, "The LM side on CPU").

ALICE decodes ``--beams`` rows per prompt, and every row of a prompt attends to the same prompt tokens. toxiforge's
session keeps each row's whole cache (the prompt copied into every beam's row) and calls SDPA with grouped-query
attention, one query per row. The alternative measured here keeps the prompt's keys and values once per prompt:
the prompt part becomes one matrix product per prompt with the beams' queries as its rows, the generated part stays
per row, and the two softmax parts are merged (a shared maximum, the sums added), which is the same attention up to
float rounding. Random tensors of SmolLM2-135M's attention shapes (9 query heads, 3 key/value heads, head size 64;
30 layers), ``--prompts`` x ``--beams`` rows; for each (prompt tokens, generated tokens) of ``--lengths`` the two
take turns ``--repeats`` times, ``--calls`` calls each, and the median process-CPU ms per call is printed with the
largest difference between their outputs and what 30 layers of it would save per LM step. Only the attention call
is timed: the model's projections and MLP (about 60% of an LM step, docs/benchmarks.md) are the same either way.

    python benchmarks/alice_shared_prefix_attention.py --lengths 70:1 100:15 140:29
"""

from __future__ import annotations

import statistics
import time

import _common

HEADS, KV_HEADS, HEAD_SIZE, LAYERS = 9, 3, 64, 30  # SmolLM2-135M


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--beams", type=int, default=10)
    parser.add_argument("--lengths", nargs="+", default=["70:1", "100:15", "140:29"],
                        help="PROMPT:GENERATED token counts (default: 70:1 100:15 140:29)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--calls", type=int, default=60)
    _common.add_threads(parser, 1)
    args = parser.parse_args()
    _common.set_torch_threads(args.threads)
    import torch

    torch.manual_seed(0)
    rows = args.prompts * args.beams
    print(f"{rows} rows ({args.prompts} prompts x {args.beams} beams), {torch.get_num_threads()} thread(s); ms of "
          f"process CPU per attention call, median of {args.repeats} turns of {args.calls} calls")
    print("| prompt tokens | generated | copied prompt (SDPA) | shared prompt | ratio | max abs diff | "
          f"saved per LM step ({LAYERS} layers) |\n|---:|---:|---:|---:|---:|---:|---:|")
    for spec in args.lengths:
        p, g = (int(x) for x in spec.split(":"))
        a, b, diff = measure(p, g, args.prompts, args.beams, args.repeats, args.calls)
        print(f"| {p} | {g} | {a:.2f} | {b:.2f} | {a / b:.2f}x | {diff:.1e} | {LAYERS * (a - b):.0f} ms |", flush=True)


def measure(p: int, g: int, prompts: int, beams: int, repeats: int, calls: int) -> tuple[float, float, float]:
    """Median ms of process CPU per call, copied prompt and shared prompt, and their outputs' largest difference,
    at ``p`` prompt and ``g`` generated tokens."""
    import torch
    import torch.nn.functional as F

    group, rows, scale = HEADS // KV_HEADS, prompts * beams, HEAD_SIZE ** -0.5
    q = torch.randn(rows, HEADS, 1, HEAD_SIZE)
    k_prompt, v_prompt = (torch.randn(prompts, KV_HEADS, p, HEAD_SIZE) for _ in range(2))
    k_gen, v_gen = (torch.randn(rows, KV_HEADS, g, HEAD_SIZE) for _ in range(2))
    k_rows = torch.cat([k_prompt.repeat_interleave(beams, 0), k_gen], 2)  # the session's layout
    v_rows = torch.cat([v_prompt.repeat_interleave(beams, 0), v_gen], 2)

    def copied() -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k_rows, v_rows, enable_gqa=True)

    def by_prompt(x: torch.Tensor, width: int) -> torch.Tensor:  # [rows, kv, group, w] -> [prompts, kv, beams*group, w]
        return x.view(prompts, beams, KV_HEADS, group, width).transpose(1, 2).reshape(
            prompts, KV_HEADS, beams * group, width)

    def by_row(x: torch.Tensor, width: int) -> torch.Tensor:  # the inverse of by_prompt
        return x.view(prompts, KV_HEADS, beams, group, width).transpose(1, 2).reshape(rows, KV_HEADS, group, width)

    def shared() -> torch.Tensor:
        qr = q.view(rows, KV_HEADS, group, HEAD_SIZE)
        s_prompt = by_row(torch.matmul(by_prompt(qr, HEAD_SIZE), k_prompt.transpose(-1, -2)) * scale, p)
        s_gen = torch.matmul(qr, k_gen.transpose(-1, -2)) * scale
        top = torch.maximum(s_prompt.amax(-1, keepdim=True), s_gen.amax(-1, keepdim=True))
        e_prompt, e_gen = torch.exp(s_prompt - top), torch.exp(s_gen - top)
        total = e_prompt.sum(-1, keepdim=True) + e_gen.sum(-1, keepdim=True)
        out = by_row(torch.matmul(by_prompt(e_prompt, p), v_prompt), HEAD_SIZE) + torch.matmul(e_gen, v_gen)
        return (out / total).view(rows, HEADS, 1, HEAD_SIZE)

    diff = (copied() - shared()).abs().max().item()
    times: dict[str, list[float]] = {"copied": [], "shared": []}
    for _ in range(repeats):
        for name, fn in (("copied", copied), ("shared", shared)):
            start = time.process_time()
            for _ in range(calls):
                fn()
            times[name].append(1000 * (time.process_time() - start) / calls)
    return statistics.median(times["copied"]), statistics.median(times["shared"]), diff


if __name__ == "__main__":
    main()
