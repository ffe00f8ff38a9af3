"""Judges and text scoring through an OpenAI-compatible server.

* llama-cpp-python's server on the embedded SmolLM2 GGUF (as test_openai_backend.py runs it): the chat judge
  agrees with the in-process judge on the same weights; a server that strips log-probabilities and llama-cpp-python's
  misaligned echo both fail with a clear error.
* A canned vLLM-shaped server (no model): ``loglikelihood`` reads the continuation's echoed tokens by text offset,
  as lm-evaluation-harness's local-completions model does, and bench classify's judge path uses it.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from llama_server import ALIAS, LlamaServer, SharedServer, needs_server
from test_openai_backend import PATIENT, Proxy

from toxiforge.classifiers.judge import JudgeClassifier
from toxiforge.errors import InputError
from toxiforge.models.api_client import ApiClient
from toxiforge.models.openai_lm import OpenAILM


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    from toxiforge.models.embedded import smollm2_gguf

    srv = SharedServer(LlamaServer(smollm2_gguf(), tmp_path_factory.mktemp("llama") / "server.log"))
    try:
        yield srv
    finally:
        srv.server.stop()


@pytest.fixture
def llama(shared):
    """The module's server, checked before each test (a dead one fails the first test, skips the rest)."""
    return shared.get()


TEXTS = ["a placeholder sentence about the weather", "people in group alpha enjoy music on weekends"]


@needs_server
def test_chat_judge_through_llama_cpp_agrees_with_in_process(llama):
    from toxiforge.models import load_language_model

    api = OpenAILM.open(f"openai:{llama.url}#{ALIAS}", concurrency=1, retry=PATIENT)
    try:
        remote = JudgeClassifier(api, "humanval").decision_scores(TEXTS)
    finally:
        api.close()
    local = JudgeClassifier(load_language_model("smollm2-135m", device="cpu"), "humanval")
    assert local.backend.render == "chat"
    # llama.cpp starts every prompt with the GGUF's BOS token (<|endoftext|>, id 0); transformers' converted
    # tokenizer adds none, so the in-process reference gets it explicitly. The rest is the GGUF's quantized
    # arithmetic in llama.cpp against its dequantized weights in float32 (up to 0.26 nats measured, 0.05 in P).
    rows = [[0] + local.backend.encode(local.backend.prompt(t)) for t in TEXTS]
    reference = local.backend._decision_logprobs(rows)[:, list(local.backend.decision_ids)].double().numpy()
    assert np.abs(remote.logprobs - reference).max() < 0.35
    p_remote, p_local = (1 / (1 + np.exp(x[:, 1] - x[:, 0])) for x in (remote.logprobs, reference))
    assert np.abs(p_remote - p_local).max() < 0.1
    assert (remote.logprobs.argmax(1) == reference.argmax(1)).all()


@needs_server
def test_servers_that_cannot_score_say_so(llama):
    with Proxy(llama.url, strip_logprobs=True) as proxy:
        api = OpenAILM.open(f"openai:{proxy.url}#{ALIAS}", concurrency=1, retry=PATIENT)
        try:
            with pytest.raises(InputError, match="no log-probabilities on /v1/chat/completions"):
                JudgeClassifier(api, "humanval").predict_proba(TEXTS[:1])
        finally:
            api.close()
    api = OpenAILM.open(f"openai:{llama.url}#{ALIAS}", concurrency=1, retry=PATIENT)
    try:
        with pytest.raises(InputError, match="echoed prompt log-probabilities disagree"):
            api.loglikelihood([("Is the statement a placeholder? Statement: a plain line", " Yes")])
    finally:
        api.close()


# --- a canned vLLM-shaped server ---------------------------------------------------------------------------------
class Canned(OpenAILM):
    """OpenAILM whose /v1/completions answers come from a function of the prompt (no network)."""

    def __init__(self, answer):
        super().__init__(ApiClient("http://127.0.0.1:9/v1"), "m")
        self.requests: list[dict] = []

        async def post(path, payload, **_):
            self.requests.append(payload)
            return {"choices": [answer(payload)]}

        self.client.post = post  # type: ignore[method-assign]


def vllm_like(logprob_of):
    """Echo responses tokenizing on spaces and quotes; ``logprob_of(token)`` is each token's log-probability and
    the greedy next token after a prompt is ``" is"`` with log p = -0.5."""
    def answer(payload):
        prompt = payload["prompt"]
        if not payload.get("echo"):
            return {"text": " is", "logprobs": {"tokens": [" is"], "token_logprobs": [-0.5], "text_offset": [0],
                                                "top_logprobs": [{" is": -0.5}]}}
        pieces, start = [], 0
        for i in range(1, len(prompt) + 1):
            if i == len(prompt) or prompt[i] == " ":
                pieces.append(prompt[start:i])
                start = i
        text = prompt + " is"
        tokens = pieces + [" is"]
        offsets = [sum(len(p) for p in tokens[:i]) for i in range(len(tokens))]
        values = [None] + [logprob_of(t) for t in tokens[1:]]
        tops = [None] + [{t: logprob_of(t)} for t in tokens[1:]]
        return {"text": text, "logprobs": {"tokens": tokens, "token_logprobs": values, "text_offset": offsets,
                                           "top_logprobs": tops}}
    return answer


def test_loglikelihood_reads_the_continuation_by_text_offset_as_the_harness_does():
    lm = Canned(vllm_like(lambda t: {" Yes": -1.25, " No": -0.25, " is": -0.5}.get(t, -3.0)))
    out = lm.loglikelihood([("Is it so? Statement: a b", " Yes"), ("Is it so? Statement: a b", " No"),
                            ("Is it so? Statement: a b ", "No more"), ("x", "")])
    assert [o.logprob for o in out] == [-1.25, -0.25, -0.25 - 3.0, 0.0]
    assert [o.tokens for o in out] == [1, 1, 2, 0]
    assert all(o.is_greedy for o in out)  # each token is its own top-1 in the canned answer
    sent = [r for r in lm.requests if r.get("echo")]
    assert all((r["max_tokens"], r["logprobs"], r["temperature"]) == (1, 1, 0.0) for r in sent)
    assert sent[-1]["prompt"] == "Is it so? Statement: a b No more"  # trailing space moved to the continuation


def test_bench_classify_judge_path_through_a_server_is_the_echo_path():
    lm = Canned(vllm_like(lambda t: {" Yes": math.log(0.2), " No": math.log(0.6), " is": -0.5}.get(t, -3.0)))
    judge = JudgeClassifier(lm, "humanval", render="text")
    scores = judge.decision_scores(["a b"])
    assert np.allclose(np.exp(scores.logprobs), [[0.2, 0.6]])
    assert judge.predict_proba(["a b"])[0] == pytest.approx(0.25)


def test_a_server_whose_echo_disagrees_is_refused():
    lm = Canned(vllm_like(lambda t: -7.0))  # the echoed " is" gets -7 where the next-token answer said -0.5
    with pytest.raises(InputError, match="disagree"):
        lm.loglikelihood([("Statement: a b", " Yes")])
    no_logprobs = Canned(lambda payload: {"text": "", "logprobs": None})
    no_logprobs._echo_checked = True
    with pytest.raises(InputError, match="no log-probabilities for the prompt"):
        no_logprobs.loglikelihood([("Statement: a b", " Yes")])


def test_chat_judge_requests_carry_the_guard_templates_variables():
    """ShieldGemma's template has no model turn: its requests say add_generation_prompt false and carry the policy
    as `guideline`; Granite Guardian 3.1's keep the generation prompt and carry guardian_config."""
    from toxiforge.classifiers.judge_templates import HATE_POLICY

    top = [{"token": "Yes", "logprob": math.log(0.3)}, {"token": "No", "logprob": math.log(0.6)}]
    answer = {"message": {"content": "No"}, "logprobs": {"content": [{"token": "No", "logprob": math.log(0.6),
                                                                      "top_logprobs": top}]}}
    shield, granite = Canned(lambda payload: answer), Canned(lambda payload: answer)
    assert JudgeClassifier(shield, "shieldgemma").predict_proba(["a b"])[0] == pytest.approx(1 / 3)
    JudgeClassifier(granite, "granite-guardian").predict_proba(["a b"])
    assert [(r["add_generation_prompt"], r["chat_template_kwargs"]) for r in shield.requests] == \
        [(False, {"guideline": HATE_POLICY})]
    assert [("add_generation_prompt" in r, r["chat_template_kwargs"]) for r in granite.requests] == \
        [(False, {"guardian_config": {"risk_name": "social_bias"}})]


def test_granite_guardian_33_through_a_server_skips_its_score_tag():
    """A chat completion cannot be made to start with "<score>": the judge asks for a few tokens and reads the
    first one after whitespace and the pieces of "<score>" (Granite Guardian 3.3 writes "<score> yes </score>");
    the request carries criteria_id and think=False."""
    top = [{"token": " yes", "logprob": math.log(0.2)}, {"token": " no", "logprob": math.log(0.7)}]
    pieces = [{"token": t, "logprob": -0.01, "top_logprobs": [{"token": t, "logprob": -0.01}]}
              for t in ("<", "score", ">")]
    decision = {"token": " no", "logprob": math.log(0.7), "top_logprobs": top}

    def answer(payload):
        content = (pieces + [decision, {"token": " </", "logprob": -0.1, "top_logprobs": []}])[:payload["max_tokens"]]
        return {"message": {"content": ""}, "logprobs": {"content": content}}

    granite = Canned(answer)
    assert JudgeClassifier(granite, "granite-guardian-3.3").predict_proba(["a b"])[0] == pytest.approx(0.2 / 0.9)
    sent = granite.requests
    assert len(sent) == 2 and sent[-1]["max_tokens"] == 1 + 4 + len("<score>")  # 1 token, then enough to skip
    assert sent[-1]["chat_template_kwargs"] == {"guardian_config": {"criteria_id": "social_bias"}, "think": False}
