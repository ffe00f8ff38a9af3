"""The LM's share of an ALICE step on the CPU: one decoding step of the embedded SmolLM2-135M at ALICE's rows
(docs/benchmarks.md, "The CPU path", issue 47).

Starts ``--prompts`` prompts (alice_step_profile.py's toxigen-dev prompts), repeats each ``--beams`` times, then
takes ``--steps`` beam steps (a select within each prompt's rows, then one token per row) and prints the median
wall and process-CPU time of a step. CPU time is the figure to compare on a shared machine: other processes stretch
the wall time, not the work. Runs with one torch thread unless ``--threads`` says otherwise; ``PYTHONPATH`` picks
the checkout measured.

    PYTHONPATH=src python benchmarks/alice_lm_step.py --dtype float32
"""

from __future__ import annotations

import statistics
import time

import _common


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--beams", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    _common.add_threads(parser, 1)
    args = parser.parse_args()
    import torch

    from toxiforge.models import load_language_model

    _common.set_torch_threads(args.threads)
    lm = load_language_model(dtype=args.dtype)
    session = lm.start(_common.demonstration_prompts(args.prompts)[0])
    rows = args.prompts * args.beams
    session.select(torch.arange(args.prompts).repeat_interleave(args.beams))
    beam_step = torch.arange(rows).view(args.prompts, args.beams).flip(-1).reshape(-1)  # rows stay with their prompt
    walls, cpus = [], []
    for step in range(args.steps):
        wall, cpu = time.perf_counter(), time.process_time()
        session.select(beam_step)
        session.advance(torch.full((rows,), 1000 + step))
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    print(f"{args.dtype}, {rows} rows, {args.steps} steps, {torch.get_num_threads()} thread(s): median step "
          f"{statistics.median(walls):.3f} s wall, {statistics.median(cpus):.3f} s CPU; "
          f"all steps {sum(cpus):.1f} s CPU")


if __name__ == "__main__":
    main()
