"""Exact pruning of ALICE's classifier calls: pruned and unpruned searches return the same hypotheses and scores."""

from __future__ import annotations

import dataclasses
import json
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch

from floats import alice_depth, assert_close, assert_same_hypotheses
from toxiforge.decoding.alice import alice_search
from toxiforge.decoding.alice_config import AliceConfig
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
    """Pruned and unpruned searches of the same prompts: the LM runs the same shapes in both (the classifier's
    scores depend only on the text), so the scores are equal bit for bit."""
    assert_same_hypotheses(a, b)


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


def test_one_classifier_call_per_round_for_every_prompt(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 0, newline_bias=None)
    config = AliceConfig(num_beams=3, candidates=20, max_new_tokens=5)
    prompts, targets = PROMPTS + [PROMPTS[1]], [1, 0, 1, 0, 1]
    clf, stats = HashClassifier(), PruningStats()
    batched = alice_search(lm, prompts, targets, config, classifier=clf, pruning_stats=stats)
    # one call per round for all prompts (a round of texts all seen before makes none): the first round of a step
    # sends every prompt's 2 × beams best candidates together
    assert 0 < len(clf.calls) <= stats.rounds and len(clf.texts) == stats.scored
    assert max(len(call) for call in clf.calls) > 2 * config.num_beams
    # prompts 1 and 4 are the same prompt with the same target: their texts are scored once
    single = HashClassifier()
    alone = [alice_search(lm, [p], [t], config, classifier=single)[0] for p, t in zip(prompts, targets)]
    assert len(clf.texts) < len(single.texts) and len(single.calls) > len(clf.calls)
    # the per-prompt searches' statements; the LM's matmuls have other shapes alone than batched, so the scores are
    # equal up to float noise (bit for bit on some CPUs, 1.9e-7 apart on an AMD EPYC's kernels)
    depth = alice_depth(config.max_new_tokens)
    assert_same_hypotheses(batched, alone, depth)
    # and the tolerance is float noise only: a score off by 1e-3 (a wrong beam term) fails
    off = [list(hyps) for hyps in alone]
    off[2][0] = dataclasses.replace(off[2][0], score=off[2][0].score + 1e-3)
    with pytest.raises(AssertionError, match="apart; float noise"):
        assert_same_hypotheses(batched, off, depth)


def test_the_texts_scored_per_prompt_are_what_each_prompt_alone_makes_the_classifier_score(tiny_tokenizer):
    """PruningStats.scored_by_prompt (the alice attack family's per-statement queries): a text two prompts share
    (prompts 1 and 4 are the same) is scored once in the batch but counts for each, as in their searches alone."""
    lm = _lm(tiny_tokenizer, 0, newline_bias=1.5)
    config = AliceConfig(num_beams=3, candidates=20, max_new_tokens=5)
    prompts, targets = PROMPTS + [PROMPTS[1]], [1, 0, 1, 0, 0]
    stats = PruningStats()
    alice_search(lm, prompts, targets, config, classifier=HashClassifier(), pruning_stats=stats)
    alone = []
    for p, t in zip(prompts, targets):
        single = HashClassifier()
        alice_search(lm, [p], [t], config, classifier=single)
        alone.append(len(single.texts))
    assert [stats.scored_by_prompt[i] for i in range(len(prompts))] == alone and alone[1] == alone[4] > 0
    assert stats.scored < sum(alone)


class StubServerLM:
    """``--model openai:URL#MODEL`` without a server: an :class:`~toxiforge.models.openai_lm.OpenAILM` whose
    ``/v1/completions`` answers come from a function of the prompt (top-N log-probs over a few placeholder words)."""

    WORDS = (" alpha", " beta", " gamma", " delta", " quiet", " river", " stone", " word", ".", "\n")

    @classmethod
    def open(cls):
        from toxiforge.models.api_client import ApiClient
        from toxiforge.models.openai_lm import OpenAILM

        lm = OpenAILM(ApiClient("http://127.0.0.1:9/v1", concurrency=16), "stub", top_logprobs=6)

        async def post(path, payload, **_):
            logits = 2.0 * np.random.default_rng(zlib.crc32(payload["prompt"].encode())).normal(size=len(cls.WORDS))
            top = sorted(zip(cls.WORDS, logits - np.logaddexp.reduce(logits)), key=lambda w: -w[1])
            return {"choices": [{"text": top[0][0], "finish_reason": "length",
                                 "logprobs": {"top_logprobs": [dict(top[:payload["logprobs"]])]}}]}

        lm.client.post = post  # type: ignore[method-assign]
        return lm


def test_one_classifier_call_per_round_for_every_prompt_through_a_server():
    """The server path (issue 47 item 4) runs the same batched pruning: each round's texts of every prompt go to one
    classifier call, and the statements equal each prompt searched alone (the stub's answers and the classifier's
    scores depend only on the text)."""
    config = AliceConfig(num_beams=3, candidates=20, max_new_tokens=5)
    lm, clf, stats = StubServerLM.open(), HashClassifier(), PruningStats()
    try:
        batched = alice_search(lm, PROMPTS, [1, 0, 1, 0], config, classifier=clf, pruning_stats=stats)
        assert 0 < len(clf.calls) <= stats.rounds and len(clf.texts) == stats.scored
        assert max(len(call) for call in clf.calls) > 2 * config.num_beams  # a round held several prompts' texts
        single = HashClassifier()
        alone = [alice_search(lm, [p], [t], config, classifier=single)[0] for p, t in zip(PROMPTS, [1, 0, 1, 0])]
        assert len(single.calls) > len(clf.calls)
    finally:
        lm.close()

    def statements(results):  # the stub's token ids depend on the order strings were first seen: compare texts
        return [[(lm.decode(h.token_ids), h.finish_reason) for h in hyps] for hyps in results]

    assert statements(batched) == statements(alone) and all(hyps[0].token_ids for hyps in batched)
    # the scores add the stub's log-probs in batches of other shapes: equal up to float noise
    assert_close([h.score for hyps in batched for h in hyps], [h.score for hyps in alone for h in hyps],
                 alice_depth(config.max_new_tokens, num_layers=0))


def test_best_first_breaks_ties_by_column_and_kth_best():
    values = torch.tensor([[1.0, 3.0, 3.0, float("-inf"), 3.0, 2.0]])
    scores, columns = best_first(values, 4)
    assert columns.tolist() == [[1, 2, 4, 5]] and scores.tolist() == [[3.0, 3.0, 3.0, 2.0]]
    assert kth_best(values, 4).tolist() == [2.0]
    assert kth_best(values[:, :2], 3).tolist() == [float("-inf")]


@pytest.fixture(scope="module")
def padded_bert(tiny_tokenizer):
    return _padded_bert(tiny_tokenizer)


def _padded_bert(tiny_tokenizer):
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

    # seed 1, initializer_range 0.3: a search in which, with pruning's batches chosen per prompt by what it needed
    # (before issue 34), a hypothesis score differed by 6e-8
    lm = TransformersLM(build_tiny_llama(tiny_tokenizer, seed=1, initializer_range=0.3), tiny_tokenizer, name="tiny")
    config = AliceConfig(num_beams=3, candidates=20, max_new_tokens=8, num_return=3)
    texts = [complete_text(tiny_tokenizer.decode(ids)) for ids in torch.randint(0, 200, (40, 5)).tolist()]
    alone = torch.cat([padded_bert.class_log_probs([t]) for t in texts])
    together = padded_bert.class_log_probs(texts)
    assert not torch.equal(alone, together)  # the batch changes scores in the last bits
    stats = PruningStats()
    pruned = alice_search(lm, PROMPTS, [1, 0, 1, 0], config, classifier=padded_bert, pruning_stats=stats)
    full = alice_search(lm, PROMPTS, [1, 0, 1, 0], config, classifier=padded_bert, prune=False)
    assert stats.scored < stats.eligible  # it did prune
    # pruned rounds and the unpruned round batch different texts across prompts: the statements are the same, the
    # scores equal up to the padding noise (observed on CPU fp32: equal bit for bit here)
    assert_same_hypotheses(pruned, full, alice_depth(config.max_new_tokens))


RECORDED = Path(__file__).with_name("alice_main_a513ac6.json")


def recorded_searches(tokenizer, bert) -> dict[str, list[list[list]]]:
    """The searches recorded from main at a513ac6 (per-prompt classifier batches), 4 prompts of both targets each:
    per case and prompt, each hypothesis' ``[token_ids, finish_reason, score]``. To record them from a checkout:
    ``PYTHONPATH=<checkout>/src:tests:tests/decoding python -c "import test_alice_pruning as t; t.record()"``."""
    from conftest import build_tiny_llama
    from toxiforge.models.transformers_lm import TransformersLM

    def lm(seed, **options):
        return TransformersLM(build_tiny_llama(tokenizer, seed=seed, **options), tokenizer, name="tiny")

    wide = AliceConfig(num_beams=4, candidates=25, max_new_tokens=7, num_return=4)
    cases = {
        "hash, seed 0": (lm(0), HashClassifier(), wide),
        "hash coarse, seed 1, newline bias": (lm(1, newline_bias=2.0), HashClassifier(coarse=True), wide),
        "padded bert, seed 1": (lm(1, initializer_range=0.3), bert,
                                AliceConfig(num_beams=3, candidates=20, max_new_tokens=8, num_return=3)),
        "padded bert, seed 0, 12 tokens": (lm(0, initializer_range=0.3), bert,
                                           AliceConfig(num_beams=4, candidates=30, max_new_tokens=12, num_return=4)),
    }
    return {name: [[[list(h.token_ids), h.finish_reason, h.score] for h in hyps]
                   for hyps in alice_search(model, PROMPTS, [1, 0, 1, 0], config, classifier=clf)]
            for name, (model, clf, config) in cases.items()}


def record() -> None:
    from conftest import build_tokenizer

    tokenizer = build_tokenizer()
    RECORDED.write_text(json.dumps(recorded_searches(tokenizer, _padded_bert(tokenizer)), indent=None) + "\n")


def test_statements_equal_those_recorded_from_main(tiny_tokenizer, padded_bert):
    recorded = json.loads(RECORDED.read_text())
    now = json.loads(json.dumps(recorded_searches(tiny_tokenizer, padded_bert)))
    assert list(now) == list(recorded)
    for case in recorded:
        # the same hypotheses in the same order; scores equal up to float noise (observed here: the hash cases bit
        # for bit; the padded BERT's 28 hypotheses all the same, 3 scores 6e-8 apart: its batches now mix prompts;
        # another CPU's kernels sum in another order)
        assert [[h[:2] for h in hyps] for hyps in now[case]] == [[h[:2] for h in hyps] for hyps in recorded[case]], \
            case
        assert_close([h[2] for hyps in now[case] for h in hyps], [h[2] for hyps in recorded[case] for h in hyps],
                     alice_depth(12), case)
