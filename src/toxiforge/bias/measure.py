"""``toxiforge bias measure`` as a library call: labelled data -> tags, dialects, predictions -> a BiasReport.

:func:`measure_data` takes a :class:`~toxiforge.data.LabeledData` (any loader: toxiforge runs, ToxiGen
annotated/train, demonstrations, any table), tags it with the TOXTRIG lexicon, estimates dialects when a dialect
model is given, takes predictions from a classifier or from a column of the data's own table, and computes the
metrics. :func:`write_outputs` writes the JSON (no NaN: empty cells are null), the Markdown and the PNG.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge._io import atomic_write_text
from toxiforge.bias.dialect import DialectModel, load_dialect_model, predict_dialects
from toxiforge.bias.lexicon import CATEGORIES, TOXTRIG, BiasLexicon, default_bias_lexicon
from toxiforge.bias.metrics import BiasReport, measure_bias
from toxiforge.data.examples import LabeledData, column, read_any_table, to_float
from toxiforge.errors import InputError
from toxiforge.records import TOXIC_THRESHOLD


@dataclass
class Measurement:
    """A report plus what it was measured on (for the outputs)."""

    report: BiasReport
    name: str
    model: str | None
    details: dict[str, Any] = field(default_factory=dict)


def find_dialect_model(folder: str | Path | None) -> tuple[DialectModel | None, str]:
    """The dialect model from ``folder`` (an error if it is not there; once loaded it is kept in the cache for
    later commands), or from the cache when ``folder`` is None (None and the reason when the cache has none).
    The second value says which copy is used."""
    from toxiforge.bias.fetch import TWITTERAAE, remember_resource

    if folder is not None:
        model = load_dialect_model(folder)
        return model, f"Blodgett et al. (2016) model from {remember_resource(TWITTERAAE, folder)[1]}"
    location, where = remember_resource(TWITTERAAE)
    if location is None:
        return None, "unavailable: run `toxiforge bias dialect fetch` (or pass --dialect-model DIR)"
    try:
        return load_dialect_model(location), f"Blodgett et al. (2016) model from {where}"
    except InputError as exc:
        return None, f"unavailable: the cached copy is unreadable ({exc.message}); fetch it again"


def predictions_from_column(data: LabeledData, name: str, *, option: str = "--predictions",
                            what: str = "predictions", missing: bool = False) -> np.ndarray:
    """Values in [0, 1] from column ``name`` of the table ``data`` was read from, lined up by
    :attr:`Example.row`: P(toxic) or 0/1 labels (true/false and toxic/benign words count as 1/0) for
    ``--predictions``, p(AAE) for ``relabel --aae-column``. ``missing=True`` reads a null or NaN cell as NaN (no
    estimate, as the dialect model's) instead of failing; ``option`` and ``what`` name the column in errors."""
    from toxiforge.data.examples import to_binary

    rows = [e.row for e in data.examples if e.row is not None]
    if len(rows) != len(data.examples):
        raise InputError(f"the {data.layout} loader does not keep table rows, so {option} cannot be lined up",
                         path=data.source, hint="use a table/toxiforge/ToxiGen file, or drop " + option)
    table = read_any_table(data.source)
    if name not in table.column_names:
        raise InputError(f"no {what} column {name!r}; the columns are {table.column_names}",
                         path=data.source, hint=f"pass {option} with one of them")
    values = column(table, name)
    out = np.empty(len(data.examples))
    for i, row in enumerate(rows):
        raw = values[row]
        number = to_float(raw)
        if number is None:
            try:
                binary = to_binary(raw)
            except ValueError:
                binary = None
            if binary is None and missing and (raw is None or str(raw).strip().lower() in ("", "nan")):
                out[i] = np.nan
                continue
            if binary is None:
                raise InputError(f"{what} column {name!r} has {raw!r} at data row {row + 1}",
                                 path=data.source, hint="give a probability in [0, 1] or a 0/1 label on every row"
                                 + (" (or leave the cell empty: no estimate)" if missing else ""))
            number = float(binary)
        if not 0.0 <= number <= 1.0:
            raise InputError(f"{what} column {name!r} has {number} at data row {row + 1}, "
                             "outside [0, 1]", path=data.source, hint="give probabilities in [0, 1] or 0/1 labels")
        out[i] = number
    return out


def measure_data(data: LabeledData, *, lexicon: BiasLexicon | None = None, dialect_model: DialectModel | None = None,
                 scores: np.ndarray | None = None, model: str | None = None, threshold: float = TOXIC_THRESHOLD,
                 aae_threshold: float | None = None, dialect_source: str | None = None,
                 flags: dict[str, np.ndarray] | None = None, p_dialect: np.ndarray | None = None) -> Measurement:
    """Tag, estimate dialects (when ``dialect_model``; ``dialect_source`` says where it came from or why it is
    missing) and compute the metrics on ``data``. A caller measuring the same texts again (several models on one
    evaluation set) passes their ``flags`` (``lexicon.tag``) and ``p_dialect`` (``predict_dialects``) instead of
    having them computed each time."""
    lexicon = lexicon or default_bias_lexicon()
    texts = data.texts
    flags = flags if flags is not None else lexicon.tag(texts)
    if p_dialect is None and dialect_model is not None:
        p_dialect = predict_dialects(texts, dialect_model)
    groups = [e.group for e in data.examples]
    available = {c: lexicon.available(c) for c in (*CATEGORIES, TOXTRIG)}
    report = measure_bias(data.labels, flags, scores=scores, threshold=threshold, p_dialect=p_dialect,
                          aae_threshold=aae_threshold, groups=groups if any(groups) else None,
                          available=available)
    note = lexicon.toxtrig_note()
    if note:
        report.notes.append(note)
    report.notes.append(lexicon.match_note())
    report.meta.update({"data": data.describe(), "lexicon": lexicon.describe(), "lexicon_match": lexicon.match,
                        "model": model,
                        "dialect": dialect_source or ("given" if dialect_model is not None else "unavailable")})
    return Measurement(report=report, name=data.name, model=model)


def describe(measurement: Measurement) -> dict[str, str]:
    """What was measured, with what (the lines above the Markdown tables)."""
    meta = measurement.report.meta
    return {"data": f"{meta['data']['source']} ({meta['data']['layout']})",
            "model": measurement.model or "none (dataset bias only)",
            "lexicon": "; ".join(f"{c.upper()}: {v['terms']} entries"
                                 + (f" ({v['regex']} regular expressions)" if v.get("regex") else "")
                                 + f", {v['source']}" for c, v in meta["lexicon"].items())
            + f"; matching {meta.get('lexicon_match', 'normalized')}",
            "AAE": meta.get("dialect", "unavailable"), "AAE membership": meta["aae_rule"],
            "threshold": f"P(toxic) > {meta['threshold']}"}


def write_outputs(measurement: Measurement, *, json_path: str | Path | None = None,
                  markdown_path: str | Path | None = None, png_path: str | Path | None = None) -> dict[str, Path]:
    """Write the requested outputs; with predictions and a Markdown file but no PNG path, the PNG goes beside
    the Markdown (``NAME.png``) and the Markdown links it. Returns what was written."""
    from toxiforge.bias.report import plot_fpr, render_markdown

    report, written = measurement.report, {}
    if png_path is None and markdown_path is not None and report.has_predictions:
        png_path = Path(markdown_path).with_suffix(".png")
    if png_path is not None:
        if not report.has_predictions:
            raise InputError("the FPR chart needs predictions", hint="pass --classifier or --predictions")
        written["png"] = plot_fpr(report, png_path, title=f"{measurement.name}: {measurement.model}")
    if json_path is not None:
        text = json.dumps(report.to_json(), indent=2, allow_nan=False) + "\n"
        written["json"] = atomic_write_text(json_path, text)
    if markdown_path is not None:
        link = None
        if png_path is not None:
            png, md = Path(png_path).resolve(), Path(markdown_path).resolve()
            link = png.name if png.parent == md.parent else str(png)
        written["markdown"] = atomic_write_text(markdown_path, render_markdown(
            report, name=measurement.name, model=measurement.model, png=link, details=describe(measurement)))
    return written
