"""``toxiforge attack`` runs: statements attacked by one family into a sharded, resumable folder, as ``generate``
writes (:mod:`toxiforge.pipeline.job`: the same layout, manifest, resume check and Ctrl-C handling)::

    OUT/manifest.json            config (sources, family, settings, classifier, validator), counts, status
    OUT/README.md                the dataset card (toxiforge.pipeline.card)
    OUT/data/shard-00000.parquet rows of sources 0 .. shard_size-1, and so on

Each row has generate's columns, so every reader of generation runs reads an attack run (``summary``, ``train
--data``, ``evaluate --on``): ``prompt`` the source statement (ALICE: the prompt it continued), ``generation`` the
attacked statement, ``generation_method`` the family (ALICE rows: ``ALICE``), ``prompt_label`` the source's label,
``classifier_score`` P(toxic) of the attacked statement, ``fooled`` whether the classifier gives it the other
label, ``decoding`` the family's settings (JSON), ``seed`` the row's seed, ``model`` the encoder (substitute) or
language model (alice) the family used. And :data:`~toxiforge.records.ATTACK_COLUMNS`: ``source_text``,
``source_score`` (P(toxic) of the source), ``family``, ``edits`` (JSON list of ``{op, word, before, after}``),
``queries`` (classifier calls on a text, the source's included), ``similarity`` (substitute: sentence cosine to
the source), ``flipped`` (the classifier got the source right and the attacked statement wrong: a successful
attack; a source it already got wrong is *skipped*, left as it is with ``flipped`` false), ``validator``,
``validator_score`` and ``validator_agrees`` (``--validate-with``: whether that classifier gives the attacked
statement the source's label; null without one).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from toxiforge.attacks.base import AttackFamily, Attempt, Source
from toxiforge.errors import InputError
from toxiforge.pipeline.manifest import JobConfig, now_utc, prepare_dir, shard_path, start_run, write_manifest
from toxiforge.records import attack_counts, attack_schema, flipped_label, is_toxic


def sources_digest(sources: Sequence[Source]) -> str:
    """SHA-256 prefix of the sources (ids, texts, labels, prompts): a resumed run must attack the same ones."""
    digest = hashlib.sha256()
    for s in sources:
        digest.update(json.dumps([s.row_id, s.text, s.label, s.prompt, s.seed]).encode() + b"\n")
    return digest.hexdigest()[:16]


@dataclass
class AttackJob:
    """An attack run whose folder and manifest are ready: the shards still to write are ``todo``."""

    out_dir: Path
    config: JobConfig
    shards: list[list[Source]]
    todo: list[int]
    manifest: dict

    def shard_file(self, index: int) -> Path:
        return shard_path(self.out_dir, index, self.config.format)

    def schema(self):
        """The pyarrow schema of the rows (:func:`~toxiforge.records.attack_schema`)."""
        return attack_schema()


@dataclass
class AttackResult:
    out_dir: Path
    manifest: dict
    rows_written: int
    seconds: float


def clear_run(out_dir: Path) -> None:
    """``--overwrite``: remove the manifest, dataset card and shards a run left in ``out_dir`` (nothing else
    there)."""
    from toxiforge.cards import CARD_FILE
    from toxiforge.records import shard_files

    manifest = out_dir / "manifest.json"
    if not manifest.is_file():
        return
    (out_dir / CARD_FILE).unlink(missing_ok=True)
    data = out_dir / "data"
    for f in shard_files(out_dir) if data.is_dir() else []:
        f.unlink()
    manifest.unlink()
    if data.is_dir() and not any(data.iterdir()):
        data.rmdir()


def open_attack(sources: Sequence[Source], fingerprint: dict, out_dir: str | Path, config: JobConfig,
                resume: bool, overwrite: bool = False) -> AttackJob:
    """Check or create ``out_dir`` and its manifest (status "running"); list the shards still to write."""
    out_dir = Path(out_dir)
    if not sources:
        raise InputError("no statement to attack", hint="check --on and --labels")
    if overwrite:
        clear_run(out_dir)
    fingerprint = {**fingerprint, "shard_size": config.shard_size, "format": config.format}
    old = prepare_dir(out_dir, fingerprint, resume or overwrite)
    shards = [list(sources[i:i + config.shard_size]) for i in range(0, len(sources), config.shard_size)]
    todo = [i for i in range(len(shards)) if not shard_path(out_dir, i, config.format).exists()]
    manifest = start_run(out_dir, old, {"kind": "attack", "config": {**fingerprint, "batch_size": config.batch_size},
                                        "shards": len(shards), "work_items": len(sources),
                                        "total_rows": len(sources)})
    return AttackJob(out_dir, config, shards, todo, manifest)


def attack_row(source: Source, attempt: Attempt, family: AttackFamily, *, settings: str, classifier: str,
               run_id: str) -> dict[str, Any]:
    """The row of one attempt (module docstring); the validator columns are filled later."""
    after = attempt.score_after
    correct = not flipped_label(attempt.score_before, source.label)
    return {
        "prompt": attempt.prompt or source.text, "generation": attempt.text, "generation_method": family.method,
        "group": source.group, "prompt_label": source.label, "machine_generated": True, "model": attempt.model,
        "decoding": settings, "seed": source.seed, "run_id": run_id, "timestamp": now_utc(),
        "raw_output": attempt.raw_output, "finish_reason": attempt.finish_reason, "parse_error": attempt.error,
        "row_id": source.row_id, "classifier": classifier, "classifier_score": after,
        "keeper_score": attempt.keeper_score,
        "fooled": None if after is None else flipped_label(after, source.label), "hypothesis_rank": 0,
        "source_text": source.text, "source_score": attempt.score_before, "family": family.family,
        "edits": json.dumps(list(attempt.edits), ensure_ascii=False), "queries": attempt.queries,
        "similarity": attempt.similarity,
        "flipped": correct and after is not None and flipped_label(after, source.label),
        "validator": None, "validator_score": None, "validator_agrees": None,
    }


def validate_rows(rows: list[dict[str, Any]], validator: Any) -> None:
    """Fill the validator columns of rows with a statement, in place (one batch)."""
    scored = [r for r in rows if r["generation"]]
    if validator is None or not scored:
        return
    for r, p in zip(scored, validator.predict_proba([r["generation"] for r in scored])):
        r.update(validator=validator.name, validator_score=float(p),
                 validator_agrees=bool(is_toxic(float(p))) == (r["prompt_label"] == 1))


def attack_calls(family: AttackFamily, sources: Sequence[Source], config: JobConfig = JobConfig()
                 ) -> Iterator[tuple[list[Source], list[Attempt]]]:
    """``family``'s attempts on ``sources`` (one shard), a ``family.attack`` call at a time: all of them in one call
    when the family attacks them ``together`` (obfuscate: one classifier call per step for all), else
    ``config.batch_size`` per call (ALICE: one batched search each; substitute: one statement after another)."""
    size = max(1, len(sources) if family.together else config.batch_size)
    for start in range(0, len(sources), size):
        batch = list(sources[start:start + size])
        yield batch, family.attack(batch)


def run_attack(sources: Sequence[Source], family: AttackFamily, out_dir: str | Path, *, classifier_name: str,
               fingerprint: dict, config: JobConfig = JobConfig(), resume: bool = False, overwrite: bool = False,
               validator: Any = None, progress: bool = False,
               on_shard: Callable[[int, Path], None] | None = None) -> AttackResult:
    """Attack every source with ``family`` into ``out_dir`` (module docstring); ``fingerprint`` is what a resumed
    run must share (sources, family settings, classifier, validator), ``validator`` a loaded classifier for
    ``--validate-with``. Statements are attacked ``config.batch_size`` at a time, a whole shard at a time when the
    family attacks them ``together`` (:func:`attack_calls`; each as alone). ``on_shard(index, path)`` runs after
    each shard is written."""
    import pyarrow as pa

    from toxiforge.pipeline.card import write_dataset_card
    from toxiforge.pipeline.job import marks_interruption, progress_bar
    from toxiforge.records import read_table, write_table

    if family.together:  # one classifier call per step for a whole shard (AttackFamily)
        config = replace(config, batch_size=config.shard_size)
    job = open_attack(sources, fingerprint, out_dir, config, resume, overwrite)
    settings = json.dumps(family.settings(), sort_keys=True)
    started, written = time.perf_counter(), 0
    done = sum(len(s) for i, s in enumerate(job.shards) if i not in job.todo)
    with marks_interruption(job), progress_bar(progress, total=len(sources), done=done, verb="attacking") as advance:
        for index in job.todo:
            rows = []
            for batch, attempts in attack_calls(family, job.shards[index], config):
                rows += [attack_row(source, attempt, family, settings=settings, classifier=classifier_name,
                                    run_id=job.manifest["run_id"]) for source, attempt in zip(batch, attempts)]
                advance(len(batch))
            validate_rows(rows, validator)
            write_table(pa.Table.from_pylist(rows, schema=attack_schema()), job.shard_file(index))
            written += len(rows)
            if on_shard is not None:
                on_shard(index, job.shard_file(index))
    seconds = time.perf_counter() - started
    all_rows = [row for i in range(len(job.shards)) for row in read_table(job.shard_file(i)).to_pylist()]
    manifest = job.manifest
    manifest.pop("rows_kept", None)
    manifest.pop("error", None)
    manifest.update(status="complete", finished_at=now_utc(), counts=attack_counts(all_rows),
                    last_call={"rows_written": written, "seconds": round(seconds, 3),
                               "statements_per_second": round(written / seconds, 3) if seconds > 0 else None})
    write_manifest(job.out_dir, manifest)
    write_dataset_card(job.out_dir, manifest, job.schema())
    return AttackResult(job.out_dir, manifest, written, seconds)


__all__ = ["AttackJob", "AttackResult", "attack_calls", "attack_row", "clear_run", "open_attack", "run_attack",
           "sources_digest", "validate_rows"]
