"""Any OpenAI-compatible inference server as the language model: ``--model openai:BASE_URL[#MODEL]``.

vLLM (``vllm serve``), TGI, llama.cpp's server, llama-cpp-python's server, Ollama and hosted APIs all serve
``/v1/completions``. Both decoders run on it:

* **Top-k** (:meth:`OpenAILM.sample_top_k`, the :class:`~toxiforge.models.base.RemoteSampler` protocol): one
  completions request per prompt with ``temperature``, ``top_k``, ``max_tokens``, ``stop: ["\\n"]`` and the
  row's seed; the server samples. ``top_k`` is applied by llama.cpp (tested with llama-cpp-python's server) and
  vLLM (documented); a server that rejects the field stops the run with a clear error (never a silent fallback);
  other servers may accept and ignore it, so ``describe()["top_k"]`` and the CLI say so when the server is not
  one known to apply it. The seed sent is ``seed % 2**31`` (llama.cpp takes 32-bit seeds).
* **ALICE** (the paper's original setting: upstream read GPT-3's top log-probabilities): a session asks, for
  every beam, the next token's top-N log-probabilities (``max_tokens: 1, logprobs: N``). The API returns token
  *strings*, so this backend keeps a vocabulary of its own (:mod:`toxiforge.models.openai_tokens`): each string
  seen gets an id, and a session's ``logprobs()`` is a sparse ``[rows, vocab]`` tensor, ``-inf`` everywhere
  except the N strings the server returned. ALICE's beam code and scorers run unchanged on it.

Departures from the transformers backend, all forced by the API (documented in docs/scaling.md):

* Candidates are the server's top N, N = ``top_logprobs`` capped by the server (OpenAI's completions allow 5,
  vLLM ``--max-logprobs``, default 20); ALICE's other candidates are ``-inf``. The paper saw GPT-3's top 100.
* Token texts are joined by string: a beam's text is the prompt + the chosen token strings, and the server
  re-tokenizes it at the next step (it may split it differently from the tokens that built it).
* ``encode`` splits text into GPT-2-style pieces (``" word"``, ``"."``, ``"\\n"``), not the server's tokens, so
  the prompt-token ban bans a candidate whose string equals a prompt piece (whole words with their leading
  space, as the server's tokenizer usually spells them; sub-word pieces are not matched), and the no-repeat
  n-gram rule counts prompt pieces as tokens.
* End of text is what the server says it is: each request generates one token at temperature 0, and when the
  server's stop reason says that token ended the text (``finish_reason: "stop"``; no stop strings are sent),
  the top-ranked string is the end-of-sequence token from then on. Strings ranked below it that the server never
  chose are recognised by the usual spellings (``</s>``, ``<|endoftext|>``, ``<|im_end|>``, ..., and "", which
  llama.cpp returns for its end token); a top-ranked usual spelling that the server did not stop on is not
  end-of-text there.
* A string that is only part of a character (U+FFFD in it, or vLLM's ``bytes:`` form; llama.cpp's "" when the
  server did not stop on it) is never a candidate: its text cannot be appended, and the server would re-read a
  literal replacement character.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from functools import partial
from typing import Any

import torch

from toxiforge.errors import InputError
from toxiforge.models.api_client import ApiClient, RetryPolicy, ServerError, public_url
from toxiforge.models.base import Loglikelihood, Sample
from toxiforge.models.openai_scoring import chat_decision, check_echo, echo_loglikelihood, first_choice
from toxiforge.models.openai_tokens import PIECES, ApiSession, TokenTable

# Servers whose /v1/models `owned_by` says they honour top_k on /v1/completions (vLLM, llama.cpp's server,
# llama-cpp-python's server, which reports "me").
TOP_K_SERVERS = frozenset({"vllm", "llamacpp", "me"})
SEED_MODULUS = 2 ** 31


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``openai:BASE_URL[#MODEL]`` -> (base URL ending in /v1 unless it has a path, model or None)."""
    body = spec[len("openai:"):] if spec.startswith("openai:") else spec
    url, _, model = body.partition("#")
    if not re.match(r"^https?://[^/]", url):
        raise InputError(f"--model {spec!r} has no http(s) URL after 'openai:'",
                         hint="use --model openai:http://127.0.0.1:8000/v1#MODEL")
    url = url.rstrip("/")
    if re.match(r"^https?://[^/]+$", url):  # no path: the OpenAI convention is BASE/v1
        url += "/v1"
    return url, (model or None)


class OpenAILM:
    """An OpenAI-compatible server behind the LanguageModel and RemoteSampler protocols. Open with :meth:`open`."""

    def __init__(self, client: ApiClient, model: str, *, owned_by: str | None = None, top_logprobs: int = 20,
                 vocab_capacity: int = 65536):
        if top_logprobs < 1:
            raise InputError(f"top_logprobs={top_logprobs} must be at least 1", hint="use 20")
        self.client = client
        self.model = model
        self.owned_by = owned_by
        self.name = f"openai:{client.url}#{model}"
        self.requested_top_logprobs = top_logprobs
        self._top_logprobs: int | None = None  # what the server accepts, found on first use
        self._echo_checked = False             # loglikelihood's echo check passed (see _check_echo)
        self.table = TokenTable(vocab_capacity)

    @classmethod
    def open(cls, spec: str, *, api_key_env: str | None = None, concurrency: int = 8, top_logprobs: int = 20,
             retry: RetryPolicy = RetryPolicy(), vocab_capacity: int = 65536) -> OpenAILM:
        """Connect to ``openai:BASE_URL[#MODEL]`` and check the model (a wrong URL or name fails here).

        The key comes from ``$OPENAI_API_KEY`` or the variable named by ``api_key_env`` (then it must be set).
        """
        url, model = parse_spec(spec)
        env = api_key_env or "OPENAI_API_KEY"
        api_key = os.environ.get(env)
        if api_key_env and not api_key:
            raise InputError(f"--api-key-env {api_key_env}: that environment variable is not set",
                             hint=f"export {api_key_env}=... or drop --api-key-env for a server without keys")
        client = ApiClient(url, api_key=api_key, concurrency=concurrency, retry=retry)
        try:
            listing = client.run(client.get("/models", retry=RetryPolicy(max_attempts=3, deadline=10.0,
                                                                         timeout=min(retry.timeout, 30.0))))
        except ServerError as exc:
            client.close()
            raise InputError(f"cannot reach an OpenAI-compatible server at {client.url} "
                             f"({str(exc).split('. Fix:')[0]})",
                             hint="start the server (e.g. `vllm serve MODEL` or `python -m llama_cpp.server "
                                  "--model FILE.gguf`) and pass its base URL, e.g. openai:http://127.0.0.1:8000/v1"
                             ) from None
        except BaseException:
            client.close()
            raise
        served = [m for m in listing.get("data", []) if isinstance(m, dict) and m.get("id")]
        names = [m["id"] for m in served]
        if model is None:
            if len(names) != 1:
                client.close()
                raise InputError(f"the server at {client.url} serves {len(names)} models ({', '.join(names)})",
                                 hint="name one: --model openai:URL#MODEL")
            model = names[0]
        elif names and model not in names:
            client.close()
            from toxiforge._lazy import did_you_mean

            raise InputError(f"the server at {client.url} does not serve model {model!r}",
                             hint=did_you_mean(model, names))
        owner = next((m.get("owned_by") for m in served if m["id"] == model), None)
        return cls(client, model, owned_by=owner, top_logprobs=top_logprobs, vocab_capacity=vocab_capacity)

    def close(self) -> None:
        self.client.close()

    # --- LanguageModel protocol ----------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self.table.capacity

    @property
    def device(self) -> torch.device:
        return torch.device("cpu")

    @property
    def eos_token_ids(self) -> frozenset[int]:
        return frozenset({0})

    def newline_mask(self) -> torch.Tensor:
        return self.table.newline_mask()

    def token_texts(self) -> list[str]:
        return self.table.texts()

    def encode(self, text: str) -> list[int]:
        return [self.table.intern(piece) for piece in PIECES.findall(text)]

    def decode(self, token_ids: Sequence[int]) -> str:
        return "".join(self.table.text(int(i)) for i in token_ids)

    def batch_decode(self, sequences: list[list[int]]) -> list[str]:
        return [self.decode(s) for s in sequences]

    def start(self, prompts: Sequence[str]) -> ApiSession:
        if len(prompts) == 0:
            raise InputError("no prompts to start a session with", hint="pass at least one prompt")
        return ApiSession(self, list(prompts))

    def loglikelihood(self, requests: Sequence[tuple[str, str]], *,
                      batch_size: int | None = None) -> list[Loglikelihood]:
        """See :meth:`toxiforge.models.base.LanguageModel.loglikelihood`; ``batch_size`` is ignored (requests run
        ``concurrency`` at a time).

        As lm-evaluation-harness's ``local-completions`` model scores text: one ``/v1/completions`` request per
        pair with the whole text as the prompt and ``echo: true, logprobs: 1, max_tokens: 1, temperature: 0``; the
        continuation's tokens are the echoed tokens whose ``text_offset`` falls in the continuation (the harness
        counts them with its local tokenizer instead). The server tokenizes the text its own way (vLLM adds BOS
        where the tokenizer does). A server that returns no prompt log-probabilities is an InputError, and so is
        one whose echoed log-probabilities disagree with its own next-token log-probabilities: the first request
        is checked once (:func:`~toxiforge.models.openai_scoring.check_echo`; llama-cpp-python's server fails it).
        """
        requests = list(requests)
        if not self._echo_checked:
            probe = next((c for c, _ in requests if c.strip()), None)
            if probe is not None:
                self.client.run(check_echo(self, probe))
                self._echo_checked = True
        return self.client.gather([partial(echo_loglikelihood, self, context, continuation)
                                   for context, continuation in requests])

    def chat_decision_logprobs(self, messages: Sequence[str], *, top_logprobs: int, chat_kwargs: dict[str, Any],
                               skip_whitespace: int, generation_prompt: bool = True,
                               answer_prefix: str = "") -> list[dict[str, float]]:
        """For a judge: the top-N log-probabilities (token string -> log p) of the first answer token to each user
        message that is neither whitespace nor part of ``answer_prefix`` (written first), rendered by the server's
        chat template (``chat_kwargs`` sent as vLLM's ``chat_template_kwargs``; ``generation_prompt=False`` sends
        ``add_generation_prompt: false``), greedy, skipping up to ``skip_whitespace`` whitespace-only tokens."""
        return self.client.gather([partial(chat_decision, self, m, top_logprobs, chat_kwargs, skip_whitespace,
                                           generation_prompt, answer_prefix) for m in messages])

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.client.url,
            "backend": "openai-compatible",
            "url": self.client.url,
            "model": self.model,
            "owned_by": self.owned_by,
            "dtype": "server",
            "device": "server",
            "concurrency": self.client.concurrency,
            "top_logprobs": self._top_logprobs or self.requested_top_logprobs,
            "top_k": ("sent; this server applies it" if self.honours_top_k else
                      "sent; applied by vLLM and llama.cpp, possibly ignored by this server: check it"),
            "seed": f"row seed % {SEED_MODULUS}",
            "retry": {"max_attempts": self.client.retry.max_attempts, "deadline_s": self.client.retry.deadline},
        }

    @property
    def honours_top_k(self) -> bool:
        """Whether the server is one known to apply ``top_k`` (vLLM, llama.cpp); others may ignore it."""
        return (self.owned_by or "").lower() in TOP_K_SERVERS

    # --- RemoteSampler and ChatSampler protocols: the server decodes --------------------------------------
    def _decoding_payload(self, config, seed: int) -> dict[str, Any]:
        """The sampling fields of a request for ``config`` (a TopKConfig). Top-1 is greedy decoding, sent as
        ``temperature: 0`` without ``top_k``: a server that ignores ``top_k`` would otherwise sample at T = 1, and
        OpenAI's API rejects the field."""
        payload: dict[str, Any] = {"model": self.model, "max_tokens": config.max_new_tokens,
                                   "seed": int(seed) % SEED_MODULUS}
        if config.top_k == 1:
            payload["temperature"] = 0.0
        else:
            payload.update(temperature=config.temperature, top_k=config.top_k)
        if config.stop_at_newline:
            payload["stop"] = ["\n"]
        return payload

    def _decode_all(self, path: str, bodies: list[dict[str, Any]], text_of) -> list:
        try:
            responses = self.client.gather([partial(self.client.post, path, body) for body in bodies])
        except InputError as exc:
            if "top_k" in exc.message:
                raise InputError(f"{self.name} does not accept top_k ({exc.message})",
                                 hint="top-k sampling needs a server that applies top_k (vLLM, llama.cpp); "
                                      "OpenAI's own API has no top_k") from None
            raise
        samples = []
        for response in responses:
            choice = first_choice(response, self.name)
            samples.append(Sample(str(text_of(choice) or ""), (), _finish_reason(choice)))
        return samples

    def sample_top_k(self, prompts: Sequence[str], seeds: Sequence[int], config) -> list:
        """One completion per prompt, decoded by the server with ``config``'s settings and the row seeds."""
        bodies = [{**self._decoding_payload(config, s), "prompt": p} for p, s in zip(prompts, seeds)]
        return self._decode_all("/completions", bodies, lambda choice: choice.get("text"))

    def sample_chat(self, messages: Sequence[str], seeds: Sequence[int], config) -> list:
        """One chat answer per user message (``/v1/chat/completions``; the server applies its chat template)."""
        bodies = [{**self._decoding_payload(config, s), "messages": [{"role": "user", "content": m}]}
                  for m, s in zip(messages, seeds)]
        return self._decode_all("/chat/completions", bodies,
                                lambda choice: (choice.get("message") or {}).get("content"))

    # --- top-N log-probabilities for ALICE -----------------------------------------------------------------
    def top_logprobs(self) -> int:
        """N, the number of next-token log-probabilities per request: the requested N, lowered to what the server
        accepts (found with one probe request the first time)."""
        if self._top_logprobs is None:
            self._top_logprobs = self.client.run(self._probe())
        return self._top_logprobs

    async def _probe(self) -> int:
        tried = []
        for n in dict.fromkeys([self.requested_top_logprobs, 20, 5, 1]):
            if n > self.requested_top_logprobs:
                continue
            tried.append(n)
            try:
                top = await self.next_token(" -", n)
            except InputError as exc:
                if "logprob" in exc.message.lower():
                    continue
                raise
            return max(1, min(n, len(top)))
        raise InputError(f"{self.name} refused every top-logprobs request (N = {tried})",
                         hint="ALICE needs the next token's log-probabilities; use a server that returns them "
                              "(vLLM, llama.cpp)")

    async def next_token(self, text: str, n: int) -> dict[str, float]:
        """The top-``n`` log-probabilities (token string -> log p) of the greedy next token after ``text``."""
        return (await self._next_tokens(text, n))[0]

    async def _next_tokens(self, text: str, n: int) -> tuple[dict[str, float], bool]:
        """The top-N next-token log-probabilities after ``text``, and whether the server ended the text on the
        token it generated (the top-ranked one: temperature 0)."""
        payload = {"model": self.model, "prompt": text, "max_tokens": 1, "temperature": 0.0, "logprobs": n,
                   "seed": 0}
        choice = first_choice(await self.client.post("/completions", payload), self.name)
        lp = choice.get("logprobs") or {}
        tops = lp.get("top_logprobs") if isinstance(lp, dict) else None
        if not tops or not isinstance(tops[0], dict) or not tops[0]:
            raise InputError(f"{self.name} returned no log-probabilities for the next token",
                             hint="ALICE needs them (upstream read GPT-3's top log-probabilities); use a server that "
                                  "returns `logprobs` on /v1/completions (vLLM, llama.cpp), or run --method top-k")
        return {str(k): float(v) for k, v in tops[0].items()}, choice.get("finish_reason") == "stop"

    def next_token_logprobs(self, texts: Sequence[str]) -> list[dict[str, float]]:
        """Top-N next-token log-probabilities (token string -> log p) after each text, requested concurrently."""
        return [tops for tops, _ in self.next_tokens(texts)]

    def next_tokens(self, texts: Sequence[str]) -> list[tuple[dict[str, float], bool]]:
        """:meth:`next_token_logprobs` with, per text, whether the server ended the text on its top token."""
        n = self.top_logprobs()
        return self.client.gather([partial(self._next_tokens, t, n) for t in texts])

    def candidate_ids(self, tops: dict[str, float], ended: bool) -> dict[int, float]:
        """Token id -> log p of the strings ALICE may choose from one answer (see the module docstring: end of
        text from the server's stop reason; partial characters dropped)."""
        best = max(tops, key=tops.__getitem__)
        if ended:
            self.table.mark_eos(best)
        out: dict[int, float] = {}
        for token, lp in tops.items():
            if "\ufffd" in token or token.startswith("bytes:"):
                continue  # part of a character: its text cannot be appended
            if token == best and not ended and token in self.table.eos_texts:
                continue  # the server did not stop on it: not its end of text (llama.cpp's "" for a partial byte)
            token_id = self.table.intern(token)
            out[token_id] = max(out.get(token_id, float("-inf")), lp)  # strings that merge keep the best
        return out



def _finish_reason(choice: dict) -> str:
    """The pipeline's finish reasons from the API's: "length"; "newline" where the server says the stop string
    ended it (vLLM's ``stop_reason``); "eos" where it says the model's end token did; else "stop" (llama.cpp
    does not say which of the two)."""
    reason = choice.get("finish_reason")
    if reason == "length":
        return "length"
    if "stop_reason" in choice:
        return "newline" if choice["stop_reason"] == "\n" else "eos" if choice["stop_reason"] is None else "stop"
    return "stop" if reason == "stop" else str(reason or "stop")


__all__ = ["ApiSession", "OpenAILM", "TokenTable", "parse_spec", "public_url"]
