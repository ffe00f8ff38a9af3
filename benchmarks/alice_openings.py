"""How ALICE's statements compare with top-k's on the same prompts: label flip (the ``fooled`` column: the
classifier disagrees with the prompt label; the paper's fool rate compares with human labels, see
``toxiforge summary --human``), share that name the target group, and share that open with a word that opens
one of the prompt's demonstrations.

The last one shows what counting the prompt in the no-repeat n-gram rule did: every prompt ends with "\\n" "-",
so each trigram "\\n" "-" X of the demonstrations was banned and no statement could open with such an X.

    python benchmarks/alice_openings.py demo-output/top-k demo-output/alice     # any generation output folders

Reads rows only (no model); prints one markdown table, one line per folder.
"""

from __future__ import annotations

import string
from pathlib import Path

import _common


def first_word(text: str) -> str:
    words = text.split()
    return words[0].strip(string.punctuation + "“”‘’").lower() if words else ""


def demonstration_openers(prompt: str) -> set[str]:
    """First words of the prompt's demonstrations (lines "- sentence"; upstream's files use a literal "\\n")."""
    lines = prompt.replace("\\n", "\n").split("\n")
    return {first_word(line.strip()[1:]) for line in lines if line.strip().startswith("-")} - {""}


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("data", nargs="+", type=Path, help="generation output folders or dataset files")
    args = parser.parse_args()

    from toxiforge.groups import resolve_group
    from toxiforge.records import read_rows

    print(_common.table_head(["data", "method", "statements", "label flip (fooled)", "names its group",
                              "opens with a demonstration's first word"]))
    for path in args.data:
        rows = read_rows(path)
        stated = [r for r in rows if r.generation]
        scored = [r for r in stated if r.fooled is not None]
        named = sum(resolve_group(r.group).mentions(r.generation) for r in stated)
        opens = sum(first_word(r.generation) in demonstration_openers(r.prompt) for r in stated)
        methods = ", ".join(sorted({r.generation_method for r in rows}))
        n = max(1, len(stated))
        print(f"| {path} | {methods} | {len(stated)}/{len(rows)} | {sum(r.fooled for r in scored)}/{len(scored)} "
              f"({sum(r.fooled for r in scored) / max(1, len(scored)):.1%}) | {named}/{len(stated)} "
              f"({named / n:.1%}) | {opens}/{len(stated)} ({opens / n:.1%}) |")


if __name__ == "__main__":
    main()
