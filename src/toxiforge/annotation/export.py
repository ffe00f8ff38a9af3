"""Study exports in ToxiGen's layouts.

* ``annotated``: one row per item with at least one response, ToxiGen's columns (``text, target_group, factual?,
  ingroup_effect, lewd, framing, predicted_group, stereotyping, intent, toxicity_ai, toxicity_human,
  predicted_author, actual_method``) with ToxiGen's value vocabulary: scores averaged over annotators,
  categorical answers by majority (without a majority, the list of answers as ToxiGen writes it, e.g.
  ``['the text directly references asian', 'it is unclear who is referenced']``). ``ingroup_effect`` is not
  asked by the nine-question form and stays empty. Extra columns: ``prompt_label``, ``source_row_id``,
  ``n_annotations``, ``trouble`` (how many annotators had trouble understanding the text).
* ``annotations`` (toxiforge's own per-response layout, NOT ToxiGen's): one row per response with the same
  text/group/method columns, the raw answers under readable names, timestamps, and a keyed hash of the annotator
  (never the token or the database id). Loads back through :func:`toxiforge.data.load_toxigen_annotated`. The only
  layout of a short-form study (``hateful``: yes/no; the paper's answers empty).
* ``toxigen-annotations``: one row per response in the column layout of the hub's ``annotations`` config (the
  Mechanical Turk export): ``Input.*`` (``text``, ``target_group``, ``generation_method``, ``prompt_label`` as
  hate/neutral, ``binary_prompt_label`` 1/0, ``prompt``, ``time``), the answers as one boolean column per choice
  (``Answer.toAI.1``-``.5``, ``Answer.toPER.1``-``.5``, ``Answer.intent.1``-``.5``, ``Answer.writer.1``-``.2``,
  ``Answer.stereo.1``-``.3``, ``Answer.lewd.1``-``.3``, ``Answer.ingroup.1``-``.3``, ``Answer.inGroup.on``), the
  selects (``Answer.factSelect``, ``Answer.framingQ``, ``Answer.refTarget``), the free texts
  (``Answer.stateGroup``, ``Answer.stateFrame``), the annotator questions (``Answer.annotatorAge``, ...) and
  ``HashedWorkerId``. Column names as public readers of the hub data use them (e.g. ``Answer.toAI.{1..5}`` read as
  one-hot); the hub card documents neither the column order nor the values of the choice and select columns, so:
  choice columns follow our form's option order (writer: 1 human, 2 AI; stereo/lewd: 1 yes, 2 maybe, 3 no), the
  selects hold our option keys, ``Input.prompt`` is empty (a study keeps the statement, not its prompt),
  ``Input.time`` is the seconds from assignment to submission, and the ingroup and annotator-demographic
  columns, which our form does not ask, are empty.

Files: .csv, .jsonl or .parquet by suffix. **CSV only**: a text cell that starts with ``=``, ``+``, ``-``, ``@``, a
tab or a carriage return gets a leading ``'`` (OWASP's advice against CSV formula injection: a spreadsheet would
otherwise run it as a formula). Parquet and JSONL keep the exact text.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

from toxiforge._io import atomic_write
from toxiforge.errors import InputError, check_choice

ANNOTATED_COLUMNS = ("text", "target_group", "factual?", "ingroup_effect", "lewd", "framing", "predicted_group",
                     "stereotyping", "intent", "toxicity_ai", "toxicity_human", "predicted_author", "actual_method")
FORMATS = ("annotated", "annotations", "toxigen-annotations")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")

_FACTUAL = {"factual": "factual", "opinion": "opinion", "neither": "neither factual nor opinion"}
_LEWD = {"yes": "contains lewd content", "maybe": "maybe contains lewd content",
         "no": "doesn't contain lewd content"}
_STEREO = {"yes": "uses positive stereotyping", "maybe": "maybe uses positive stereotyping",
           "no": "doesn't use positive stereotyping"}
_FRAMING = {"none": "it is unclear who is referenced"}


def _method(value: str) -> str:
    return {"top-k": "topk", "ALICE": "cbs"}.get(value, value)


def _group_phrase(resp, group: str) -> str:
    if resp.group_reference == "direct":
        return f"the text directly references {group}"
    if resp.group_reference == "indirect":
        return f"the text indirectly references {group}"
    if resp.group_reference == "other":
        return f"the text references {resp.other_groups}".rstrip()
    return "it is unclear who is referenced"


def _vote(values: list[str]) -> str:
    value, count = Counter(values).most_common(1)[0]
    return value if count * 2 > len(values) else str(values)


def annotated_rows(store, study_id: int) -> list[dict[str, Any]]:
    by_item: dict[int, list] = defaultdict(list)
    items = {}
    for item, resp in store.responses(study_id):
        by_item[item.id].append(resp)
        items[item.id] = item
    rows = []
    for item_id, rs in by_item.items():
        item = items[item_id]
        rows.append({
            "text": item.text, "target_group": item.target_group,
            "factual?": _vote([_FACTUAL[r.factual] for r in rs]),
            "ingroup_effect": None,
            "lewd": _vote([_LEWD[r.lewd] for r in rs]),
            "framing": _vote([_FRAMING.get(r.framing, r.framing) for r in rs]),
            "predicted_group": _vote([_group_phrase(r, item.target_group) for r in rs]),
            "stereotyping": _vote([_STEREO[r.stereotyping] for r in rs]),
            "intent": mean(r.intent for r in rs),
            "toxicity_ai": mean(r.harmful_ai for r in rs),
            "toxicity_human": mean(r.harmful_human for r in rs),
            "predicted_author": _vote([r.author for r in rs]),
            "actual_method": _method(item.method),
            "prompt_label": item.label, "source_row_id": item.source_row_id, "n_annotations": len(rs),
            "trouble": sum(bool(r.trouble) for r in rs),
        })
    return rows


def annotation_rows(store, study_id: int) -> list[dict[str, Any]]:
    rows = []
    for item, r in store.responses(study_id):
        rows.append({
            "text": item.text, "target_group": item.target_group, "actual_method": _method(item.method),
            "prompt_label": item.label, "source_row_id": item.source_row_id,
            "annotator": store.keyed_hash("annotator", r.annotator_id)[:16],
            "predicted_author": r.author, "toxicity_ai": r.harmful_ai, "toxicity_human": r.harmful_human,
            "stereotyping": r.stereotyping, "intent": r.intent, "lewd": r.lewd,
            "group_reference": r.group_reference, "other_groups": r.other_groups, "framing": r.framing,
            "framing_other": r.framing_other, "factual": r.factual, "hateful": r.hateful, "trouble": bool(r.trouble),
            "started_at": r.started_at.isoformat() if r.started_at else None,
            "submitted_at": r.submitted_at.isoformat() if r.submitted_at else None,
        })
    return rows


def _one_hot(prefix: str, value: Any, options: tuple) -> dict[str, bool]:
    return {f"{prefix}.{i}": value == option for i, option in enumerate(options, start=1)}


def toxigen_annotation_rows(store, study_id: int) -> list[dict[str, Any]]:
    """One row per response in the hub's ``annotations`` layout (see the module docstring)."""
    scale, yes_maybe_no = (1, 2, 3, 4, 5), ("yes", "maybe", "no")
    rows = []
    for item, r in store.responses(study_id):
        seconds = (r.submitted_at - r.started_at).total_seconds() if r.started_at and r.submitted_at else None
        row: dict[str, Any] = {
            "Input.prompt": None, "Input.text": item.text, "Input.time": seconds,
            "Input.generation_method": _method(item.method),
            "Input.prompt_label": {1: "hate", 0: "neutral"}.get(item.label),
            "Input.target_group": item.target_group, "Input.binary_prompt_label": item.label,
            "Answer.annotatorAge": None, "Answer.annotatorGender": None, "Answer.annotatorMinority": None,
            **{f"Answer.annotatorPolitics.{i}": None for i in scale}, "Answer.annotatorRace": None,
            "Answer.factSelect": r.factual, "Answer.framingQ": r.framing, "Answer.inGroup.on": None,
            **{f"Answer.ingroup.{i}": None for i in (1, 2, 3)},
            **_one_hot("Answer.intent", r.intent, scale), **_one_hot("Answer.lewd", r.lewd, yes_maybe_no),
            "Answer.refTarget": r.group_reference, "Answer.stateFrame": r.framing_other,
            "Answer.stateGroup": r.other_groups, **_one_hot("Answer.stereo", r.stereotyping, yes_maybe_no),
            **_one_hot("Answer.toAI", r.harmful_ai, scale), **_one_hot("Answer.toPER", r.harmful_human, scale),
            **_one_hot("Answer.writer", r.author, ("human", "ai")),
            "HashedWorkerId": store.keyed_hash("annotator", r.annotator_id)[:16],
        }
        rows.append(row)
    return rows


_ROWS = {"annotated": annotated_rows, "annotations": annotation_rows, "toxigen-annotations": toxigen_annotation_rows}


def neutralise_formula(value: Any) -> Any:
    """A CSV cell that a spreadsheet would run as a formula, made inert with a leading ``'`` (OWASP)."""
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def export_study(store, study_id: int, path: str | Path, fmt: str = "annotated") -> tuple[Path, int]:
    """Write the study in ``fmt`` (one of :data:`FORMATS`) to ``path``; returns the path and row count."""
    import pyarrow as pa

    check_choice(fmt, FORMATS, what="export format")
    if fmt != "annotations" and store.study_form(study_id) == "short":
        raise InputError(f"a short-form study has no answers to the paper's questions, so no {fmt} layout",
                         hint="use --format annotations (its hateful column holds the short form's answers)")
    rows = _ROWS[fmt](store, study_id)
    if not rows:
        raise InputError("the study has no responses yet", hint="export after annotators have submitted answers")
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".parquet"):
        raise InputError(f"cannot tell the export format from suffix {suffix!r}", path=path,
                         hint="use .csv, .jsonl or .parquet")

    def write(tmp: Path) -> None:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            pq.write_table(pa.Table.from_pylist(rows), tmp)
        elif suffix == ".csv":
            import pyarrow.csv as pcsv

            # formula cells neutralised in CSV only: Parquet and JSONL keep the exact text
            pcsv.write_csv(pa.Table.from_pylist([{k: neutralise_formula(v) for k, v in row.items()}
                                                 for row in rows]), tmp)
        else:
            import json

            with open(tmp, "w", encoding="utf-8") as fh:
                for row in rows:
                    fh.write(json.dumps(row, ensure_ascii=False) + "\n")

    return atomic_write(path, write), len(rows)


def export_bytes(store, study_id: int, fmt: str) -> bytes:
    """The export as CSV bytes (for the admin download)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        path, _ = export_study(store, study_id, Path(tmp) / "export.csv", fmt)
        return path.read_bytes()
