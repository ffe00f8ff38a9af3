"""ALICE: scorers on hand-built tensors; the beam loop on a tiny random Llama with a fake classifier."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from floats import alice_depth, assert_same_hypotheses
from toxiforge.decoding.alice import alice_search
from toxiforge.decoding.alice_config import AliceConfig, check_lm
from toxiforge.decoding.alice_decoder import AliceDecoder
from toxiforge.decoding.pruning import PruningStats
from toxiforge.decoding.scorers import complete_text, exempt_from_prompt_ban, group_term_tokens
from toxiforge.errors import InputError
from toxiforge.groups import Group

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


# --- the beam loop -------------------------------------------------------------------------------------------

class VowelClassifier:
    """Fake classifier whose P(toxic) is the share of vowels among the letters: ordinary text sits mid-range, so
    steering toward either class has room to show."""

    name = "vowels"
    num_classes, toxic_index, benign_index = 2, 1, 0

    def predict_proba(self, texts):
        letters = [[c for c in t.lower() if c.isalpha()] for t in texts]
        return np.array([min(0.95, max(0.05, sum(c in "aeiou" for c in ls) / len(ls))) if ls else 0.5
                         for ls in letters])

    def class_log_probs(self, texts):
        p = torch.tensor(self.predict_proba(texts), dtype=torch.float32)
        return torch.stack([torch.log1p(-p), torch.log(p)], dim=1)


class Only:
    """An extra constraint (the Scorer protocol): only ``allowed`` tokens while ``first`` <= tokens generated so far
    < ``last``."""

    def __init__(self, allowed, first=0, last=None):
        self.allowed, self.first, self.last = list(allowed), first, last

    def keep_rows(self, rows):
        return self

    def __call__(self, state, scores, token_ids=None):
        done = state.generated.shape[1]
        if done < self.first or (self.last is not None and done >= self.last):
            return scores
        out = torch.full_like(scores, float("-inf"))
        out[:, self.allowed] = scores[:, self.allowed]
        return out


class Recorder:
    """Records the scores it is given (the Scorer protocol); changes nothing."""

    def __init__(self):
        self.seen = []

    def keep_rows(self, rows):
        return self

    def __call__(self, state, scores, token_ids=None):
        self.seen.append(scores.clone())
        return scores


def _lm(tokenizer, newline_bias):
    from conftest import build_tiny_llama
    from toxiforge.models.transformers_lm import TransformersLM

    return TransformersLM(build_tiny_llama(tokenizer, newline_bias=newline_bias), tokenizer, name="tiny")


class GeneratedOnlyNoRepeat:
    """transformers' no-repeat n-gram processor over the generated tokens only (the reference for ALICE's rule)."""

    def __init__(self, size, prompt_length):
        from transformers import NoRepeatNGramLogitsProcessor

        self.inner, self.prompt_length = NoRepeatNGramLogitsProcessor(size), prompt_length

    def __call__(self, input_ids, scores):
        return self.inner(input_ids[:, self.prompt_length:], scores)


@pytest.mark.parametrize("newline_bias, ngram", [(None, 0), (0.3, 0), (0.15, 2), (None, 3)])
def test_without_classifier_equals_transformers_beam_search(tiny_tokenizer, newline_bias, ngram):
    from transformers import LogitsProcessorList

    lm = _lm(tiny_tokenizer, newline_bias)
    config = AliceConfig(lambda_clf=0.0, num_beams=4, max_new_tokens=12, temperature=1.0,
                         no_repeat_ngram_size=ngram, ban_prompt_tokens=False, require_text=False)
    ours = alice_search(lm, PROMPTS, [0, 0, 0], config)
    stop_ids = sorted(set(lm.newline_mask().nonzero().view(-1).tolist()) | set(lm.eos_token_ids))
    for prompt, hyps in zip(PROMPTS, ours):
        inputs = tiny_tokenizer(prompt, return_tensors="pt", add_special_tokens=False)
        width = inputs["input_ids"].shape[1]
        processors = LogitsProcessorList([GeneratedOnlyNoRepeat(ngram, width)] if ngram else [])
        out = lm.model.generate(**inputs, num_beams=4, do_sample=False, max_new_tokens=12, eos_token_id=stop_ids,
                                pad_token_id=tiny_tokenizer.pad_token_id, length_penalty=1.0, early_stopping=False,
                                logits_processor=processors, output_scores=True, return_dict_in_generate=True)
        hf = [t for t in out.sequences[0, width:].tolist()
              if t not in (tiny_tokenizer.pad_token_id, tiny_tokenizer.eos_token_id)]
        assert list(hyps[0].token_ids) == hf
        # λL = 0.5 halves every score; the ranking is unchanged
        assert math.isclose(hyps[0].score * 2, float(out.sequences_scores[0]), rel_tol=1e-4)


def recompute_eq1(lm, prompt, hyp, classifier, target, config):
    """A finished hypothesis' score from scratch: Σ_i λL · log p_LM,T(t_i | prompt, t_<i) + λC · log p_CLF(target |
    t_1..t_i), divided by its length (EOS counts as a step but is not in token_ids)."""
    tokens = list(hyp.token_ids) + ([sorted(lm.eos_token_ids)[0]] if hyp.finish_reason == "eos" else [])
    session, total = lm.start([prompt]), 0.0
    for i, token in enumerate(tokens):
        lm_term = torch.log_softmax(session.logprobs()[0] / config.temperature, -1)[token].item()
        text = complete_text(lm.decode(tokens[:i + 1]))
        clf_term = classifier.class_log_probs([text])[0, target].item()
        total += config.lambda_lm * lm_term + config.lambda_clf * clf_term
        session.advance(torch.tensor([token]))
    return total / len(tokens) ** config.length_penalty


@pytest.mark.parametrize("lambda_lm, lambda_clf, temperature", [(0.5, 0.5, 0.9), (0.3, 0.7, 1.0), (0.8, 0.2, 0.6),
                                                                 (0.0, 1.0, 0.9)])
def test_finished_scores_are_eq1_recomputed_from_scratch(tiny_lm_newlines, lambda_lm, lambda_clf, temperature):
    # a doubled classifier term (upstream), swapped λs, a missing temperature or a decayed running score all fail
    lm, clf = tiny_lm_newlines, VowelClassifier()
    config = AliceConfig(lambda_lm=lambda_lm, lambda_clf=lambda_clf, temperature=temperature, num_beams=3,
                         candidates=15, max_new_tokens=8, num_return=3)
    results = alice_search(lm, PROMPTS, [1, 0, 1], config, classifier=clf)
    checked = 0
    for prompt, target, hyps in zip(PROMPTS, [1, 0, 1], results):
        for h in hyps:
            assert h.finish_reason in ("newline", "eos", "length") and math.isfinite(h.score)
            assert math.isclose(h.score, recompute_eq1(lm, prompt, h, clf, target, config), rel_tol=1e-4,
                                abs_tol=1e-5)
            checked += 1
    assert checked >= 6


def test_classifier_term_steers_in_the_expected_direction(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 0.2)
    clf = VowelClassifier()
    base = dict(num_beams=4, candidates=50, max_new_tokens=10, ban_prompt_tokens=False)

    def mean_p(config, targets):
        hyps = alice_search(lm, PROMPTS, targets, config, classifier=clf)
        return float(np.mean(clf.predict_proba([complete_text(lm.decode(h[0].token_ids)) for h in hyps])))

    neutral = mean_p(AliceConfig(lambda_clf=0.0, **base), [1, 1, 1])
    toward_toxic = mean_p(AliceConfig(lambda_clf=3.0, **base), [1, 1, 1])
    toward_benign = mean_p(AliceConfig(lambda_clf=3.0, **base), [0, 0, 0])
    assert 0.15 < neutral < 0.85  # mid-range: room in both directions
    assert toward_toxic > neutral + 0.1
    assert toward_benign < neutral - 0.1


def test_temperature_changes_the_search(tiny_lm):
    base = dict(lambda_clf=0.0, num_beams=3, candidates=30, max_new_tokens=6, ban_prompt_tokens=False)
    cold = alice_search(tiny_lm, PROMPTS, [0, 0, 0], AliceConfig(temperature=0.5, **base))
    warm = alice_search(tiny_lm, PROMPTS, [0, 0, 0], AliceConfig(temperature=2.0, **base))
    # at λC = 0 the ranking of whole sequences changes with T only through the per-step normalisation; the
    # scores themselves must differ (T is applied inside the search, to every step's log-probabilities)
    assert [h[0].score for h in cold] != pytest.approx([h[0].score for h in warm])


def test_classifier_top_n_limits_classifier_calls(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 0.2)
    clf, stats = LetterClassifier(), PruningStats()
    alice_search(lm, PROMPTS[:1], [1], AliceConfig(num_beams=2, candidates=9, max_new_tokens=3,
                                                   classifier_top_n=4), classifier=clf, prune=False,
                 pruning_stats=stats)
    assert stats.eligible_by_step == [4] + [8] * (len(stats.eligible_by_step) - 1)
    # unpruned: one call per step with every eligible text (issue 47: no longer batches of 2 × beams)
    assert [len(c) for c in clf.calls] == stats.calls_by_step and all(len(c) <= 8 for c in clf.calls)
    assert len(clf.calls) == len(stats.eligible_by_step) and sum(map(len, clf.calls)) == stats.scored


def test_classifier_top_extensions_is_upstreams_set(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 0.2)
    clf, stats = LetterClassifier(), PruningStats()
    config = AliceConfig(num_beams=3, candidates=20, max_new_tokens=5, classifier_top_extensions=6)
    alice_search(lm, PROMPTS[:2], [1, 0], config, classifier=clf, prune=False,  # prune=False: every eligible one
                 pruning_stats=stats)
    assert stats.eligible_by_step and all(n == 12 for n in stats.eligible_by_step)  # 2 prompts × 2W extensions
    everything = PruningStats()
    alice_search(lm, PROMPTS[:2], [1, 0], replace(config, classifier_top_extensions=None),
                 classifier=LetterClassifier(), prune=False, pruning_stats=everything)
    assert everything.eligible_by_step[1] == 2 * 3 * 20


def test_classifier_never_sees_the_prompt(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 0.2)
    clf, stats = LetterClassifier(), PruningStats()
    for prune in (True, False):
        alice_search(lm, PROMPTS[:1], [1], AliceConfig(num_beams=2, candidates=5, max_new_tokens=3),
                     classifier=clf, prune=prune, pruning_stats=stats)
        assert clf.calls and all("placeholder" not in text for call in clf.calls for text in call)
    assert stats.eligible_by_step[0] == 5  # step 1 scores only beam 0 (the others are masked copies)


@pytest.mark.parametrize("top_n", [None, 4])
def test_batched_equals_one_prompt_at_a_time(tiny_tokenizer, top_n):
    lm = _lm(tiny_tokenizer, 0.2)
    config = AliceConfig(num_beams=3, candidates=20, max_new_tokens=10, num_return=2, classifier_top_n=top_n)
    batched = alice_search(lm, PROMPTS, [1, 0, 1], config, classifier=LetterClassifier(), groups=GROUPS)
    for i, prompt in enumerate(PROMPTS):
        alone = alice_search(lm, [prompt], [[1, 0, 1][i]], config, classifier=LetterClassifier(),
                             groups=GROUPS[i:i + 1])[0]
        # the same statements; scores equal up to float noise (the LM's batches have other shapes)
        assert_same_hypotheses([alone], [batched[i]], alice_depth(config.max_new_tokens))


GAMMA = Group("gamma_people", "Gamma people", "user", patterns=("group gamma",), kind="user")
GROUPS = [None, None, GAMMA]


def test_banned_prompt_tokens_never_appear(tiny_lm):
    config = AliceConfig(num_beams=4, candidates=30, max_new_tokens=15)
    hyps = alice_search(tiny_lm, PROMPTS, [1, 1, 1], config, classifier=LetterClassifier(), groups=GROUPS)
    exempt = exempt_from_prompt_ban(tiny_lm.token_texts())
    for prompt, group, h in zip(PROMPTS, GROUPS, hyps):
        ids = tiny_lm.encode(prompt)
        allowed = group_term_tokens(ids, group, tiny_lm.batch_decode) if group else set()
        banned = {t for t in ids if not exempt[t]} - allowed
        assert banned and not banned & set(h[0].token_ids)


def test_target_group_name_may_be_copied_from_the_prompt(tiny_lm):
    prompt = PROMPTS[2]
    name = group_term_tokens(tiny_lm.encode(prompt), GAMMA, tiny_lm.batch_decode)
    assert {tiny_lm.decode([t]) for t in name} == {" group", " g", "am", "m", "a"}
    stop = tiny_lm.newline_mask().nonzero().view(-1).tolist()
    exempt = exempt_from_prompt_ban(tiny_lm.token_texts())
    name = {t for t in name if not exempt[t]}  # " group", " g", "am", "m" ("a" is a stopword, never banned)
    only_name = Only(sorted(name) + stop)  # only the group's name tokens (all in the prompt) and newlines
    config = AliceConfig(lambda_clf=0.0, num_beams=2, candidates=10, max_new_tokens=6)
    named = alice_search(tiny_lm, [prompt], [1], config, groups=[GAMMA], scorers=[only_name])[0][0]
    assert named.finish_reason != "blocked" and set(named.token_ids) - set(stop) <= name
    with pytest.warns(RuntimeWarning, match="no hypothesis"):  # upstream's ban: the name is banned too
        banned = alice_search(tiny_lm, [prompt], [1], replace(config, exempt_group_terms=False), groups=[GAMMA],
                              scorers=[only_name])[0][0]
    assert banned.finish_reason == "blocked" and banned.token_ids == ()


def test_a_statement_may_open_with_a_demonstrations_first_word(tiny_lm):
    prompt = "- alpha beta\n- gamma\n-"
    ids = tiny_lm.encode(prompt)
    opener = ids[ids.index(tiny_lm.encode("\n")[0]) + 2]  # " g", after "\n" "-"
    recorder = Recorder()
    alice_search(tiny_lm, [prompt], [0], AliceConfig(lambda_clf=0.0, num_beams=2, candidates=10, max_new_tokens=3,
                                                     ban_prompt_tokens=False, no_repeat_ngram_size=3),
                 scorers=[recorder])
    # the trigram "\n" "-" " g" is in the prompt; counting the prompt would have banned " g" at step 1
    assert torch.isfinite(recorder.seen[0][:, opener]).all()


def test_no_repeated_trigram_in_generated_tokens(tiny_lm):
    config = AliceConfig(num_beams=4, candidates=30, max_new_tokens=20, ban_prompt_tokens=False,
                         no_repeat_ngram_size=3)
    for h in alice_search(tiny_lm, PROMPTS, [1, 1, 1], config, classifier=LetterClassifier()):
        seq = list(h[0].token_ids)
        grams = [tuple(seq[i:i + 3]) for i in range(len(seq) - 2)]
        assert len(grams) == len(set(grams))


def test_newline_and_eos_finish_hypotheses(tiny_lm):
    newline, eos = tiny_lm.encode("\n")[0], sorted(tiny_lm.eos_token_ids)[0]
    word = tiny_lm.encode(" plain")[0]
    config = AliceConfig(lambda_clf=0.0, num_beams=2, candidates=3, max_new_tokens=6, ban_prompt_tokens=False,
                         num_return=2)
    # step 1: only " plain"; from step 2 on: only the newline or EOS
    for stopper, reason in ((newline, "newline"), (eos, "eos")):
        only = [Only([word], last=1), Only([stopper], first=1)]
        hyps = alice_search(tiny_lm, PROMPTS[:1], [0], config, scorers=only)[0]
        assert [h.finish_reason for h in hyps] == [reason]
        assert hyps[0].token_ids == ((word, newline) if reason == "newline" else (word,))  # EOS is not kept


def test_require_text_keeps_empty_hypotheses_out(tiny_lm_newlines):
    newline, word = tiny_lm_newlines.encode("\n")[0], tiny_lm_newlines.encode(" plain")[0]
    config = AliceConfig(lambda_clf=0.0, num_beams=2, candidates=2, max_new_tokens=4, ban_prompt_tokens=False,
                         num_return=2, require_text=False)
    only = [Only([newline, word])]
    loose = alice_search(tiny_lm_newlines, PROMPTS[:1], [0], config, scorers=only)[0]
    assert (newline,) in [h.token_ids for h in loose]  # a newline at step 1: an empty hypothesis finished
    strict = alice_search(tiny_lm_newlines, PROMPTS[:1], [0], replace(config, require_text=True), scorers=only)[0]
    assert strict and all(word in h.token_ids for h in strict)


def test_decoder_skips_empty_statements(tiny_lm_newlines, monkeypatch):
    from toxiforge.decoding import alice as alice_module  # the decoder calls alice.alice_search
    from toxiforge.decoding.beam import Hypothesis

    word, newline = tiny_lm_newlines.encode(" plain")[0], tiny_lm_newlines.encode("\n")[0]
    ranked = [Hypothesis((newline,), -0.1, "newline"), Hypothesis((word, newline), -0.5, "newline")]
    monkeypatch.setattr(alice_module, "alice_search", lambda *a, **k: [ranked])
    decoder = AliceDecoder(LetterClassifier(), AliceConfig(num_beams=2, candidates=5))
    [[sample]] = decoder.decode(tiny_lm_newlines, PROMPTS[:1], [0], [0], [None])
    assert sample.token_ids == (word, newline) and sample.score == -0.5


def test_all_banned_search_is_blocked_with_a_warning(tiny_lm, tmp_path):
    config = AliceConfig(lambda_clf=0.0, num_beams=2, candidates=5, max_new_tokens=4)
    with pytest.warns(RuntimeWarning, match="2 of 2 prompts"):
        hyps = alice_search(tiny_lm, PROMPTS[:2], [0, 0], config, scorers=[Only([])])
    assert [[(h.token_ids, h.score, h.finish_reason) for h in row] for row in hyps] == \
        [[((), float("-inf"), "blocked")]] * 2


def test_lambda_lm_zero_gives_no_nan_and_keeps_the_ban(tiny_lm):
    config = AliceConfig(lambda_lm=0.0, lambda_clf=1.0, num_beams=3, candidates=20, max_new_tokens=8)
    hyps = alice_search(tiny_lm, PROMPTS, [1, 0, 1], config, classifier=LetterClassifier())
    exempt = exempt_from_prompt_ban(tiny_lm.token_texts())
    for prompt, h in zip(PROMPTS, hyps):
        assert h[0].finish_reason != "blocked" and math.isfinite(h[0].score)
        assert not {t for t in tiny_lm.encode(prompt) if not exempt[t]} & set(h[0].token_ids)


# --- bad input -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, message", [
    ({"num_beams": 0}, "num_beams"), ({"candidates": 0}, "candidates"), ({"classifier_top_n": 0}, "top_n"),
    ({"classifier_top_extensions": 0}, "top_extensions"), ({"mode": "sideways"}, "mode"),
    ({"num_return": 11}, "between 1 and num_beams"), ({"temperature": 0}, "temperature"),
    ({"lambda_lm": 0, "lambda_clf": 0}, "not both 0"), ({"lambda_clf": float("nan")}, "finite"),
    ({"lambda_lm": -1}, "non-negative"), ({"length_penalty": -1}, "length_penalty")])
def test_config_errors(kwargs, message):
    with pytest.raises(InputError, match=message):
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

class ConstantClassifier(LetterClassifier):
    """P(toxic) = 0.7 for every text."""

    name = "constant"

    def predict_proba(self, texts):
        return np.full(len(texts), 0.7)


def test_alice_job_rows(tiny_lm, tmp_path):
    from toxiforge.pipeline import GenerationPlan, run_generation
    from toxiforge.records import read_rows

    plan = GenerationPlan.grid(["asian"], ["toxic", "benign"], 2, source=str(_asian_demos(tmp_path)), k=3)
    decoder = AliceDecoder(ConstantClassifier(), AliceConfig(num_beams=2, candidates=10, max_new_tokens=5))
    run_generation(plan, tiny_lm, tmp_path / "run", decoder=decoder, classifier=decoder.classifier, progress=False)
    rows = read_rows(tmp_path / "run")
    assert len(rows) == 4 and {r.generation_method for r in rows} == {"ALICE"}
    # P(toxic) = 0.7: a benign prompt's statement fools the classifier (called toxic), a toxic prompt's does not
    expected = {0: True, 1: False}
    for r in rows:
        assert r.parse_error is None and r.generation
        assert (r.classifier, r.classifier_score, r.fooled) == ("constant", pytest.approx(0.7),
                                                                 expected[r.prompt_label])
    assert '"classifier": "constant"' in rows[0].decoding


# --- several hypotheses per prompt ---------------------------------------------------------------------------

def test_decoder_returns_num_return_distinct_hypotheses_best_first(tiny_lm):
    from toxiforge.decoding import Sample, postprocess

    config = AliceConfig(num_beams=8, candidates=10, max_new_tokens=6)
    single = AliceDecoder(LetterClassifier(), config).decode(tiny_lm, PROMPTS, [0, 0, 0], [1, 0, 1], GROUPS)
    several = AliceDecoder(LetterClassifier(), replace(config, num_return=3)).decode(tiny_lm, PROMPTS, [0, 0, 0],
                                                                                     [1, 0, 1], GROUPS)
    pools = alice_search(tiny_lm, PROMPTS, [0, 1, 0], replace(config, num_return=8), classifier=LetterClassifier(),
                         groups=GROUPS)
    assert all(len(s) == 1 and isinstance(s[0], Sample) for s in single)  # always a list per prompt
    for [best], hyps, pool in zip(single, several, pools):
        assert len(hyps) == 3 and hyps[0] == best
        # the 3 best hypotheses whose statements differ (the random fixture decodes many byte tokens to "\ufffd")
        distinct = {}
        for h in pool:
            text = postprocess(tiny_lm.decode(h.token_ids)).text
            if text:  # the decoder skips empty statements
                distinct.setdefault(text, h)
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
        decoder = AliceDecoder(ConstantClassifier(), AliceConfig(num_beams=5, candidates=10, max_new_tokens=6,
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
        if r.parse_error is None:  # P(toxic) = 0.7: benign prompts' statements fool it, toxic prompts' do not
            assert (r.classifier, r.classifier_score, r.fooled) == ("constant", pytest.approx(0.7),
                                                                     r.prompt_label == 0)
    same = [c for c in ("prompt", "generation", "group", "prompt_label", "seed", "raw_output", "finish_reason",
                        "parse_error", "row_id", "classifier_score", "fooled", "hypothesis_rank", "hypothesis_score")]
    rank0 = [r for r in three if r.hypothesis_rank == 0]
    assert [[getattr(r, c) for c in same] for r in rank0] == [[getattr(r, c) for c in same] for r in one]
    assert all(r.hypothesis_rank == 0 for r in one)
    assert json.loads(three[0].decoding)["num_return"] == 3


def test_alice_and_top_k_raise_no_deprecation_warnings(tiny_lm):
    # transformers 5 renamed the forward's `past_key_values` to `cache`; the old name warned on every step
    # (30 FutureWarnings for a 2-statement run). Real warnings stay visible: nothing is filtered here or there.
    import warnings

    from toxiforge.decoding.topk import TopKConfig, sample_top_k

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        alice_search(tiny_lm, PROMPTS[:2], [1, 0], AliceConfig(num_beams=2, candidates=5, max_new_tokens=3),
                     classifier=LetterClassifier())
        sample_top_k(tiny_lm, PROMPTS[:2], [0, 1], TopKConfig(max_new_tokens=3))
    assert [str(w.message) for w in caught if issubclass(w.category, (FutureWarning, DeprecationWarning))] == []
