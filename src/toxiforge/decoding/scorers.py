"""ALICE's scorers: every term and constraint of a beam step implements one small protocol, :class:`Scorer`.

A scorer takes the search state (:class:`~toxiforge.decoding.beam.BeamState`: generated tokens, row targets,
running scores) and a ``[rows, n]`` score tensor, and returns a new tensor (it never mutates its input). With
``token_ids=None`` column ``j`` is token ``j`` (full vocabulary, before the candidates are chosen: the prompt ban,
the no-repeat rule and the stop-token rule); otherwise ``scores[r, j]`` belongs to token ``token_ids[r, j]`` (the
candidates: the classifier term). A constraint gives ``-inf`` to forbidden tokens; a term adds its weighted score.
When the search reorders, repeats or drops rows, it calls ``keep_rows(rows)`` on every scorer, which returns the
scorer for the new rows (stateless scorers return themselves).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

from toxiforge.errors import InputError

if TYPE_CHECKING:
    from toxiforge.decoding.alice_config import AliceConfig
    from toxiforge.decoding.beam import BeamState
    from toxiforge.groups import Group
    from toxiforge.models.base import LanguageModel

MASKED = -1.0e9  # a finite "impossible" beam score (as transformers), so sums of masked scores never become NaN


class Scorer(Protocol):
    """One term or constraint of ALICE's step score (see the module docstring)."""

    def __call__(self, state: BeamState, scores: torch.Tensor,
                 token_ids: torch.Tensor | None = None) -> torch.Tensor:
        """New scores; ``scores[r, j]`` scores appending token ``j`` (or ``token_ids[r, j]``) to row ``r``."""

    def keep_rows(self, rows: torch.Tensor) -> Scorer:
        """This scorer for rows ``rows`` (``LongTensor``) of the current ones, in that order."""


def lm_scores(logprobs: torch.Tensor, temperature: float) -> torch.Tensor:
    """log p_LM at ``temperature``: ``log_softmax(logprobs / T)`` (= log-softmax of the logits / T)."""
    return torch.log_softmax(logprobs / temperature, dim=-1)


def weighted(weight: float, scores: torch.Tensor) -> torch.Tensor:
    """``weight · scores`` where finite; ``-inf`` (a banned token) stays ``-inf`` even for weight 0, where the
    plain product would be NaN (and ``topk`` ranks NaN first)."""
    return torch.where(torch.isfinite(scores), weight * scores, scores)


def _select(mask: torch.Tensor, token_ids: torch.Tensor | None) -> torch.Tensor:
    """``mask [rows, vocab]`` itself, or its entries for ``token_ids [rows, n]``."""
    return mask if token_ids is None else mask.gather(1, token_ids.to(mask.device))


# --- the prompt ban ------------------------------------------------------------------------------------------

def exempt_from_prompt_ban(token_texts: Sequence[str], stopwords: frozenset[str] | None = None) -> torch.Tensor:
    """``BoolTensor[vocab]``: tokens that may be copied from the prompt — whitespace, punctuation, stopwords
    (:func:`toxiforge._tokens.is_function_text`).

    Stopwords default to scikit-learn's English list (318 words). A token is matched after stripping whitespace
    and lowercasing, so " The" and "the" are both exempt.
    """
    from toxiforge._tokens import is_function_text

    return torch.tensor([is_function_text(text, stopwords) for text in token_texts], dtype=torch.bool)


def group_term_tokens(token_ids: Sequence[int], group: Group,
                      batch_decode: Callable[[list[list[int]]], list[str]]) -> set[int]:
    """The tokens of ``token_ids`` that spell one of ``group``'s identity terms (``groups.py``) in their text.

    A token counts when its characters overlap a match of the group's identity-term regex, so a name split into
    several tokens (" Mus", "lims") gives all of them. Character offsets come from decoding every prefix.
    """
    ids = list(token_ids)
    text = batch_decode([ids])[0] if ids else ""
    spans = [m.span() for m in group.regex.finditer(text)] if group.regex is not None else []
    if not spans:
        return set()
    ends = [len(t) for t in batch_decode([ids[:i + 1] for i in range(len(ids))])]
    found, start = set(), 0
    for token, end in zip(ids, ends):
        if any(start < span_end and end > span_start for span_start, span_end in spans):
            found.add(token)
        start = end
    return found


@dataclass(frozen=True)
class PromptTokenBan:
    """Give ``-inf`` to tokens of each row's prompt, except the exempt ones (upstream gave them -100).

    ``banned`` is ``BoolTensor[rows, vocab]``; build it with :meth:`from_prompts`.
    """

    banned: torch.Tensor

    @classmethod
    def from_prompts(cls, prompt_ids: Sequence[Sequence[int]], exempt: torch.Tensor,
                     also_exempt: Sequence[set[int]] | None = None) -> PromptTokenBan:
        """The ban of each prompt's tokens but ``exempt`` (``BoolTensor[vocab]``) and the row's ``also_exempt``
        ids (ALICE: the target group's identity-term tokens)."""
        vocab = exempt.shape[0]
        banned = torch.zeros((len(prompt_ids), vocab), dtype=torch.bool)
        for row, ids in enumerate(prompt_ids):
            allowed = also_exempt[row] if also_exempt is not None else set()
            keep = sorted(set(ids) - allowed)
            if keep:
                banned[row, torch.tensor(keep, dtype=torch.long)] = True
        return cls(banned & ~exempt)

    def keep_rows(self, rows: torch.Tensor) -> PromptTokenBan:
        return PromptTokenBan(self.banned.index_select(0, rows.to(self.banned.device)))

    def __call__(self, state: BeamState, scores: torch.Tensor,
                 token_ids: torch.Tensor | None = None) -> torch.Tensor:
        return scores.masked_fill(_select(self.banned.to(scores.device), token_ids), float("-inf"))


# --- the no-repeat rule --------------------------------------------------------------------------------------

def repeated_ngram_mask(ids: torch.Tensor, size: int, vocab: int) -> torch.Tensor:
    """``BoolTensor[rows, vocab]``: tokens that would repeat an n-gram of ``size`` already in the row ``ids``
    (as transformers' ``no_repeat_ngram_size``). Negative ids are padding and never banned. Tensor operations
    only (a scatter, no ``nonzero``): no host-device sync."""
    if ids.shape[1] < size:
        return torch.zeros((ids.shape[0], vocab), dtype=torch.bool, device=ids.device)
    grams = ids.unfold(1, size, 1)                                # [rows, windows, size]
    tokens = grams[:, :, size - 1]
    hits = tokens >= 0
    if size > 1:
        prefix = ids[:, ids.shape[1] - size + 1:]                 # the last size-1 tokens of each row
        hits &= (grams[:, :, :-1] == prefix[:, None, :]).all(-1)
    # a window that is no hit writes to the extra column ``vocab``, which is cut off
    mask = torch.zeros((ids.shape[0], vocab + 1), dtype=torch.bool, device=ids.device)
    return mask.scatter_(1, torch.where(hits, tokens, vocab), True)[:, :vocab]


@dataclass(frozen=True)
class NoRepeatNGram:
    """Give ``-inf`` to every token that would repeat an n-gram of the row's *generated* tokens.

    The prompt is not part of the row: with it, every demonstration's "\\n" "-" X trigram was banned, so a
    statement could never open with a word that opens a demonstration (" the", " my") — see the ALICE docstring.
    """

    size: int

    def __post_init__(self) -> None:
        if self.size < 1:
            raise InputError(f"no-repeat n-gram size {self.size} must be at least 1", hint="use 3, or 0 to disable")

    def keep_rows(self, rows: torch.Tensor) -> NoRepeatNGram:
        return self

    def __call__(self, state: BeamState, scores: torch.Tensor,
                 token_ids: torch.Tensor | None = None) -> torch.Tensor:
        if state.generated.shape[1] < self.size:
            return scores
        mask = repeated_ngram_mask(state.generated.to(scores.device), self.size, state.vocab_size)
        return scores.masked_fill(_select(mask, token_ids), float("-inf"))


# --- the minimum length --------------------------------------------------------------------------------------

def text_tokens(token_texts: Sequence[str]) -> torch.Tensor:
    """``BoolTensor[vocab]``: tokens whose text before any newline has a character other than whitespace and
    '-' (so a statement ending with them is not empty after :func:`~toxiforge.decoding.types.postprocess`)."""
    return torch.tensor([bool(t.split("\n", 1)[0].replace("-", "").strip()) for t in token_texts], dtype=torch.bool)


@dataclass(frozen=True)
class RequireText:
    """Give ``-inf`` to stop tokens (newline, EOS) that would end a row whose continuation has no text yet.

    ``stop`` marks the stop tokens, ``has_text`` the tokens with text (:func:`text_tokens`), both
    ``BoolTensor[vocab]``. A stop token that itself carries text (".\\n") stays allowed.
    """

    stop: torch.Tensor
    has_text: torch.Tensor

    def keep_rows(self, rows: torch.Tensor) -> RequireText:
        return self

    def __call__(self, state: BeamState, scores: torch.Tensor,
                 token_ids: torch.Tensor | None = None) -> torch.Tensor:
        has_text = self.has_text.to(scores.device)
        generated = state.generated.to(scores.device)
        row_has_text = has_text[generated].any(dim=1) if generated.shape[1] else \
            torch.zeros(generated.shape[0], dtype=torch.bool, device=scores.device)
        # the usual case after a step or two: no row needs the mask. Checked on the CPU only, where reading the
        # answer is free and the mask a full pass; on a GPU the pass is cheap and the check a host-device sync
        if scores.device.type == "cpu" and bool(row_has_text.all()):
            return scores
        forbidden = (self.stop.to(scores.device) & ~has_text)[None, :] & ~row_has_text[:, None]
        return scores.masked_fill(_select(forbidden, token_ids), float("-inf"))


# --- the classifier term -------------------------------------------------------------------------------------

def complete_text(text: str) -> str:
    """``text`` without trailing U+FFFD: what a byte-level tokenizer decodes from the incomplete bytes of a
    character that the next token would finish (an emoji, an accented letter). The classifier should score the
    text so far, not a replacement character."""
    return text.rstrip("\ufffd")


@dataclass(frozen=True)
class ClassifierTerm:
    """``weight · log p_CLF(target class | generated text + candidate)``, the classifier term of the paper's eq. 1,
    and with a keeper (issue 50) the third term ``keeper_weight · log p_K(prompt's class | the same text)``.

    Scores only candidates that can still be chosen: a finite score on a live row (not a masked step-1 copy).
    ``batch_decode`` turns token ids into text (the LM's tokenizer); the classifier sees only the continuation,
    never the prompt, with incomplete trailing characters removed (:func:`complete_text`).
    ``class_log_probs`` is the classifier's batched method (see
    :class:`toxiforge.classifiers.base.ToxicityClassifier`); ``keeper_log_probs`` the keeper's, called on the texts
    the attacked classifier scored whose candidates can still be chosen with its term (:mod:`.pruning`), its class
    per row in ``BeamState.keep_targets``.
    """

    class_log_probs: Callable[[Sequence[str]], torch.Tensor]
    batch_decode: Callable[[list[list[int]]], list[str]]
    weight: float
    keeper_log_probs: Callable[[Sequence[str]], torch.Tensor] | None = None
    keeper_weight: float = 0.0

    def keep_rows(self, rows: torch.Tensor) -> ClassifierTerm:
        return self

    def __call__(self, state: BeamState, scores: torch.Tensor,
                 token_ids: torch.Tensor | None = None) -> torch.Tensor:
        """Every live candidate scored: the exhaustive path of :func:`.pruning.pruned_classifier_scores` (the one
        implementation; ``alice_search`` calls that with pruning on or off)."""
        if token_ids is None:
            raise ValueError("the classifier term scores candidates: pass their token_ids")
        from toxiforge.decoding.pruning import pruned_classifier_scores

        finishes = torch.zeros_like(token_ids, dtype=torch.bool)  # read only when pruning
        return pruned_classifier_scores(self, state, scores, token_ids, finishes, exhaustive=True)


# --- a search's constraints and upstream's extension set -----------------------------------------------------

@dataclass(frozen=True)
class VocabMasks:
    """Per-LM token masks (each looks at the whole vocabulary, so they are computed once per LM object)."""

    exempt: torch.Tensor     # may be copied from the prompt: whitespace, punctuation, stopwords
    has_text: torch.Tensor   # see scorers.text_tokens
    newline: torch.Tensor    # tokens whose text contains a newline
    eos: torch.Tensor


_VOCAB_CACHE: weakref.WeakKeyDictionary[Any, VocabMasks] = weakref.WeakKeyDictionary()


def vocab_masks(lm: LanguageModel) -> VocabMasks:
    """The token masks of ``lm``, computed once per LM object."""
    if lm not in _VOCAB_CACHE:
        texts = lm.token_texts()
        eos = torch.zeros(lm.vocab_size, dtype=torch.bool)
        eos[sorted(lm.eos_token_ids)] = True
        _VOCAB_CACHE[lm] = VocabMasks(exempt_from_prompt_ban(texts), text_tokens(texts), lm.newline_mask().cpu(), eos)
    return _VOCAB_CACHE[lm]


def token_constraints(lm: LanguageModel, prompt_ids: list[list[int]], groups: Sequence[Group | None],
                      config: AliceConfig, stop: torch.Tensor) -> list[Scorer]:
    """The scorers that forbid tokens (full vocabulary), for one row per prompt (the caller repeats rows)."""
    vocab = vocab_masks(lm)
    scorers: list[Scorer] = []
    if config.ban_prompt_tokens:
        allowed = [group_term_tokens(ids, g, lm.batch_decode) if g is not None and config.exempt_group_terms
                   else set() for ids, g in zip(prompt_ids, groups)]
        ban = PromptTokenBan.from_prompts(prompt_ids, vocab.exempt, allowed)
        scorers.append(PromptTokenBan(ban.banned.to(lm.device)))
    if config.no_repeat_ngram_size:
        scorers.append(NoRepeatNGram(config.no_repeat_ngram_size))
    if config.require_text:
        scorers.append(RequireText(stop.to(lm.device), vocab.has_text.to(lm.device)))
    return scorers


def keep_best_extensions(state: BeamState, step_scores: torch.Tensor, n: int) -> torch.Tensor:
    """Upstream's classifier set: per prompt, only the ``n`` best (beam, candidate) extensions by running score +
    weighted LM score stay; the others get ``-inf`` (so the classifier never scores them)."""
    slots, width = state.rows // state.num_beams, state.num_beams * step_scores.shape[1]
    total = (state.running.view(-1, 1) + step_scores).view(slots, width)
    keep = torch.zeros_like(total, dtype=torch.bool).scatter_(1, torch.topk(total, min(n, width), dim=-1).indices,
                                                              True)
    return step_scores.masked_fill(~keep.view_as(step_scores), float("-inf"))
