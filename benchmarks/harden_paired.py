"""Two harden runs' round-0 attacks, paired by prompt and seed (issue 50: with and without a keeper).

Both runs draw the same prompts when they share ``--seed``, groups, ``-n`` and data, so each of round 0's statements
has a partner. Per run: flips of C_0, statements the validator gives their prompt label, and validated flips (the
statements that join round 1); per 100 pairs, the second run minus the first, with a 95% bootstrap interval.

    python benchmarks/harden_paired.py RUN_WITHOUT RUN_WITH

Run of 2026-11-28 (docs/harden.md, "A keeper in harden"): 80 pairs, validated flips 31 -> 46 (harden's report counts
45: one statement came from two prompts), +18.8 [+5.0, +32.5].
"""

from __future__ import annotations

import json
from pathlib import Path

import _common


def outcomes(run: Path) -> dict[tuple[str, int], tuple[bool, bool, bool]]:
    """(prompt, seed) -> (flipped, flipped and validated, validated) of round 0's attack."""
    import pandas as pd

    from toxiforge.records import is_toxic

    rows = pd.concat(pd.read_parquet(p) for p in sorted((run / "round-0" / "attack" / "data").glob("*.parquet")))
    validation = json.loads((run / "round-0" / "attack.validation.json").read_text())
    p_toxic = dict(zip(validation["texts"], validation["scores"]))
    out = {}
    for r in rows.itertuples():
        agrees = r.generation in p_toxic and is_toxic(p_toxic[r.generation]) == (r.prompt_label == 1)
        out[(r.prompt, int(r.seed))] = (bool(r.fooled), bool(r.fooled) and agrees, agrees)
    return out


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("first", type=Path, help="harden -o of the baseline run")
    parser.add_argument("second", type=Path, help="harden -o of the run compared with it")
    args = parser.parse_args()
    a, b = outcomes(args.first), outcomes(args.second)
    keys = sorted(set(a) & set(b))
    print(f"{len(a)} and {len(b)} statements, {len(keys)} pairs")
    for i, name in enumerate(["flips", "validated flips (added to round 1)", "validator agrees"]):
        x, y = ([o[k][i] for k in keys] for o in (a, b))
        mean, low, high = _common.paired_interval([int(q) - int(p) for p, q in zip(x, y)], 4000)
        print(f"{name}: {sum(x)} -> {sum(y)}; per 100 pairs {100 * mean:+.1f} [{100 * low:+.1f}, {100 * high:+.1f}]")


if __name__ == "__main__":
    main()
