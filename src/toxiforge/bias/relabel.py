"""Dialect-aware relabeling (Zhou et al. 2021, §6): relabel AAE examples by what a classifier says about their
White-aligned English (WAE) "translation".

1. The four dialect proportions per text from Blodgett et al.'s dialect model
   (:func:`toxiforge.bias.dialect.predict_dialects`); the candidates are the texts whose most probable dialect
   is AAE (the rule of ``bias measure``, upstream's ``dialect_argmax`` and the paper), or with ``aae_threshold``
   those with p(AAE) above it -- the only rule for a precomputed p(AAE) column (``bias relabel --aae-column``).
2. Each candidate is translated with any toxiforge :class:`~toxiforge.models.LanguageModel` through a few-shot
   prompt (:func:`translation_prompt`), decoded greedily to the end of the line (:func:`lm_translator`).
3. A classifier scores the translation; where its verdict differs from the gold label, the label becomes the
   verdict. Zhou et al. relabel only toxic AAE examples whose translation is predicted non-toxic (their
   heuristic, the default here: ``direction="toxic-to-benign"``); ``direction="any"`` relabels either way, as
   the general rule reads.

toxiforge's addition (the paper has none): a translation that is empty, repeats one of the few-shot sentences,
or carries the prompt's ``Input:`` / ``Output:`` scaffolding is a failed translation (:func:`translation_error`):
its row keeps its label and says why in ``translation_error``. Judging such text would relabel by the prompt, not
by the example (SmolLM2-135M answered 2 of 40 real sentences with the last few-shot output; docs/bias.md).

The output keeps every row; candidates get ``translation`` (and ``translation_error``) and all rows
``old_label``, ``p_aae``, ``relabeled``, ``relabel_method`` (the translator and classifier), ``relabel_model``
(the translating LM) and ``relabel_seed`` (the decoder's seed; greedy decoding does not use it) as provenance;
``label`` is the new label. :func:`relabel_manifest` is the run manifest written beside it.

Departures: the paper prompts GPT-3 with four pairs from Spears (1998); toxiforge's few-shot pairs
(:data:`FEW_SHOT`) are its own neutral sentences showing the same kinds of features (habitual *be*, completive
*done*, *finna*, negative concord), not the paper's. Zhou et al. also accept a translation predicted non-toxic
by a classifier trained on the translations; here one classifier decides.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from toxiforge.data.examples import Example
from toxiforge.decoding.types import postprocess
from toxiforge.errors import InputError, check_choice
from toxiforge.records import TOXIC_THRESHOLD, is_toxic

# (AAE, WAE) pairs written for toxiforge: neutral everyday sentences, one dialect feature each.
FEW_SHOT: tuple[tuple[str, str], ...] = (
    ("she be working late on tuesdays", "She usually works late on Tuesdays."),
    ("he done finished the whole book already", "He has already finished the whole book."),
    ("we finna go to the store", "We are about to go to the store."),
    ("they ain't never seen that movie", "They have never seen that movie."),
)
INSTRUCTION = "Rewrite each sentence in Standard American English, keeping its meaning."
DIRECTIONS: tuple[str, ...] = ("toxic-to-benign", "any")
SCAFFOLDING: tuple[str, ...] = ("input:", "output:", INSTRUCTION.lower())  # parts of the prompt, not of a sentence


def translation_prompt(text: str, few_shot: Sequence[tuple[str, str]] = FEW_SHOT) -> str:
    """The few-shot prompt: the instruction, ``Input:``/``Output:`` pairs, then the text and an open ``Output:``."""
    blocks = [INSTRUCTION, ""] + [f"Input: {a}\nOutput: {b}\n" for a, b in few_shot]
    return "\n".join(blocks) + f"\nInput: {' '.join(text.split())}\nOutput:"


def translation_config(max_new_tokens: int = 48):
    """The translator's decoding settings: greedy (top-1), to the end of the line."""
    from toxiforge.decoding.topk import TopKConfig

    return TopKConfig(top_k=1, temperature=1.0, max_new_tokens=max_new_tokens, stop_at_newline=True)


def lm_translator(lm, *, max_new_tokens: int = 48, batch_size: int = 8, seed: int = 0,
                  few_shot: Sequence[tuple[str, str]] = FEW_SHOT) -> Callable[[Sequence[str]], list[str]]:
    """``texts -> translations`` with ``lm``: greedy (top-1) decoding of the few-shot prompt to the line's end
    (``seed`` seeds every row's generator, which top-1 decoding never draws from; recorded as provenance)."""
    from toxiforge.decoding.topk import sample_top_k

    if batch_size < 1:
        raise InputError(f"--batch-size must be at least 1, got {batch_size}", hint="e.g. 8")
    config = translation_config(max_new_tokens)

    def translate(texts: Sequence[str]) -> list[str]:
        out: list[str] = []
        for start in range(0, len(texts), batch_size):
            prompts = [translation_prompt(t, few_shot) for t in texts[start:start + batch_size]]
            out += [postprocess(s.raw_output).text for s in sample_top_k(lm, prompts, [seed] * len(prompts),
                                                                          config)]
        return out

    return translate


def _words(text: str) -> str:
    return " ".join("".join(c for c in text.lower() if c.isalnum() or c.isspace()).split())


def translation_error(source: str, translation: str, few_shot: Sequence[tuple[str, str]] = FEW_SHOT) -> str | None:
    """Why ``translation`` of ``source`` is not a translation (None when it may be one): empty, a repeat of a
    few-shot sentence (words compared without case and punctuation; unless ``source`` is that pair's input or
    output, whose translation it then is), or the prompt's scaffolding (``Input:``, ``Output:``, the
    instruction)."""
    words, own = _words(translation), _words(source)
    if not words:
        return "empty translation"
    for pair in few_shot:
        sentences = {_words(t) for t in pair}
        if words in sentences and own not in sentences:
            return "repeats a few-shot example"
    if any(part in translation.lower() for part in SCAFFOLDING):
        return "contains the prompt's scaffolding"
    return None


@dataclass(frozen=True)
class RelabelResult:
    """Per row: new label, old label, p(AAE) (NaN: no prediction), translation (None: not a candidate), the
    classifier's P(toxic) of it, and why it is not a translation (:func:`translation_error`; None: it is one)."""

    labels: np.ndarray
    old_labels: np.ndarray
    p_aae: np.ndarray
    translations: list[str | None]
    scores: list[float | None]
    errors: list[str | None]

    @property
    def relabeled(self) -> np.ndarray:
        return self.labels != self.old_labels


def relabel(examples: Sequence[Example], *, p_aae: npt.ArrayLike, translate: Callable[[Sequence[str]], list[str]],
            classify: Callable[[Sequence[str]], np.ndarray], aae_threshold: float | None = None,
            direction: str = "toxic-to-benign", threshold: float = TOXIC_THRESHOLD,
            few_shot: Sequence[tuple[str, str]] = FEW_SHOT) -> RelabelResult:
    """Relabel ``examples`` (see the module docstring). ``p_aae``: the ``[n, 4]`` dialect proportions of
    :func:`~toxiforge.bias.dialect.predict_dialects` (candidates: AAE the most probable, or p(AAE) >
    ``aae_threshold`` when given), or ``[n]`` p(AAE) alone (``aae_threshold`` required). ``classify`` gives
    P(toxic) per text; a translation is toxic when its score is above ``threshold``
    (:func:`~toxiforge.records.is_toxic`). Failed translations (:func:`translation_error` against ``few_shot``,
    the translator's pairs) are not judged and keep their label."""
    from toxiforge.bias.metrics import aae_members

    check_choice(direction, DIRECTIONS, what="relabel direction")
    if aae_threshold is not None and not 0 <= aae_threshold < 1:
        raise InputError(f"--aae-threshold must be in [0, 1), got {aae_threshold}", hint="e.g. 0.5")
    old = np.array([e.label for e in examples], dtype=np.int64)
    dialects = np.asarray(p_aae, dtype=np.float64)
    if dialects.ndim == 1:
        if aae_threshold is None:
            raise InputError("p(AAE) alone cannot give the most probable dialect",
                             hint="pass the four dialect proportions, or an --aae-threshold (e.g. 0.5)")
        dialects = np.column_stack([dialects, np.zeros((len(dialects), 3))])
    if dialects.ndim != 2 or dialects.shape != (len(old), 4):
        raise InputError(f"{len(dialects)} p(AAE) values for {len(old)} examples", hint="one per example")
    p = dialects[:, 0]
    candidates = np.flatnonzero(aae_members(dialects, aae_threshold))
    if direction == "toxic-to-benign":
        candidates = candidates[old[candidates] == 1]
    translations: list[str | None] = [None] * len(old)
    scores: list[float | None] = [None] * len(old)
    errors: list[str | None] = [None] * len(old)
    new = old.copy()
    if len(candidates):
        rows = [int(i) for i in candidates]
        for row, text in zip(rows, translate([examples[row].text for row in rows])):
            translations[row], errors[row] = text, translation_error(examples[row].text, text, few_shot)
        judged = [row for row in rows if errors[row] is None]
        verdict = np.asarray(classify([str(translations[row]) for row in judged]) if judged else [], dtype=np.float64)
        for row, score in zip(judged, verdict):
            scores[row] = float(score)
            new[row] = int(is_toxic(score, threshold))
    return RelabelResult(labels=new, old_labels=old, p_aae=p, translations=translations, scores=scores,
                         errors=errors)


def relabeled_table(examples: Sequence[Example], result: RelabelResult, *, method: str, model: str, seed: int):
    """The relabeled dataset as a pyarrow table: text, label (new), group, then the provenance columns."""
    import pyarrow as pa

    return pa.table({
        "text": [e.text for e in examples], "label": result.labels.tolist(),
        "group": [e.group for e in examples], "old_label": result.old_labels.tolist(),
        "p_aae": [None if np.isnan(x) else float(x) for x in result.p_aae],
        "translation": result.translations, "translation_p_toxic": result.scores,
        "translation_error": result.errors,
        "relabeled": result.relabeled.tolist(), "relabel_method": [method] * len(examples),
        "relabel_model": [model] * len(examples), "relabel_seed": [seed] * len(examples),
    })


def relabel_manifest(result: RelabelResult, settings: dict[str, Any],
                     few_shot: Sequence[tuple[str, str]] = FEW_SHOT) -> dict[str, Any]:
    """The run manifest: ``settings`` (what the caller ran: models, decoding, seed, thresholds, p(AAE) source),
    the prompt's pairs and the counts: rows, candidates (translated), failed translations by reason, labels
    changed each way."""
    old, new = result.old_labels, result.labels
    failed = Counter(e for e in result.errors if e is not None)
    return {"settings": settings, "few_shot": [list(pair) for pair in few_shot], "instruction": INSTRUCTION,
            "counts": {"rows": len(old), "translated": sum(t is not None for t in result.translations),
                       "failed_translations": dict(sorted(failed.items())),
                       "toxic_to_benign": int(((old == 1) & (new == 0)).sum()),
                       "benign_to_toxic": int(((old == 0) & (new == 1)).sum())}}


def read_translations(path: str | Path) -> dict[str, str]:
    """``{text: translation}`` from a table with ``text`` and ``translation`` columns (``bias relabel``'s output, or
    the ``relabeled.parquet`` of an ``experiment debias`` run); rows without a translation are skipped."""
    from toxiforge.data.examples import column, read_any_table

    table = read_any_table(str(path))
    missing = [c for c in ("text", "translation") if c not in table.column_names]
    if missing:
        raise InputError(f"no {missing} column in the translations table; it has {table.column_names}", path=path,
                         hint="pass the output of `toxiforge bias relabel` or an experiment's relabeled.parquet")
    return {str(t): str(tr) for t, tr in zip(column(table, "text"), column(table, "translation")) if tr is not None}


PARTIAL_TRANSLATIONS = "translations.partial.jsonl"


def experiment_relabeler(lm: str, *, dialect_model: Any, aae_threshold: float | None = None,
                         translations: dict[str, str] | None = None, batch_size: int = 8, device: str = "auto",
                         dtype: str = "auto", seed: int = 0
                         ) -> Callable[[Sequence[Example], Any, Path], list[Example]]:
    """The AAE-relabeled step of ``experiment debias``: ``(train rows, classifier, out dir) -> relabeled rows``.

    Translates the candidates with ``lm`` (loaded on first need), reusing ``translations`` (``{text: translation}``,
    :func:`read_translations`: greedy decoding makes a translation a function of the text, so a run can reuse
    another's), judges them with ``classifier`` (the experiment passes its first Vanilla model, as Zhou et al.)
    and writes ``relabeled.parquet`` and ``relabeled.manifest.json`` into the out dir. Translations are appended to
    ``translations.partial.jsonl`` there as they are made, and read back first: a stopped run loses at most one
    chunk (8 batches) of them. ``dtype`` is the translator's weights (``relabeled.manifest.json`` records them;
    bfloat16 decodes about 2.5x faster than float32 on a CPU with bfloat16 units: docs/debias-davidson.md)."""
    import json
    import time

    from toxiforge._io import atomic_write_text
    from toxiforge.bias.dialect import predict_dialects
    from toxiforge.records import write_table

    if batch_size < 1:
        raise InputError(f"--relabel-batch-size must be at least 1, got {batch_size}", hint="e.g. 8")
    known = dict(translations or {})

    def run(rows: Sequence[Example], classifier: Any, out: Path) -> list[Example]:
        from toxiforge.models import load_language_model

        loaded: list[Any] = []
        counts = {"reused": 0, "translated": 0}
        partial = out / PARTIAL_TRANSLATIONS  # each chunk as it is translated: a stopped run keeps them
        for line in partial.read_text(encoding="utf-8").splitlines() if partial.exists() else []:
            if line.strip():
                saved = json.loads(line)
                known.setdefault(saved["text"], saved["translation"])

        def translate(texts: Sequence[str]) -> list[str]:
            missing = list(dict.fromkeys(t for t in texts if t not in known))
            counts["reused"] += sum(t in known for t in texts)
            for start in range(0, len(missing), batch_size * 8):
                if not loaded:
                    loaded.append(load_language_model(lm, dtype=dtype, device=device))
                chunk = missing[start:start + batch_size * 8]
                done = lm_translator(loaded[0], batch_size=batch_size, seed=seed)(chunk)
                known.update(zip(chunk, done))
                with partial.open("a", encoding="utf-8") as handle:
                    handle.writelines(json.dumps({"text": t, "translation": d}, ensure_ascii=False) + "\n"
                                      for t, d in zip(chunk, done))
                counts["translated"] += len(chunk)
            return [known[t] for t in texts]

        started = time.perf_counter()
        result = relabel(rows, p_aae=predict_dialects([e.text for e in rows], dialect_model), translate=translate,
                         classify=classifier.predict_proba, aae_threshold=aae_threshold)
        method = (f"relabel: translated by {lm} (few-shot, greedy), judged by the experiment's first Vanilla "
                  f"model, direction toxic-to-benign")
        write_table(relabeled_table(rows, result, method=method, model=lm, seed=seed), out / "relabeled.parquet")
        settings = {"lm": loaded[0].describe() if loaded else lm, "classifier": classifier.describe(),
                    "decoding": translation_config().to_dict(), "seed": seed, "batch_size": batch_size,
                    "aae_rule": "argmax" if aae_threshold is None else f"p(AAE) > {aae_threshold:g}",
                    "translations_reused": counts["reused"], "translations_made": counts["translated"],
                    "seconds": round(time.perf_counter() - started, 2)}
        atomic_write_text(out / "relabeled.manifest.json",
                          json.dumps(relabel_manifest(result, settings), indent=2, default=str) + "\n")
        return [Example(e.text, int(label), group=e.group, method=e.method, row=e.row)
                for e, label in zip(rows, result.labels)]

    return run
