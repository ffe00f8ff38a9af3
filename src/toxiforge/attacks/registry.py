"""Attack families by name: ``{family: attack class}`` for ``toxiforge attack`` and other front ends.

As :mod:`toxiforge.decoding.registry`: a registered class has a ``config_type`` (a frozen dataclass that checks
its own values) and a ``from_config(config, classifier, resources)`` class method. :func:`family_config` builds
and checks the config from the settings a user gave, before any model loads; :func:`make_family` builds the
family. :class:`Resources` holds the models a family may need besides the attacked classifier (the sentence
encoder of ``substitute``, the language model of ``alice``), each loaded on first use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from toxiforge._lazy import Registry
from toxiforge.attacks.base import AttackFamily
from toxiforge.models.embedded import DEFAULT_ENCODER, DEFAULT_LM


class FamilyClass(Protocol):
    """What :data:`FAMILIES` holds: an attack class with its config dataclass and a constructor from it."""

    @property
    def config_type(self) -> Any: ...

    def from_config(self, config: Any, classifier: Any, resources: Resources) -> AttackFamily: ...


FAMILIES: Registry[FamilyClass] = Registry("attack family", {
    "obfuscate": "toxiforge.attacks.obfuscate:ObfuscateAttack",
    "substitute": "toxiforge.attacks.substitute:SubstituteAttack",
    "alice": "toxiforge.attacks.alice:AliceAttack",
})


@dataclass
class Resources:
    """Models a family may use besides the classifier, by name (``encoder``, ``model``) or already loaded
    (``embedder``: any :data:`~toxiforge.analysis.embeddings.Embedder`; ``vocabulary``: the words ``substitute``
    draws candidates from, default the encoder tokenizer's whole words; ``lm``); ``load_lm`` loads ``model`` (the
    CLI's prints the load time)."""

    encoder: str = DEFAULT_ENCODER
    model: str = DEFAULT_LM
    device: str = "auto"
    embedder: Any = None
    vocabulary: Sequence[str] | None = None
    lm: Any = None
    load_lm: Callable[..., Any] | None = None

    def sentence_encoder(self) -> Any:
        """The sentence encoder, loaded on first use and kept."""
        if self.embedder is None:
            from toxiforge.analysis.embeddings import load_encoder

            self.embedder = load_encoder(self.encoder, device=self.device)
        return self.embedder

    def language_model(self) -> Any:
        """The language model, loaded on first use and kept."""
        if self.lm is None:
            from toxiforge.models import load_language_model

            self.lm = (self.load_lm or load_language_model)(self.model, device=self.device)
        return self.lm


def family_config(family: str, settings: Mapping[str, Any]) -> Any:
    """The config of attack ``family`` from ``settings`` (config field names; None = the default): an unknown
    family (with "did you mean"), a setting the family does not have or a value its config refuses is an
    InputError (:meth:`~toxiforge._lazy.Registry.config`)."""
    from toxiforge.decoding.registry import FLAGS

    return FAMILIES.config(family, settings, option="--family", flags=FLAGS)


def make_family(config: Any, classifier: Any, resources: Resources | None = None) -> AttackFamily:
    """The family for ``config`` (from :func:`family_config`) attacking ``classifier``."""
    return FAMILIES.get(config.family).from_config(config, classifier, resources or Resources())


__all__ = ["FAMILIES", "FamilyClass", "Resources", "family_config", "make_family"]
