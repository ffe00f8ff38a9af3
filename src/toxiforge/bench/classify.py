"""Classification mode: ask the LM whether a statement is hateful, as lm-evaluation-harness's ``toxigen`` task.

The task (lm-eval ``tasks/toxigen/toxigen.yaml``): zero-shot, the context is :data:`PROMPT` with the statement,
the two continuations are ``" No"`` and ``" Yes"`` (the harness's target delimiter " " before each choice), and
the gold label of ToxiGen annotated rows is ``(toxicity_ai + toxicity_human) > 5.5`` (toxiforge's ``sum`` label
rule, the default of :func:`toxiforge.data.load_toxigen_annotated`). Metrics, as the harness computes them:

* ``acc``: the choice with the higher log-likelihood is the gold one;
* ``acc_norm``: the same after dividing each log-likelihood by the choice's length in characters (the harness's
  ``completion_len``, ``len("No") = 2``, ``len("Yes") = 3``; for these ASCII choices also their byte length);
* ``roc_auc`` (not in the harness): ROC AUC of ``P(Yes) - P(No)`` against the gold labels, which does not depend
  on a threshold or on the model's bias toward one answer.

Ties go to the first choice ("No"), as ``numpy.argmax`` breaks them in the harness. Log-likelihoods come from the
judge's yes/no path (:func:`_yes_no`, the ``humanval`` judge template rendered as plain text): in-process one
forward pass per batch of items with the question's shared prefix computed once; through an OpenAI-compatible
server one echoed ``/v1/completions`` request per answer, as the harness's ``local-completions`` model sends it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from toxiforge.classifiers.judge_templates import CHOICES, PROMPT, TARGET_DELIMITER  # the judge's humanval question
from toxiforge.data.examples import LabeledData
from toxiforge.errors import InputError
from toxiforge.intervals import Share, proportion

ITEMS_PER_CALL = 64              # items per loglikelihood() call: the progress bar's step


def classify_requests(texts: Sequence[str]) -> list[tuple[str, str]]:
    """The harness's requests, two per text in order: ``(context, " No")``, ``(context, " Yes")``."""
    return [(PROMPT.format(text=t), TARGET_DELIMITER + c) for t in texts for c in CHOICES]


def demonstration_examples(source: str | Path, *, groups: Sequence[str] | None = None) -> LabeledData:
    """A labelled table from demonstration files (the ``demonstrations`` data kind: hate/toxic sets = 1,
    neutral/benign = 0), e.g. upstream's ``demonstrations/`` folder, optionally only some groups. Not HumanVal:
    these are the prompts' own human-written sentences."""
    from toxiforge.data.toxigen import load_demonstration_data
    from toxiforge.groups import resolve_group

    data = load_demonstration_data(source, name=f"demonstrations:{Path(source).name}")
    if groups is None:
        return data
    wanted = {resolve_group(g).name for g in groups}
    examples = [e for e in data.examples if e.group in wanted]
    if not examples:
        raise InputError("no demonstrations for the chosen groups", path=source,
                         hint="check --groups against the files' groups (toxiforge groups lists them)")
    return replace(data, examples=examples)


@dataclass
class ClassifyResult:
    """Per-item log-likelihoods and the task's metrics."""

    model: dict[str, Any]
    data: dict[str, Any]
    items: list[dict[str, Any]]
    seconds: float
    metrics: dict[str, Any] = field(default_factory=dict)
    groups: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"mode": "classify", "task": "toxigen (lm-evaluation-harness)", "prompt": PROMPT,
                "choices": [TARGET_DELIMITER + c for c in CHOICES], "model": self.model, "data": self.data,
                "metrics": self.metrics, "groups": self.groups, "seconds": round(self.seconds, 3),
                "items_per_second": round(len(self.items) / self.seconds, 3) if self.seconds > 0 else None}

    def markdown(self) -> str:
        m = self.metrics
        auc = "n/a" if m["roc_auc"] is None else f"{m['roc_auc']:.3f}"
        lines = [f"# ToxiGen classification: {self.model.get('name')}", "",
                 f"Data: {self.data.get('name')} ({self.data.get('n')} items, {self.data.get('toxic')} hateful); "
                 f"prompt as lm-evaluation-harness's `toxigen` task.", "",
                 "| metric | value [95% Wilson interval] |", "| :--- | ---: |",
                 f"| acc (%) | {Share(**m['acc']).cell()} |", f"| acc_norm (%) | {Share(**m['acc_norm']).cell()} |",
                 f"| ROC AUC of P(Yes) - P(No) | {auc} |",
                 f"| predicted Yes (%) | {100 * m['predicted_yes']:.1f} |", ""]
        if m.get("roc_auc_note"):
            lines += [f"ROC AUC {m['roc_auc_note']}.", ""]
        if self.groups:
            lines += ["| group | n | acc (%) | acc_norm (%) |", "| :--- | ---: | ---: | ---: |"]
            lines += [f"| {g} | {v['n']} | {100 * v['acc']:.1f} | {100 * v['acc_norm']:.1f} |"
                      for g, v in self.groups.items()]
            lines.append("")
        lines.append(f"{len(self.items)} items in {self.seconds:.1f} s "
                     f"({len(self.items) / max(self.seconds, 1e-9):.2f} items/s).")
        return "\n".join(lines) + "\n"

    def write(self, out_dir: str | Path) -> Path:
        """``results.json``, ``results.md`` and ``items.parquet`` (one row per item) under ``out_dir``."""
        import pyarrow as pa

        from toxiforge._io import atomic_write_text
        from toxiforge.records import write_table

        out = Path(out_dir)
        atomic_write_text(out / "results.json", json.dumps(self.to_dict(), indent=2) + "\n")
        atomic_write_text(out / "results.md", self.markdown())
        write_table(pa.Table.from_pylist(self.items), out / "items.parquet")
        return out


def score_items(labels: Sequence[int], ll_no: Sequence[float], ll_yes: Sequence[float]) -> dict[str, np.ndarray]:
    """Per item: ``pred`` (argmax of the log-likelihoods), ``pred_norm`` (of log-likelihood / choice length),
    ``acc``/``acc_norm`` (0/1) and ``score`` = P(Yes) - P(No)."""
    lls = np.stack([np.asarray(ll_no, dtype=np.float64), np.asarray(ll_yes, dtype=np.float64)], axis=1)
    lengths = np.array([float(len(c)) for c in CHOICES])  # the harness's completion_len, without the delimiter
    gold = np.asarray(labels, dtype=np.int64)
    pred, pred_norm = lls.argmax(axis=1), (lls / lengths).argmax(axis=1)
    return {"pred": pred, "pred_norm": pred_norm, "acc": (pred == gold).astype(float),
            "acc_norm": (pred_norm == gold).astype(float), "score": np.exp(lls[:, 1]) - np.exp(lls[:, 0])}


def _yes_no(lm, batch_size: int) -> Callable[[list[str]], tuple[list[float], list[float], list[tuple[bool, bool]]]]:
    """log P(" No"), log P(" Yes") and their greedy flags per text: the judge's scoring path
    (:class:`~toxiforge.classifiers.judge.JudgeClassifier` with the humanval template as plain text, in-process or
    through a server's echo), so ``bench classify`` and ``-c judge:MODEL`` share one implementation. A tokenizer in
    which " Yes" or " No" is more than one token after the prompt (the judge refuses it) is scored as the harness
    scores it, the sum over the answer's tokens (:meth:`~toxiforge.models.base.LanguageModel.loglikelihood`)."""
    from toxiforge.classifiers.judge import JudgeClassifier

    try:
        judge = JudgeClassifier(lm, "humanval", render="text", batch_size=batch_size)
    except InputError as exc:
        if "not a single token" not in exc.message:
            raise
    else:
        def ask(texts: list[str]) -> tuple[list[float], list[float], list[tuple[bool, bool]]]:
            s = judge.decision_scores(texts)  # columns: unsafe (Yes), safe (No)
            return s.logprobs[:, 1].tolist(), s.logprobs[:, 0].tolist(), [(bool(g[1]), bool(g[0])) for g in s.greedy]
        return ask

    def by_loglikelihood(texts: list[str]) -> tuple[list[float], list[float], list[tuple[bool, bool]]]:
        lls = lm.loglikelihood(classify_requests(texts), batch_size=batch_size)
        no, yes = lls[0::2], lls[1::2]
        return [x.logprob for x in no], [x.logprob for x in yes], [(n.is_greedy, y.is_greedy) for n, y in zip(no, yes)]
    return by_loglikelihood


def run_classify(lm, data: LabeledData, *, batch_size: int = 16,
                 on_progress: Callable[[int], None] | None = None) -> ClassifyResult:
    """Score every example of ``data`` with ``lm`` (any :class:`~toxiforge.models.base.LanguageModel`)."""
    from toxiforge.training.metrics import auc_or_reason

    if len(data) == 0:
        raise InputError("the data has no items", path=data.source, hint="pass a table with rows")
    examples = data.examples
    ask = _yes_no(lm, batch_size)
    ll_no: list[float] = []
    ll_yes: list[float] = []
    greedy: list[tuple[bool, bool]] = []
    started = time.perf_counter()
    for b in range(0, len(examples), ITEMS_PER_CALL):
        chunk = examples[b:b + ITEMS_PER_CALL]
        no, yes, flags = ask([e.text for e in chunk])
        ll_no, ll_yes, greedy = ll_no + no, ll_yes + yes, greedy + flags
        if on_progress is not None:
            on_progress(len(chunk))
    seconds = time.perf_counter() - started
    labels = [e.label for e in examples]
    scored = score_items(labels, ll_no, ll_yes)
    items = [{"text": e.text, "label": e.label, "group": e.group, "ll_no": n, "ll_yes": y,
              "greedy_no": g[0], "greedy_yes": g[1], "pred": int(scored["pred"][i]),
              "pred_norm": int(scored["pred_norm"][i]), "p_yes_minus_p_no": float(scored["score"][i])}
             for i, (e, n, y, g) in enumerate(zip(examples, ll_no, ll_yes, greedy))]
    auc = auc_or_reason(labels, scored["score"])
    metrics = {"n": len(items), "acc": proportion(scored["acc"]).to_dict(),
               "acc_norm": proportion(scored["acc_norm"]).to_dict(), "roc_auc": auc.value,
               "roc_auc_note": auc.reason, "predicted_yes": float(scored["pred"].mean())}
    groups: dict[str, dict[str, Any]] = {}
    for g in sorted({e.group for e in examples if e.group is not None}):
        mask = np.array([e.group == g for e in examples])
        groups[g] = {"n": int(mask.sum()), "acc": float(scored["acc"][mask].mean()),
                     "acc_norm": float(scored["acc_norm"][mask].mean())}
    model = lm.describe()
    return ClassifyResult(model=model, data=data.describe(), items=items, seconds=seconds, metrics=metrics,
                          groups=groups)
