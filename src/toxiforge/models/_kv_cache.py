"""A transformers KV cache that grows in place, for :class:`~toxiforge.models.transformers_lm.TransformersSession`.

transformers' ``DynamicLayer`` appends each step's keys and values with ``torch.cat``, which copies the layer's
whole cache every step: for the embedded SmolLM2-135M at ALICE's 160 rows (16 prompts x 10 beams, ~100-token
prompts) that copy was a quarter of a decoding step on the CPU (docs/benchmarks.md, "The CPU path"). A
:class:`GrowingLayer` keeps its keys and values as views of buffers with room for :data:`SPARE_TOKENS` more
positions, so a step writes its one position and copies the cache once every :data:`SPARE_TOKENS` steps. What the
model reads is the same tensors' values, so the log-probs are the same up to float noise (an attention kernel may
read a view of a larger buffer in another order than a compact tensor; bit for bit on the CPUs measured).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache
from transformers.cache_utils import DynamicLayer

SPARE_TOKENS = 32  # positions a buffer holds beyond what it was grown for (ALICE's paper setting: 30 new tokens)


class GrowingLayer(DynamicLayer):
    """A ``DynamicLayer`` whose ``keys`` and ``values`` are views of the first positions of larger buffers."""

    keys: torch.Tensor | None
    values: torch.Tensor | None

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

    def _holds_views(self) -> bool:
        """Whether ``keys``/``values`` are still views of this layer's buffers (transformers' own methods such as
        ``batch_select_indices`` assign fresh tensors; the next ``update`` then copies them into new buffers)."""
        if self._buffers is None or self.keys is None or self.values is None:
            return False
        # by address and layout (a view's ``_base`` is None under inference mode, where the session runs)
        return all(view.data_ptr() == buffer.data_ptr() and view.stride() == buffer.stride()
                   and view.shape[:-2] == buffer.shape[:-2] for view, buffer in zip((self.keys, self.values),
                                                                                  self._buffers))

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args: Any, **kwargs: Any
               ) -> tuple[torch.Tensor, torch.Tensor]:
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        length = self.get_seq_length()
        end = length + key_states.shape[-2]
        if not self._holds_views() or self._buffers is None or end > self._buffers[0].shape[-2]:
            self._buffers = (self._grown(self.keys, key_states, length, end),
                             self._grown(self.values, value_states, length, end))
        keys, values = self._buffers
        keys[..., length:end, :] = key_states
        values[..., length:end, :] = value_states
        self.keys, self.values = keys[..., :end, :], values[..., :end, :]
        return self.keys, self.values

    @staticmethod
    def _grown(cached: torch.Tensor | None, states: torch.Tensor, length: int, end: int) -> torch.Tensor:
        buffer = states.new_empty((*states.shape[:-2], end + SPARE_TOKENS, states.shape[-1]))
        if length and cached is not None:
            buffer[..., :length, :] = cached
        return buffer

    def reorder_cache(self, beam_idx: torch.LongTensor) -> None:
        """Reorder the rows of the buffers (spare positions included), keeping the views."""
        if not self._holds_views() or self._buffers is None:
            super().reorder_cache(beam_idx)
            return
        length = self.get_seq_length()
        index = beam_idx.to(self._buffers[0].device)
        self._buffers = (self._buffers[0].index_select(0, index), self._buffers[1].index_select(0, index))
        self.keys, self.values = self._buffers[0][..., :length, :], self._buffers[1][..., :length, :]

    def reset(self) -> None:
        self._buffers = None
        super().reset()


def growing_cache(config: Any) -> DynamicCache:
    """A ``DynamicCache`` for ``config`` whose plain layers are :class:`GrowingLayer`s (sliding-window and other
    special layers stay as transformers makes them)."""
    cache = DynamicCache(config=config)
    cache.layers = [GrowingLayer() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache
