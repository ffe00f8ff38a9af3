"""ALICE as a pipeline decoder (:class:`AliceDecoder`, the :class:`~toxiforge.decoding.types.Decoder` protocol):
prompt labels to target classes, the keeper loaded from its name, the search (:func:`~toxiforge.decoding.alice.
alice_search`) and its finished hypotheses turned into distinct statements."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from toxiforge.decoding import alice
from toxiforge.decoding.alice_config import AliceConfig, check_lm, keeper_classes, target_classes
from toxiforge.decoding.beam import Hypothesis
from toxiforge.decoding.pruning import PruningStats
from toxiforge.decoding.types import Sample, postprocess
from toxiforge.errors import InputError
from toxiforge.models.base import LanguageModel


class AliceDecoder:
    """ALICE as a pipeline decoder (see :class:`toxiforge.decoding.types.Decoder`), steering toward the class
    chosen by ``config.mode`` and the prompt label.

    ``decode`` returns, per prompt, up to ``num_return`` hypotheses, best first, that post-process to distinct,
    non-empty statements: of the (up to ``num_beams``) finished hypotheses, one whose statement is empty or equals
    a better one's is skipped (different token sequences can decode to the same text, e.g. ``"a"+"b"`` and
    ``"ab"``, or a statement with and without its newline). Fewer than ``num_return`` come back only when the
    search did not finish that many; when none has a statement, the best hypothesis comes back alone (the job
    flags its row). The best hypothesis is always first, so rank 0 does not depend on ``num_return``. Each
    sample's ``score`` is the hypothesis' length-normalized beam score. Beam search is deterministic, so the
    per-row sampling seeds the pipeline passes are not used.

    ``keeper``: the classifier of ``config.keep_label_with`` already loaded (tests, notebooks); without it the
    decoder loads it (:func:`~toxiforge.classifiers.load_classifier`, on the attacked classifier's device), so a Ray
    worker or an attack builds the same decoder from the config alone."""

    method = "ALICE"
    config_type = AliceConfig

    def __init__(self, classifier, config: AliceConfig = AliceConfig(), keeper=None):
        if classifier is None and config.lambda_clf > 0:
            raise InputError("ALICE needs a classifier to steer against",
                             hint="pass --classifier NAME (e.g. profanity-check, which works offline)")
        if classifier is not None:
            for what, index in (("toxic", classifier.toxic_index), ("benign", classifier.benign_index)):
                if not 0 <= index < classifier.num_classes:
                    raise InputError(f"classifier {classifier.name} has {classifier.num_classes} classes; its {what} "
                                     f"class index {index} is out of range",
                                     hint="set the classifier's toxic_index/benign_index to existing classes")
        if config.keep_label_with is not None and keeper is None:
            from toxiforge.classifiers import load_classifier

            device = getattr(classifier, "device", None)
            keeper = load_classifier(config.keep_label_with, name=config.keep_label_with,
                                     device=None if device is None else str(device))
        self.classifier = classifier
        self.keeper = keeper if config.keep_label_with is not None else None
        self.config = config
        self._checked: set[int] = set()

    @classmethod
    def from_config(cls, config: AliceConfig, classifier=None) -> AliceDecoder:
        return cls(classifier, config)

    @property
    def num_return(self) -> int:
        """At most this many outputs per prompt come back from :meth:`decode`."""
        return self.config.num_return

    def settings(self) -> dict[str, Any]:
        """The config, the attacked classifier's name and, with a keeper, its content fingerprint (None: a name, not
        a local model; :func:`~toxiforge.classifiers.fingerprint.fingerprint`), so a run records which K kept its
        labels."""
        out = {**self.config.to_dict(), "classifier": getattr(self.classifier, "name", None)}
        if self.config.keep_label_with is not None:
            from toxiforge.classifiers.fingerprint import fingerprint

            out["keeper_weights"] = fingerprint(self.config.keep_label_with)
        return out

    def decode(self, lm: LanguageModel, prompts: Sequence[str], seeds: Sequence[int], labels: Sequence[int],
               groups: Sequence[str | None] | None = None,
               pruning_stats: PruningStats | None = None) -> list[list[Sample]]:
        """The protocol's ``decode``; ``pruning_stats`` collects the search's counts (:class:`~toxiforge.decoding.
        pruning.PruningStats`: the ``alice`` attack family reads the texts scored per prompt from it)."""
        if id(lm) not in self._checked:
            check_lm(lm, self.config)
            self._checked.add(id(lm))
        clf = self.classifier
        targets = target_classes(labels, self.config.mode, clf.toxic_index if clf else 1,
                                 clf.benign_index if clf else 0)
        # the search does not depend on num_return: ask for every finished hypothesis, keep n distinct statements
        pool = replace(self.config, num_return=self.config.num_beams)
        keeper = self.keeper
        results = alice.alice_search(lm, prompts, targets, pool, classifier=clf, groups=groups, keeper=keeper,
                               keep_targets=None if keeper is None else keeper_classes(labels, keeper),
                               pruning_stats=pruning_stats)
        return [self._distinct(lm, hyps) for hyps in results]

    def _distinct(self, lm: LanguageModel, hyps: list[Hypothesis]) -> list[Sample]:
        samples = [Sample(text, h.token_ids, h.finish_reason, h.score)
                   for h, text in zip(hyps, lm.batch_decode([list(h.token_ids) for h in hyps]))]
        chosen, seen = [], set()
        for sample in samples:
            statement = postprocess(sample.raw_output).text
            if statement and statement not in seen:
                seen.add(statement)
                chosen.append(sample)
            if len(chosen) == self.config.num_return:
                break
        return chosen or samples[:1]
