"""Where a judge's decision log-probabilities come from: an in-process transformers model or a server.

:class:`LocalDecisions` (transformers): the prompt of every statement is rendered and tokenized; the tokens before
the statement (the rendered template's shared prefix) are run once and their key/value cache is copied into every
batch, which then runs only each prompt's own tokens, left-padded, with explicit position ids and an attention
mask: one forward pass per batch, plus one short step per skipped whitespace token. The numbers equal a plain
forward pass over the whole prompts (the test checks 1e-5).

:class:`ServerDecisions` (OpenAI-compatible server):

* ``render="chat"`` (the server applies the model's own chat template, ``chat_kwargs`` go as vLLM's
  ``chat_template_kwargs``; a template with ``generation_prompt: false`` sends ``add_generation_prompt: false``,
  which ShieldGemma's template ignores anyway): one ``/v1/chat/completions`` request per statement with
  ``max_tokens: 1``, ``temperature: 0`` and ``top_logprobs: N``; the two words are read from the top N
  (Granite Guardian's card reads them so). A word missing from the top N is bounded by the N-th
  log-probability (counted in ``describe()["bounded"]``). A first token that is whitespace only is skipped by
  asking again for up to :data:`MAX_WHITESPACE` + 1 tokens; so are the tokens of the template's answer prefix
  (Granite Guardian 3.3's ``<score>``), which a chat completion cannot be made to start with.
* ``render="text"``: the exact log-probability of each word after the prompt, from
  :meth:`~toxiforge.models.openai_lm.OpenAILM.loglikelihood` (``echo: true``, as lm-evaluation-harness's
  ``local-completions`` scores text): the path ``bench classify`` takes through a server.

Prefix caching on the server is the server's: vLLM ``--enable-prefix-caching`` (on by default in vLLM's V1
engine), llama.cpp's ``llama-server`` reuses a slot's cache by default (``--cache-reuse N`` for shifted prefixes).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np
import torch

from toxiforge.classifiers.judge_templates import TARGET_DELIMITER, JudgeTemplate
from toxiforge.errors import InputError

SENTINEL = "\u2063TOXIFORGE\u2063"  # marks where the statement goes, to find the rendered prompt's shared prefix
PLACEHOLDER = "A neutral placeholder statement."
MAX_WHITESPACE = 4   # whitespace-only tokens skipped before the decision position (Llama Guard 3 writes one)


class DecisionScores(NamedTuple):
    """Per text: log P(unsafe word), log P(safe word) over the whole vocabulary at the decision position
    (``logprobs`` ``[N, 2]``), and whether each word is the most likely token there (``greedy`` ``[N, 2]``)."""

    logprobs: np.ndarray
    greedy: np.ndarray


def open_backend(lm: Any, template: JudgeTemplate, policy: str | None, *, render: str | None, batch_size: int,
                 reuse_prefix: bool, top_logprobs: int) -> LocalDecisions | ServerDecisions:
    """The backend for ``lm``: a TransformersLM in-process, an OpenAILM through its server."""
    from toxiforge.models.openai_lm import OpenAILM
    from toxiforge.models.transformers_lm import TransformersLM

    if isinstance(lm, TransformersLM):
        return LocalDecisions(lm, template, policy, render=render, batch_size=batch_size, reuse_prefix=reuse_prefix)
    if isinstance(lm, OpenAILM):
        return ServerDecisions(lm, template, policy, render=render, top_logprobs=top_logprobs)
    raise InputError(f"a judge runs on a transformers model or an OpenAI-compatible server, not {type(lm).__name__}",
                     hint="use -c judge:MODEL with an embedded name, hub id, model directory, .gguf or openai:URL")


class LocalDecisions:
    """In-process decision log-probabilities with a reused prefix cache (see the module docstring)."""

    def __init__(self, lm: Any, template: JudgeTemplate, policy: str | None, *, render: str | None,
                 batch_size: int, reuse_prefix: bool):
        self.lm, self.model, self.tokenizer = lm, lm.model, lm.tokenizer
        self.template, self.policy = template, policy
        self.batch_size, self.reuse_prefix = batch_size, reuse_prefix
        has_chat = bool(getattr(self.tokenizer, "chat_template", None))
        self.render = render or template.render
        if self.render == "auto":
            self.render = "chat" if has_chat else "text"
        if self.render == "chat" and not has_chat:
            raise InputError(f"{lm.name} has no chat template, and judge template {template.name!r} needs one",
                             hint="use --judge-template humanval (plain text for a model without a chat template), "
                                  "or a template FILE with \"render\": \"text\"")
        self.kwargs = template.kwargs_for(policy)
        delimiter = TARGET_DELIMITER if self.render == "text" else ""
        self.words = (delimiter + template.unsafe, delimiter + template.safe)
        probe = self.prompt(SENTINEL)
        if SENTINEL not in probe:
            raise InputError(f"the {self.render} rendering of judge template {template.name!r} drops the statement",
                             hint="check the template's message ({text}) and the model's chat template")
        if self.render == "chat" and template.generation_prompt and self._chat(SENTINEL) == self._chat(
                SENTINEL, generation_prompt=False):
            raise InputError(f"{lm.name}'s chat template renders no decision position (no assistant turn after the "
                             "user's message)", hint="use a model whose chat template adds a generation prompt, or "
                                                    "a template FILE with \"generation_prompt\": false to score "
                                                    "right after the user's message")
        self.decision_ids = tuple(self._single_token(probe, w) for w in self.words)
        # The shared prefix: the tokens that prompts of statements with different first characters have in common
        # (so a prefix token that merges with the statement's first characters is never reused).
        probes = [self.encode(self.prompt(t)) for t in (SENTINEL, PLACEHOLDER, "0")]
        shared = 0
        while all(shared < len(p) - 1 for p in probes) and len({p[shared] for p in probes}) == 1:
            shared += 1
        self.prefix = tuple(probes[0][:shared])
        self._prefix_cache: dict[int, list[tuple[torch.Tensor, torch.Tensor]]] = {}
        # Whitespace is skipped in chat renderings only: a text rendering's words carry their leading space (" Yes")
        # and are scored right after the prompt, as the harness's loglikelihood and the server's echo score them.
        self.whitespace = torch.tensor([self.render == "chat" and bool(t) and not t.strip() for t in lm.token_texts()],
                                       dtype=torch.bool)
        self.whitespace[list(self.decision_ids)] = False

    # --- rendering -----------------------------------------------------------------------------------------
    def _chat(self, text: str, *, generation_prompt: bool | None = None) -> str:
        """The chat rendering of one statement, with the template's generation prompt unless told otherwise."""
        if generation_prompt is None:
            generation_prompt = self.template.generation_prompt
        messages = [{"role": "user", "content": self.template.message_for(text, self.policy)}]
        try:
            return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation_prompt,
                                                      **self.kwargs)
        except Exception as exc:  # jinja errors: a template that needs other variables or roles
            raise InputError(f"{self.lm.name}'s chat template failed on judge template {self.template.name!r}: {exc}",
                             hint="check --judge-template (its chat_kwargs) against the model's chat template"
                             ) from None

    def prompt(self, text: str) -> str:
        """The rendered prompt of one statement and the template's answer prefix (the decision word comes next)."""
        if self.render == "chat":
            return self._chat(text) + self.template.answer_prefix
        return self.template.message_for(text, self.policy) + self.template.answer_prefix

    def encode(self, prompt: str) -> list[int]:
        """Chat renderings carry their own special tokens; plain text is encoded as the harness encodes a context."""
        if self.render == "chat":
            return self.tokenizer(prompt, add_special_tokens=False)["input_ids"]
        return self.lm.encode_default(prompt)

    def _single_token(self, probe: str, word: str) -> int:
        context, whole = self.encode(probe), self.encode(probe + word)
        extra = whole[len(context):]
        if whole[:len(context)] != context or len(extra) != 1:
            pieces = self.tokenizer.convert_ids_to_tokens(extra) if whole[:len(context)] == context else "merged"
            raise InputError(f"decision word {word!r} of judge template {self.template.name!r} is not a single token "
                             f"after the prompt in {self.lm.name}'s tokenizer ({pieces})",
                             hint="use a template FILE whose unsafe/safe words are single tokens (with or without "
                                  "a leading space, as the model writes them)")
        return int(extra[0])

    # --- scoring -------------------------------------------------------------------------------------------
    def score(self, texts: list[str]):
        encoded = [self.encode(self.prompt(t)) for t in texts]
        logprobs = np.empty((len(texts), 2))
        greedy = np.empty((len(texts), 2), dtype=bool)
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i]), reverse=True)
        for b in range(0, len(order), self.batch_size):
            index = order[b:b + self.batch_size]
            lp = self._decision_logprobs([encoded[i] for i in index])
            ids = torch.tensor(self.decision_ids)
            logprobs[index] = lp[:, ids].double().numpy()
            greedy[index] = (lp.argmax(-1, keepdim=True) == ids).numpy()
        return DecisionScores(logprobs, greedy)

    def _shared(self, rows: list[list[int]]) -> int:
        """How many leading tokens every row shares with the template's prefix (each row keeps >= 1 own token)."""
        if not self.reuse_prefix:
            return 0
        n = len(self.prefix)
        for row in rows:
            limit = min(n, len(row) - 1)
            k = 0
            while k < limit and row[k] == self.prefix[k]:
                k += 1
            n = k
        return n

    @torch.inference_mode()
    def _prefix_kv(self, n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
        if n not in self._prefix_cache:
            from transformers import DynamicCache

            ids = torch.tensor([self.prefix[:n]], device=self.lm.device)
            cache = DynamicCache(config=self.model.config)  # filled in place: never read back from the output
            self.model(input_ids=ids, use_cache=True, logits_to_keep=1, **{self.lm.cache_argument: cache})
            self._prefix_cache[n] = [(layer.keys, layer.values) for layer in cache.layers]
        return self._prefix_cache[n]

    @torch.inference_mode()
    def _decision_logprobs(self, rows: list[list[int]]) -> torch.Tensor:
        """float32 CPU ``[B, vocab]`` log-softmax at each row's decision position (whitespace skipped)."""
        from transformers import DynamicCache

        device = self.lm.device
        shared = self._shared(rows)
        cache = DynamicCache(config=self.model.config)
        if shared:
            for layer, (keys, values) in enumerate(self._prefix_kv(shared)):
                cache.update(keys.expand(len(rows), -1, -1, -1).contiguous(),
                             values.expand(len(rows), -1, -1, -1).contiguous(), layer)
        own = [row[shared:] for row in rows]
        width = max(len(r) for r in own)
        input_ids = torch.full((len(rows), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros((len(rows), shared + width), dtype=torch.long)
        mask[:, :shared] = 1
        for r, ids in enumerate(own):
            input_ids[r, width - len(ids):] = torch.tensor(ids)
            mask[r, shared + width - len(ids):] = 1
        mask = mask.to(device)
        positions = (mask.cumsum(-1) - 1).clamp(min=0)[:, shared:]
        out = self.model(input_ids=input_ids.to(device), attention_mask=mask, position_ids=positions,
                         use_cache=True, logits_to_keep=1, **{self.lm.cache_argument: cache})
        logprobs = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        whitespace = self.whitespace.to(device)
        pending = whitespace[logprobs.argmax(-1)]
        for _ in range(MAX_WHITESPACE):
            if not bool(pending.any()):
                break
            nxt = logprobs.argmax(-1, keepdim=True)
            mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
            positions = positions[:, -1:] + 1
            out = self.model(input_ids=nxt, attention_mask=mask, position_ids=positions,
                             use_cache=True, logits_to_keep=1, **{self.lm.cache_argument: cache})
            step = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
            logprobs = torch.where(pending.view(-1, 1), step, logprobs)
            pending = pending & whitespace[step.argmax(-1)]
        return logprobs.cpu()

    def describe(self) -> dict[str, Any]:
        return {"render": self.render, "decision_tokens": dict(zip(("unsafe", "safe"), self.words)),
                "prefix_tokens_reused": len(self.prefix) if self.reuse_prefix else 0}


class ServerDecisions:
    """Decision log-probabilities from an OpenAI-compatible server (see the module docstring)."""

    def __init__(self, lm: Any, template: JudgeTemplate, policy: str | None, *, render: str | None,
                 top_logprobs: int):
        self.lm, self.template, self.policy = lm, template, policy
        self.render = render or template.render
        if self.render == "auto":  # the server knows whether its model has a chat template; it applies it
            self.render = "chat"
        self.kwargs = template.kwargs_for(policy)
        delimiter = TARGET_DELIMITER if self.render == "text" else ""
        self.words = (delimiter + template.unsafe, delimiter + template.safe)
        self.top_logprobs = top_logprobs
        self.bounded = 0

    def score(self, texts: list[str]):
        if self.render == "text":
            prompts = [self.template.message_for(t, self.policy) + self.template.answer_prefix for t in texts]
            scored = self.lm.loglikelihood([(p, w) for p in prompts for w in self.words])
            logprobs = np.array([s.logprob for s in scored], dtype=np.float64).reshape(-1, 2)
            greedy = np.array([s.is_greedy for s in scored], dtype=bool).reshape(-1, 2)
            return DecisionScores(logprobs, greedy)
        tops = self.lm.chat_decision_logprobs([self.template.message_for(t, self.policy) for t in texts],
                                              top_logprobs=self.top_logprobs, chat_kwargs=self.kwargs,
                                              skip_whitespace=MAX_WHITESPACE,
                                              generation_prompt=self.template.generation_prompt,
                                              answer_prefix=self.template.answer_prefix)
        logprobs = np.empty((len(texts), 2))
        greedy = np.zeros((len(texts), 2), dtype=bool)
        for i, top in enumerate(tops):
            if not top:
                raise InputError(f"{self.lm.name} returned no log-probabilities for the decision position",
                                 hint="a judge needs a server that returns top_logprobs on /v1/chat/completions "
                                      "(vLLM, llama.cpp)")
            floor = min(top.values())
            best = max(top, key=top.__getitem__)
            for j, word in enumerate(self.words):
                if word in top:
                    logprobs[i, j], greedy[i, j] = top[word], word == best
                else:
                    logprobs[i, j] = floor
                    self.bounded += 1
        return DecisionScores(logprobs, greedy)

    def describe(self) -> dict[str, Any]:
        return {"render": self.render, "decision_tokens": dict(zip(("unsafe", "safe"), self.words)),
                "top_logprobs": self.top_logprobs if self.render == "chat" else None, "bounded": self.bounded}

