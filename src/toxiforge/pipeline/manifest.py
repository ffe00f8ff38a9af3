"""A generation job's output folder and manifest: how the job runs (:class:`JobConfig`), what it records of its
models (:class:`JobModels`), the fingerprint a resumed run must match, and :func:`open_job`, which checks or
creates the folder and manifest and lists the shards still to write. :mod:`toxiforge.pipeline.job` writes them.
"""

from __future__ import annotations

import json
import platform
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from toxiforge._io import atomic_write_text, require_empty_dir
from toxiforge.decoding import Decoder
from toxiforge.errors import InputError, check_choice
from toxiforge.models.base import LanguageModel
from toxiforge.pipeline.plan import GenerationPlan, WorkItem

MANIFEST = "manifest.json"
FORMATS = {"parquet": ".parquet", "jsonl": ".jsonl", "csv": ".csv"}
# Fingerprint keys added after the first release, with the value that older manifests (which lack them) meant.
FINGERPRINT_DEFAULTS = {"num_return": 1}
# Runs made before a setting was recorded: no value to compare, so resuming them is not refused over it.
UNRECORDED = ("classifier_settings",)
# Settings compared one by one, only when what they belong to (the method, the classifier) is the same.
SETTINGS_OF = {"decoding": "method", "classifier_settings": "classifier", "settings": "family"}  # settings: attack


@dataclass(frozen=True)
class JobConfig:
    """How the job runs (not what it generates)."""

    batch_size: int = 16
    shard_size: int = 128
    format: str = "parquet"

    def __post_init__(self) -> None:
        if self.batch_size < 1:
            raise InputError(f"batch_size={self.batch_size} must be at least 1", hint="use --batch-size 16")
        if self.shard_size < 1:
            raise InputError(f"shard_size={self.shard_size} must be at least 1", hint="use --shard-size 128")
        check_choice(self.format, tuple(FORMATS), what="output format", hint="use parquet, jsonl or csv")


def now_utc() -> str:
    """The time now (UTC), as the manifest and rows record it."""
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def library_versions() -> dict:
    import torch
    import transformers

    from toxiforge import __version__

    return {"toxiforge": __version__, "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__}


def write_manifest(out_dir: Path, manifest: dict) -> None:
    """Write ``manifest`` to ``out_dir``'s manifest.json atomically."""
    atomic_write_text(out_dir / MANIFEST, json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


def shard_path(out_dir: Path, index: int, fmt: str) -> Path:
    return out_dir / "data" / f"shard-{index:05d}{FORMATS[fmt]}"


@dataclass(frozen=True)
class JobModels:
    """What a job records about its models and decoder (fingerprint and manifest). Built from the objects with
    :meth:`of`; a Ray run gets it from a worker, so the driver never loads the models."""

    method: str
    decoding: dict
    model: str
    model_info: dict
    classifier: str | None
    num_return: int
    classifier_settings: dict | None = None

    @classmethod
    def of(cls, lm: LanguageModel, decoder: Decoder, classifier=None) -> JobModels:
        from toxiforge.classifiers.base import scoring_settings

        return cls(method=decoder.method, decoding=decoder.settings(), model=lm.name, model_info=lm.describe(),
                   classifier=getattr(classifier, "name", None), num_return=decoder.num_return,
                   classifier_settings=None if classifier is None else scoring_settings(classifier))


def _fingerprint(plan: GenerationPlan, models: JobModels, config: JobConfig) -> dict:
    """The settings a resumed run must share with the original (batch size may differ)."""
    return {"plan": plan.to_dict(), "method": models.method, "decoding": models.decoding, "model": models.model,
            "classifier": models.classifier, "classifier_settings": models.classifier_settings,
            "num_return": models.num_return, "shard_size": config.shard_size, "format": config.format}


def check_output_dir(out_dir: str | Path, resume: bool) -> None:
    """Fail early when ``out_dir`` cannot be written: a file, a non-empty folder without ``resume``
    (:func:`~toxiforge._io.require_empty_dir`), or a folder to resume that is not a run."""
    out_dir = require_empty_dir(out_dir, resume, flag="--resume")
    if resume and out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MANIFEST).exists():
        raise InputError("--resume: directory has no manifest.json, so it is not a toxiforge run", path=out_dir,
                         hint="choose the directory of the run to resume")


def prepare_dir(out_dir: Path, fingerprint: dict, resume: bool) -> dict | None:
    """Check the output directory; return the old manifest when resuming."""
    check_output_dir(out_dir, resume)
    manifest_path = out_dir / MANIFEST
    if not manifest_path.exists():
        return None
    old = json.loads(manifest_path.read_text(encoding="utf-8"))
    old_config = old.get("config", {})
    compared = [k for k in fingerprint if k in old_config or k not in UNRECORDED]
    differences = fingerprint_differences({k: old_config.get(k, FINGERPRINT_DEFAULTS.get(k)) for k in compared},
                                          {k: fingerprint[k] for k in compared})
    if differences:
        def show(value: object) -> str:
            return "(none)" if value is None else str(value)

        shown = "; ".join(f"{option} {show(was)} (the run) vs {show(now)} (now)" for option, was, now in differences)
        raise InputError(f"--resume: the run in this folder was made with other options: {shown}", path=out_dir,
                         hint="resume with the run's values ("
                              + " ".join(f"no {option}" if was is None else f"{option} {was}"
                                         for option, was, _ in differences)
                              + "), or write to a new -o")
    return old


# The command-line option behind each fingerprint entry (decoding settings are named after the option they come
# from, e.g. num_beams <- --beams); anything unlisted shows as its key.
OPTION_NAMES = {
    "plan.source": "--demonstrations/--prompts", "plan.prompt_source": "--demonstrations/--prompts", "plan.k": "-k",
    "plan.seed": "--seed", "plan.groups": "--groups", "plan.labels": "--labels", "plan.n": "-n", "method": "--method",
    "model": "--model", "classifier": "--classifier", "num_return": "--num-return", "shard_size": "--shard-size",
    "format": "--format", "classifier_settings.template": "--judge-template",
    "classifier_settings.policy": "--judge-policy", "classifier_settings.toxic_label": "--toxic-label",
    "decoding.num_beams": "--beams", "decoding.no_repeat_ngram_size": "--no-repeat-ngram",
    "decoding.mode": "--alice-mode",
    # toxiforge attack's fingerprint (toxiforge.attacks.runner); its family settings show as --max-edits etc.
    "on": "--on", "family": "--family", "labels": "--labels", "validator": "--validate-with", "seed": "--seed",
    "sources_sha256": "the statements of --on (their digest)", "sources": "the number of statements of --on",
    "settings.num_beams": "--beams", "settings.operations": "--ops",
}


def _plan_options(plan: dict) -> dict:
    """A plan's cells as the options that made them (--groups, --labels, -n), plus its other fields."""
    cells = plan.get("cells") or []
    flat = {k: v for k, v in plan.items() if k != "cells"}
    flat["groups"] = ",".join(dict.fromkeys(c["group"] for c in cells))
    flat["labels"] = ",".join(dict.fromkeys(c["label"] for c in cells))
    sizes = sorted({c["n"] for c in cells})
    flat["n"] = sizes[0] if len(sizes) == 1 else ",".join(map(str, sizes))
    return flat


def fingerprint_differences(old: dict, new: dict) -> list[tuple[str, object, object]]:
    """``(option, run's value, this call's value)`` for every setting in which two run fingerprints differ."""
    out = []
    for key in new:
        was, now = old.get(key), new[key]
        if key == "plan" and isinstance(was, dict):
            was, now, prefix = _plan_options(was), _plan_options(now), "plan."
        elif key in SETTINGS_OF and old.get(SETTINGS_OF[key]) != new.get(SETTINGS_OF[key]):
            continue  # another method or classifier has other settings: --method/--classifier says it
        elif key in SETTINGS_OF and isinstance(was, dict):
            prefix = key + "."
        else:
            if was != now:
                out.append((OPTION_NAMES.get(key, key), was, now))
            continue
        for sub in dict.fromkeys([*was, *now]):
            if was.get(sub) != now.get(sub):
                name = prefix + sub
                out.append((OPTION_NAMES.get(name, "--" + sub.replace("_", "-")), was.get(sub), now.get(sub)))
    return out


@dataclass
class OpenJob:
    """A job whose output directory and manifest are ready: the shards still to write are ``todo``."""

    out_dir: Path
    config: JobConfig
    items: list[WorkItem]
    shards: list[list[WorkItem]]
    todo: list[int]
    manifest: dict

    @property
    def done_items(self) -> int:
        return len(self.items) - sum(len(self.shards[i]) for i in self.todo)

    def shard_file(self, index: int) -> Path:
        return shard_path(self.out_dir, index, self.config.format)

    def schema(self):
        """The pyarrow schema of the rows (:func:`~toxiforge.records.arrow_schema`)."""
        from toxiforge.records import arrow_schema

        return arrow_schema()


def open_job(plan: GenerationPlan, models: JobModels, out_dir: str | Path, config: JobConfig = JobConfig(),
             resume: bool = False) -> OpenJob:
    """Expand the plan, check or create ``out_dir`` and its manifest (status "running"), list missing shards."""
    out_dir = Path(out_dir)
    items = plan.expand()  # reads every prompt source first: bad input fails before anything is written
    fingerprint = _fingerprint(plan, models, config)
    old = prepare_dir(out_dir, fingerprint, resume)
    shards = [items[i:i + config.shard_size] for i in range(0, len(items), config.shard_size)]
    todo = [i for i in range(len(shards)) if not shard_path(out_dir, i, config.format).exists()]
    manifest = start_run(out_dir, old, {
        "config": {**fingerprint, "batch_size": config.batch_size},
        "model": models.model_info,
        "shards": len(shards),
        "work_items": len(items),
        "total_rows": len(items) * fingerprint["num_return"],  # at most; the exact count is counts["rows"]
    })
    return OpenJob(out_dir, config, items, shards, todo, manifest)


def start_run(out_dir: Path, old: dict | None, fields: dict) -> dict:
    """Write the manifest of a sharded run (generation or attack) as "running" and make its ``data/`` folder:
    a new one from ``fields`` (plus run id, machine-generated mark, start time, library versions), or ``old`` (a
    resumed run's, from :func:`prepare_dir`) with the time of this resumption added."""
    manifest = old or {"run_id": uuid.uuid4().hex[:12], "machine_generated": True, "started_at": now_utc(),
                       "versions": library_versions(), **fields}
    manifest["status"] = "running"
    manifest.setdefault("resumed_at", [])
    if old is not None:
        manifest["resumed_at"].append(now_utc())
    (out_dir / "data").mkdir(parents=True, exist_ok=True)
    write_manifest(out_dir, manifest)
    return manifest
