"""Generation jobs: sharded, atomic, resumable, with a run manifest and a progress bar.

Layout of an output directory::

    OUT/manifest.json            config, model, versions, counts, status ("running" / "interrupted" / "complete")
    OUT/README.md                the dataset card (pipeline/card.py), written when the run completes or is interrupted
    OUT/data/shard-00000.parquet rows of work items 0 .. shard_size-1 of the plan, and so on

The plan's work items are cut into fixed shards of ``shard_size`` items; a shard file appears (atomic rename)
only when all its rows are written, so after a crash every shard on disk is whole. ``resume=True`` checks that
the manifest's fingerprint (plan, decoding, model, outputs per prompt, shard size, format) matches and generates
only the missing shards. Ctrl-C (KeyboardInterrupt) marks the manifest ``interrupted`` with the rows kept and
raises :class:`RunInterrupted`, whose :meth:`~RunInterrupted.line` the command prints. Every row samples with its
own seed (beam search is deterministic), so a resumed run writes the same rows as an uninterrupted one.

A decoder that returns several outputs per prompt (ALICE with ``num_return`` > 1) gets one row per output, in
rank order after its work item: ``hypothesis_rank`` 0 is the best and keeps the item's ``row_id``, rank ``r``
gets ``<row_id>/<r>`` (:meth:`~toxiforge.pipeline.plan.WorkItem.output_row_id`). A shard then holds up to
``shard_size * num_return`` rows.

The folder, its manifest and the resume checks: :mod:`toxiforge.pipeline.manifest`; the decoding and writing of
the shards: this module.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from toxiforge.decoding import Decoder, TopKDecoder, as_hypotheses, postprocess
from toxiforge.errors import Interrupted, ToxiforgeError
from toxiforge.models.base import LanguageModel
from toxiforge.pipeline.card import write_dataset_card
from toxiforge.pipeline.manifest import (  # noqa: F401  (the unused ones are re-exported: they lived here)
    FORMATS,
    MANIFEST,
    OPTION_NAMES,
    JobConfig,
    JobModels,
    OpenJob,
    check_output_dir,
    fingerprint_differences,
    library_versions,
    now_utc,
    open_job,
    shard_path,
    write_manifest,
)
from toxiforge.pipeline.plan import GenerationPlan, WorkItem
from toxiforge.records import Row, is_toxic, label_word, read_rows, write_rows


@dataclass
class JobResult:
    out_dir: Path
    manifest: dict
    rows_written: int          # by this call (0 when everything was already done)
    seconds: float
    shards: list[Path] = field(default_factory=list)


def _make_rows(items: Sequence[WorkItem], outputs, decoder: Decoder, lm: LanguageModel, run_id: str) -> list[Row]:
    """One row per output of each item, in item order then rank order (see the module docstring)."""
    outputs = list(outputs)
    if len(outputs) != len(items):
        raise ToxiforgeError(f"decoder {decoder.method} returned {len(outputs)} outputs for {len(items)} prompts")
    settings = json.dumps(decoder.settings(), sort_keys=True)
    limit = decoder.num_return
    rows = []
    for item, output in zip(items, outputs):
        for rank, sample in enumerate(as_hypotheses(output, limit)):
            statement = postprocess(sample.raw_output)
            score = sample.score if sample.score is not None and math.isfinite(sample.score) else None
            rows.append(Row(prompt=item.prompt, generation=statement.text, generation_method=decoder.method,
                            group=item.group, prompt_label=item.label, model=lm.name, decoding=settings,
                            seed=item.seed, run_id=run_id, timestamp=now_utc(), raw_output=sample.raw_output,
                            finish_reason=sample.finish_reason, parse_error=statement.error,
                            row_id=item.output_row_id(rank), hypothesis_rank=rank, hypothesis_score=score))
    return rows


def score_rows(rows: Sequence[Row], classifier, keeper=None) -> None:
    """Fill ``classifier``, ``classifier_score`` (P(toxic)) and ``fooled`` of rows with a statement, in place, and
    ``keeper_score`` (the keeper's P(toxic)) with ALICE's ``keeper``.

    Fooled: the classifier's label (:func:`~toxiforge.records.is_toxic`, toxic iff P > 0.5) differs from the
    prompt's: a toxic prompt's statement scored benign, or a benign prompt's scored toxic. ``roberta_prediction``
    is filled too when the classifier is upstream's toxigen-roberta.
    """
    scored = [r for r in rows if r.parse_error is None and r.generation]
    if not scored:
        return
    if keeper is not None:
        for r, p in zip(scored, keeper.predict_proba([r.generation for r in scored])):
            r.keeper_score = float(p)
    if classifier is None:
        return
    from toxiforge.classifiers import default_score_column

    upstream_column = default_score_column(classifier.name) == "roberta_prediction"
    probabilities = classifier.predict_proba([r.generation for r in scored])
    for r, p in zip(scored, probabilities):
        r.classifier, r.classifier_score = classifier.name, float(p)
        r.fooled = is_toxic(r.classifier_score) != (r.prompt_label == 1)
        if upstream_column:
            r.roberta_prediction = float(p)


def _count(rows: Sequence[Row], counts: dict) -> None:
    for r in rows:
        key = f"{r.group}/{label_word(r.prompt_label)}"
        counts["cells"][key] = counts["cells"].get(key, 0) + 1
        counts["finish_reasons"][r.finish_reason] = counts["finish_reasons"].get(r.finish_reason, 0) + 1
        counts["rows"] += 1
        counts["parse_errors"] += r.parse_error is not None
        if r.fooled is not None:
            counts["scored"] += 1
            counts["fooled"] += r.fooled
        if r.keeper_score is not None:  # ALICE with a keeper: how many statements keep the prompt's label in its view
            kept = bool(is_toxic(r.keeper_score)) == (r.prompt_label == 1)
            for key, add in (("kept_scored", True), ("kept", kept), ("fooled_and_kept", kept and bool(r.fooled))):
                counts[key] = counts.get(key, 0) + add


def shard_rows(items: Sequence[WorkItem], lm: LanguageModel, decoder: Decoder, *, run_id: str, batch_size: int,
               classifier=None, advance: Callable[[int], None] = lambda n: None) -> list[Row]:
    """Decode (and score) the ``items`` of one shard in batches; the rows, written nowhere."""
    rows: list[Row] = []
    for b in range(0, len(items), batch_size):
        batch = items[b:b + batch_size]
        outputs = decoder.decode(lm, [it.prompt for it in batch], [it.seed for it in batch],
                                 [it.label for it in batch], [it.group for it in batch])
        batch_rows = _make_rows(batch, outputs, decoder, lm, run_id)
        score_rows(batch_rows, classifier, getattr(decoder, "keeper", None))  # ALICE's keeper, if it has one
        rows.extend(batch_rows)
        advance(len(batch))
    return rows


def generate_shard(items: Sequence[WorkItem], path: Path, lm: LanguageModel, decoder: Decoder, *, run_id: str,
                   batch_size: int, classifier=None, advance: Callable[[int], None] = lambda n: None) -> int:
    """:func:`shard_rows`, written to ``path`` atomically (the file appears only when every row is in it); returns
    the number of rows."""
    rows = shard_rows(items, lm, decoder, run_id=run_id, batch_size=batch_size, classifier=classifier,
                      advance=advance)
    write_rows(rows, path)
    return len(rows)


class RunInterrupted(Interrupted):
    """Ctrl-C during a generation job: the whole shards on disk (``rows_kept`` rows, of at most ``rows_planned``)
    are kept and the manifest says ``interrupted``; rerunning with ``--resume`` writes only the rest."""

    def __init__(self, out_dir: Path, rows_kept: int, rows_planned: int):
        super().__init__(out_dir, rows_kept, rows_planned)
        self.out_dir, self.rows_kept, self.rows_planned = out_dir, rows_kept, rows_planned

    def line(self) -> str:
        """The one line the command prints."""
        return (f"interrupted: {self.rows_kept} of {self.rows_planned} rows kept in {self.out_dir}; rerun the same "
                "command with --resume to finish it")


def rows_on_disk(files: Sequence[Path]) -> int:
    """The number of rows in the shard files that exist (Parquet from its metadata, without reading the rows)."""
    from toxiforge.records import read_table

    total = 0
    for f in files:
        if not f.exists():
            continue
        if f.suffix == ".parquet":
            import pyarrow.parquet as pq

            total += pq.ParquetFile(f).metadata.num_rows
        else:
            total += read_table(f).num_rows
    return total


class ShardedJob(Protocol):
    """What :func:`marks_interruption` needs of a job: its folder, manifest, shards, their files and the rows'
    schema (an
    :class:`OpenJob`, or another sharded job such as ``toxiforge attack``'s)."""

    out_dir: Path
    manifest: dict

    @property
    def shards(self) -> Sequence[Sequence[Any]]: ...

    def shard_file(self, index: int) -> Path: ...

    def schema(self) -> Any: ...


@contextmanager
def marks_interruption(job: ShardedJob) -> Iterator[None]:
    """Turn Ctrl-C inside the block into :class:`RunInterrupted`, after marking the manifest ``interrupted``; a
    :class:`ToxiforgeError` (a server that stopped answering) marks it too, and its message gains the rows kept and
    --resume when there are any."""
    try:
        yield
    except KeyboardInterrupt:
        kept = rows_on_disk([job.shard_file(i) for i in range(len(job.shards))])
        job.manifest.update(status="interrupted", interrupted_at=now_utc(), rows_kept=kept)
        write_manifest(job.out_dir, job.manifest)
        write_dataset_card(job.out_dir, job.manifest, job.schema())
        raise RunInterrupted(job.out_dir, kept, job.manifest["total_rows"]) from None
    except ToxiforgeError as exc:  # e.g. a server that stopped answering: the whole shards are kept
        kept = rows_on_disk([job.shard_file(i) for i in range(len(job.shards))])
        job.manifest.update(status="interrupted", interrupted_at=now_utc(), rows_kept=kept, error=str(exc))
        write_manifest(job.out_dir, job.manifest)
        write_dataset_card(job.out_dir, job.manifest, job.schema())
        if not kept:
            raise
        raise ToxiforgeError(f"{exc}; {kept} of {job.manifest['total_rows']} rows are kept in {job.out_dir}: once "
                             "fixed, rerun the same command with --resume to finish the run") from exc


def finish_job(job: OpenJob, written: int, seconds: float) -> JobResult:
    """Count the rows of every shard into the manifest and mark it complete."""
    counts = {"rows": 0, "parse_errors": 0, "scored": 0, "fooled": 0, "cells": {}, "finish_reasons": {}}
    files = [job.shard_file(i) for i in range(len(job.shards))]
    for f in files:
        _count(read_rows(f), counts)
    manifest = job.manifest
    manifest.pop("rows_kept", None)
    manifest.pop("error", None)
    manifest.update(status="complete", finished_at=now_utc(), counts=counts,
                    last_call={"rows_written": written, "seconds": round(seconds, 3),
                               "statements_per_second": round(written / seconds, 3) if seconds > 0 else None})
    write_manifest(job.out_dir, manifest)
    write_dataset_card(job.out_dir, manifest, job.schema())
    return JobResult(out_dir=job.out_dir, manifest=manifest, rows_written=written, seconds=seconds, shards=files)


def run_generation(plan: GenerationPlan, lm: LanguageModel, out_dir: str | Path, *,
                   decoder: Decoder | None = None, config: JobConfig = JobConfig(), resume: bool = False,
                   progress: bool = True, on_shard: Callable[[int, Path], None] | None = None,
                   classifier=None, label: str = "generating") -> JobResult:
    """Generate every statement of ``plan`` into ``out_dir``; see the module docstring for layout and resume.

    With a ``classifier`` (any :class:`~toxiforge.classifiers.base.ToxicityClassifier`) every statement (every
    hypothesis rank) is scored and marked fooled or not (:func:`score_rows`) — for ALICE, the classifier it
    attacked.

    ``on_shard(index, path)`` is called after each shard is written (tests use it to simulate a crash);
    ``label`` names the job on its progress line (harden: the round and phase). The same job in worker processes:
    :func:`toxiforge.pipeline.processes.run_generation_processes`; on a Ray cluster:
    :func:`toxiforge.pipeline.ray_runner.run_generation_ray`.
    """
    decoder = decoder or TopKDecoder()
    job = open_job(plan, JobModels.of(lm, decoder, classifier), out_dir, config, resume)
    started = time.perf_counter()
    written = 0
    with marks_interruption(job), progress_bar(progress, total=len(job.items), done=job.done_items,
                                               verb=label) as advance:
        for shard_index in job.todo:
            path = job.shard_file(shard_index)
            written += generate_shard(job.shards[shard_index], path, lm, decoder, run_id=job.manifest["run_id"],
                                      batch_size=config.batch_size, classifier=classifier, advance=advance)
            if on_shard is not None:
                on_shard(shard_index, path)
    return finish_job(job, written, time.perf_counter() - started)


class progress_bar:
    """A rich progress bar with done/total, ``unit``/s and ETA (a no-op when disabled), labelled ``verb``, on
    ``console`` (rich's own when None); ``done`` items at the start (a resumed job) do not count toward the rate.

    On a console that is no terminal (output to a log file, ``nohup``) a live bar draws nothing, so a plain line with
    the same numbers is printed instead, at most every ``every`` seconds and when the last item is done."""

    def __init__(self, enabled: bool, total: int, done: int, verb: str = "generating", unit: str = "statements",
                 console: Any = None, every: float = 60.0):
        self.enabled, self.total, self.done, self.verb = enabled, total, done, verb
        self.unit, self.console, self.every = unit, console, every

    def __enter__(self) -> Callable[[int], None]:
        if not self.enabled:
            return lambda n: None
        from rich import get_console

        console = self.console or get_console()
        if not console.is_terminal:
            return self._lines(console)
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._bar = Progress(TextColumn(f"[bold]{self.verb}"), BarColumn(), MofNCompleteColumn(),
                             TextColumn(f"{{task.fields[rate]}} {self.unit}/s"), TimeElapsedColumn(),
                             TextColumn("ETA"), TimeRemainingColumn(), console=console)
        self._bar.start()
        task = self._bar.add_task("generate", total=self.total, completed=self.done, rate="-")
        started, base = time.perf_counter(), self.done

        def advance(n: int) -> None:
            self.done += n
            rate = (self.done - base) / max(time.perf_counter() - started, 1e-9)
            self._bar.update(task, advance=n, rate=f"{rate:.2f}")

        return advance

    def _lines(self, console: Any) -> Callable[[int], None]:
        started, base = time.perf_counter(), self.done
        last = started

        def advance(n: int) -> None:
            nonlocal last
            self.done += n
            now = time.perf_counter()
            if now - last < self.every and self.done < self.total:
                return
            last = now
            console.print(progress_line(self.verb, self.done, self.total, self.done - base, now - started, self.unit),
                          highlight=False, soft_wrap=True)

        return advance

    def __exit__(self, *exc) -> None:
        if self.enabled and getattr(self, "_bar", None) is not None:
            self._bar.stop()


def progress_line(label: str, done: int, total: int, counted: int, seconds: float, unit: str) -> str:
    """``label: done/total unit, rate unit/s, ETA h:mm:ss`` (the rate over the ``counted`` items of this call, done
    in ``seconds``)."""
    rate = counted / seconds if seconds > 0 else 0.0
    eta = "-"
    if done >= total or rate > 0:
        left = 0 if done >= total else round((total - done) / rate)
        eta = f"{left // 3600}:{left % 3600 // 60:02d}:{left % 60:02d}"
    return f"{label}: {done}/{total} {unit}, {rate:.2f} {unit}/s, ETA {eta}"
