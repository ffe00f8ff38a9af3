"""The row schema every stage shares: ToxiGen's ``train`` columns plus provenance.

ToxiGen's released ``train`` config has ``prompt, generation, generation_method, group, prompt_label,
roberta_prediction``. toxiforge keeps those names and meanings (``prompt_label`` 1 = toxic prompt, 0 = benign;
``generation_method`` "top-k" or "ALICE") and adds provenance so every machine-generated row says how it was
made: ``machine_generated`` (always true for generated rows), ``model``, ``decoding`` (the decoding settings as
JSON), ``seed`` (the row's own sampling seed), ``run_id``, ``timestamp`` (UTC, ISO 8601), ``raw_output`` (the
LM's text before post-processing), ``finish_reason`` ("newline", "eos" or "length" when the token budget ran
out), ``row_id`` (stable "<group>/<label>/<index>") and ``parse_error`` (null, or why the output could not be
turned into a statement; such unparsed rows are kept, never dropped). ALICE rows also fill ``classifier``,
``classifier_score`` and ``fooled``, and ALICE with a keeper (``--keep-label-with K``) ``keeper_score``: K's
P(toxic) of the statement (K keeps the prompt's label when :func:`is_toxic` of it equals the label; K's name, λK and
weights digest are in ``decoding`` and the manifest). Null otherwise, and in files written before it existed.

A decoder may return several outputs per prompt (ALICE with ``num_return`` > 1): each is a row of its own.
``hypothesis_rank`` is the output's rank among its prompt's outputs (0 = best; top-k rows and the only output
of a prompt are 0) and ``hypothesis_score`` the decoder's score of it (ALICE: the length-normalized beam score;
null for top-k). The best output keeps the work item's ``row_id``; rank ``r`` > 0 appends ``/r``
(``asian/toxic/000003/2``). Files written before these columns existed read as rank 0 with no score.

Files: Parquet (default), JSONL and CSV, chosen by suffix. A directory of shards (as written by a generation
job) reads as one dataset; a run whose manifest is not ``complete`` (interrupted, or still running) is read as it
is, with a :class:`~toxiforge.errors.ToxiforgeWarning` giving the rows present and planned -- the one rule for
partial runs in every command. A folder of demonstration files (upstream's ``demonstrations/`` layout, or a
checkout holding one) reads as rows too (:func:`toxiforge.data.toxigen.demonstration_table`). The Parquet loads
with ``datasets.load_dataset("parquet", data_files=...)``.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from toxiforge._io import atomic_write
from toxiforge.errors import InputError, ToxiforgeWarning

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

TOXIC, BENIGN = 1, 0
# P(toxic) above this is toxic (:func:`is_toxic`, the one decision rule of every stage).
TOXIC_THRESHOLD = 0.5
METHOD_TOPK, METHOD_ALICE = "top-k", "ALICE"
GENERATION_METHODS = (METHOD_TOPK, METHOD_ALICE)

_LABEL_WORDS = {
    "hate": TOXIC, "toxic": TOXIC, "1": TOXIC, "true": TOXIC,
    "neutral": BENIGN, "benign": BENIGN, "0": BENIGN, "false": BENIGN,
}


@overload
def is_toxic(score: float, threshold: float = ...) -> bool: ...
@overload
def is_toxic(score: np.ndarray | Sequence[float], threshold: float = ...) -> npt.NDArray[np.bool_]: ...
def is_toxic(score: Any, threshold: float = TOXIC_THRESHOLD) -> Any:
    """Whether P(toxic) ``score`` means toxic: toxic iff ``score > threshold`` (0.5).

    The one rule that turns a score into a label in every stage: ``classify``'s share, ``generate``'s and
    ``summary``'s ``fooled`` (label flips), ``bench generate``, ``bias measure`` and ``relabel``. At 0.5 it is the
    argmax of a two-class head where a tie is benign (class 0), as in Zhou et al.'s code (``1 if i > 0.5``) and
    ``transformers``' argmax. A number gives a bool; an array or list gives a numpy bool array of its shape.
    """
    if isinstance(score, (int, float)):  # numpy float64 is a float too
        return bool(score > threshold)
    import numpy as np

    toxic = np.asarray(score, dtype=np.float64) > threshold
    return bool(toxic) if toxic.ndim == 0 else toxic


def parse_label(value: Any, *, path: str | Path | None = None, line: int | None = None) -> int:
    """Map a label word to 1 (hate/toxic) or 0 (neutral/benign); ints 0/1 pass through."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and value in (0, 1):
        return int(value)
    key = str(value).strip().lower()
    if key in _LABEL_WORDS:
        return _LABEL_WORDS[key]
    raise InputError(f"unknown label {value!r}", path=path, line=line,
                     hint="use hate/toxic/1 for toxic or neutral/benign/0 for benign")


def label_word(label: int) -> str:
    """'toxic' or 'benign' for 1 or 0."""
    return "toxic" if label == TOXIC else "benign"


@dataclass
class Row:
    """One generated statement with its provenance (ToxiGen columns first)."""

    prompt: str
    generation: str
    generation_method: str
    group: str
    prompt_label: int
    roberta_prediction: float | None = None
    machine_generated: bool = True
    model: str = ""
    decoding: str = "{}"
    seed: int | None = None
    run_id: str = ""
    timestamp: str = ""
    raw_output: str = ""
    finish_reason: str | None = None
    parse_error: str | None = None
    row_id: str = ""
    classifier: str | None = None
    classifier_score: float | None = None
    fooled: bool | None = None
    hypothesis_rank: int = 0
    hypothesis_score: float | None = None
    keeper_score: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Row))
TOXIGEN_COLUMNS: tuple[str, ...] = ("prompt", "generation", "generation_method", "group", "prompt_label",
                                    "roberta_prediction")
# Where a dataset's statements are, in order of preference: toxiforge's and ToxiGen's train column, else ``text``.
TEXT_COLUMNS: tuple[str, ...] = ("generation", "text")


def arrow_schema():
    """The pyarrow schema of :class:`Row` (explicit, so all-null columns keep their types)."""
    import pyarrow as pa

    types = {
        "prompt_label": pa.int8(), "roberta_prediction": pa.float64(), "machine_generated": pa.bool_(),
        "seed": pa.int64(), "classifier_score": pa.float64(), "fooled": pa.bool_(),
        "hypothesis_rank": pa.int16(), "hypothesis_score": pa.float64(), "keeper_score": pa.float64(),
    }
    return pa.schema([pa.field(name, types.get(name, pa.string())) for name in COLUMNS])


# --- attack rows (toxiforge attack): generate's columns plus these (toxiforge.attacks.job writes them) ----------

ATTACK_COLUMNS: dict[str, str] = {
    "source_text": "string", "source_score": "float64", "family": "string", "edits": "string", "queries": "int64",
    "similarity": "float64", "flipped": "bool_", "validator": "string", "validator_score": "float64",
    "validator_agrees": "bool_",
}


def attack_schema():
    """The pyarrow schema of attack rows: :func:`arrow_schema` then :data:`ATTACK_COLUMNS`."""
    import pyarrow as pa

    return pa.schema([*arrow_schema(), *(pa.field(n, getattr(pa, t)()) for n, t in ATTACK_COLUMNS.items())])


def is_attack_table(columns: Sequence[str]) -> bool:
    """Whether a table's columns are an attack run's."""
    return {"flipped", "queries", "family"} <= set(columns)


def flipped_label(score: float, label: int) -> bool:
    """Whether P(toxic) ``score`` gives a statement labelled ``label`` the other label (the one rule,
    :func:`is_toxic`)."""
    return bool(is_toxic(score)) != (label == 1)


def attack_counts(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Of attack rows: rows, skipped (the classifier already got the source wrong), attacked, flipped, queries spent
    on the attacked ones, queries per success (all of them over the flips), and validated flips (with a validator)."""
    attacked = [r for r in rows if not flipped_label(r["source_score"], r["prompt_label"])]
    flips = [r for r in attacked if r["flipped"]]
    queries = sum(int(r["queries"]) for r in attacked)
    validated = [r for r in flips if r.get("validator_agrees") is not None]
    return {"rows": len(rows), "skipped": len(rows) - len(attacked), "attacked": len(attacked),
            "flipped": len(flips), "flip_rate": round(len(flips) / len(attacked), 4) if attacked else None,
            "queries": queries, "queries_per_success": round(queries / len(flips), 2) if flips else None,
            "validated_flips": sum(bool(r["validator_agrees"]) for r in validated) if validated else None}


def format_of(path: str | Path) -> str:
    """``parquet``, ``jsonl`` or ``csv`` from a file's suffix; InputError for any other suffix."""
    suffix = Path(path).suffix.lower()
    if suffix in (".parquet", ".pq"):
        return "parquet"
    if suffix in (".jsonl", ".json"):
        return "jsonl"
    if suffix == ".csv":
        return "csv"
    raise InputError(f"cannot tell the file format from suffix {suffix!r}", path=path,
                     hint="use .parquet, .jsonl or .csv")


def write_table(table: Any, path: str | Path) -> Path:
    """Write a pyarrow table atomically (temporary file, then rename) as Parquet, JSONL or CSV by suffix."""
    path = Path(path)
    fmt = format_of(path)

    def write(tmp: Path) -> None:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            pq.write_table(table, tmp)
        elif fmt == "jsonl":
            with open(tmp, "w", encoding="utf-8") as fh:
                for row in table.to_pylist():
                    fh.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        else:
            import pyarrow.csv as pcsv

            pcsv.write_csv(table, tmp)

    return atomic_write(path, write)


def write_rows(rows: Sequence[Row | dict], path: str | Path) -> Path:
    """Write rows in the :func:`arrow_schema` with :func:`write_table` (format by suffix, atomically)."""
    import pyarrow as pa

    format_of(path)  # an unknown suffix fails before the rows are converted
    dicts = [r.to_dict() if isinstance(r, Row) else {c: r.get(c) for c in COLUMNS} for r in rows]
    return write_table(pa.Table.from_pylist(dicts, schema=arrow_schema()), path)


def shard_files(directory: str | Path) -> list[Path]:
    """The data shards of a generation-job directory, in order."""
    directory = Path(directory)
    data = directory / "data"
    base = data if data.is_dir() else directory
    return sorted(p for p in base.iterdir()
                  if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in (".parquet", ".jsonl", ".csv"))


def conform_table(table):
    """Cast columns that :class:`Row` defines to the row schema's types where that cast is lossless, so files of
    different formats (JSONL reads int64 and null columns, Parquet keeps int8) concatenate."""
    import pyarrow as pa

    schema = arrow_schema()
    for i, name in enumerate(table.column_names):
        if name in schema.names and table.schema.field(i).type != schema.field(name).type:
            try:
                table = table.set_column(i, name, table.column(i).cast(schema.field(name).type, safe=True))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
                pass  # e.g. label words in prompt_label: left for the caller to parse
    return table


def run_status(directory: str | Path) -> dict | None:
    """The manifest of a generation run folder (``status``, ``total_rows``, ...), or None when it has none."""
    manifest = Path(directory) / "manifest.json"
    if not manifest.is_file():
        return None
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def run_complete(directory: str | Path) -> bool:
    """Whether ``directory`` is a generation (or attack) run whose manifest says it is complete."""
    return (run_status(directory) or {}).get("status") == "complete"


def warn_if_partial(directory: str | Path, rows_present: int) -> None:
    """Warn (:class:`~toxiforge.errors.ToxiforgeWarning`) when ``directory`` is a run whose manifest is not
    ``complete``: the rows present and planned, and how to finish it. Reading goes on."""
    manifest = run_status(directory)
    if manifest is None or manifest.get("status", "complete") == "complete":
        return
    status = manifest["status"]
    why = "still running, or killed" if status == "running" else status
    command = "attack" if manifest.get("kind") == "attack" else "generate"  # toxiforge.attacks.job's runs say so
    warnings.warn(ToxiforgeWarning(
        f"{directory}: the run is {why}: {rows_present} of {manifest.get('total_rows', '?')} planned rows are "
        f"present, and the results cover only those. Fix: finish it by rerunning the `toxiforge {command} -o "
        f"{directory} ...` command that made it with --resume"), stacklevel=3)


def read_table(path: str | Path):
    """Read a file of rows or a job directory into a pyarrow Table (no schema coercion). The row schema's own
    reader: other datasets (demonstration folders, published layouts) are read by
    :func:`toxiforge.data.read_any_table`, which calls this one for toxiforge's files."""
    import pyarrow as pa

    path = Path(path)
    if not path.exists():
        raise InputError("no such file or directory", path=path, hint="check the path")
    if path.is_dir():
        files = shard_files(path)
        if not files:
            raise InputError("directory holds no .parquet/.jsonl/.csv files", path=path,
                             hint="point at a generation output directory or a dataset file (any other dataset: "
                                  "toxiforge.data.read_any_table, or a dataset spec KIND:PATH on the command line)")
        table = pa.concat_tables([read_table(f) for f in files], promote_options="default")
        warn_if_partial(path, table.num_rows)
        return table
    fmt = format_of(path)
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq

            return conform_table(pq.read_table(path))
        if fmt == "jsonl":
            import pyarrow.json as pjson

            return conform_table(pjson.read_json(path))
        import pyarrow.csv as pcsv

        return conform_table(pcsv.read_csv(path))
    except (OSError, ValueError) as exc:  # pyarrow.ArrowInvalid subclasses ValueError
        raise InputError(f"cannot read {fmt} file ({exc})", path=path,
                         hint="check that the file is complete and in the format its suffix says") from exc


def read_rows(path: str | Path) -> list[Row]:
    """Read rows written by :func:`write_rows` (or a ToxiGen ``train`` file: missing provenance stays empty)."""
    return rows_from_table(read_table(path), path)


def rows_from_table(table, path: str | Path | None = None) -> list[Row]:
    """:class:`Row` objects from a pyarrow table in the row schema (columns :class:`Row` lacks are dropped)."""
    missing = [c for c in ("prompt", "generation", "group", "prompt_label") if c not in table.column_names]
    if missing:
        raise InputError(f"missing columns {missing}; found {table.column_names}", path=path,
                         hint="give a toxiforge or ToxiGen train file")
    known = set(COLUMNS)
    rows = []
    for d in table.to_pylist():
        kept = {k: v for k, v in d.items() if k in known}
        kept.setdefault("generation_method", "")
        if kept.get("hypothesis_rank") is None:  # older files, or older shards next to newer ones
            kept["hypothesis_rank"] = 0
        rows.append(Row(**kept))
    return rows


def iter_dicts(rows: Iterable[Row]) -> Iterable[dict[str, Any]]:
    for r in rows:
        yield r.to_dict()
