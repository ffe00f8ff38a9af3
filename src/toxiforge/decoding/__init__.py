"""Decoders: top-k sampling (ToxiGen's baseline) and ALICE (classifier-in-the-loop beam search).

A decoder turns a batch of prompts into continuations on any :class:`~toxiforge.models.LanguageModel`.
The generation pipeline talks to decoders only through :class:`~toxiforge.decoding.base.Decoder`.
"""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "Decoder": "base:Decoder", "DecoderOutput": "base:DecoderOutput", "as_hypotheses": "base:as_hypotheses",
    "outputs_per_prompt": "base:outputs_per_prompt",
    "AliceConfig": "alice:AliceConfig", "AliceDecoder": "alice:AliceDecoder", "alice_search": "alice:alice_search",
    "Sample": "topk:Sample", "Statement": "topk:Statement", "TopKConfig": "topk:TopKConfig",
    "TopKDecoder": "topk:TopKDecoder", "postprocess": "topk:postprocess", "sample_top_k": "topk:sample_top_k",
})
