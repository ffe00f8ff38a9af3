"""Decoding methods by name: ``{method: decoder class}`` for the CLI and other front ends.

A registered decoder class has a ``config_type`` (a frozen dataclass that validates its own values) and a
``from_config(config, classifier)`` class method. :func:`decoder_config` builds and checks the config from the
settings a user gave, before any model loads; :func:`make_decoder` then builds the decoder.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from toxiforge._lazy import Registry
from toxiforge.decoding.types import Decoder


class DecoderClass(Protocol):
    """What :data:`DECODERS` holds: a decoder class with its config dataclass and a constructor from it."""

    @property
    def config_type(self) -> Any: ...

    def from_config(self, config: Any, classifier: Any = None) -> Decoder: ...


DECODERS: Registry[DecoderClass] = Registry("decoding method", {
    "top-k": "toxiforge.decoding.topk:TopKDecoder",
    "alice": "toxiforge.decoding.alice_decoder:AliceDecoder",
})


# config fields whose command-line flag is not their name (generate, harden, attack --family alice)
FLAGS = {"num_beams": "--beams"}


def decoder_config(method: str, settings: Mapping[str, Any]) -> Any:
    """The config of decoding ``method`` from ``settings`` (config field names; None = the default): an unknown
    method, a setting the method does not have or a value its config refuses is an InputError
    (:meth:`~toxiforge._lazy.Registry.config`)."""
    return DECODERS.config(method, settings, option="--method", flags=FLAGS)


def make_decoder(config: Any, classifier=None) -> Decoder:
    """The decoder for ``config`` (from :func:`decoder_config`); ``classifier`` is the one ALICE steers against."""
    return DECODERS.get(config.method).from_config(config, classifier)


__all__ = ["DECODERS", "decoder_config", "make_decoder"]
