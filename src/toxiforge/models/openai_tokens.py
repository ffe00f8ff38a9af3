"""ALICE on an OpenAI-compatible server: the string vocabulary (:class:`TokenTable`) and the beam session
(:class:`ApiSession`) of :class:`~toxiforge.models.openai_lm.OpenAILM`, whose module docstring says how ALICE runs
on the API and where that departs from the transformers backend.

The string vocabulary has a fixed size (``vocab_capacity``, default 65,536, far more distinct strings than one run
meets) split in ranges: end-of-sequence, strings with a newline, function text (whitespace, punctuation, stopwords:
:func:`toxiforge._tokens.is_function_text`, the rule by which ALICE's prompt ban exempts tokens), other strings. The
backend imports no decoder; a string's range never changes, so masks that ALICE computes once from
:meth:`~toxiforge.models.openai_lm.OpenAILM.token_texts` and
:meth:`~toxiforge.models.openai_lm.OpenAILM.newline_mask` stay right as new strings arrive; ids not yet used
read as ``""`` (exempt ranges) or ``"<unused>"`` (the word range).
"""

from __future__ import annotations

import re
import threading
from typing import TYPE_CHECKING

import torch

from toxiforge.errors import InputError, ToxiforgeError

if TYPE_CHECKING:
    from toxiforge.models.openai_lm import OpenAILM

EOS_TEXTS = frozenset({"", "</s>", "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|end_of_text|>", "<eos>",
                       "<|end|>"})
# How OpenAILM.encode splits text: GPT-2-style pieces (" word", ".", "\n"), not the server's tokens.
PIECES = re.compile(r"'(?:s|t|re|ve|m|ll|d)| ?\w+| ?[^\s\w]+|\s+(?!\S)|\s+")
UNUSED = "<unused>"


class TokenTable:
    """Token strings <-> ids in fixed ranges (see the module docstring); thread-safe."""

    def __init__(self, capacity: int = 65536, newline_slots: int = 4096, exempt_slots: int = 4096):
        if capacity < 1 + newline_slots + exempt_slots + 1:
            raise InputError(f"vocab_capacity={capacity} is too small", hint="use 65536")
        self.capacity = capacity
        self._starts = {"newline": 1, "exempt": 1 + newline_slots, "word": 1 + newline_slots + exempt_slots}
        self._ends = {"newline": 1 + newline_slots, "exempt": 1 + newline_slots + exempt_slots, "word": capacity}
        self._next = dict(self._starts)
        self._ids: dict[str, int] = {}
        self._texts: list[str] = [""] * self._starts["word"] + [UNUSED] * (capacity - self._starts["word"])
        self._lock = threading.Lock()
        self.eos_texts: set[str] = set(EOS_TEXTS)  # grows with what the server's stop reasons reveal

    def mark_eos(self, text: str) -> None:
        """The server stopped on ``text``: it is this model's end of text (id 0) from now on."""
        with self._lock:
            self.eos_texts.add(text)

    def _kind(self, text: str) -> str:
        from toxiforge._tokens import is_function_text  # the rule ALICE's prompt ban exempts by

        if "\n" in text:
            return "newline"
        return "exempt" if is_function_text(text) else "word"

    def intern(self, text: str) -> int:
        if text in self.eos_texts:
            return 0
        found = self._ids.get(text)
        if found is not None:
            return found
        kind = self._kind(text)
        with self._lock:
            if text in self._ids:
                return self._ids[text]
            token_id = self._next[kind]
            if token_id >= self._ends[kind]:
                size = self._ends[kind] - self._starts[kind]
                raise ToxiforgeError(f"the API model's string vocabulary is full ({size} {kind} strings). Fix: open "
                                     "the model with a larger vocab_capacity")
            self._next[kind] = token_id + 1
            self._ids[text] = token_id
            self._texts[token_id] = text
        return token_id

    def text(self, token_id: int) -> str:
        text = self._texts[token_id]
        return "" if text == UNUSED else text

    def texts(self) -> list[str]:
        return list(self._texts)

    def newline_mask(self) -> torch.Tensor:
        mask = torch.zeros(self.capacity, dtype=torch.bool)
        mask[self._starts["newline"]:self._ends["newline"]] = True
        return mask

    def __len__(self) -> int:
        return len(self._ids) + 1


class ApiSession:
    """Rows of text; :meth:`logprobs` asks the server for every distinct row (:mod:`toxiforge.models.openai_lm`)."""

    def __init__(self, lm: OpenAILM, texts: list[str]):
        self._lm = lm
        self._texts = texts
        self._logprobs: torch.Tensor | None = None

    @property
    def batch_size(self) -> int:
        return len(self._texts)

    def logprobs(self) -> torch.Tensor:
        if self._logprobs is None:
            distinct = list(dict.fromkeys(self._texts))
            answers = {text: self._lm.candidate_ids(tops, ended)
                       for text, (tops, ended) in zip(distinct, self._lm.next_tokens(distinct))}
            out = torch.full((len(self._texts), self._lm.vocab_size), float("-inf"))
            for row, text in enumerate(self._texts):
                for token_id, lp in answers[text].items():
                    out[row, token_id] = lp
            self._logprobs = out
        return self._logprobs

    def advance(self, tokens: torch.Tensor) -> None:
        ids = tokens.view(-1).tolist()
        if len(ids) != self.batch_size:
            raise InputError(f"advance() got {len(ids)} tokens for {self.batch_size} rows",
                             hint="pass exactly one token per row")
        self._texts = [text + self._lm.table.text(i) for text, i in zip(self._texts, ids)]
        self._logprobs = None

    def select(self, index: torch.Tensor) -> None:
        rows = index.view(-1).tolist()
        self._texts = [self._texts[i] for i in rows]
        if self._logprobs is not None:
            self._logprobs = self._logprobs.index_select(0, index.to(self._logprobs.device, torch.long))


__all__ = ["EOS_TEXTS", "PIECES", "ApiSession", "TokenTable"]
