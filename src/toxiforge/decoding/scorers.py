"""ALICE's pluggable scorers: pure callables in the style of transformers' logits processors.

Token scorers take ``(input_ids [rows, seq], scores [rows, vocab])`` and return new scores; they never mutate
their inputs. The classifier scorer takes the generated tokens and the candidate tokens of each row and returns
the classifier's log-probability of a target class for every "generated text + candidate" string.
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from toxiforge.errors import InputError

TokenScorer = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def lm_scores(logprobs: torch.Tensor, temperature: float) -> torch.Tensor:
    """log p_LM at ``temperature``: ``log_softmax(logprobs / T)`` (= log-softmax of the logits / T)."""
    return torch.log_softmax(logprobs / temperature, dim=-1)


def exempt_from_prompt_ban(token_texts: Sequence[str], stopwords: frozenset[str] | None = None) -> torch.Tensor:
    """``BoolTensor[vocab]``: tokens that may be copied from the prompt — whitespace, punctuation, stopwords.

    Stopwords default to scikit-learn's English list (318 words). A token is matched after stripping whitespace
    and lowercasing, so " The" and "the" are both exempt.
    """
    if stopwords is None:
        from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

        stopwords = frozenset(ENGLISH_STOP_WORDS)
    punctuation = set(string.punctuation) | set("“”‘’–—…")
    exempt = torch.zeros(len(token_texts), dtype=torch.bool)
    for token_id, text in enumerate(token_texts):
        word = text.strip().lower()
        if not word or all(ch in punctuation for ch in word) or word in stopwords:
            exempt[token_id] = True
    return exempt


@dataclass(frozen=True)
class PromptTokenBan:
    """Give ``-inf`` to tokens of each row's prompt, except the exempt ones (upstream gave them -100).

    ``banned`` is ``BoolTensor[rows, vocab]``; build it with :meth:`from_prompts`.
    """

    banned: torch.Tensor

    @classmethod
    def from_prompts(cls, prompt_ids: Sequence[Sequence[int]], exempt: torch.Tensor) -> PromptTokenBan:
        vocab = exempt.shape[0]
        banned = torch.zeros((len(prompt_ids), vocab), dtype=torch.bool)
        for row, ids in enumerate(prompt_ids):
            if ids:
                banned[row, torch.tensor(sorted(set(ids)), dtype=torch.long)] = True
        return cls(banned & ~exempt)

    def select(self, index: torch.Tensor) -> PromptTokenBan:
        """The ban for rows ``index`` (after beams are expanded or prompts dropped)."""
        return PromptTokenBan(self.banned.index_select(0, index.to(self.banned.device)))

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        return scores.masked_fill(self.banned.to(scores.device), float("-inf"))


@dataclass(frozen=True)
class NoRepeatNGram:
    """Give ``-inf`` to every token that would repeat an n-gram already in the row (as transformers'
    ``no_repeat_ngram_size``; the rows' ``input_ids`` include the prompt)."""

    size: int

    def __post_init__(self) -> None:
        if self.size < 1:
            raise InputError(f"no-repeat n-gram size {self.size} must be at least 1", hint="use 3, or 0 to disable")

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        n = self.size
        if input_ids.shape[1] < n:
            return scores
        ids = input_ids.to(scores.device)
        grams = ids.unfold(1, n, 1)                               # [rows, windows, n]
        if n > 1:
            prefix = ids[:, ids.shape[1] - n + 1:]                # the last n-1 tokens of each row
            hits = (grams[:, :, :-1] == prefix[:, None, :]).all(-1)
        else:
            hits = torch.ones(grams.shape[:2], dtype=torch.bool, device=ids.device)
        rows, windows = hits.nonzero(as_tuple=True)
        tokens = grams[rows, windows, n - 1]
        valid = tokens >= 0  # negative ids mark padding
        if not bool(valid.any()):
            return scores
        mask = torch.zeros_like(scores, dtype=torch.bool)
        mask[rows[valid], tokens[valid]] = True
        return scores.masked_fill(mask, float("-inf"))


@dataclass(frozen=True)
class ClassifierScorer:
    """log p_CLF(target class | generated text + candidate token), the classifier term of the paper's eq. 1.

    ``decode`` turns token ids into text (the LM's tokenizer); the classifier sees only the continuation, never
    the prompt. ``class_log_probs`` is the classifier's batched method (see
    :class:`toxiforge.classifiers.base.ToxicityClassifier`).
    """

    class_log_probs: Callable[[Sequence[str]], torch.Tensor]
    batch_decode: Callable[[list[list[int]]], list[str]]

    def texts(self, generated: torch.Tensor, candidates: torch.Tensor) -> list[str]:
        """Row-major texts of every (row, candidate): ``generated[row] + [candidates[row, j]]``."""
        prefixes = generated.tolist()
        return self.batch_decode([prefix + [token] for prefix, row in zip(prefixes, candidates.tolist())
                                  for token in row])

    def __call__(self, generated: torch.Tensor, candidates: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """``[rows, n]`` log-probabilities of class ``targets[row]`` for each candidate continuation."""
        rows, n = candidates.shape
        if rows == 0 or n == 0:
            return torch.zeros((rows, n))
        log_probs = self.class_log_probs(self.texts(generated, candidates))
        column = targets.to(log_probs.device).repeat_interleave(n).view(-1, 1)
        return log_probs.gather(1, column).view(rows, n).float()
