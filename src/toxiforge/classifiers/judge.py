"""Guard LLMs and yes/no judges as toxicity classifiers: ``-c judge:MODEL``.

A generative judge answers a question about a statement with a decision word: Llama Guard says ``safe`` or
``unsafe``, ShieldGemma and Granite Guardian say ``Yes`` or ``No``, any instruct model can be asked the HumanVal
question (``--judge-template``, :mod:`toxiforge.classifiers.judge_templates`). :class:`JudgeClassifier` reads
P(unsafe) at the decision position instead of generating text:

* the prompt is rendered (the model's own chat template, or plain text), and the log-probabilities of the two
  decision words (each a single token after the prompt, checked at load) are read from the logits of the next
  position, in one forward pass per batch;
* in chat renderings, leading whitespace tokens are skipped: while the most likely next token is whitespace only
  (Llama Guard 3 writes ``"\\n\\n"`` before its verdict), it is appended and the next position is read, at most
  :data:`~toxiforge.classifiers.judge_backends.MAX_WHITESPACE` times. A text rendering (``humanval`` as
  ``bench classify`` uses it) scores the words with their leading space right after the prompt, as
  lm-evaluation-harness does;
* P(unsafe) = softmax over the two logits, the model cards' rule (ShieldGemma: softmax over Yes/No; Granite
  Guardian: from the Yes and No log-probabilities). ``class_log_probs`` gives ALICE log P(safe), log P(unsafe).

Backends (:mod:`toxiforge.classifiers.judge_backends`): the in-process transformers model (any name
``toxiforge generate --model`` takes, the embedded SmolLM2 GGUF included), which computes the key/value cache of
the prompt's shared prefix (everything before the statement) once and reuses it for every batch; and an
OpenAI-compatible server (``judge:openai:URL#MODEL``) with the retry/timeout/concurrency rules of ``generate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from toxiforge.classifiers._common import EPS, as_texts
from toxiforge.classifiers.judge_backends import MAX_WHITESPACE, DecisionScores, open_backend
from toxiforge.classifiers.judge_templates import JudgeTemplate, load_template, read_policy
from toxiforge.classifiers.registry import JUDGE_PREFIX
from toxiforge.errors import InputError


class JudgeClassifier:
    """A generative judge behind the :class:`~toxiforge.classifiers.base.ToxicityClassifier` protocol.

    ``JudgeClassifier.load("smollm2-135m")``, ``.load("openai:http://host:8000/v1#meta-llama/Llama-Guard-3-8B",
    template="llama-guard")``, or wrap a loaded LM: ``JudgeClassifier(lm, "humanval")``. ``render`` overrides the
    template's rendering ("text" is what ``bench classify`` uses); ``reuse_prefix=False`` recomputes the prompt's
    shared prefix in every batch (the benchmark's baseline).
    """

    num_classes = 2
    toxic_index = 1
    benign_index = 0

    def __init__(self, lm: Any, template: str | Path | JudgeTemplate | None = None, *, policy: str | None = None,
                 batch_size: int = 16, reuse_prefix: bool = True, render: str | None = None,
                 name: str | None = None, top_logprobs: int = 20):
        if batch_size < 1:
            raise InputError(f"batch_size={batch_size} must be at least 1", hint="use e.g. 16")
        self.template = load_template(template)
        self.policy = self.template.resolve_policy(read_policy(policy))
        self.lm = lm
        self.backend = open_backend(lm, self.template, self.policy, render=render, batch_size=batch_size,
                                    reuse_prefix=reuse_prefix, top_logprobs=top_logprobs)
        self.name = name or f"{JUDGE_PREFIX}{lm.name}"

    @classmethod
    def load(cls, model: str, *, template: str | Path | JudgeTemplate | None = None, policy: str | None = None,
             device: str = "auto", dtype: str = "auto", batch_size: int = 16, name: str | None = None,
             **options: Any) -> JudgeClassifier:
        """Load the judge's LM by any name ``--model`` takes (``openai:URL#MODEL`` for a server; ``options`` go to
        it: ``concurrency``, ``api_key_env``, ``retry``) and check the template against it."""
        from toxiforge.models.loader import API_PREFIX, load_language_model

        if options.get("concurrency") is not None and not model.startswith(API_PREFIX):
            raise InputError(f"--judge-concurrency sets the requests in flight to a judge on a server "
                             f"(-c judge:openai:URL#MODEL); {model!r} runs in this process",
                             hint="drop --judge-concurrency")
        template = load_template(template)     # bad templates and policies fail before the model loads
        template.resolve_policy(read_policy(policy))
        if not model or model.startswith(JUDGE_PREFIX):
            raise InputError(f"judge model {model!r} is not a model name", hint="use -c judge:MODEL, e.g. "
                                                                                 "judge:smollm2-135m")
        lm = load_language_model(model, dtype=dtype, device=device, **options)
        return cls(lm, template, policy=policy, batch_size=batch_size, name=name)

    # --- protocol ------------------------------------------------------------------------------------------
    def decision_scores(self, texts: Sequence[str]) -> DecisionScores:
        """Full-vocabulary log-probabilities of the two decision words per text (see :class:`DecisionScores`)."""
        texts = as_texts(texts)
        if not texts:
            return DecisionScores(np.zeros((0, 2)), np.zeros((0, 2), dtype=bool))
        return self.backend.score(texts)

    def class_log_probs(self, texts: Sequence[str]) -> torch.Tensor:
        """float32 ``[N, 2]``: log P(safe), log P(unsafe), normalised over the two words (clamped at log 1e-7)."""
        lp = torch.from_numpy(self.decision_scores(texts).logprobs[:, ::-1].copy())  # columns: safe, unsafe
        two = torch.log_softmax(lp.double(), dim=-1).clamp(min=float(np.log(EPS)))
        return two.float()

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(unsafe) per text: softmax of the two decision words' logits, float64."""
        lp = self.decision_scores(texts).logprobs
        if len(lp) == 0:
            return np.zeros(0)
        return 1.0 / (1.0 + np.exp(lp[:, 1] - lp[:, 0]))

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "backend": "judge", "kind": "judge", "lm": self.lm.describe(),
                "template": self.template.describe(), "policy": self.policy, **self.backend.describe(),
                "score": "softmax over the two decision words' logits at the decision position"}


def load_judge(spec: str, **kwargs: Any) -> JudgeClassifier:
    """``judge:MODEL`` -> :meth:`JudgeClassifier.load` (``kwargs``: template, policy, device, dtype, batch_size)."""
    return JudgeClassifier.load(spec[len(JUDGE_PREFIX):] if spec.startswith(JUDGE_PREFIX) else spec, **kwargs)


__all__ = ["DecisionScores", "JUDGE_PREFIX", "JudgeClassifier", "MAX_WHITESPACE", "load_judge"]
