"""The dataset card (``OUT/README.md``) of a generation run (``toxiforge generate``) or an attack run
(``toxiforge attack``), in the Hugging Face Hub's conventions, so that ``datasets.load_dataset(OUT)`` reads the
rows as they are and the folder uploads to the Hub as it is.

YAML metadata: licence (:data:`~toxiforge.cards.OUTPUT_LICENSE`), task, language, tags, size, ``configs``
pointing at ``data/*.<format>`` (the shards) and ``dataset_info.features`` (the rows' types). Text: what the
rows are (every one machine-generated), counts per group x label x method, the models, decoding or attack settings
and seeds, the content warning, how the run was made (its manifest) and whether it is complete. Counts and
settings only: no row's text.

:func:`write_dataset_card` is called when a run completes (again after a ``--resume`` completes it) and when it
is interrupted (the card then says *incomplete*).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from toxiforge.cards import (
    OUTPUT_LICENSE,
    OUTPUT_LICENSE_NAME,
    OUTPUT_LICENSE_TEXT,
    PATHS_NOTE,
    content_warning,
    make_card,
    settings_table,
    size_category,
    table,
    write_card,
)
from toxiforge.records import label_word, shard_files

TAGS = ["toxiforge", "toxicity", "hate-speech", "implicit-hate-speech", "machine-generated", "synthetic"]


def run_counts(out_dir: Path) -> Counter[tuple[str, str, str]]:
    """Rows of the run's shards on disk per ``(group, label word, method)`` (group ``-`` where a row has none)."""
    from toxiforge.records import read_table

    counts: Counter[tuple[str, str, str]] = Counter()
    for path in shard_files(out_dir) if (out_dir / "data").is_dir() else []:
        columns = read_table(path).select(["group", "prompt_label", "generation_method"]).to_pydict()
        counts.update(("-" if g is None else str(g), label_word(int(y)), str(m)) for g, y, m in
                      zip(columns["group"], columns["prompt_label"], columns["generation_method"]))
    return counts


def _status_line(manifest: dict[str, Any], rows: int) -> str:
    status = manifest.get("status", "complete")
    if status == "complete":
        return f"Status: **complete** ({rows} rows, finished {manifest.get('finished_at', '?')})."
    command = "attack" if manifest.get("kind") == "attack" else "generate"
    return (f"Status: **incomplete** ({status}): {rows} of {manifest.get('total_rows', '?')} planned rows are "
            f"present. Rerun the `toxiforge {command}` command that made it with `--resume` to finish it; this card "
            "is rewritten when it completes.")


def _generation_sections(manifest: dict[str, Any]) -> list[str]:
    config = manifest.get("config", {})
    plan = config.get("plan", {})
    model = manifest.get("model", {})
    models = [("language model", f"`{config.get('model')}`", ", ".join(f"{k} {v}" for k, v in model.items()
                                                                     if k in ("architecture", "backend", "dtype")))]
    if config.get("classifier"):
        models.append(("classifier (scores every row; ALICE's target)", f"`{config['classifier']}`",
                       ", ".join(f"{k} {v}" for k, v in (config.get("classifier_settings") or {}).items())))
    seeds = (f"Seeds: plan seed {plan.get('seed')} (prompts and each row's sampling seed, column `seed`, follow from "
             "it and the row's cell and position).")
    prompts = {k: v for k, v in plan.items() if k != "cells"}
    return ["## Models", table(("role", "model", "details"), models), seeds,
            f"## Decoding: {config.get('method')}", settings_table({**(config.get("decoding") or {}),
                                                                    "num_return": config.get("num_return")}),
            "## Prompts", settings_table(prompts)]


def _attack_sections(manifest: dict[str, Any]) -> list[str]:
    config = manifest.get("config", {})
    counts = manifest.get("counts") or {}
    models = [("attacked classifier", f"`{config.get('classifier')}`",
               ", ".join(f"{k} {v}" for k, v in (config.get("classifier_settings") or {}).items()))]
    if config.get("validator"):
        models.append(("validator (`--validate-with`)", f"`{config['validator']}`", ""))
    source = {"on": ", ".join(map(str, config.get("on") or [])), "labels": config.get("labels"),
              "statements": config.get("sources"), "statements_sha256": config.get("sources_sha256"),
              "seed": config.get("seed")}
    result = {k: counts.get(k) for k in ("rows", "skipped", "attacked", "flipped", "flip_rate", "queries",
                                         "queries_per_success", "validated_flips")} if counts else {}
    sections = ["## Models", table(("role", "model", "details"), models),
                "The language model or encoder a family used is in each row's `model` column.",
                "## Source statements", settings_table(source),
                f"## Attack: {config.get('family')}", settings_table(config.get("settings") or {})]
    if result:
        sections += ["## Attack results", settings_table(result)]
    return sections


def features(schema: Any) -> list[dict[str, Any]]:
    """The ``dataset_info.features`` of rows in the pyarrow ``schema``: ``datasets`` then reads every format
    (CSV and JSONL too, whose readers would guess) with the types the rows were written with."""
    from datasets import Features

    return Features.from_arrow_schema(schema)._to_yaml_list()


def dataset_card(out_dir: str | Path, manifest: dict[str, Any], schema: Any = None):
    """The :class:`~huggingface_hub.DatasetCard` of the run in ``out_dir`` with ``manifest`` (rows in the pyarrow
    ``schema``, when given)."""
    from huggingface_hub import DatasetCard, DatasetCardData

    out_dir = Path(out_dir)
    attack = manifest.get("kind") == "attack"
    config = manifest.get("config", {})
    fmt = config.get("format", "parquet")
    counts = run_counts(out_dir)
    rows = sum(counts.values())
    data = DatasetCardData(
        license=OUTPUT_LICENSE, license_name=OUTPUT_LICENSE_NAME, language=["en"],
        task_categories=["text-classification"], task_ids=["hate-speech-detection"],
        annotations_creators=["machine-generated"],
        language_creators=["machine-generated"], size_categories=[size_category(rows)],
        tags=[*TAGS, *(["adversarial-attack"] if attack else [])],
        pretty_name=f"toxiforge {'attack' if attack else 'generation'} run {manifest.get('run_id', '')}".strip(),
        configs=[{"config_name": "default", "data_files": [{"split": "train", "path": f"data/*.{fmt}"}]}],
        dataset_info={"features": features(schema)} if schema is not None else None)
    what = ("attacked statements: source statements that an attack family rewrote to change a classifier's label"
            if attack else "statements that a language model wrote when prompted with demonstrations")
    command = "toxiforge attack" if attack else "toxiforge generate"
    count_rows = [(g, y, m, n) for (g, y, m), n in sorted(counts.items())]
    body = [
        f"# {data.pretty_name}",
        content_warning("This dataset contains implicit hate speech"),
        f"Machine-generated {what}, made by `{command}` (toxiforge {manifest.get('versions', {}).get('toxiforge', '')})"
        ". **Every row is machine-generated** (column `machine_generated` is true); `prompt_label` is the label the "
        "prompt or source statement was meant to have, not a person's judgment of the row.",
        _status_line(manifest, rows),
        "## Rows per group, label and method",
        table(("group", "label (`prompt_label`)", "method (`generation_method`)", "rows"), count_rows)
        if count_rows else "No rows yet.",
        f"Files: `data/*.{fmt}` ({config.get('shard_size')} {'statements' if attack else 'prompts'} per shard); "
        f"`datasets.load_dataset(\"path/to/this/folder\")` reads them as one `train` split.",
        *(_attack_sections(manifest) if attack else _generation_sections(manifest)),
        "## How it was made",
        f"Made by `{command}` with the settings above; `manifest.json` beside this card records every setting, the "
        f"model details, the library versions and the counts (run id `{manifest.get('run_id')}`, started "
        f"{manifest.get('started_at')}"
        + (f", resumed {', '.join(manifest['resumed_at'])}" if manifest.get("resumed_at") else "") + "). "
        "The columns are described in toxiforge's docs/generation.md"
        + (" and docs/attacks.md" if attack else "") + ". " + PATHS_NOTE,
        settings_table(manifest.get("versions") or {}),
        "## Intended use and limitations",
        "For training and testing classifiers of implicit hate speech and for auditing them. Labels are the prompts' "
        "or the source statements' (a statement need not carry the label it was meant to have); check a sample with "
        "people (`toxiforge annotate`) before treating them as gold labels. Not for training models to produce "
        "such text.",
        "## Licence", OUTPUT_LICENSE_TEXT,
    ]
    return make_card(DatasetCard, data, body)


def write_dataset_card(out_dir: str | Path, manifest: dict[str, Any], schema: Any = None) -> Path:
    """Write the run's :func:`dataset_card` to ``out_dir``/README.md."""
    return write_card(dataset_card(out_dir, manifest, schema), out_dir)
