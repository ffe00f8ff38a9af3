"""What a stopped ``experiment debias`` keeps, so that ``--resume`` goes on where it stopped.

The whole comparison on a CPU takes hours (docs/debias-davidson.md), longer than a machine may stay up. Kept in
the output folder as the run goes:

* ``experiment.json``: the run's fingerprint (settings, the training and evaluation rows' digests, the split,
  how AAE-relabeled is made). ``--resume`` with anything else is refused, naming what differs.
* ``runs.jsonl``: each model's record as it is measured; a resumed run measures only the (run, method) pairs
  missing there, and the tables are computed from every record.
* ``subsets-runN.json``: the subsets drawn in run N (indices into the training rows, and the top-ups), written
  when drawn, so a resumed run trains on the same rows without retraining the Vanilla model whose training
  dynamics drew the DataMaps regions.
* ``models/runN/METHOD/``: a model trained but not measured yet is measured, not trained again (its training
  seconds are in ``seconds.json`` beside it).
* ``relabeled.parquet`` (with ``relabeled.manifest.json``) once made, and ``translations.partial.jsonl`` while the
  translations are made (:func:`toxiforge.bias.relabel.experiment_relabeler`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge.data.examples import Example
from toxiforge.errors import InputError

STATE_FILE, RUNS_FILE, SECONDS_FILE = "experiment.json", "runs.jsonl", "seconds.json"


def rows_digest(rows: Sequence[Example]) -> str:
    """SHA-256 of the rows' texts and labels, in order."""
    digest = hashlib.sha256()
    for e in rows:
        digest.update(e.text.encode("utf-8") + b"\0" + str(e.label).encode() + b"\n")
    return digest.hexdigest()


def _differences(old: dict[str, Any], new: dict[str, Any], prefix: str = "") -> list[str]:
    keys = sorted(set(old) | set(new))
    out: list[str] = []
    for k in keys:
        a, b = old.get(k), new.get(k)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{k}.")
        elif a != b:
            out.append(f"{prefix}{k} ({a!r} then, {b!r} now)")
    return out


@dataclass
class ExperimentState:
    """The records and saved steps of one output folder (module docstring)."""

    out: Path
    done: dict[tuple[int, str], dict[str, Any]] = field(default_factory=dict)  # in measuring order

    @classmethod
    def open(cls, out: Path, fingerprint: dict[str, Any], resume: bool) -> ExperimentState:
        """Start (a new run: ``runs.jsonl`` emptied) or resume (the fingerprint must equal the saved one)."""
        from toxiforge._io import atomic_write_text

        state = cls(Path(out))
        path = state.out / STATE_FILE
        fingerprint = json.loads(json.dumps(fingerprint, default=str))
        if resume:
            if not path.exists():
                raise InputError(f"nothing to resume in {state.out}: it has no {STATE_FILE}",
                                 hint="start the run without --resume (it was made before resuming existed, or "
                                      "is another command's folder)")
            old = json.loads(path.read_text(encoding="utf-8"))
            differ = _differences(old, fingerprint)
            if differ:
                raise InputError(f"--resume: this command differs from the run in {state.out}: "
                                 + "; ".join(differ[:5]) + (f"; and {len(differ) - 5} more" if len(differ) > 5 else ""),
                                 hint="rerun with the options the run was started with, or start a new -o")
            runs = state.out / RUNS_FILE
            for line in runs.read_text(encoding="utf-8").splitlines() if runs.exists() else []:
                if line.strip():
                    record = json.loads(line)
                    state.done[(int(record["run"]), str(record["method"]))] = record
        else:
            (state.out / RUNS_FILE).unlink(missing_ok=True)
        state.out.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(fingerprint, indent=2) + "\n")
        return state

    def measured(self, run: int, method: str) -> bool:
        return (run, method) in self.done

    def record(self, record: dict[str, Any]) -> None:
        """Keep a measured model's record (appended to ``runs.jsonl`` at once: a cut run keeps it)."""
        with (self.out / RUNS_FILE).open("a", encoding="utf-8") as log:
            log.write(json.dumps(record, default=str) + "\n")
        self.done[(int(record["run"]), str(record["method"]))] = json.loads(json.dumps(record, default=str))

    def records(self) -> list[dict[str, Any]]:
        """Every record, runs in order and, within a run, in measuring order."""
        return list(self.done.values())

    def save_subsets(self, run: int, subsets: dict[str, np.ndarray], top_ups: dict[str, int]) -> None:
        from toxiforge._io import atomic_write_text

        atomic_write_text(self.out / f"subsets-run{run}.json", json.dumps(
            {"subsets": {k: np.asarray(v).tolist() for k, v in subsets.items()}, "top_ups": top_ups}))

    def load_subsets(self, run: int) -> tuple[dict[str, np.ndarray], dict[str, int]] | None:
        path = self.out / f"subsets-run{run}.json"
        if not path.exists():
            return None
        saved = json.loads(path.read_text(encoding="utf-8"))
        return ({k: np.asarray(v, dtype=np.int64) for k, v in saved["subsets"].items()},
                {k: int(v) for k, v in saved["top_ups"].items()})

    @staticmethod
    def trained_seconds(folder: Path) -> float | None:
        """A model trained here before (its training log and seconds are written): its training seconds."""
        from toxiforge.training.trainer import LOG_FILE

        seconds = folder / SECONDS_FILE
        if (folder / LOG_FILE).exists() and seconds.exists():
            return float(json.loads(seconds.read_text(encoding="utf-8"))["train_seconds"])
        return None

    @staticmethod
    def save_seconds(folder: Path, seconds: float) -> None:
        from toxiforge._io import atomic_write_text

        atomic_write_text(folder / SECONDS_FILE, json.dumps({"train_seconds": seconds}) + "\n")
