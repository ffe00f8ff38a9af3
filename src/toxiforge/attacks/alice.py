"""The ``alice`` family: the existing ALICE generation attack (:mod:`toxiforge.decoding.alice`) behind the family
protocol, so ``toxiforge attack --family alice`` writes the rows the other families write.

ALICE writes a *new* statement rather than editing the source: it continues the source's own prompt when the
source came from a generation run (its ``prompt`` column), else the prompt ``"- SOURCE\\n-"`` (the source as the
one demonstration), steering toward the class opposite the source's label. The sources of one call (``toxiforge
attack`` gives ``batch_size`` of them, :func:`~toxiforge.attacks.job.attack_calls`) are scored in one classifier
call, and those the classifier gets right are decoded in one batched search (:func:`~toxiforge.decoding.alice.
alice_search`: every prompt's candidates of a pruning round in one classifier call). Queries are still counted per
statement, as a search of that source alone counts them: the source, the final statement, and every text the
search scored for its prompt (:class:`~toxiforge.decoding.pruning.PruningStats` ``scored_by_prompt``: a text two
prompts share is scored once but counts for each). With a classifier whose scores depend only on the text, each
attempt is what attacking its source alone gives (``tests/attacks/test_alice_family.py``); a padded transformer
classifier's scores move in the last bits with the batch a text is scored in (:mod:`toxiforge.decoding.pruning`).

The new statement keeps the source's label as its intended label, as ALICE's rows keep their prompt's; nothing
guarantees it, so check with ``--validate-with``. ``edits`` are empty and ``similarity`` is not measured. With
``--keep-label-with K`` the search also keeps the source's label in K's view (:mod:`toxiforge.decoding.alice`);
K's queries are the attacker's own, not counted, and its P(toxic) of the statement is the row's ``keeper_score``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from toxiforge.attacks.base import Attempt, Source, untouched
from toxiforge.decoding.alice_config import AliceConfig
from toxiforge.decoding.alice_decoder import AliceDecoder
from toxiforge.decoding.pruning import PruningStats
from toxiforge.decoding.types import as_hypotheses, postprocess
from toxiforge.errors import InputError
from toxiforge.records import flipped_label


@dataclass(frozen=True)
class AliceAttackConfig(AliceConfig):
    """ALICE's own settings (:class:`~toxiforge.decoding.alice_config.AliceConfig`, the paper's defaults)."""

    family: ClassVar[str] = "alice"


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
    together = False  # a batch of batch_size sources per call (one search), not a whole shard: the LM holds every beam
    config_type = AliceAttackConfig

    def __init__(self, classifier: Any, lm: Any, config: AliceConfig = AliceAttackConfig()):
        if config.num_return != 1:
            raise InputError(f"num_return={config.num_return}: an attack writes one statement per source",
                             hint="leave --num-return out")
        self.classifier = classifier
        self.decoder = AliceDecoder(classifier, config)
        self.lm = lm

    @classmethod
    def from_config(cls, config: AliceConfig, classifier: Any, resources: Any) -> AliceAttack:
        return cls(classifier, resources.language_model(), config)

    def settings(self) -> dict[str, Any]:
        return {"family": self.family, **self.decoder.settings(), "model": self.lm.name}

    def attack(self, sources: Sequence[Source]) -> list[Attempt]:
        """One attempt per source, in order (module docstring): the sources the classifier gets right are decoded
        together, in one search."""
        if not sources:
            return []
        before = [float(p) for p in self.classifier.predict_proba([s.text for s in sources])]
        todo = [i for i, s in enumerate(sources) if not flipped_label(before[i], s.label)]
        attempts = [untouched(s, p, 1, model=self.lm.name) for s, p in zip(sources, before)]
        for i, attempt in zip(todo, self._decode([sources[i] for i in todo], [before[i] for i in todo])):
            attempts[i] = attempt
        return attempts

    def _decode(self, sources: Sequence[Source], before: Sequence[float]) -> list[Attempt]:
        """The attempts on ``sources`` (each one the classifier gets right, P(toxic) ``before``), one search."""
        if not sources:
            return []
        prompts = [source_prompt(s) for s in sources]
        stats = PruningStats()
        outputs = self.decoder.decode(self.lm, prompts, [s.seed for s in sources], [s.label for s in sources],
                                      [_group(s.group) for s in sources], pruning_stats=stats)
        samples = [as_hypotheses(output, 1)[0] for output in outputs]
        statements = [postprocess(sample.raw_output) for sample in samples]
        texts = [st.text for st in statements if st.text]
        after = self._scores(self.classifier, texts)
        keeper = self.decoder.keeper
        kept = self._scores(keeper, texts) if keeper is not None else {}
        return [Attempt(text=st.text, queries=1 + stats.scored_by_prompt[i] + bool(st.text), score_before=score,
                        score_after=after.get(st.text), prompt=prompt, raw_output=sample.raw_output,
                        finish_reason=sample.finish_reason, error=st.error, model=self.lm.name,
                        keeper_score=kept.get(st.text))
                for i, (st, score, prompt, sample) in enumerate(zip(statements, before, prompts, samples))]

    @staticmethod
    def _scores(classifier: Any, texts: Sequence[str]) -> dict[str, float]:
        """P(toxic) of each text by ``classifier``, in one call (none for no text)."""
        return dict(zip(texts, map(float, classifier.predict_proba(list(texts))))) if texts else {}


__all__ = ["AliceAttack", "AliceAttackConfig", "source_prompt"]
