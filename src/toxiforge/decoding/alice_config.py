"""ALICE's settings (:class:`AliceConfig`, the one place they are checked) and the rules that turn prompt labels
into the classes the search steers toward (:func:`target_classes`) and the keeper keeps (:func:`keeper_classes`).
The search itself is :mod:`toxiforge.decoding.alice`; the pipeline decoder :mod:`toxiforge.decoding.alice_decoder`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal

from toxiforge.errors import InputError
from toxiforge.models.base import LanguageModel

Mode = Literal["auto", "false-negatives", "false-positives"]


@dataclass(frozen=True)
class AliceConfig:
    """ALICE settings; defaults are the paper's (§3.3) except the departures in the module docstring. The one
    place these values are checked."""

    method: ClassVar[str] = "alice"

    lambda_lm: float = 0.5
    lambda_clf: float = 0.5
    num_beams: int = 10
    candidates: int = 100
    temperature: float = 0.9
    max_new_tokens: int = 30
    length_penalty: float = 1.0
    classifier_top_n: int | None = None
    classifier_top_extensions: int | None = None
    no_repeat_ngram_size: int = 3
    ban_prompt_tokens: bool = True
    exempt_group_terms: bool = True
    require_text: bool = True
    mode: Mode = "auto"
    num_return: int = 1
    stop_at_newline: bool = True
    keep_label_with: str | None = None
    lambda_keep: float = 1.0

    def __post_init__(self) -> None:
        lambdas = (self.lambda_lm, self.lambda_clf)
        keeper = self.keep_label_with
        checks = [
            (self.num_beams >= 1, f"num_beams={self.num_beams} must be at least 1", "use --beams 10"),
            (self.candidates >= 1, f"candidates={self.candidates} must be at least 1", "use --candidates 100"),
            (self.classifier_top_n is None or self.classifier_top_n >= 1,
             f"classifier_top_n={self.classifier_top_n} must be at least 1", "omit it to score all candidates"),
            (self.classifier_top_extensions is None or self.classifier_top_extensions >= 1,
             f"classifier_top_extensions={self.classifier_top_extensions} must be at least 1",
             "omit it to score all candidates, or use 2 × beams (upstream's)"),
            (self.temperature > 0 and math.isfinite(self.temperature),
             f"temperature={self.temperature} must be a finite number > 0", "use 0.9"),
            (self.max_new_tokens >= 1, f"max_new_tokens={self.max_new_tokens} must be at least 1", "use 30"),
            (all(math.isfinite(x) and x >= 0 for x in lambdas) and any(x > 0 for x in lambdas),
             f"λ weights (lambda_lm={self.lambda_lm}, lambda_clf={self.lambda_clf}) must be finite, non-negative "
             "and not both 0", "use 0.5 and 0.5 (the paper's)"),
            (self.length_penalty >= 0, f"length_penalty={self.length_penalty} must be >= 0", "use 1"),
            (self.no_repeat_ngram_size >= 0, "no_repeat_ngram_size must be >= 0", "use 3, or 0 to disable"),
            (self.mode in ("auto", "false-negatives", "false-positives"), f"unknown mode {self.mode!r}",
             "use auto, false-negatives or false-positives"),
            (1 <= self.num_return <= self.num_beams,
             f"num_return={self.num_return} must be between 1 and num_beams ({self.num_beams})",
             "return at most as many hypotheses as beams, or raise --beams"),
            (math.isfinite(self.lambda_keep) and self.lambda_keep >= 0,
             f"lambda_keep={self.lambda_keep} must be a finite number >= 0", "use 1 (the default)"),
            (keeper is not None or self.lambda_keep == AliceConfig.lambda_keep,
             f"lambda_keep={self.lambda_keep} was given without a keeper: it would weigh nothing",
             "add --keep-label-with CLASSIFIER, or drop --lambda-keep"),
            (keeper is None or self.mode == "auto",
             f"--keep-label-with {keeper} with --alice-mode {self.mode}: the keeper holds each statement to its "
             "prompt's label, which only auto mode steers from", "drop --alice-mode (auto is the default)"),
            (keeper is None or self.lambda_clf > 0,
             f"--keep-label-with {keeper} with lambda_clf=0: nothing is attacked, the keeper would only keep labels",
             "use a positive --lambda-clf (paper: 0.5)"),
        ]
        for ok, message, hint in checks:
            if not ok:
                raise InputError(message, hint=hint)

    def fields(self) -> dict[str, Any]:
        """The settings by field name, without the keeper's when there is none, so that what a run without one
        records (manifests, harden's fingerprint, the audit's run folders) is what it recorded before they existed."""
        out = asdict(self)
        if self.keep_label_with is None:
            del out["keep_label_with"], out["lambda_keep"]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"method": "ALICE", **self.fields()}

    def __repr__(self) -> str:  # the dataclass repr of :meth:`fields` (the audit keys its run folders by it)
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in self.fields().items())})"


def check_lm(lm: LanguageModel, config: AliceConfig) -> None:
    """Refuse an LM ALICE cannot drive: candidates beyond its vocabulary, or no full-vocabulary log-probs."""
    if config.candidates > lm.vocab_size:
        raise InputError(f"candidates={config.candidates} is larger than the LM's vocabulary ({lm.vocab_size})",
                         hint=f"use --candidates {min(100, lm.vocab_size)} or fewer")
    probe = lm.start(["-"]).logprobs()
    if probe.dim() != 2 or probe.shape[-1] != lm.vocab_size:
        raise InputError(f"LM {lm.name} returned next-token scores of shape {tuple(probe.shape)}, not the full "
                         f"vocabulary ({lm.vocab_size})",
                         hint="ALICE needs full-vocabulary log-probabilities; use a transformers or llama.cpp LM")


def target_classes(labels: Sequence[int], mode: Mode, toxic_index: int, benign_index: int) -> list[int]:
    """Classifier class to maximize per prompt: benign for toxic prompts (false negatives), toxic for benign ones."""
    if mode == "false-negatives":
        return [benign_index] * len(labels)
    if mode == "false-positives":
        return [toxic_index] * len(labels)
    return [benign_index if label == 1 else toxic_index for label in labels]


def keeper_classes(labels: Sequence[int], keeper: Any) -> list[int]:
    """The keeper's class to keep per prompt: the prompt's own (toxic for toxic prompts, benign for benign ones)."""
    return [keeper.toxic_index if label == 1 else keeper.benign_index for label in labels]
