"""Decoding methods by name: ``{method: decoder class}`` for the CLI and other front ends.

A registered decoder class has a ``config_type`` (a frozen dataclass that validates its own values) and a
``from_config(config, classifier)`` class method. :func:`decoder_config` builds and checks the config from the
settings a user gave, before any model loads; :func:`make_decoder` then builds the decoder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any, Protocol

from toxiforge._lazy import Registry
from toxiforge.decoding.types import Decoder
from toxiforge.errors import InputError


class DecoderClass(Protocol):
    """What :data:`DECODERS` holds: a decoder class with its config dataclass and a constructor from it."""

    @property
    def config_type(self) -> Any: ...

    def from_config(self, config: Any, classifier: Any = None) -> Decoder: ...


DECODERS: Registry[DecoderClass] = Registry("decoding method", {
    "top-k": "toxiforge.decoding.topk:TopKDecoder",
    "alice": "toxiforge.decoding.alice:AliceDecoder",
})


def decoder_config(method: str, settings: Mapping[str, Any]) -> Any:
    """The config of decoding ``method`` from ``settings`` (config field names; None = the default).

    Raises :class:`~toxiforge.errors.InputError` for an unknown method (with "did you mean"), a setting the method
    does not have, or a value its config refuses.
    """
    config_type = DECODERS.get(method).config_type
    given = {name: value for name, value in settings.items() if value is not None}
    known = {f.name for f in fields(config_type)}
    foreign = sorted(set(given) - known)
    if foreign:
        owners = [name for name in DECODERS.names() if set(foreign) <= {f.name for f in fields(
            DECODERS.get(name).config_type)}]
        raise InputError(f"{', '.join(foreign)} {'is not a setting' if len(foreign) == 1 else 'are not settings'} "
                         f"of the {DECODERS.key(method)} method",
                         hint=(f"use --method {' or '.join(owners)}, or " if owners else "") + "drop the option")
    return config_type(**given)


def make_decoder(config: Any, classifier=None) -> Decoder:
    """The decoder for ``config`` (from :func:`decoder_config`); ``classifier`` is the one ALICE steers against."""
    return DECODERS.get(config.method).from_config(config, classifier)


__all__ = ["DECODERS", "decoder_config", "make_decoder"]
