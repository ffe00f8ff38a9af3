"""The ``alice`` family decodes the sources of a call in one batched search (issue 47) and still gives each source
the attempt, and the per-statement query count, of attacking it alone."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from attack_fakes import KeywordClassifier

from toxiforge.attacks.base import Source
from toxiforge.attacks.registry import Resources, family_config, make_family

SETTINGS = {"num_beams": 3, "candidates": 12, "max_new_tokens": 5}
SOURCES = [
    Source("t/000000", "placeholder statement number one", 1, "asian", 11),
    Source("t/000001", "a plain line", 1, None, 12),
    Source("t/000002", "another neutral sentence", 0, None, 13),
    Source("t/000003", "placeholder statement number one", 1, "asian", 14),  # the first again: texts shared
    Source("t/000004", "the quick brown fox", 1, None, 15,
           prompt="- people in group gamma enjoy music\n- the quick brown fox\n-"),  # a generation run's row
    Source("t/000005", "numbers like 1 2 3", 0, None, 16),
]


class HashScores(KeywordClassifier):
    """KeywordClassifier's scores (``placeholder`` pushes P(toxic) up) plus a fixed pseudo-random function of the
    text, so ALICE's candidates score differently and pruning has work to do; ``salt`` makes another classifier."""

    def __init__(self, salt: str = "", name: str = "hash-keywords"):
        super().__init__({"placeholder": 0.4, "fox": 0.3}, name=name)
        self.salt = salt

    def score(self, text: str) -> float:
        noise = np.random.default_rng(zlib.crc32((self.salt + text).encode())).normal()
        return float(min(0.99, max(0.01, super().score(text) + 0.15 * noise)))


@pytest.fixture(scope="module")
def lm(tiny_tokenizer):
    from conftest import build_tiny_llama
    from toxiforge.models.transformers_lm import TransformersLM

    model = build_tiny_llama(tiny_tokenizer, seed=1, newline_bias=1.5, initializer_range=0.3)
    return TransformersLM(model, tiny_tokenizer, name="tiny-follows")


def _family(lm, keeper: bool, **settings):
    """The family against a fresh :class:`HashScores`; ``keeper``: with a keeper (``--keep-label-with``)."""
    from toxiforge.decoding.alice_decoder import AliceDecoder

    clf = HashScores()
    config = family_config("alice", {**SETTINGS, **settings})
    family = make_family(config, clf, Resources(lm=lm))
    if keeper:  # the decoder an attack builds, with the keeper given instead of loaded
        config = family_config("alice", {**SETTINGS, **settings, "keep_label_with": "keeper-dir"})
        family.decoder = AliceDecoder(clf, config, keeper=HashScores(salt="k", name="keeper"))
    searched: list[int] = []
    decode = family.decoder.decode

    def spy(lm, prompts, *args, **kwargs):
        searched.append(len(prompts))
        return decode(lm, prompts, *args, **kwargs)

    family.decoder.decode = spy
    return family, clf, searched


@pytest.mark.parametrize("keeper", [False, True], ids=["plain", "keeper"])
def test_sources_are_searched_together_with_the_attempts_and_queries_of_each_alone(lm, keeper):
    family, clf, searched = _family(lm, keeper)
    alone = []
    for source in SOURCES:  # the one-at-a-time path: each source its own search
        texts, calls = clf.texts_scored, clf.calls
        [attempt] = family.attack([source])
        assert attempt.queries == clf.texts_scored - texts  # every text the classifier scored for it (not K's)
        alone.append((attempt, clf.calls - calls))
    attacked = [i for i, (a, _) in enumerate(alone) if a.prompt is not None]
    assert len(attacked) >= 4 and len(attacked) < len(SOURCES)  # a skipped source (already the other label) too
    assert all(alone[i][0].queries > 2 for i in attacked) and alone[0][0] == alone[3][0]
    assert not keeper or all(alone[i][0].keeper_score is not None for i in attacked if alone[i][0].text)

    family, clf, searched = _family(lm, keeper)
    batched = family.attack(SOURCES)
    assert batched == [a for a, _ in alone]  # texts, scores, queries, prompts, finish reasons, keeper scores
    assert searched == [len(attacked)]  # one search for every source the classifier got right
    assert clf.calls < sum(calls for _, calls in alone)  # each pruning round scores every prompt's texts at once
    assert clf.texts_scored < sum(a.queries for a, _ in alone)  # a text two prompts share is scored once


def test_a_run_decodes_each_batch_of_the_job_in_one_search(lm, tmp_path):
    from toxiforge.attacks.job import run_attack
    from toxiforge.pipeline.manifest import JobConfig
    from toxiforge.records import read_table

    family, clf, searched = _family(lm, False)
    alone = [family.attack([source])[0] for source in SOURCES]
    searched.clear()
    run_attack(SOURCES, family, tmp_path / "run", classifier_name=clf.name, fingerprint={"test": 1},
               config=JobConfig(batch_size=4, shard_size=8))
    rows = read_table(tmp_path / "run").to_pylist()
    assert [r["queries"] for r in rows] == [a.queries for a in alone]
    assert [r["generation"] for r in rows] == [a.text for a in alone]
    skipped = [i for i, a in enumerate(alone) if a.prompt is None]
    assert searched == [4 - sum(i < 4 for i in skipped), 2 - sum(i >= 4 for i in skipped)]  # batch_size per call
