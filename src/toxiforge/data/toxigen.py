"""ToxiGen's own data, and toxiforge's generated datasets, as :class:`~toxiforge.data.examples.LabeledData`.

**Annotated** (hub ``toxigen/toxigen-data``, config ``annotated``: train 8,960 rows, test 940; the test split is
ToxiGen-HumanVal). Columns: ``text, target_group, factual?, ingroup_effect, lewd, framing, predicted_group,
stereotyping, intent, toxicity_ai, toxicity_human, predicted_author, actual_method``. ``toxicity_ai`` and
``toxicity_human`` are the mean 1-5 harm ratings "if written by an AI" / "by a human". Two label rules:

* ``"sum"`` (default): toxic when ``toxicity_ai + toxicity_human > 5.5`` -- upstream's rule
  (``toxigen/utils.py`` at microsoft/TOXIGEN 01517e8), also used by lm-evaluation-harness;
* ``"max"``: toxic when ``max(toxicity_ai, toxicity_human) > 3`` -- the paper's text (§4.2, footnote 8: scores
  below 3 non-toxic, 3 ambiguous, above 3 toxic); ambiguous rows count as benign. Upstream issue #26 notes that
  the two differ.

``target_group`` becomes the group and ``actual_method`` the method (``topk`` -> ``top-k``; ``CBS``, the
constrained beam search, -> ``ALICE``), which gives the paper's Table 7 split of ToxiGen-Val by method.

**Train layout** (config ``train``: ``prompt, generation, generation_method, group, prompt_label,
roberta_prediction``) and **toxiforge's output** (the same columns plus provenance, read with
:func:`toxiforge.records.read_table`; a generation directory reads as one dataset): text = ``generation``,
label = ``prompt_label`` (the paper's proxy label) or another binary column (a human label), group = ``group``,
method = ``generation_method``. Rows with a ``parse_error`` (unparsed LM output) or with an empty generation are
left out and counted.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Literal

from toxiforge.data.examples import (
    Example,
    LabeledData,
    binary_labels,
    clean_text,
    column,
    finish,
    load_hub_table,
    normalize_group,
    normalize_method,
    read_any_table,
    require_columns,
    to_float,
)
from toxiforge.errors import InputError, check_choice

HUB_ID = "toxigen/toxigen-data"
ANNOTATED_COLUMNS: tuple[str, ...] = (
    "text", "target_group", "factual?", "ingroup_effect", "lewd", "framing", "predicted_group", "stereotyping",
    "intent", "toxicity_ai", "toxicity_human", "predicted_author", "actual_method")
TRAIN_COLUMNS: tuple[str, ...] = ("prompt", "generation", "generation_method", "group", "prompt_label",
                                  "roberta_prediction")
LabelRule = Literal["sum", "max"]
LABEL_RULES: dict[LabelRule, str] = {
    "sum": "toxic when toxicity_ai + toxicity_human > 5.5 (upstream's rule)",
    "max": "toxic when max(toxicity_ai, toxicity_human) > 3 (the paper's rule; 3 = ambiguous counts as benign)",
}


def annotated_label(toxicity_ai: float, toxicity_human: float, rule: LabelRule = "sum") -> int:
    """The binary label of one annotated row under ``rule`` (see the module docstring)."""
    if rule == "sum":
        return int(toxicity_ai + toxicity_human > 5.5)
    if rule == "max":
        return int(max(toxicity_ai, toxicity_human) > 3)
    raise InputError(f"unknown label rule {rule!r}", hint="use 'sum' (upstream) or 'max' (the paper)")



def load_toxigen_annotated(path: str | Path | None = None, *, split: str = "test", rule: str = "sum",
                           name: str | None = None) -> LabeledData:
    """ToxiGen's annotated data from a local CSV/JSONL/Parquet file, or from the hub when ``path`` is None.

    ``split`` picks the hub split (``test`` = ToxiGen-HumanVal, ``train``); a local file is used whole.
    """
    checked: LabelRule = check_choice(rule, tuple(LABEL_RULES), what="label rule",
                                      hint="use 'sum' (upstream) or 'max' (the paper)")
    if path is None:
        table, source = load_hub_table(HUB_ID, "annotated", split=split), f"hub:{HUB_ID}/annotated/{split}"
    else:
        table, source = read_any_table(path), str(path)
    require_columns(table.column_names, ("text", "toxicity_ai", "toxicity_human"), layout="ToxiGen annotated",
                    path=source)
    texts, ai, human = column(table, "text"), column(table, "toxicity_ai"), column(table, "toxicity_human")
    groups, methods = column(table, "target_group"), column(table, "actual_method")
    skipped: Counter = Counter()
    examples = []
    for i, raw in enumerate(texts):
        text = clean_text(raw)
        a, h = to_float(ai[i]), to_float(human[i])
        if text is None:
            skipped["empty text"] += 1
            continue
        if a is None or h is None:
            skipped["missing toxicity score"] += 1
            continue
        examples.append(Example(text, annotated_label(a, h, checked), normalize_group(groups[i]),
                                normalize_method(methods[i]), row=i))
    default = "ToxiGen-HumanVal" if (path is not None or split == "test") else f"ToxiGen annotated ({split})"
    return finish(name or default, examples, layout="toxigen-annotated", source=source, skipped=skipped,
                  notes=[f"label rule {checked}: {LABEL_RULES[checked]}"])


def load_generated(path: str | Path | None = None, *, label_column: str = "prompt_label",
                   text_column: str = "generation", name: str | None = None,
                   keep_unparsed: bool = False) -> LabeledData:
    """ToxiGen's ``train`` layout or a toxiforge dataset (file or generation directory); the hub's ToxiGen
    ``train`` config (250,951 rows) when ``path`` is None.

    ``label_column`` defaults to ``prompt_label``, the paper's proxy label; pass a human label column (binary
    values) to train on that instead. ``keep_unparsed`` keeps rows with a ``parse_error``.
    """
    if path is None:
        table, source = load_hub_table(HUB_ID, "train", split="train"), f"hub:{HUB_ID}/train"
    else:
        table, source = read_any_table(path), str(path)
    require_columns(table.column_names, (text_column, label_column), layout="ToxiGen train / toxiforge",
                    path=source)
    labels = binary_labels(column(table, label_column), column=label_column, path=source)
    texts, groups = column(table, text_column), column(table, "group")
    methods, errors = column(table, "generation_method"), column(table, "parse_error")
    skipped: Counter = Counter()
    examples = []
    for i, raw in enumerate(texts):
        text = clean_text(raw)
        if errors[i] and not keep_unparsed:
            skipped["unparsed (parse_error)"] += 1
        elif text is None:
            skipped["empty text"] += 1
        elif (label := labels[i]) is None:
            skipped["missing label"] += 1
        else:
            examples.append(Example(text, label, normalize_group(groups[i]), normalize_method(methods[i]), row=i))
    default = name or ("ToxiGen train" if path is None else _stem(path))
    layout = "toxiforge" if "machine_generated" in table.column_names else "toxigen-train"
    from toxiforge.records import is_attack_table

    if label_column == "prompt_label" and is_attack_table(table.column_names):
        why = " (the attacked statement's own label, which the attack keeps: text = the attacked text)"
    else:
        why = " (prompt label as a proxy for toxicity)" if label_column == "prompt_label" else ""
    return finish(default, examples, layout=layout, source=source, skipped=skipped,
                  notes=[f"label = {label_column}{why}"])


def load_demonstration_data(path: str | Path, *, name: str | None = None) -> LabeledData:
    """Demonstration sentences as labelled examples: anything
    :func:`~toxiforge.demonstrations.sets.load_demonstrations` reads (an upstream checkout, its
    ``demonstrations/`` folder, sentence files); ``hate_*`` sets are label 1, ``neutral_*`` 0, group from the
    file name. Upstream's are human-written, which makes them a small labelled test set."""
    from toxiforge.demonstrations.sets import load_demonstrations

    sets = load_demonstrations(path)
    examples = [Example(text, s.label, s.group) for _, s in sorted(sets.items()) for text in s.sentences]
    return finish(name or _stem(path), examples, layout="demonstrations", source=path, skipped=Counter(),
                  notes=["label = the demonstration set (hate_* = 1, neutral_* = 0)"])


def is_demonstration_folder(path: str | Path) -> bool:
    """True for upstream's ``demonstrations/`` folder or a folder holding one (a checkout, what ``toxiforge
    demonstrations fetch`` writes, the shared ``toxigen-dev``): the one test of every command that reads texts."""
    path = Path(path).expanduser()
    return path.is_dir() and ((path / "demonstrations").is_dir() or path.name == "demonstrations")


def demonstration_table(path: str | Path):
    """A demonstrations folder as rows of toxiforge's schema (:func:`~toxiforge.data.examples.labeled_table` of
    :func:`load_demonstration_data`; human-written, so ``machine_generated`` is false)."""
    from toxiforge.data.examples import labeled_table

    return labeled_table(load_demonstration_data(path), machine_generated=False)


def _stem(path: str | Path) -> str:
    p = Path(path)
    return p.name if p.is_dir() else p.stem
