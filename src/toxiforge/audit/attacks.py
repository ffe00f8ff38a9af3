"""The audit's attack section: how often an attack family makes each classifier miss toxic rows it caught.

Per (classifier, dataset, family): the toxic rows the classifier flags (P(toxic) > the threshold) are the
candidates; a seeded sample of at most ``n`` of them (the same rows for every family) is attacked with the family
(:mod:`toxiforge.attacks`: ``obfuscate``, ``substitute``, ``alice``) against that classifier. **Success rate** = the
share of attacked rows whose attacked text the classifier no longer flags (P(toxic) <= the same threshold), with its
Wilson interval (a proportion of the attacked rows: 100 of 100 is [0.963, 1], not a point); **queries per success**
and **edits per success** are means over the successes. The row-level outcomes are cached under ``OUT/attacks/`` by
the classifier's and dataset's digests and the attack settings (the threshold among them), so ``--resume`` (or one
more ``-c``) attacks only what is missing. Classifiers are not compared pairwise here: each attacks its own flagged
rows, so the rows differ.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge.data.examples import LabeledData
from toxiforge.intervals import Proportion, Resampler

ATTACK_DIR = "attacks"


def check_families(families: Sequence[str]) -> tuple[str, ...]:
    """The canonical family names; an unknown one is an InputError with "did you mean" (before any scoring)."""
    from toxiforge.attacks.registry import FAMILIES, family_config

    for family in families:
        family_config(family, {})
    return tuple(FAMILIES.key(f) for f in families)


def attack_record(data: LabeledData, scores: np.ndarray, classifier: Any, families: Sequence[str], *, n: int,
                  seed: int, threshold: float) -> dict[str, Any]:
    """Attack a seeded sample of at most ``n`` of the toxic rows ``classifier`` flags (P(toxic) > ``threshold``),
    in row order, with each family. A row is a success when its attacked text is no longer flagged (P(toxic) <=
    ``threshold``: one threshold selects and counts). The cache's record: ``rows`` (their positions), ``candidates``
    (how many were flagged), ``threshold``, and per family the row-level ``success``, ``queries`` and ``edits`` (lists
    in ``rows`` order)."""
    from toxiforge.attacks.base import Source
    from toxiforge.attacks.job import attack_calls
    from toxiforge.attacks.registry import family_config, make_family

    flagged = np.flatnonzero((np.asarray(data.labels) == 1) & (np.asarray(scores) > threshold))
    rows = flagged if len(flagged) <= n else np.sort(np.random.default_rng(seed).choice(flagged, size=n,
                                                                                        replace=False))
    sources = [Source(row_id=str(int(i)), text=data.examples[i].text, label=1, group=data.examples[i].group,
                      seed=seed + int(i)) for i in rows]
    outcomes: dict[str, dict[str, list]] = {}
    for family in families:
        attacker = make_family(family_config(family, {}), classifier)
        attempts = [a for _, part in attack_calls(attacker, sources) for a in part]  # as `toxiforge attack` calls it
        outcomes[family] = {"success": [bool(a.error is None and a.score_after is not None and a.text
                                             and a.score_after <= threshold) for a in attempts],
                            "queries": [int(a.queries) for a in attempts],
                            "edits": [len(a.edits) for a in attempts]}
    return {"rows": rows.tolist(), "candidates": len(flagged), "threshold": threshold, "outcomes": outcomes}


def summarise(outcomes: dict[str, dict[str, list]], candidates: int, n_boot: int, seed: int) -> dict[str, Any]:
    """Per family: rows attacked (of the flagged candidates), the success rate with its interval, and queries and
    edits per success."""
    section: dict[str, Any] = {}
    for family, result in outcomes.items():
        won = np.asarray(result["success"], dtype=bool)
        queries, edits = np.asarray(result["queries"]), np.asarray(result["edits"])
        k = len(won)
        section[family] = {
            "attacked": k, "flagged_toxic": candidates,
            "success_rate": Resampler(k, n_boot, seed).estimates({"rate": Proportion(won, np.ones(k, bool))})["rate"],
            "queries_per_success": float(queries[won].mean()) if won.any() else None,
            "edits_per_success": float(edits[won].mean()) if won.any() else None,
        }
    return section


class JsonRecords:
    """JSON records in ``folder``, one file each, written atomically; an unreadable one reads as missing."""

    folder: Path

    def get(self, path: Path) -> dict[str, Any] | None:
        try:
            return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        except (OSError, ValueError):
            return None

    def put(self, path: Path, record: dict[str, Any]) -> None:
        from toxiforge._io import atomic_write_text

        self.folder.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(record))


class AttackCache(JsonRecords):
    """Row-level attack outcomes under ``OUT/attacks/``, one JSON file per (classifier, dataset, settings)."""

    def __init__(self, out: str | Path):
        self.folder = Path(out) / ATTACK_DIR

    def path(self, classifier_key: str, data_key: str, families: Sequence[str], n: int, seed: int,
             threshold: float) -> Path:
        import hashlib

        settings = hashlib.sha256(json.dumps([sorted(families), n, seed, threshold]).encode()).hexdigest()[:12]
        return self.folder / f"{classifier_key}-{data_key}-{settings}.json"
