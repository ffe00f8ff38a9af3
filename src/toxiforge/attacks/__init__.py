"""Attack families: ways to make a classifier miss a statement's label, behind one protocol.

A family (:class:`~toxiforge.attacks.base.AttackFamily`) attacks labelled statements and returns, for each, an
:class:`~toxiforge.attacks.base.Attempt` (the attacked text, its edits, the classifier queries spent, P(toxic)
before and after). :data:`~toxiforge.attacks.registry.FAMILIES` holds them by name: ``obfuscate`` (character
edits), ``substitute`` (word substitution within a similarity budget) and ``alice`` (the ALICE generation attack
behind the same protocol). :func:`~toxiforge.attacks.runner.attack` runs one over a dataset into a sharded,
resumable folder (``toxiforge attack``).
"""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "AliceAttack": "alice:AliceAttack",
    "Attempt": "base:Attempt",
    "AttackFamily": "base:AttackFamily",
    "FAMILIES": "registry:FAMILIES",
    "ObfuscateAttack": "obfuscate:ObfuscateAttack",
    "ObfuscateConfig": "obfuscate:ObfuscateConfig",
    "Oracle": "base:Oracle",
    "Resources": "registry:Resources",
    "Source": "base:Source",
    "SubstituteAttack": "substitute:SubstituteAttack",
    "SubstituteConfig": "substitute:SubstituteConfig",
    "attack": "runner:attack",
    "family_config": "registry:family_config",
    "load_sources": "runner:load_sources",
    "make_family": "registry:make_family",
    "rank_words": "importance:rank_words",
    "run_attack": "job:run_attack",
})
