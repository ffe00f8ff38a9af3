"""The ``alice`` family: the existing ALICE generation attack (:mod:`toxiforge.decoding.alice`) behind the family
protocol, so ``toxiforge attack --family alice`` writes the rows the other families write.

ALICE writes a *new* statement rather than editing the source: it continues the source's own prompt when the
source came from a generation run (its ``prompt`` column), else the prompt ``"- SOURCE\\n-"`` (the source as the
one demonstration), steering toward the class opposite the source's label, one prompt at a time so the queries
are counted per statement (every text the classifier scores during the beam search counts one, and so do the
source and the final statement). The new statement keeps the source's label as its intended label, as ALICE's
rows keep their prompt's; nothing guarantees it, so check with ``--validate-with``. ``edits`` are empty and
``similarity`` is not measured. With ``--keep-label-with K`` the search also keeps the source's label in K's view
(:mod:`toxiforge.decoding.alice`); K's queries are the attacker's own, not counted, and its P(toxic) of the statement
is the row's ``keeper_score``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch

from toxiforge.attacks.base import Attempt, Source, flipped_label, untouched
from toxiforge.decoding.alice import AliceConfig, AliceDecoder
from toxiforge.decoding.types import as_hypotheses, postprocess
from toxiforge.errors import InputError


@dataclass(frozen=True)
class AliceAttackConfig(AliceConfig):
    """ALICE's own settings (:class:`~toxiforge.decoding.alice.AliceConfig`, the paper's defaults)."""

    family: ClassVar[str] = "alice"


class CountingClassifier:
    """``classifier`` with a count of the texts it scored (:attr:`queries`), through either scoring method."""

    def __init__(self, classifier: Any):
        self.inner = classifier
        self.name = classifier.name
        self.num_classes, self.toxic_index, self.benign_index = (
            classifier.num_classes, classifier.toxic_index, classifier.benign_index)
        self.queries = 0

    def class_log_probs(self, texts: Sequence[str]) -> torch.Tensor:
        self.queries += len(texts)
        return self.inner.class_log_probs(texts)

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        self.queries += len(texts)
        return self.inner.predict_proba(texts)

    def describe(self) -> dict[str, Any]:
        return self.inner.describe()


def source_prompt(source: Source) -> str:
    """The prompt ALICE continues for ``source`` (module docstring)."""
    return source.prompt if source.prompt else f"- {source.text}\n-"


def _group(name: str | None) -> str | None:
    from toxiforge.groups import resolve_group

    if name is None:
        return None
    try:
        return resolve_group(name).name
    except InputError:
        return None  # a group toxiforge does not know: no identity terms exempt from the prompt-token ban


class AliceAttack:
    """The family (:class:`~toxiforge.attacks.base.AttackFamily`) against ``classifier``, decoding with ``lm``."""

    family = "alice"
    method = "ALICE"
    together = False  # one statement at a time, so that queries are counted per statement
    config_type = AliceAttackConfig

    def __init__(self, classifier: Any, lm: Any, config: AliceConfig = AliceAttackConfig()):
        if config.num_return != 1:
            raise InputError(f"num_return={config.num_return}: an attack writes one statement per source",
                             hint="leave --num-return out")
        self.counting = CountingClassifier(classifier)
        self.decoder = AliceDecoder(self.counting, config)
        self.lm = lm

    @classmethod
    def from_config(cls, config: AliceConfig, classifier: Any, resources: Any) -> AliceAttack:
        return cls(classifier, resources.language_model(), config)

    def settings(self) -> dict[str, Any]:
        return {"family": self.family, **self.decoder.settings(), "model": self.lm.name}

    def attack(self, sources: Sequence[Source]) -> list[Attempt]:
        return [self.attack_one(s) for s in sources]

    def attack_one(self, source: Source) -> Attempt:
        """The attempt on one statement (module docstring)."""
        counting = self.counting
        counting.queries = 0
        score = float(counting.predict_proba([source.text])[0])
        if flipped_label(score, source.label):
            return untouched(source, score, counting.queries, model=self.lm.name)
        prompt = source_prompt(source)
        group = _group(source.group)
        groups = None if group is None else [group]
        output = self.decoder.decode(self.lm, [prompt], [source.seed], [source.label], groups)
        sample = as_hypotheses(output[0], 1)[0]
        statement = postprocess(sample.raw_output)
        after = float(counting.predict_proba([statement.text])[0]) if statement.text else None
        keeper = self.decoder.keeper
        kept = float(keeper.predict_proba([statement.text])[0]) if keeper is not None and statement.text else None
        return Attempt(text=statement.text, queries=counting.queries, score_before=score, score_after=after,
                       prompt=prompt, raw_output=sample.raw_output, finish_reason=sample.finish_reason,
                       error=statement.error, model=self.lm.name, keeper_score=kept)


__all__ = ["AliceAttack", "AliceAttackConfig", "CountingClassifier", "source_prompt"]
