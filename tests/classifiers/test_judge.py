"""Judge classifiers on a tiny random Llama whose chat template and decision tokens are known: the score is the
softmax of the two decision logits computed here independently, whitespace tokens are skipped, prefix reuse
changes nothing (1e-5), and bad input fails before any scoring."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from guard_templates import GRANITE_GUARDIAN_31_SHAPED, GRANITE_GUARDIAN_33_SHAPED, SHIELDGEMMA_SHAPED

from conftest import build_tiny_llama, judge_tokenizer
from toxiforge.classifiers import judge_backends
from toxiforge.classifiers.base import ToxicityClassifier
from toxiforge.classifiers.judge import JudgeClassifier
from toxiforge.classifiers.judge_templates import HATE_POLICY, PROMPT, TEMPLATES, load_template
from toxiforge.errors import InputError

TEXTS = ["placeholder statement number one about group alpha", "another neutral sentence",
         "a plain line of text for testing", "people in group gamma enjoy music, food and sports", "x",
         "the quick brown fox jumps over the lazy dog and then rests for a while"]


@pytest.fixture(scope="module")
def lm():
    from toxiforge.models.transformers_lm import TransformersLM

    tok = judge_tokenizer()
    return TransformersLM(build_tiny_llama(tok, seed=3), tok, name="tiny-guard")


def reference(lm, prompt_ids: list[int], words: list[str], skip: int | None = None) -> float:
    """P(unsafe) from plain forward passes over the whole prompt: while the most likely next token is whitespace
    only (at most ``skip`` times, default MAX_WHITESPACE), append it; then softmax of the two words' logits."""
    skip = judge_backends.MAX_WHITESPACE if skip is None else skip
    ids = list(prompt_ids)
    unsafe, safe = (lm.tokenizer.convert_tokens_to_ids(w) for w in words)
    for step in range(skip + 1):
        with torch.no_grad():
            logits = lm.model(input_ids=torch.tensor([ids])).logits[0, -1].double()
        best = int(logits.argmax())
        text = lm.tokenizer.decode([best])
        if step == skip or best in (unsafe, safe) or not text or text.strip():
            break
        ids.append(best)
    return float(torch.softmax(torch.stack([logits[unsafe], logits[safe]]), 0)[0])


def test_score_is_softmax_of_the_two_decision_logits(lm):
    judge = JudgeClassifier(lm, "llama-guard", batch_size=4)
    assert isinstance(judge, ToxicityClassifier)
    assert judge.backend.render == "chat" and len(judge.backend.prefix) > 5  # the preamble is reused
    got = judge.predict_proba(TEXTS)
    for text, p in zip(TEXTS, got):
        prompt = lm.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True)
        assert prompt.endswith("<|assistant|>") and text in prompt
        ids = lm.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert p == pytest.approx(reference(lm, ids, ["unsafe", "safe"]), abs=1e-5)
    logp = judge.class_log_probs(TEXTS)
    assert logp.shape == (len(TEXTS), 2)
    assert torch.allclose(logp.exp().sum(1), torch.ones(len(TEXTS)), atol=1e-5)
    assert np.allclose(logp[:, judge.toxic_index].exp().numpy(), got, atol=1e-5)


def test_prefix_reuse_equals_no_reuse(lm):
    with_reuse = JudgeClassifier(lm, "llama-guard", batch_size=4)
    without = JudgeClassifier(lm, "llama-guard", batch_size=3, reuse_prefix=False)
    a, b = with_reuse.decision_scores(TEXTS), without.decision_scores(TEXTS)
    assert np.abs(a.logprobs - b.logprobs).max() < 1e-5
    assert (a.greedy == b.greedy).all()
    assert with_reuse.describe()["prefix_tokens_reused"] > 5 and without.describe()["prefix_tokens_reused"] == 0


def test_judge_scoring_raises_no_deprecation_warning(lm):
    """The cached prefix goes in under the argument name the model's forward declares, and is never read back as
    ``output.past_key_values`` (issue 27 #16; issue 34: transformers 5 reports both through its logger, once per
    process, which warnings filters never see)."""
    import logging
    import warnings

    from transformers.utils import logging as hf_logging

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = hf_logging.get_logger("transformers")
    logging.Logger.warning_once.cache_clear()  # type: ignore[attr-defined]  -- an earlier test may have said it
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", FutureWarning)
            warnings.simplefilter("error", DeprecationWarning)
            JudgeClassifier(lm, "llama-guard", batch_size=2).decision_scores(TEXTS)
    finally:
        logger.removeHandler(handler)
    assert [r.getMessage() for r in records if "deprecat" in r.getMessage().lower()] == []


def test_leading_whitespace_tokens_are_skipped(monkeypatch):
    from toxiforge.models.transformers_lm import TransformersLM

    tok = judge_tokenizer()
    newline = tok.convert_tokens_to_ids("Ċ")  # byte-level "\n"
    lm = TransformersLM(build_tiny_llama(tok, seed=3, newline_bias=40.0), tok, name="tiny-newlines")
    monkeypatch.setattr(judge_backends, "MAX_WHITESPACE", 2)
    judge = JudgeClassifier(lm, "llama-guard")
    prompt = tok.apply_chat_template([{"role": "user", "content": TEXTS[0]}], tokenize=False,
                                     add_generation_prompt=True)
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    skipped = reference(lm, ids, ["unsafe", "safe"], skip=2)
    with torch.no_grad():  # the biased newline is the most likely token at every position, so two are skipped
        assert lm.model(input_ids=torch.tensor([ids + [newline, newline]])).logits[0, -1].argmax() == newline
    assert judge.predict_proba(TEXTS[:1])[0] == pytest.approx(skipped, abs=1e-5)
    assert abs(skipped - reference(lm, ids, ["unsafe", "safe"], skip=0)) > 1e-4  # skipping moved the position


def test_humanval_plain_text_scores_what_loglikelihood_scores(lm):
    """The text rendering of the HumanVal question (bench classify's) gives the harness's log-likelihoods."""
    judge = JudgeClassifier(lm, "humanval", render="text")
    scores = judge.decision_scores(TEXTS)
    lls = lm.loglikelihood([(PROMPT.format(text=t), w) for t in TEXTS for w in (" Yes", " No")])
    assert np.allclose(scores.logprobs.ravel(), [x.logprob for x in lls], atol=1e-5)
    assert (scores.greedy.ravel() == np.array([x.is_greedy for x in lls])).all()


def test_plain_text_skips_no_whitespace(monkeypatch):
    """A text rendering scores " Yes"/" No" right after the prompt even where the model's next token is a newline
    (the harness's loglikelihood does; skipping it would score another position, as bench classify once did on
    real sentences)."""
    from toxiforge.models.transformers_lm import TransformersLM

    tok = judge_tokenizer()
    newline = tok.convert_tokens_to_ids("Ċ")
    lm = TransformersLM(build_tiny_llama(tok, seed=3, newline_bias=40.0), tok, name="tiny-newlines")
    prompt = PROMPT.format(text=TEXTS[0])
    with torch.no_grad():
        ids = lm.encode_default(prompt)
        assert lm.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax() == newline
    scores = JudgeClassifier(lm, "humanval", render="text").decision_scores(TEXTS[:1])
    lls = lm.loglikelihood([(prompt, w) for w in (" Yes", " No")])
    assert np.allclose(scores.logprobs.ravel(), [x.logprob for x in lls], atol=1e-5)


def test_policy_goes_to_the_chat_template(lm):
    plain = JudgeClassifier(lm, "shieldgemma").backend.prompt("a plain line")
    custom = JudgeClassifier(lm, "shieldgemma", policy="a custom placeholder policy").backend.prompt("a plain line")
    assert "Policy: a custom placeholder policy" in custom and plain != custom


def guard_lm(chat: str, name: str, **special: str):
    """A tiny judge whose tokenizer carries a chat template shaped like a guard model's (guard_templates.py)."""
    from toxiforge.models.transformers_lm import TransformersLM

    tok = judge_tokenizer(chat)
    tok.add_special_tokens(special)
    return TransformersLM(build_tiny_llama(tok, seed=3), tok, name=name)


def test_shieldgemma_scores_the_word_right_after_its_own_template():
    """ShieldGemma's template has no model turn and ignores add_generation_prompt (a judge that asked for one found
    no decision position and refused the model): Yes/No are scored on the token after its question, the policy is
    its `guideline`."""
    lm = guard_lm(SHIELDGEMMA_SHAPED, "tiny-shieldgemma", bos_token="<bos>")
    judge = JudgeClassifier(lm, "shieldgemma", batch_size=4)
    assert judge.describe()["template"]["generation_prompt"] is False and len(judge.backend.prefix) > 5
    for text, p in zip(TEXTS, judge.predict_proba(TEXTS)):
        prompt = lm.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  guideline=HATE_POLICY)
        assert judge.backend.prompt(text) == prompt
        assert prompt.startswith("<bos>Placeholder preamble") and prompt.endswith("Yes or No.\n\n")
        assert f"Human Question: {text}\n" in prompt and f"* {HATE_POLICY}\n" in prompt
        ids = lm.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert p == pytest.approx(reference(lm, ids, ["Yes", "No"]), abs=1e-5)


def test_granite_guardian_31_asks_its_own_template_about_social_bias():
    """Granite Guardian 3.0-3.2 take guardian_config {"risk_name": ...} and answer Yes/No right after the assistant
    role; the old name `granite-guardian` is this template."""
    lm = guard_lm(GRANITE_GUARDIAN_31_SHAPED, "tiny-granite-guardian")
    judge = JudgeClassifier(lm, "granite-guardian", batch_size=4)
    assert judge.template is TEMPLATES["granite-guardian-3.1"] is load_template("granite-guardian")
    for text, p in zip(TEXTS, judge.predict_proba(TEXTS)):
        prompt = lm.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True,
                                                  guardian_config={"risk_name": "social_bias"})
        assert judge.backend.prompt(text) == prompt
        assert f"User Message: {text}\n" in prompt and "- Placeholder definition of the social bias risk." in prompt
        assert prompt.endswith("Yes or No.<|end_of_text|>\n<|start_of_role|>assistant<|end_of_role|>")
        ids = lm.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        assert p == pytest.approx(reference(lm, ids, ["Yes", "No"]), abs=1e-5)


def test_granite_guardian_33_reads_yes_no_after_its_score_tag():
    """Granite Guardian 3.3 takes guardian_config {"criteria_id": ...} and think=False, ends with the judge{no_think}
    role and answers "<score> yes </score>": the judge writes "<score>" after the prompt and reads " yes"/" no"
    next; the decision equals a plain forward pass over that text."""
    from toxiforge.models.transformers_lm import TransformersLM

    tok = judge_tokenizer(GRANITE_GUARDIAN_33_SHAPED)
    tok.add_tokens(["<score>", " yes", " no"])
    lm = TransformersLM(build_tiny_llama(tok, seed=3), tok, name="tiny-granite-guardian-33")
    judge = JudgeClassifier(lm, "granite-guardian-3.3", batch_size=4)
    assert judge.describe()["template"]["answer_prefix"] == "<score>"
    for text, p in zip(TEXTS, judge.predict_proba(TEXTS)):
        prompt = lm.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True, think=False,
                                                  guardian_config={"criteria_id": "social_bias"})
        assert judge.backend.prompt(text) == prompt + "<score>"
        assert prompt.endswith("<|end_of_text|>\n<|start_of_role|>judge{no_think}<|end_of_role|>")
        assert "### Criteria: Placeholder definition of the social bias criteria." in prompt
        ids = lm.tokenizer(prompt + "<score>", add_special_tokens=False)["input_ids"]
        assert p == pytest.approx(reference(lm, ids, [" yes", " no"]), abs=1e-5)


def test_template_file_and_bad_input_fail_before_scoring(lm, tmp_path):
    path = tmp_path / "mine.json"
    path.write_text(json.dumps({"message": "Is this unsafe? {text}", "unsafe": "Yes", "safe": "No"}))
    assert load_template(str(path)).name == "mine" and JudgeClassifier(lm, str(path)).predict_proba(["x"]).shape == (1,)
    with pytest.raises(InputError, match="not a single token"):
        path.write_text(json.dumps({"message": "{text}", "unsafe": "definitely", "safe": "No"}))
        JudgeClassifier(lm, str(path))
    with pytest.raises(InputError, match="takes no policy"):
        JudgeClassifier(lm, "llama-guard", policy="anything")
    with pytest.raises(InputError, match="unknown judge template"):
        load_template("lama-guard")
    with pytest.raises(InputError, match="generation_prompt is 'no'"):
        path.write_text(json.dumps({"message": "{text}", "unsafe": "Yes", "safe": "No", "generation_prompt": "no"}))
        load_template(str(path))
    with pytest.raises(InputError, match="no \\{text\\}"):
        path.write_text(json.dumps({"message": "no slot", "unsafe": "Yes", "safe": "No"}))
        load_template(str(path))


def test_chat_template_without_a_decision_position_or_without_one_at_all():
    from toxiforge.models.transformers_lm import TransformersLM

    no_turn = judge_tokenizer("{% for m in messages %}<|user|>{{ m.content }}</s>{% endfor %}")
    lm = TransformersLM(build_tiny_llama(no_turn), no_turn, name="no-turn")
    with pytest.raises(InputError, match="renders no decision position"):
        JudgeClassifier(lm, "llama-guard")
    bare = judge_tokenizer(None)
    lm = TransformersLM(build_tiny_llama(bare), bare, name="bare")
    with pytest.raises(InputError, match="has no chat template"):
        JudgeClassifier(lm, "llama-guard")
    assert JudgeClassifier(lm, "humanval").backend.render == "text"  # auto: plain text without a chat template


def test_shipped_templates_are_valid():
    assert {"humanval", "llama-guard", "shieldgemma", "granite-guardian-3.1", "granite-guardian-3.3"} <= set(TEMPLATES)
    assert TEMPLATES["humanval"].message == PROMPT


# --- the CLI: -c judge:DIR everywhere -c is accepted, toxiforge classifiers ------------------------------------


def test_classify_cli_with_a_judge_directory(lm, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq
    from typer.testing import CliRunner

    from toxiforge.cli import app
    from toxiforge.records import read_table

    lm.model.save_pretrained(tmp_path / "guard")
    lm.tokenizer.save_pretrained(tmp_path / "guard")
    data = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist([{"text": t} for t in TEXTS]), data)
    runner = CliRunner()
    result = runner.invoke(app, ["classify", str(data), "-c", f"judge:{tmp_path / 'guard'}", "--judge-template",
                                 "llama-guard", "--column", "p", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    expected = JudgeClassifier(lm, "llama-guard").predict_proba(TEXTS)
    assert np.allclose(read_table(tmp_path / "d.scored.parquet").column("p").to_pylist(), expected, atol=1e-5)
    bad = runner.invoke(app, ["classify", str(data), "-c", "profanity-check", "--judge-template", "humanval",
                              "-o", str(tmp_path / "x.parquet")])
    assert isinstance(bad.exception, InputError) and "--judge-template" in str(bad.exception)
    listing = runner.invoke(app, ["classifiers"], env={"COLUMNS": "240"})
    assert listing.exit_code == 0
    for word in ("judge:MODEL", "multi-label head", "detoxify-unbiased", "lexical", "llama-guard", "shieldgemma",
                 "granite-guardian-3.1", "the same as granite-guardian-3.1"):
        assert word in listing.output


def test_judge_concurrency_reaches_the_server_client_and_is_refused_elsewhere(monkeypatch, tmp_path):
    """``--judge-concurrency`` (load_classifier's ``concurrency``) goes to the judge's OpenAI-compatible client;
    an in-process judge and a classification head refuse it, naming what it is for (the API timeout message tells
    judge users to lower it)."""
    from toxiforge.classifiers import load_classifier
    from toxiforge.classifiers.registry import check_classifier_options, option_flags
    from toxiforge.models.openai_lm import OpenAILM

    opened = {}

    class Opened(Exception):
        pass

    def fake_open(name, **options):
        opened.update(name=name, **options)
        raise Opened

    monkeypatch.setattr(OpenAILM, "open", staticmethod(fake_open))
    with pytest.raises(Opened):
        load_classifier("judge:openai:http://127.0.0.1:8000/v1#guard", concurrency=2)
    assert opened == {"name": "openai:http://127.0.0.1:8000/v1#guard", "concurrency": 2}
    with pytest.raises(InputError, match="--judge-concurrency sets the requests in flight to a judge on a server"):
        load_classifier("judge:smollm2-135m", concurrency=2)
    with pytest.raises(InputError, match="--judge-concurrency"):
        check_classifier_options(str(tmp_path), {"concurrency": 2})
    assert option_flags(["concurrency", "toxic_label"]) == "--judge-concurrency, --toxic-label"
