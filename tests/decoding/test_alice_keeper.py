"""ALICE's keeper term (issue 50): eq. 1 with a third term λK · log p_K(prompt's class | text), scored on the same
candidates in the same pruning rounds, exact pruning kept, the settings and refusals, and the rows' keeper_score."""

from __future__ import annotations

import json
import math
import zlib

import numpy as np
import pytest
import torch
from test_alice_pruning import PROMPTS  # the same four placeholder prompts

from floats import assert_same_hypotheses
from toxiforge.decoding.alice import alice_search
from toxiforge.decoding.alice_config import AliceConfig, keeper_classes
from toxiforge.decoding.alice_decoder import AliceDecoder
from toxiforge.decoding.pruning import PruningStats
from toxiforge.decoding.scorers import complete_text
from toxiforge.errors import InputError


class HashClassifier:
    """Class log-probs a fixed pseudo-random function of the text (``salt`` makes another classifier), recording
    every call; ``veto`` texts get P(toxic) 1e-6 (a keeper that says they lost a toxic prompt's label)."""

    num_classes, toxic_index, benign_index = 2, 1, 0

    def __init__(self, name: str = "hash", salt: str = "", veto: frozenset[str] = frozenset(),
                 positive: bool = False):
        self.name, self.salt, self.veto, self.positive = name, salt, veto, positive
        self.calls: list[list[str]] = []

    def p_toxic(self, text: str) -> float:
        if text in self.veto:
            return 1e-6
        rng = np.random.default_rng(zlib.crc32((self.salt + text).encode()))
        return float(1.0 / (1.0 + np.exp(-2.0 * rng.normal())))

    def predict_proba(self, texts):
        return np.array([self.p_toxic(t) for t in texts])

    def class_log_probs(self, texts):
        self.calls.append(list(texts))
        p = torch.tensor([self.p_toxic(t) for t in texts], dtype=torch.float64)
        out = torch.stack([torch.log1p(-p), torch.log(p)], dim=1).float()
        return out + 0.05 if self.positive else out

    def describe(self):
        return {"name": self.name, "backend": "test"}


def _lm(tokenizer, seed=0, newline_bias=None):
    from conftest import build_tiny_llama
    from toxiforge.models.transformers_lm import TransformersLM

    return TransformersLM(build_tiny_llama(tokenizer, seed=seed, newline_bias=newline_bias), tokenizer, name="tiny")


def _same(a, b):
    """Searches of the same prompts (pruned or not, λK = 0 or no keeper): the LM runs the same shapes in both and the
    classifiers' scores depend only on the text, so the scores are equal bit for bit."""
    assert_same_hypotheses(a, b)


def eq1_with_keeper(lm, prompt, hyp, clf, target, keeper, keep_target, config):
    """A finished hypothesis' score from scratch: Σ_i λL · log p_LM + λC · log p_C(target | t_1..t_i) +
    λK · log p_K(keep_target | t_1..t_i), over its length."""
    tokens = list(hyp.token_ids) + ([sorted(lm.eos_token_ids)[0]] if hyp.finish_reason == "eos" else [])
    session, total = lm.start([prompt]), 0.0
    for i, token in enumerate(tokens):
        lm_term = torch.log_softmax(session.logprobs()[0] / config.temperature, -1)[token].item()
        text = complete_text(lm.decode(tokens[:i + 1]))
        total += (config.lambda_lm * lm_term + config.lambda_clf * clf.class_log_probs([text])[0, target].item()
                  + config.lambda_keep * keeper.class_log_probs([text])[0, keep_target].item())
        session.advance(torch.tensor([token]))
    return total / len(tokens) ** config.length_penalty


def test_the_keeper_vetoes_plain_alices_pick_as_eq1_with_a_third_term_says(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, newline_bias=2.0)
    config = AliceConfig(num_beams=3, candidates=15, max_new_tokens=6, num_return=3)
    labels = [1, 1, 0]  # toxic prompts steer C toward benign; the keeper keeps them toxic
    clf = HashClassifier()
    targets = [clf.benign_index if lab == 1 else clf.toxic_index for lab in labels]
    plain = alice_search(lm, PROMPTS[:3], targets, config, classifier=clf)
    # the keeper says plain ALICE's pick for the first (toxic) prompt, and every prefix of it, lost its label
    best = plain[0][0].token_ids
    vetoed = frozenset(complete_text(lm.decode(list(best[:i + 1]))) for i in range(len(best)))
    keeper = HashClassifier("keeper", salt="k", veto=vetoed)
    keep_targets = keeper_classes(labels, keeper)
    assert keep_targets == [1, 1, 0]
    kept = alice_search(lm, PROMPTS[:3], targets, config, classifier=clf, keeper=keeper, keep_targets=keep_targets)
    assert kept[0][0].token_ids != best                       # the veto changes the pick
    assert all(h.token_ids != best for h in kept[0])          # and the vetoed statement is not among the finished
    checked = 0
    for prompt, target, kt, hyps in zip(PROMPTS, targets, keep_targets, kept):
        for h in hyps:  # every finished hypothesis scores as eq. 1 with the keeper term, recomputed from scratch
            assert math.isclose(h.score, eq1_with_keeper(lm, prompt, h, clf, target, keeper, kt, config),
                                rel_tol=1e-4, abs_tol=1e-5)
            checked += 1
    assert checked >= 6
    # plain ALICE's pick scores below the keeper's pick under the three-term objective
    assert eq1_with_keeper(lm, PROMPTS[0], plain[0][0], clf, targets[0], keeper, 1, config) < kept[0][0].score
    # λK = 0 is plain ALICE, and asks the keeper nothing (issue 56: it was called every pruning round)
    keeper.calls.clear()
    _same(alice_search(lm, PROMPTS[:3], targets, AliceConfig(**{**config.__dict__, "keep_label_with": "k",
                                                                   "lambda_keep": 0.0}),
                       classifier=clf, keeper=keeper, keep_targets=keep_targets), plain)
    assert keeper.calls == []


SETTINGS = [dict(), dict(lambda_keep=2.0), dict(lambda_lm=0.0, lambda_clf=1.0, lambda_keep=0.3),
            dict(num_return=3, stop_at_newline=False), dict(classifier_top_n=7)]


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("settings", SETTINGS, ids=[",".join(s) or "defaults" for s in SETTINGS])
def test_pruning_with_a_keeper_equals_the_unpruned_search(tiny_tokenizer, seed, settings):
    lm = _lm(tiny_tokenizer, seed, newline_bias=[None, 2.0][seed])
    config = AliceConfig(**{"num_beams": 4, "candidates": 25, "max_new_tokens": 7, "num_return": 4,
                            "keep_label_with": "keeper", **settings})
    labels = [1, 0, 1, 0]
    targets = [0 if lab == 1 else 1 for lab in labels]
    pruned_clf, pruned_keeper, stats = HashClassifier(), HashClassifier("keeper", salt="k"), PruningStats()
    pruned = alice_search(lm, PROMPTS, targets, config, classifier=pruned_clf, keeper=pruned_keeper,
                          keep_targets=labels, pruning_stats=stats)
    full_clf, full_keeper = HashClassifier(), HashClassifier("keeper", salt="k")
    full = alice_search(lm, PROMPTS, targets, config, classifier=full_clf, keeper=full_keeper, keep_targets=labels,
                        prune=False)
    _same(pruned, full)
    assert 0 < stats.scored < stats.eligible
    # unpruned, the keeper scores exactly the attacked classifier's texts; pruned, only some of the texts the
    # attacked classifier scored (those whose bound with its term can still reach a beam), so fewer
    assert full_keeper.calls == full_clf.calls
    clf_texts = {t for call in pruned_clf.calls for t in call}
    keeper_texts = [t for call in pruned_keeper.calls for t in call]
    assert set(keeper_texts) <= clf_texts and 0 < stats.kept == len(keeper_texts) < stats.scored
    # and the keeper moves the search: without it the results differ
    plain = alice_search(lm, PROMPTS, targets, AliceConfig(**{k: v for k, v in config.__dict__.items()
                                                              if k not in ("keep_label_with", "lambda_keep")}),
                         classifier=HashClassifier())
    assert [[h.token_ids for h in hyps] for hyps in plain] != [[h.token_ids for h in hyps] for hyps in full]


def test_a_positive_keeper_log_prob_turns_pruning_off(tiny_tokenizer):
    lm = _lm(tiny_tokenizer, 1, newline_bias=1.5)
    config = AliceConfig(num_beams=3, candidates=20, max_new_tokens=6, keep_label_with="keeper")
    run = [alice_search(lm, PROMPTS, [1, 0, 1, 0], config, classifier=HashClassifier(),
                        keeper=HashClassifier("keeper", salt="k", positive=True), keep_targets=[0, 1, 0, 1],
                        prune=prune) for prune in (True, False)]
    _same(*run)


@pytest.mark.parametrize("kwargs, message", [
    (dict(keep_label_with="k", mode="false-negatives"), "only auto mode"),
    (dict(keep_label_with="k", mode="false-positives"), "only auto mode"),
    (dict(lambda_keep=2.0), "without a keeper"),
    (dict(keep_label_with="k", lambda_keep=-1.0), "finite number >= 0"),
    (dict(keep_label_with="k", lambda_keep=float("nan")), "finite number >= 0"),
    (dict(keep_label_with="k", lambda_clf=0.0, lambda_lm=1.0), "nothing is attacked"),
])
def test_keeper_config_refusals(kwargs, message):
    with pytest.raises(InputError, match=message):
        AliceConfig(**kwargs)


def test_settings_without_a_keeper_are_unchanged_and_with_one_name_it():
    assert "keep_label_with" not in AliceConfig().to_dict() and "lambda_keep" not in AliceConfig().to_dict()
    assert AliceConfig(keep_label_with="k").to_dict()["lambda_keep"] == 1.0


def test_generate_with_a_keeper_records_it_in_rows_and_manifest(tiny_lm, tmp_path):
    from toxiforge.classifiers.fingerprint import fingerprint
    from toxiforge.pipeline import GenerationPlan, run_generation
    from toxiforge.records import read_rows

    demos = tmp_path / "demos"
    demos.mkdir()
    for prefix in ("hate", "neutral"):
        (demos / f"{prefix}_asian.txt").write_text("\n".join(f"placeholder {prefix} {i}" for i in range(6)))
    keeper_dir = tmp_path / "keeper"  # a directory with weights: the manifest records their digest
    keeper_dir.mkdir()
    (keeper_dir / "model.safetensors").write_bytes(b"placeholder weights")
    keeper = HashClassifier("keeper", salt="k")
    plan = GenerationPlan.grid(["asian"], ["toxic", "benign"], 2, source=str(demos), k=3)
    config = AliceConfig(num_beams=2, candidates=10, max_new_tokens=5, keep_label_with=str(keeper_dir),
                         lambda_keep=0.7)
    decoder = AliceDecoder(HashClassifier(), config, keeper=keeper)
    result = run_generation(plan, tiny_lm, tmp_path / "run", decoder=decoder, classifier=decoder.classifier,
                            progress=False)
    decoding = result.manifest["config"]["decoding"]
    assert decoding["keep_label_with"] == str(keeper_dir) and decoding["lambda_keep"] == 0.7
    assert decoding["keeper_weights"] == fingerprint(keeper_dir) is not None
    rows = read_rows(tmp_path / "run")
    assert len(rows) == 4
    for r in rows:
        assert r.keeper_score == pytest.approx(keeper.p_toxic(r.generation))
        assert json.loads(r.decoding)["keep_label_with"] == str(keeper_dir)


def test_the_decoder_loads_the_keeper_it_names(tmp_path):
    # without a loaded keeper the decoder loads --keep-label-with itself (a Ray worker, an attack): a bad one fails
    with pytest.raises(InputError, match="unknown classifier"):
        AliceDecoder(HashClassifier(), AliceConfig(keep_label_with="no-such-keeper"))
