"""Study exports in ToxiGen's layouts.

* ``annotated``: one row per item with at least one response, ToxiGen's columns (``text, target_group, factual?,
  ingroup_effect, lewd, framing, predicted_group, stereotyping, intent, toxicity_ai, toxicity_human,
  predicted_author, actual_method``) with ToxiGen's value vocabulary: scores averaged over annotators,
  categorical answers by majority (without a majority, the list of answers as ToxiGen writes it, e.g.
  ``['the text directly references asian', 'it is unclear who is referenced']``). ``ingroup_effect`` is not
  asked by the nine-question form and stays empty. Extra columns: ``prompt_label``, ``source_row_id``,
  ``n_annotations``, ``trouble`` (how many annotators had trouble understanding the text).
* ``annotations``: one row per response with the same text/group/method columns, the raw answers, timestamps,
  and a keyed hash of the annotator (never the token or the database id).

Both load back through :func:`toxiforge.data.load_toxigen_annotated`. Files: .csv, .jsonl or .parquet by suffix.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from statistics import mean
from typing import Any

from toxiforge._io import atomic_write
from toxiforge.errors import InputError

ANNOTATED_COLUMNS = ("text", "target_group", "factual?", "ingroup_effect", "lewd", "framing", "predicted_group",
                     "stereotyping", "intent", "toxicity_ai", "toxicity_human", "predicted_author", "actual_method")
FORMATS = ("annotated", "annotations")

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
            "framing_other": r.framing_other, "factual": r.factual, "trouble": bool(r.trouble),
            "started_at": r.started_at.isoformat() if r.started_at else None,
            "submitted_at": r.submitted_at.isoformat() if r.submitted_at else None,
        })
    return rows


def export_study(store, study_id: int, path: str | Path, fmt: str = "annotated") -> tuple[Path, int]:
    """Write the study in ``fmt`` ("annotated" or "annotations") to ``path``; returns the path and row count."""
    import pyarrow as pa

    if fmt not in FORMATS:
        raise InputError(f"unknown export format {fmt!r}", hint="use annotated or annotations")
    rows = annotated_rows(store, study_id) if fmt == "annotated" else annotation_rows(store, study_id)
    if not rows:
        raise InputError("the study has no responses yet", hint="export after annotators have submitted answers")
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".parquet"):
        raise InputError(f"cannot tell the export format from suffix {suffix!r}", path=path,
                         hint="use .csv, .jsonl or .parquet")
    table = pa.Table.from_pylist(rows)

    def write(tmp: Path) -> None:
        if suffix == ".parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        elif suffix == ".csv":
            import pyarrow.csv as pcsv

            pcsv.write_csv(table, tmp)
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
