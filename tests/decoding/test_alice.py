"""ALICE: scorers on hand-built tensors; the beam loop on a tiny random Llama with a fake classifier."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from toxiforge.decoding.alice import AliceConfig, AliceDecoder, alice_search, check_lm, target_classes
from toxiforge.decoding.scorers import (
    ClassifierScorer,
    NoRepeatNGram,
    PromptTokenBan,
    exempt_from_prompt_ban,
    lm_scores,
)
from toxiforge.errors import InputError

PROMPTS = [
    "- placeholder statement number one\n- another neutral sentence\n-",
    "- a plain line\n-",
    "- people in group gamma enjoy music, food and sports\n- numbers like 1 2 3\n-",
]


class LetterClassifier:
    """Fake classifier with a known preference: P(toxic) grows with the number of 'e's in the text."""

    name = "letter-e"
    num_classes, toxic_index, benign_index = 2, 1, 0

    def __init__(self):
        self.calls: list[list[str]] = []

    def predict_proba(self, texts):
        return np.array([min(0.99, 0.01 + 0.2 * t.count("e")) for t in texts])

    def class_log_probs(self, texts):
        self.calls.append(list(texts))
        p = torch.tensor(self.predict_proba(texts), dtype=torch.float32)
        return torch.stack([torch.log1p(-p), torch.log(p)], dim=1)

    def describe(self):
        return {"name": self.name, "backend": "test"}


# --- scorers -------------------------------------------------------------------------------------------------

def test_lm_scores_apply_temperature_without_mutating():
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    lp = torch.log_softmax(logits, -1)
    before = lp.clone()
    out = lm_scores(lp, 0.9)
    assert torch.allclose(out, torch.log_softmax(logits / 0.9, -1), atol=1e-6)
    assert torch.equal(lp, before)


def test_prompt_ban_exempts_punctuation_stopwords_and_whitespace():
    texts = ["the", " The", ",", " ", "alpha", "\n", " beta", "..."]
    assert exempt_from_prompt_ban(texts).tolist() == [True, True, True, True, False, True, False, True]
    ban = PromptTokenBan.from_prompts([[0, 2, 4], [6]], exempt_from_prompt_ban(texts))
    scores = torch.zeros(2, len(texts))
    out = ban(torch.zeros(2, 1, dtype=torch.long), scores)
    assert torch.isinf(out[0, 4]) and torch.isinf(out[1, 6])
    assert torch.isfinite(out[0, [0, 2, 6]]).all() and torch.isfinite(out[1, [0, 4]]).all()
    assert torch.equal(scores, torch.zeros(2, len(texts)))
    assert ban.select(torch.tensor([1, 1, 0])).banned[:, 6].tolist() == [True, True, False]


@pytest.mark.parametrize("ids, n, banned", [
    ([1, 2, 3, 1], 2, {2}),          # "1 2" occurred and the row ends in 1
    ([5, 5], 2, {5}),
    ([1, 2, 3, 1, 2], 3, {3}),
    ([1, 2, 3, 4], 2, set()),
    ([-1, -1, 7, 7], 2, {7}),        # negative ids are padding and never banned
])
def test_no_repeat_ngram(ids, n, banned):
    scores = torch.zeros(1, 10)
    out = NoRepeatNGram(n)(torch.tensor([ids]), scores)
    assert {i for i in range(10) if torch.isinf(out[0, i])} == banned
    assert torch.equal(scores, torch.zeros(1, 10))


def test_classifier_scorer_sees_continuation_plus_candidate():
    seen = []

    def class_log_probs(texts):
        seen.extend(texts)
        return torch.log(torch.tensor([[0.25, 0.75]] * len(texts)))

    scorer = ClassifierScorer(class_log_probs, lambda seqs: [" ".join(map(str, s)) for s in seqs])
    out = scorer(torch.tensor([[1, 2], [3, 4]]), torch.tensor([[7, 8], [9, 10]]), torch.tensor([1, 0]))
    assert seen == ["1 2 7", "1 2 8", "3 4 9", "3 4 10"]
    assert torch.allclose(out, torch.log(torch.tensor([[0.75, 0.75], [0.25, 0.25]])))


def test_target_classes_follow_prompt_label_or_mode():
    assert target_classes([1, 0], "auto", toxic_index=1, benign_index=0) == [0, 1]
    assert target_classes([1, 0], "false-positives", 1, 0) == [1, 1]
    assert target_classes([1, 0], "false-negatives", 1, 0) == [0, 0]


# --- the beam loop -------------------------------------------------------------------------------------------

def _lm(tokenizer, newline_bias):
    from conftest import build_tiny_llama
    from toxiforge.models.transformers_lm import TransformersLM

    return TransformersLM(build_tiny_llama(tokenizer, newline_bias=newline_bias), tokenizer, name="tiny")


@pytest.mark.parametrize("newline_bias, ngram", [(None, 0), (0.3, 0), (0.15, 2), (None, 3)])
def test_without_classifier_equals_transformers_beam_search(tiny_tokenizer, newline_bias, ngram):
    lm = _lm(tiny_tokenizer, newline_bias)
    config = AliceConfig(lambda_clf=0.0, num_beams=4, max_new_tokens=12, temperature=1.0,
                         no_repeat_ngram_size=ngram, ban_prompt_tokens=False)
    ours = alice_search(lm, PROMPTS, [0, 0, 0], config)
    stop_ids = sorted(set(lm.newline_mask().nonzero().view(-1).tolist()) | set(lm.eos_token_ids))
    for prompt, hyps in zip(PROMPTS, ours):
        inputs = tiny_tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        out = lm.model.generate(**inputs, num_beams=4, do_sample=False, max_new_tokens=12, eos_token_id=stop_ids,
                                pad_token_id=tiny_tokenizer.pad_token_id, length_penalty=1.0, early_stopping=False,
                                no_repeat_ngram_size=ngram or None, output_scores=True,
                                return_dict_in_generate=True)
        hf = [t for t in out.sequences[0, inputs["input_ids"].shape[1]:].tolist()
              if t not in (tiny_tokenizer.pad_token_id, tiny_tokenizer.eos_token_id)]
        assert list(hyps[0].token_ids) == hf
        # λL = 0.5 halves every score; the ranking is unchanged
        assert math.isclose(hyps[0].score * 2, float(out.sequences_scores[0]), rel_tol=1e-4)


def test_classifier_term_steers_in_the_expected_direction(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 0.2)
    clf = LetterClassifier()
    base = dict(num_beams=4, candidates=50, max_new_tokens=10, ban_prompt_tokens=False)

    def mean_p(config, targets):
        hyps = alice_search(lm, PROMPTS, targets, config, classifier=clf)
        return float(np.mean(clf.predict_proba([lm.decode(h[0].token_ids) for h in hyps])))

    neutral = mean_p(AliceConfig(lambda_clf=0.0, **base), [1, 1, 1])
    toward_toxic = mean_p(AliceConfig(lambda_clf=3.0, **base), [1, 1, 1])
    toward_benign = mean_p(AliceConfig(lambda_clf=3.0, **base), [0, 0, 0])
    assert toward_toxic > neutral + 0.1
    assert toward_benign <= neutral
    assert toward_benign < toward_toxic


def test_classifier_top_n_limits_classifier_calls(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 0.2)
    clf = LetterClassifier()
    alice_search(lm, PROMPTS[:1], [1], AliceConfig(num_beams=2, candidates=9, max_new_tokens=3,
                                                   classifier_top_n=4), classifier=clf)
    assert [len(c) for c in clf.calls] == [4] + [8] * (len(clf.calls) - 1)


def test_classifier_never_sees_the_prompt(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 0.2)
    clf = LetterClassifier()
    alice_search(lm, PROMPTS[:1], [1], AliceConfig(num_beams=2, candidates=5, max_new_tokens=3), classifier=clf)
    assert clf.calls and all("placeholder" not in text for call in clf.calls for text in call)
    assert len(clf.calls[0]) == 5  # step 1 scores only beam 0 (the other beams are masked copies)


@pytest.mark.parametrize("top_n", [None, 4])
def test_batched_equals_one_prompt_at_a_time(tiny_tokenizer, top_n):
    lm = _lm(tiny_tokenizer, 0.2)
    config = AliceConfig(num_beams=3, candidates=20, max_new_tokens=10, num_return=2, classifier_top_n=top_n)
    batched = alice_search(lm, PROMPTS, [1, 0, 1], config, classifier=LetterClassifier())
    for i, prompt in enumerate(PROMPTS):
        alone = alice_search(lm, [prompt], [[1, 0, 1][i]], config, classifier=LetterClassifier())[0]
        assert [h.token_ids for h in alone] == [h.token_ids for h in batched[i]]
        assert all(math.isclose(a.score, b.score, rel_tol=1e-4) for a, b in zip(alone, batched[i]))


def test_banned_prompt_tokens_never_appear(tiny_lm):
    config = AliceConfig(num_beams=4, candidates=30, max_new_tokens=15)
    hyps = alice_search(tiny_lm, PROMPTS, [1, 1, 1], config, classifier=LetterClassifier())
    exempt = exempt_from_prompt_ban(tiny_lm.token_texts())
    for prompt, h in zip(PROMPTS, hyps):
        banned = {t for t in tiny_lm.encode(prompt) if not exempt[t]}
        assert banned and not banned & set(h[0].token_ids)


def test_no_repeated_trigram_in_output(tiny_lm):
    config = AliceConfig(num_beams=4, candidates=30, max_new_tokens=20, ban_prompt_tokens=False,
                         no_repeat_ngram_size=3)
    for prompt, h in zip(PROMPTS, alice_search(tiny_lm, PROMPTS, [1, 1, 1], config, classifier=LetterClassifier())):
        seq = tiny_lm.encode(prompt) + list(h[0].token_ids)
        grams = [tuple(seq[i:i + 3]) for i in range(len(seq) - 2)]
        assert len(grams) == len(set(grams))


# --- bad input -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs", [{"num_beams": 0}, {"candidates": 0}, {"classifier_top_n": 0},
                                    {"mode": "sideways"}, {"num_return": 11}])
def test_config_errors(kwargs):
    with pytest.raises(InputError):
        AliceConfig(**kwargs)


def test_candidates_larger_than_vocabulary(tiny_lm):
    with pytest.raises(InputError, match="vocabulary"):
        check_lm(tiny_lm, AliceConfig(candidates=tiny_lm.vocab_size + 1))


def test_lm_without_full_logits_is_refused(tiny_lm):
    class Truncated:
        def __init__(self, session):
            self._s = session

        def logprobs(self):
            return self._s.logprobs()[:, :10]

    class PartialLM:
        name, vocab_size = "partial", tiny_lm.vocab_size

        def start(self, prompts):
            return Truncated(tiny_lm.start(prompts))

    with pytest.raises(InputError, match="full"):
        check_lm(PartialLM(), AliceConfig(candidates=5))


def test_classifier_without_the_class_index():
    clf = LetterClassifier()
    clf.toxic_index = 2
    with pytest.raises(InputError, match="out of range"):
        AliceDecoder(clf)
    with pytest.raises(InputError, match="classifier"):
        AliceDecoder(None)


# --- in a generation job -------------------------------------------------------------------------------------

def test_alice_job_rows(tiny_lm, tmp_path):
    from toxiforge.pipeline import GenerationPlan, run_generation
    from toxiforge.records import read_rows

    folder = tmp_path / "demos"
    folder.mkdir()
    for prefix in ("hate", "neutral"):
        (folder / f"{prefix}_asian.txt").write_text("\n".join(f"placeholder {prefix} {i}" for i in range(6)))
    plan = GenerationPlan.grid(["asian"], ["toxic", "benign"], 2, source=str(folder), k=3)
    decoder = AliceDecoder(LetterClassifier(), AliceConfig(num_beams=2, candidates=10, max_new_tokens=5))
    run_generation(plan, tiny_lm, tmp_path / "run", decoder=decoder, classifier=decoder.classifier, progress=False)
    rows = read_rows(tmp_path / "run")
    assert len(rows) == 4 and {r.generation_method for r in rows} == {"ALICE"}
    for r in rows:
        if r.parse_error is None:
            assert r.classifier == "letter-e" and 0 <= r.classifier_score <= 1
            assert r.fooled == (r.classifier_score < 0.5 if r.prompt_label == 1 else r.classifier_score >= 0.5)
    assert '"classifier": "letter-e"' in rows[0].decoding


# --- several hypotheses per prompt ---------------------------------------------------------------------------

def test_decoder_returns_num_return_distinct_hypotheses_best_first(tiny_lm):
    from toxiforge.decoding import Sample, postprocess

    config = AliceConfig(num_beams=8, candidates=10, max_new_tokens=6)
    single = AliceDecoder(LetterClassifier(), config).decode(tiny_lm, PROMPTS, [0, 0, 0], [1, 0, 1])
    several = AliceDecoder(LetterClassifier(), replace(config, num_return=3)).decode(tiny_lm, PROMPTS, [0, 0, 0],
                                                                                     [1, 0, 1])
    pools = alice_search(tiny_lm, PROMPTS, [0, 1, 0], replace(config, num_return=8), classifier=LetterClassifier())
    assert all(isinstance(s, Sample) for s in single)  # num_return=1 keeps one Sample per prompt
    for best, hyps, pool in zip(single, several, pools):
        assert len(hyps) == 3 and hyps[0] == best
        # the 3 best hypotheses whose statements differ (the random fixture decodes many byte tokens to "\ufffd")
        distinct = {}
        for h in pool:
            distinct.setdefault(postprocess(tiny_lm.decode(h.token_ids)).text, h)
        assert [h.token_ids for h in hyps] == [h.token_ids for h in list(distinct.values())[:3]]
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def _asian_demos(tmp_path):
    folder = tmp_path / "demos"
    folder.mkdir(exist_ok=True)
    for prefix in ("hate", "neutral"):
        (folder / f"{prefix}_asian.txt").write_text("\n".join(f"placeholder {prefix} {i}" for i in range(6)))
    return folder


def test_alice_job_with_num_return_writes_one_row_per_hypothesis(tiny_lm, tmp_path):
    from toxiforge.pipeline import GenerationPlan, run_generation
    from toxiforge.records import read_rows

    plan = GenerationPlan.grid(["asian"], ["toxic", "benign"], 3, source=str(_asian_demos(tmp_path)), k=3)
    runs = {}
    for n in (1, 3):
        decoder = AliceDecoder(LetterClassifier(), AliceConfig(num_beams=5, candidates=10, max_new_tokens=6,
                                                               num_return=n))
        result = run_generation(plan, tiny_lm, tmp_path / f"run{n}", decoder=decoder, classifier=decoder.classifier,
                                progress=False)
        runs[n] = read_rows(tmp_path / f"run{n}")
        assert result.manifest["config"]["num_return"] == n and result.manifest["work_items"] == 6
        assert result.manifest["counts"]["rows"] == 6 * n
    one, three = runs[1], runs[3]
    assert len(three) == 18 and len({r.row_id for r in three}) == 18
    for i, item_rows in enumerate(three[j:j + 3] for j in range(0, 18, 3)):
        assert [r.hypothesis_rank for r in item_rows] == [0, 1, 2]
        assert len({r.generation for r in item_rows}) == 3
        assert len({(r.prompt, r.group, r.prompt_label, r.seed) for r in item_rows}) == 1
        scores = [r.hypothesis_score for r in item_rows]
        assert scores == sorted(scores, reverse=True)
        base = one[i].row_id
        assert [r.row_id for r in item_rows] == [base, f"{base}/1", f"{base}/2"]
    for r in three:  # the classifier scores every rank
        if r.parse_error is None:
            assert r.classifier == "letter-e" and 0 <= r.classifier_score <= 1
            assert r.fooled == (r.classifier_score < 0.5 if r.prompt_label == 1 else r.classifier_score >= 0.5)
    same = [c for c in ("prompt", "generation", "group", "prompt_label", "seed", "raw_output", "finish_reason",
                        "parse_error", "row_id", "classifier_score", "fooled", "hypothesis_rank", "hypothesis_score")]
    rank0 = [r for r in three if r.hypothesis_rank == 0]
    assert [[getattr(r, c) for c in same] for r in rank0] == [[getattr(r, c) for c in same] for r in one]
    assert all(r.hypothesis_rank == 0 for r in one)
    assert json.loads(three[0].decoding)["num_return"] == 3
