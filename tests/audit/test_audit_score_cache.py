"""The audit's score cache keyed by the classifier's content fingerprint (issue 56, item 6): a model card written into
the folder keeps the cached scores, weights replaced by a file of the same size and modification time do not, the
scores of the old weights are removed, and an interrupted audit counts its own pairs only."""

from __future__ import annotations

import json
import os
from collections import Counter

import pytest
from typer.testing import CliRunner

from conftest import write_csv
from toxiforge.classifiers.wrap import CallableClassifier
from toxiforge.cli import app, interrupted_line

runner = CliRunner()
WEIGHTS = 3 << 20   # over the 1 MiB up to which the old digest read files by content


@pytest.fixture
def sets(tmp_path):
    hatecheck = write_csv(tmp_path / "test_suite_cases.csv",
                          ["functionality", "case_id", "test_case", "label_gold", "target_ident"],
                          [(test, i, f"placeholder case {i} for {test}", gold, "women")
                           for test, gold in (("ident_neutral_nh", "non-hateful"), ("derog_neg_emote_h", "hateful"))
                           for i in range(10)])
    table = write_csv(tmp_path / "plain.csv", ["text", "label"],
                      [(f"neutral placeholder sentence {i}", i % 2) for i in range(30)])
    return ["--on", f"hatecheck:{hatecheck}", "--on", f"table:{table}"]


@pytest.fixture
def scored(monkeypatch):
    """Loads any -c as a fake that counts the texts it scores; ``scored["interrupt"]`` makes it press Ctrl-C on
    the plain table."""
    calls: Counter = Counter()

    def load(spec, **kwargs):
        def fn(texts):
            if calls["interrupt"] and any("sentence" in t for t in texts):
                raise KeyboardInterrupt
            calls[spec] += len(texts)
            return [0.3 + 0.4 * ("_h" in t) for t in texts]

        return CallableClassifier(fn, name=spec)

    monkeypatch.setattr("toxiforge.classifiers.load_classifier", load)
    return calls


def rewrite_keeping_size_and_mtime(path, last_byte: bytes) -> None:
    st = path.stat()
    path.write_bytes(b"\1" * (st.st_size - 1) + last_byte)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_the_cache_follows_what_decides_the_scores_and_drops_stale_pairs(tmp_path, sets, scored):
    folder = tmp_path / "clf"
    folder.mkdir()
    (folder / "config.json").write_text('{"id2label": {"0": "benign", "1": "toxic"}}')
    (folder / "model.safetensors").write_bytes(b"\1" * WEIGHTS)
    out, spec = tmp_path / "audit", str(folder)
    scores = out / "scores"

    def audit(*extra):
        return runner.invoke(app, ["audit", "-c", f"C={spec}", *sets, "-o", str(out), "--bootstrap", "20", *extra])

    assert audit().exit_code == 0 and scored[spec] == 20 + 30
    first = sorted(p.name for p in scores.iterdir())
    assert len(first) == 4   # two pairs, each .npy and .json

    (folder / "README.md").write_text("# clf\n\nA model card, as `audit --model-card` writes it.\n")
    scored.clear()
    assert audit("--resume").exit_code == 0 and scored == {}   # the card decides no score: nothing scored again
    assert sorted(p.name for p in scores.iterdir()) == first

    rewrite_keeping_size_and_mtime(folder / "model.safetensors", b"\2")
    assert audit("--resume").exit_code == 0 and scored[spec] == 50   # new weights: scored again ...
    second = sorted(p.name for p in scores.iterdir())
    assert len(second) == 4 and not set(second) & set(first)        # ... and the old weights' scores removed
    assert {json.loads((scores / n).read_text())["spec"] for n in second if n.endswith(".json")} == {spec}

    rewrite_keeping_size_and_mtime(folder / "model.safetensors", b"\3")
    scored["interrupt"] = 1
    stopped = audit("--resume")
    assert stopped.exit_code == 130
    assert interrupted_line(stopped.exception).startswith("interrupted: 1 finished (classifier, dataset) pairs kept")
    kept = [p for p in scores.glob("*.npy") if not p.name.endswith(".partial.npy")]
    assert len(kept) == 1 and kept[0].name not in second   # HateCheck with the newest weights, and nothing older


def test_remove_stale_spares_other_classifiers_and_this_audits_digests(tmp_path):
    """Only the pairs recorded for the same -c (any spelling of its path) under a digest this audit does not use go;
    finished() counts this audit's pairs only."""
    import numpy as np

    from toxiforge.audit.scores import ScoreCache

    (tmp_path / "m").mkdir()
    cache = ScoreCache(tmp_path / "audit")
    for key, spec in (("old", str(tmp_path / "m")), ("new", f"{tmp_path}/./m"), ("other", "profanity-check")):
        cache.score(key, "d", ["placeholder"], lambda texts: np.zeros(len(texts)), {"spec": spec})
    assert cache.finished() == 3
    removed = cache.remove_stale(str(tmp_path / "m"), {"new"})
    assert [p.name for p in removed] == ["old-d.json", "old-d.npy"]
    assert sorted(p.name for p in cache.folder.iterdir()) == ["new-d.json", "new-d.npy", "other-d.json",
                                                              "other-d.npy"]
    assert ScoreCache(tmp_path / "audit", [("new", "d"), ("new", "e")]).finished() == 1
