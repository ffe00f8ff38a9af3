"""Decoders: top-k sampling (ToxiGen's baseline) and ALICE (classifier-in-the-loop beam search).

A decoder turns a batch of prompts into continuations on any :class:`~toxiforge.models.LanguageModel`.
The generation pipeline talks to decoders only through :class:`~toxiforge.decoding.types.Decoder`; the CLI
finds them by method name in :data:`~toxiforge.decoding.registry.DECODERS`.
"""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "AliceConfig": "alice_config:AliceConfig",
    "AliceDecoder": "alice_decoder:AliceDecoder",
    "alice_search": "alice:alice_search",
    "as_hypotheses": "types:as_hypotheses",
    "Decoder": "types:Decoder",
    "DECODERS": "registry:DECODERS",
    "decoder_config": "registry:decoder_config",
    "FINISH_REASONS": "types:FINISH_REASONS",
    "make_decoder": "registry:make_decoder",
    "postprocess": "types:postprocess",
    "Sample": "types:Sample",
    "Statement": "types:Statement",
    "TopKConfig": "topk:TopKConfig",
    "TopKDecoder": "topk:TopKDecoder",
    "sample_top_k": "topk:sample_top_k",
})
