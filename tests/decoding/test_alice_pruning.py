"""Exact pruning of ALICE's classifier calls: pruned and unpruned searches return the same hypotheses and scores."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
import torch

from toxiforge.decoding.alice import AliceConfig, alice_search
from toxiforge.decoding.beam import best_first
from toxiforge.decoding.pruning import PruningStats, kth_best
from toxiforge.decoding.scorers import complete_text

PROMPTS = [
    "- placeholder statement number one\n- another neutral sentence\n-",
    "- a plain line\n-",
    "- people in group gamma enjoy music, food and sports\n- numbers like 1 2 3\n-",
    "- the quick brown fox\n-",
]


class HashClassifier:
    """A fake classifier whose class log-probs are a fixed pseudo-random function of the text (steep or flat with
    ``scale``), recording what it was asked. ``coarse`` rounds P(toxic) to tenths, so many texts tie."""

    name = "hash"
    num_classes, toxic_index, benign_index = 2, 1, 0

    def __init__(self, scale: float = 3.0, coarse: bool = False, positive: bool = False):
        self.scale, self.coarse, self.positive = scale, coarse, positive
        self.texts: list[str] = []
        self.calls: list[list[str]] = []

    def p_toxic(self, text: str) -> float:
        rng = np.random.default_rng(zlib.crc32(text.encode()))
        p = 1.0 / (1.0 + np.exp(-self.scale * rng.normal()))
        return round(p, 1) * 0.98 + 0.01 if self.coarse else p

    def class_log_probs(self, texts):
        self.texts.extend(texts)
        self.calls.append(list(texts))
        p = torch.tensor([self.p_toxic(t) for t in texts], dtype=torch.float64)
        out = torch.stack([torch.log1p(-p), torch.log(p)], dim=1).float()
        return out + 0.05 if self.positive else out  # positive: breaks the bound (a buggy classifier)


def _lm(tokenizer, seed, newline_bias):
    from conftest import build_tiny_llama
    from toxiforge.models.transformers_lm import TransformersLM

    return TransformersLM(build_tiny_llama(tokenizer, seed=seed, newline_bias=newline_bias), tokenizer, name="tiny")


def _same(a, b):
    assert [[(h.token_ids, h.finish_reason) for h in hyps] for hyps in a] == \
        [[(h.token_ids, h.finish_reason) for h in hyps] for hyps in b]
    assert [[h.score for h in hyps] for hyps in a] == [[h.score for h in hyps] for hyps in b]  # bit for bit


SETTINGS = [
    dict(),
    dict(lambda_lm=0.0, lambda_clf=1.0),                     # bound = running score only: whole beams pruned
    dict(lambda_lm=0.9, lambda_clf=0.1),
    dict(lambda_lm=0.2, lambda_clf=2.0, temperature=1.5),
    dict(num_return=3, stop_at_newline=False),             # EOS only: keep = 2 × beams, not every candidate
    dict(classifier_top_n=7),
    dict(classifier_top_extensions=5, require_text=False),
    dict(no_repeat_ngram_size=0, ban_prompt_tokens=False, max_new_tokens=4),
]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("settings", SETTINGS, ids=[",".join(s) or "defaults" for s in SETTINGS])
def test_pruned_equals_unpruned(tiny_tokenizer, seed, settings):
    lm = _lm(tiny_tokenizer, seed, newline_bias=[None, 2.0][seed])
    config = AliceConfig(**{"num_beams": 4, "candidates": 25, "max_new_tokens": 7, "num_return": 4, **settings})
    targets = [1, 0, 1, 0]
    for clf in (HashClassifier(scale=[3.0, 0.3][seed]), HashClassifier(coarse=True)):
        stats = PruningStats()
        pruned = alice_search(lm, PROMPTS, targets, config, classifier=clf, pruning_stats=stats)
        full = alice_search(lm, PROMPTS, targets, config, classifier=clf, prune=False)
        _same(pruned, full)
        assert any(h.token_ids for hyps in full for h in hyps)
        assert 0 < stats.scored <= stats.eligible


def test_pruning_scores_far_fewer_texts_with_a_peaked_lm(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 0, newline_bias=None)
    with torch.no_grad():
        lm.model.lm_head.weight.mul_(40.0)  # a confident LM: the LM bound separates the candidates
    config = AliceConfig(num_beams=4, candidates=60, max_new_tokens=8)
    pruned_clf, full_clf, stats = HashClassifier(scale=0.5), HashClassifier(scale=0.5), PruningStats()
    _same(alice_search(lm, PROMPTS, [1, 0, 1, 0], config, classifier=pruned_clf, pruning_stats=stats),
          alice_search(lm, PROMPTS, [1, 0, 1, 0], config, classifier=full_clf, prune=False))
    assert len(pruned_clf.texts) < len(full_clf.texts) / 3
    assert stats.scored == len(pruned_clf.texts) and stats.eligible >= len(full_clf.texts) - 4 * 60


def test_a_positive_classifier_log_prob_turns_pruning_off(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 1, newline_bias=1.5)
    config = AliceConfig(num_beams=3, candidates=20, max_new_tokens=6)
    _same(alice_search(lm, PROMPTS, [1, 0, 1, 0], config, classifier=HashClassifier(positive=True)),
          alice_search(lm, PROMPTS, [1, 0, 1, 0], config, classifier=HashClassifier(positive=True), prune=False))


def test_each_prompt_scores_its_own_batches(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 0, newline_bias=None)
    clf = HashClassifier()
    # the same prompt twice, same target: each copy sends the same batches as a search of that prompt alone (a
    # batch never depends on another prompt's, so pruning cannot change it), one classifier call per batch
    alice_search(lm, [PROMPTS[1]] * 2, [1, 1], AliceConfig(num_beams=3, candidates=20, max_new_tokens=5),
                 classifier=clf)
    single = HashClassifier()
    alice_search(lm, [PROMPTS[1]], [1], AliceConfig(num_beams=3, candidates=20, max_new_tokens=5), classifier=single)
    assert sorted(clf.texts) == sorted(single.texts * 2)
    assert len(clf.calls) == 2 * len(single.calls) and clf.calls[::2] == clf.calls[1::2] == single.calls


def test_best_first_breaks_ties_by_column_and_kth_best():
    values = torch.tensor([[1.0, 3.0, 3.0, float("-inf"), 3.0, 2.0]])
    scores, columns = best_first(values, 4)
    assert columns.tolist() == [[1, 2, 4, 5]] and scores.tolist() == [[3.0, 3.0, 3.0, 2.0]]
    assert kth_best(values, 4).tolist() == [2.0]
    assert kth_best(values[:, :2], 3).tolist() == [float("-inf")]


@pytest.fixture(scope="module")
def padded_bert(tiny_tokenizer):
    """A real padded classifier: a tiny BERT (sharpened head) over a word tokenizer of the LM's token strings, so
    ALICE's texts become word sequences of many lengths. Its scores of a text move by ~1e-7 with the batch."""
    from transformers import BertForSequenceClassification

    from conftest import build_word_tokenizer, tiny_bert_config
    from toxiforge.classifiers.hf import HFClassifier

    words = build_word_tokenizer([tiny_tokenizer.decode([i]) for i in range(len(tiny_tokenizer))])
    torch.manual_seed(0)
    model = BertForSequenceClassification(tiny_bert_config(words, num_labels=2)).eval()
    with torch.no_grad():
        model.classifier.weight.mul_(100.0)
    return HFClassifier(model, words, name="tiny-bert", batch_size=4, device="cpu")


def test_pruned_equals_unpruned_with_a_padded_bert_classifier(tiny_tokenizer, padded_bert):
    from conftest import build_tiny_llama
    from toxiforge.models.transformers_lm import TransformersLM

    # seed 1, initializer_range 0.3: a search in which, before the batches were fixed, a hypothesis score differed
    lm = TransformersLM(build_tiny_llama(tiny_tokenizer, seed=1, initializer_range=0.3), tiny_tokenizer, name="tiny")
    config = AliceConfig(num_beams=3, candidates=20, max_new_tokens=8)
    texts = [complete_text(tiny_tokenizer.decode(ids)) for ids in torch.randint(0, 200, (40, 5)).tolist()]
    alone = torch.cat([padded_bert.class_log_probs([t]) for t in texts])
    together = padded_bert.class_log_probs(texts)
    assert not torch.equal(alone, together)  # the batch changes scores: equal searches must share batches
    stats = PruningStats()
    pruned = alice_search(lm, PROMPTS, [1, 0, 1, 0], config, classifier=padded_bert, pruning_stats=stats)
    _same(pruned, alice_search(lm, PROMPTS, [1, 0, 1, 0], config, classifier=padded_bert, prune=False))
    assert stats.scored < stats.eligible  # it did prune
