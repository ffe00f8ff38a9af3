"""Fool rates against human labels (ToxiGen §4.3 and Appendix E), for ``toxiforge summary RUN --human FILE``.

A generated row's ``fooled`` column compares the classifier with the row's *prompt* label: that is a label flip,
not the paper's fool rate. In the paper a statement fools a classifier when the classifier disagrees with the
*human* label ("58.97% of toxic ALICE-generated examples fool HateBERT", App. E). Here the human labels of an
annotated file are joined to the rows by statement text, and per method (top-k / ALICE) and prompt label we report:

* ``human_fool_rate``: of the scored rows with a human label, the share where the classifier's verdict differs
  from the human label;
* ``matches_prompt``: the share of rows whose human label equals the prompt label (the paper: 40.3% for ALICE
  from toxic prompts, 95.2% / 67.7% for top-k from benign / toxic ones, §4.3);
* ``label_flip_rate``: the ``fooled`` column on the same rows (classifier vs the prompt label), for comparison.

The classifier's verdict is recovered from the row without a threshold: the prompt label when ``fooled`` is false,
the other label when it is true. The human label is the paper's rule by default (toxic when max(toxicity if an AI
wrote it, if a person wrote it) > 3, averaged over annotators; :func:`toxiforge.data.toxigen.annotated_label`).

Annotated files: toxiforge's ``annotated`` or ``annotations`` exports and ToxiGen's ``annotated`` (``text``,
``toxicity_ai``, ``toxicity_human``), or ToxiGen's ``annotations`` layout (``Input.text`` and the one-hot
``Answer.toAI.1``-``.5`` / ``Answer.toPER.1``-``.5``); responses are averaged per text. Texts are compared after
trimming whitespace and undoing the ``'`` that CSV exports put before formula-like cells.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from toxiforge.annotation.export import FORMULA_STARTS
from toxiforge.errors import InputError, check_choice
from toxiforge.records import Row, label_word


def join_key(text: str | None) -> str | None:
    """The text as it is compared: trimmed, and without the ``'`` a CSV export adds before formula-like cells."""
    if text is None:
        return None
    if text.startswith("'") and text[1:].startswith(FORMULA_STARTS):
        text = text[1:]
    return text.strip() or None


def _one_hot(row: dict, prefix: str) -> int | None:
    chosen = [i for i in range(1, 6) if row.get(f"{prefix}.{i}") in (True, 1, "True", "true", "1")]
    return chosen[0] if len(chosen) == 1 else None


def human_labels(path: str | Path, rule: str = "max") -> dict[str, int]:
    """Text (see :func:`join_key`) -> human label (1 toxic, 0 not) from an annotated file, scores averaged per text."""
    from toxiforge.data.examples import read_any_table, to_float
    from toxiforge.data.toxigen import LABEL_RULES, annotated_label

    checked_rule = check_choice(rule, tuple(LABEL_RULES), what="label rule",
                                hint="use 'max' (the paper) or 'sum' (upstream)")
    table = read_any_table(path)
    names = set(table.column_names)
    scores: dict[str, list[tuple[float, float]]] = defaultdict(list)
    ai: float | None
    human: float | None
    if "Input.text" in names:
        for row in table.to_pylist():
            key, ai, human = join_key(row["Input.text"]), _one_hot(row, "Answer.toAI"), _one_hot(row, "Answer.toPER")
            if key is not None and ai is not None and human is not None:
                scores[key].append((ai, human))
    elif {"text", "toxicity_ai", "toxicity_human"} <= names:
        for row in table.select(["text", "toxicity_ai", "toxicity_human"]).to_pylist():
            key, ai, human = join_key(row["text"]), to_float(row["toxicity_ai"]), to_float(row["toxicity_human"])
            if key is not None and ai is not None and human is not None:
                scores[key].append((ai, human))
    else:
        raise InputError("not an annotated file: expected text, toxicity_ai, toxicity_human (toxiforge or ToxiGen "
                         "annotated/annotations) or Input.text with Answer.toAI.* / Answer.toPER.* (ToxiGen's hub "
                         "annotations)", path=path, hint="export one with 'toxiforge annotate export'")
    return {key: annotated_label(sum(a for a, _ in s) / len(s), sum(h for _, h in s) / len(s), checked_rule)
            for key, s in scores.items()}


@dataclass(frozen=True)
class HumanValidation:
    method: str
    label: str                # the prompt label, as a word
    rows: int                 # rows whose text has a human label
    matches_prompt: int       # of those, rows whose human label equals the prompt label
    scored: int               # of those, rows scored by a classifier
    human_fooled: int         # of the scored, the classifier's verdict differs from the human label
    label_flipped: int        # of the scored, the `fooled` column (classifier vs the prompt label)

    @property
    def matches_prompt_rate(self) -> float | None:
        return self.matches_prompt / self.rows if self.rows else None

    @property
    def human_fool_rate(self) -> float | None:
        return self.human_fooled / self.scored if self.scored else None

    @property
    def label_flip_rate(self) -> float | None:
        return self.label_flipped / self.scored if self.scored else None


def human_validation(rows: Iterable[Row], labels: dict[str, int]) -> tuple[list[HumanValidation], int]:
    """Per (method, prompt label) over the rows whose text has a human label; also how many rows had none."""
    cells: dict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0, 0, 0])
    unmatched = 0
    for r in rows:
        if r.parse_error is not None or not r.generation:
            continue
        key = join_key(r.generation)
        human = labels.get(key) if key is not None else None
        if human is None:
            unmatched += 1
            continue
        c = cells[(r.generation_method, r.prompt_label)]
        c[0] += 1
        c[1] += human == r.prompt_label
        if r.fooled is not None:
            verdict = 1 - r.prompt_label if r.fooled else r.prompt_label
            c[2] += 1
            c[3] += verdict != human
            c[4] += bool(r.fooled)
    out = [HumanValidation(method, label_word(label), *c) for (method, label), c in sorted(cells.items())]
    return out, unmatched


def render_human_validation(results: list[HumanValidation], unmatched: int, source: str, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    def pct(n: int, d: int) -> str:
        return f"{n}/{d} ({n / d:.1%})" if d else "-"

    table = Table(title=f"Against human labels ({source})", show_lines=False)
    for name in ("method", "prompt label", "rows", "human = prompt", "fool rate (human)", "label flip"):
        table.add_column(name, justify="left" if name in ("method", "prompt label") else "right", no_wrap=True)
    for v in results:
        table.add_row(v.method, v.label, str(v.rows), pct(v.matches_prompt, v.rows), pct(v.human_fooled, v.scored),
                      pct(v.label_flipped, v.scored))
    console = console or Console()
    if not console.is_terminal:  # a log or a pipe: rich would assume 80 columns
        console = Console(file=console.file, width=max(console.width, 140))
    console.print(table)
    console.print(f"{unmatched} statement(s) had no human label in {source}. human = prompt: the human label equals "
                  "the prompt label; fool rate (human): the classifier disagrees with the human label (the paper's "
                  "fool rate, §4.3, App. E); label flip: it disagrees with the prompt label (the fooled column).",
                  highlight=False)
