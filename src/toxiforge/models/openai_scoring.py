"""Scoring given text and reading a judge's decision through an OpenAI-compatible server (used by
:class:`~toxiforge.models.openai_lm.OpenAILM`'s ``loglikelihood`` and ``chat_decision_logprobs``).

* :func:`echo_loglikelihood`: lm-evaluation-harness's ``local-completions`` request, ``echo: true, logprobs: 1,
  max_tokens: 1``; the continuation's tokens are the echoed tokens whose ``text_offset`` falls inside it.
* :func:`check_echo`: the one-time check that the server's echoed log-probabilities are its next-token ones.
* :func:`chat_decision`: the top-N log-probabilities of a chat answer's first non-whitespace token.
"""

from __future__ import annotations

from typing import Any

from toxiforge.errors import InputError, ToxiforgeError
from toxiforge.models.base import Loglikelihood


def first_choice(response: dict, name: str) -> dict:
    """The first choice of a completions answer; a ToxiforgeError when it has none (not an OpenAI-style server)."""
    choices = response.get("choices") if isinstance(response, dict) else None
    if not choices or not isinstance(choices[0], dict):
        raise ToxiforgeError(f"{name} answered without choices: {str(response)[:200]}. Fix: check that the URL "
                             "is an OpenAI-compatible /v1 base URL")
    return choices[0]


def top_of(position: dict) -> dict[str, float]:
    """A chat-completions logprobs position's ``top_logprobs`` as token string -> log p."""
    return {str(t["token"]): float(t["logprob"]) for t in position.get("top_logprobs") or []}


async def check_echo(lm: Any, context: str) -> None:
    """The server's most likely next token after ``context``, echoed back after it, must get the log-probability
    the server gave it as the next token (within 0.05: batches differ in float rounding)."""
    context = context.rstrip()
    top = await lm.next_token(context, 1)
    best = max(top, key=top.__getitem__)
    if not best.strip():
        return  # a whitespace token would move into the context's trailing whitespace: nothing to compare
    token, value = await echo_loglikelihood(lm, context, best, first_only=True)
    if token != best or abs(top[best] - value) > 0.05:
        raise InputError(f"{lm.name}'s echoed prompt log-probabilities disagree with its next-token "
                         f"log-probabilities (after the same text, {best!r}: {top[best]:.4f} as the next token, "
                         f"{token!r}: {value:.4f} echoed); llama-cpp-python's server pairs echoed tokens with the "
                         "wrong positions", hint="score text through vLLM (`vllm serve MODEL`), or in-process "
                                                 "(an embedded name, hub id, model directory or .gguf)")

async def echo_loglikelihood(lm: Any, context: str, continuation: str, *, first_only: bool = False) -> Any:
    if not continuation:
        return Loglikelihood(0.0, True, 0)
    if not context:
        raise InputError(f"{lm.name} cannot score text without a context (the first token has no "
                         "log-probability in an echoed prompt)",
                         hint="score from an empty context (perplexity) with an in-process model")
    spaces = len(context) - len(context.rstrip())
    if spaces:  # the harness's rule: trailing whitespace of the context moves to the continuation
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    payload = {"model": lm.model, "prompt": context + continuation, "max_tokens": 1, "temperature": 0.0,
               "logprobs": 1, "echo": True, "seed": 0}
    choice = first_choice(await lm.client.post("/completions", payload), lm.name)
    lp: dict = choice["logprobs"] if isinstance(choice.get("logprobs"), dict) else {}
    tokens, values, offsets = lp.get("tokens"), lp.get("token_logprobs"), lp.get("text_offset")
    tops = lp.get("top_logprobs") or [None] * len(tokens or [])
    if not tokens or not values or not offsets or len(offsets) != len(tokens):
        raise InputError(f"{lm.name} returned no log-probabilities for the prompt it was given (echo)",
                         hint="scoring text through a server needs /v1/completions with `echo: true` and "
                              "`logprobs` (vLLM; lm-evaluation-harness's local-completions relies on it); or "
                              "score in-process (an embedded name, hub id, model directory or .gguf)")
    start, end = len(context), len(context) + len(continuation)
    picked = [i for i, offset in enumerate(offsets) if start <= offset < end]
    if not picked or (picked[0] > 0 and offsets[picked[0] - 1] + len(tokens[picked[0] - 1]) > start):
        raise InputError(f"{lm.name} tokenized the context and the continuation {continuation!r} together "
                         "(a token spans both), so the continuation's log-probability cannot be read",
                         hint="end the context where a token ends (e.g. before the space of ' Yes')")
    if any(values[i] is None for i in picked):
        raise InputError(f"{lm.name} returned no log-probability for a continuation token",
                         hint="use a server that returns echoed prompt log-probabilities (vLLM)")
    if first_only:  # (token, log p) of the continuation's first token, for _check_echo
        return str(tokens[picked[0]]), float(values[picked[0]])
    greedy = all(isinstance(tops[i], dict) and tops[i] and max(tops[i], key=tops[i].get) == tokens[i]
                 for i in picked)
    return Loglikelihood(float(sum(values[i] for i in picked)), bool(greedy), len(picked))


async def chat_decision(lm: Any, message: str, n: int, chat_kwargs: dict[str, Any], skip: int,
                        generation_prompt: bool = True, answer_prefix: str = "") -> dict[str, float]:
    payload: dict[str, Any] = {"model": lm.model, "messages": [{"role": "user", "content": message}],
                               "max_tokens": 1, "temperature": 0.0, "logprobs": True, "top_logprobs": n, "seed": 0}
    if not generation_prompt:  # vLLM's request field (default true); ShieldGemma's template ignores it anyway
        payload["add_generation_prompt"] = False
    if chat_kwargs:
        payload["chat_template_kwargs"] = chat_kwargs
    content: list = []
    prefix = "".join(answer_prefix.split())
    for max_tokens in dict.fromkeys((1, 1 + skip + len(prefix))):
        payload["max_tokens"] = max_tokens
        choice = first_choice(await lm.client.post("/chat/completions", payload), lm.name)
        logprobs = choice.get("logprobs")
        content = (logprobs.get("content") if isinstance(logprobs, dict) else None) or []
        if not content:
            raise InputError(f"{lm.name} returned no log-probabilities on /v1/chat/completions",
                             hint="a judge needs a server that returns `logprobs`/`top_logprobs` for chat "
                                  "completions (vLLM, llama.cpp)")
        rest = prefix
        # the first token that is neither whitespace only (Llama Guard 3 writes "\n\n") nor the next piece of the
        # answer prefix (Granite Guardian 3.3 writes "<score>" before its yes/no)
        for position in content:
            token = str(position.get("token", ""))
            piece = "".join(token.split())
            if token and not piece:
                continue
            if rest and piece and rest.startswith(piece):
                rest = rest[len(piece):]
                continue
            return top_of(position)
        if len(content) < max_tokens:  # the answer ended: nothing but whitespace and the prefix
            break
    return top_of(content[-1])


