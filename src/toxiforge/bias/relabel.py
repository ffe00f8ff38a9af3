"""Dialect-aware relabeling (Zhou et al. 2021, §6): relabel AAE examples by what a classifier says about their
White-aligned English (WAE) "translation".

1. p(AAE) per text from Blodgett et al.'s dialect model (:func:`toxiforge.bias.dialect.aae_probability`); the
   examples with p(AAE) > ``aae_threshold`` are candidates.
2. Each candidate is translated with any toxiforge :class:`~toxiforge.models.LanguageModel` through a few-shot
   prompt (:func:`translation_prompt`), decoded greedily to the end of the line (:func:`lm_translator`).
3. A classifier scores the translation; where its verdict differs from the gold label, the label becomes the
   verdict. Zhou et al. relabel only toxic AAE examples whose translation is predicted non-toxic (their
   heuristic, the default here: ``direction="toxic-to-benign"``); ``direction="any"`` relabels either way, as
   the general rule reads.

The output keeps every row; candidates get ``translation`` and all rows ``old_label``, ``p_aae``, ``relabeled``
and ``relabel_method`` (the translator and classifier) as provenance; ``label`` is the new label.

Departures: the paper prompts GPT-3 with four pairs from Spears (1998); toxiforge's few-shot pairs
(:data:`FEW_SHOT`) are its own neutral sentences showing the same kinds of features (habitual *be*, completive
*done*, *finna*, negative concord), not the paper's. Zhou et al. also accept a translation predicted non-toxic
by a classifier trained on the translations; here one classifier decides.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from toxiforge.data.examples import Example
from toxiforge.errors import InputError

# (AAE, WAE) pairs written for toxiforge: neutral everyday sentences, one dialect feature each.
FEW_SHOT: tuple[tuple[str, str], ...] = (
    ("she be working late on tuesdays", "She usually works late on Tuesdays."),
    ("he done finished the whole book already", "He has already finished the whole book."),
    ("we finna go to the store", "We are about to go to the store."),
    ("they ain't never seen that movie", "They have never seen that movie."),
)
INSTRUCTION = "Rewrite each sentence in Standard American English, keeping its meaning."
DIRECTIONS: tuple[str, ...] = ("toxic-to-benign", "any")


def translation_prompt(text: str, few_shot: Sequence[tuple[str, str]] = FEW_SHOT) -> str:
    """The few-shot prompt: the instruction, ``Input:``/``Output:`` pairs, then the text and an open ``Output:``."""
    blocks = [INSTRUCTION, ""] + [f"Input: {a}\nOutput: {b}\n" for a, b in few_shot]
    return "\n".join(blocks) + f"\nInput: {' '.join(text.split())}\nOutput:"


def lm_translator(lm, *, max_new_tokens: int = 48, batch_size: int = 8,
                  few_shot: Sequence[tuple[str, str]] = FEW_SHOT) -> Callable[[Sequence[str]], list[str]]:
    """``texts -> translations`` with ``lm``: greedy (top-1) decoding of the few-shot prompt to the line's end."""
    from toxiforge.decoding.topk import TopKConfig, sample_top_k

    config = TopKConfig(top_k=1, temperature=1.0, max_new_tokens=max_new_tokens, stop_at_newline=True)

    def translate(texts: Sequence[str]) -> list[str]:
        out: list[str] = []
        for start in range(0, len(texts), batch_size):
            prompts = [translation_prompt(t, few_shot) for t in texts[start:start + batch_size]]
            out += [s.raw_output.strip() for s in sample_top_k(lm, prompts, [0] * len(prompts), config)]
        return out

    return translate


@dataclass(frozen=True)
class RelabelResult:
    """Per row: new label, old label, p(AAE) (NaN: no prediction), translation (None: not a candidate)."""

    labels: np.ndarray
    old_labels: np.ndarray
    p_aae: np.ndarray
    translations: list[str | None]
    scores: list[float | None]

    @property
    def relabeled(self) -> np.ndarray:
        return self.labels != self.old_labels


def relabel(examples: Sequence[Example], *, p_aae: npt.ArrayLike, translate: Callable[[Sequence[str]], list[str]],
            classify: Callable[[Sequence[str]], np.ndarray], aae_threshold: float = 0.5,
            direction: str = "toxic-to-benign", threshold: float = 0.5) -> RelabelResult:
    """Relabel ``examples`` (see the module docstring). ``classify`` gives P(toxic) per text; a translation is
    toxic when its score is above ``threshold``."""
    if direction not in DIRECTIONS:
        raise InputError(f"unknown relabel direction {direction!r}", hint=f"use one of {', '.join(DIRECTIONS)}")
    if not 0 <= aae_threshold < 1:
        raise InputError(f"--aae-threshold must be in [0, 1), got {aae_threshold}", hint="e.g. 0.5")
    old = np.array([e.label for e in examples], dtype=np.int64)
    p = np.asarray(p_aae, dtype=np.float64)
    if p.shape != old.shape:
        raise InputError(f"{len(p)} p(AAE) values for {len(old)} examples", hint="one per example")
    candidates = np.flatnonzero(np.nan_to_num(p, nan=0.0) > aae_threshold)
    if direction == "toxic-to-benign":
        candidates = candidates[old[candidates] == 1]
    translations: list[str | None] = [None] * len(old)
    scores: list[float | None] = [None] * len(old)
    new = old.copy()
    if len(candidates):
        done = translate([examples[int(i)].text for i in candidates])
        verdict = np.asarray(classify(done), dtype=np.float64)
        for i, text, score in zip(candidates, done, verdict):
            translations[i], scores[i] = text, float(score)
            new[i] = int(score > threshold)
    return RelabelResult(labels=new, old_labels=old, p_aae=p, translations=translations, scores=scores)


def relabeled_table(examples: Sequence[Example], result: RelabelResult, *, method: str):
    """The relabeled dataset as a pyarrow table: text, label (new), group, then the provenance columns."""
    import pyarrow as pa

    return pa.table({
        "text": [e.text for e in examples], "label": result.labels.tolist(),
        "group": [e.group for e in examples], "old_label": result.old_labels.tolist(),
        "p_aae": [None if np.isnan(x) else float(x) for x in result.p_aae],
        "translation": result.translations, "translation_p_toxic": result.scores,
        "relabeled": result.relabeled.tolist(), "relabel_method": [method] * len(examples),
    })
