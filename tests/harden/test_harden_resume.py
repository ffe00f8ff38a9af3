"""A harden run at real size runs for hours (issue 55 item 1): a kill -9 in the middle of a round loses at most the
shard being generated, the resumed run writes the rows of an uninterrupted one, and every phase of a round prints a
progress line with rows done, rate and ETA. Tiny models built in-process (test_harden.py's)."""

from __future__ import annotations

import json

import pytest

from toxiforge.harden.loop import Harden
from toxiforge.pipeline import Generator, JobConfig
from toxiforge.records import read_rows

from .test_harden import config_for

KILLED_IN = "round-1/alice/attack"  # round 1 attacking the alice arm's C_1, after its top-k pool and both trainings


class Killed(BaseException):
    """kill -9: no handler of toxiforge's runs (neither KeyboardInterrupt nor an Exception), so the manifest stays
    "running" and nothing is marked, as after a real kill."""


def run(setup, out, lm, *, resume=False, progress=False):  # noqa: F811
    # shard_size 4 as test_harden.harden: an attack of 12 statements is 3 shards, the top-k pool of 24 is 6
    generator = Generator(model="tiny", lm=lm, device="cpu", job=JobConfig(batch_size=4, shard_size=4),
                          progress=progress)
    job = Harden(config_for(setup), out, generator, keep_going=True, progress=progress)
    job.run(resume)
    return job


def test_a_kill_mid_round_loses_at_most_the_shard_in_progress(setup, varied_lm, finished, tmp_path,  # noqa: F811
                                                               monkeypatch, capsys):
    import toxiforge.pipeline.job as job_module

    out = tmp_path / "h"
    real, decoded, kill = job_module.generate_shard, [], True

    def generate_shard(items, path, *args, **kwargs):
        decoded.append(str(path.relative_to(out)))
        if kill and decoded[-1] == f"{KILLED_IN}/data/shard-00001.parquet":
            raise Killed  # while decoding the attack's second shard: its first is on disk
        return real(items, path, *args, **kwargs)

    monkeypatch.setattr(job_module, "generate_shard", generate_shard)
    with pytest.raises(Killed):
        run(setup, out, varied_lm)
    killed = out / KILLED_IN
    assert [p.name for p in (killed / "data").glob("shard-*")] == ["shard-00000.parquet"]
    assert json.loads((killed / "manifest.json").read_text())["status"] == "running"
    on_disk = {p: p.stat().st_mtime_ns for p in out.rglob("shard-*.parquet")}

    kill, decoded[:] = False, []
    capsys.readouterr()
    resumed = run(setup, out, varied_lm, resume=True, progress=True)
    # what the kill lost: the shard in progress, decoded again; every shard on disk was kept as it was
    assert decoded[0] == f"{KILLED_IN}/data/shard-00001.parquet"
    assert not set(decoded) & {str(p.relative_to(out)) for p in on_disk}
    assert all(p.stat().st_mtime_ns == t for p, t in on_disk.items())
    assert "train round-1/alice/model" not in resumed.steps and "generate round-1/control/topk" not in resumed.steps

    _, reference = finished  # the same settings, never interrupted: the same rows, the same numbers
    for run_dir in (KILLED_IN, "round-1/control/attack"):
        rows = {r.row_id: r.generation for r in read_rows(out / run_dir)}
        assert rows == {r.row_id: r.generation for r in read_rows(reference / run_dir)}
    metrics = json.loads((out / "round-1" / "metrics.json").read_text())
    assert metrics["alice"]["flip_rate"] == json.loads((reference / "round-1" / "metrics.json").read_text())[
        "alice"]["flip_rate"]

    # a progress line per phase, with rows done of the total, the rate and the ETA (a plain line: no terminal)
    printed = capsys.readouterr()
    text = printed.out + printed.err
    assert "round-1-alice: ALICE attack: 12/12 statements, " in text and "statements/s, ETA 0:00:00" in text
    assert "round-1-control: ALICE attack: 12/12 statements" in text
    assert "scoring held with round-1-alice: 13/13 rows" in text
