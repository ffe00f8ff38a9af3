"""Per-statement perplexity under a reference LM (ToxiGen Appendix C, Table 5).

A statement's perplexity is ``exp(mean NLL)`` over its tokens (tokenized without special tokens), each token
conditioned on the tokens before it and on a context token: the tokenizer's BOS token, else its EOS token (as
GPT-2's ``<|endoftext|>``), so the first token is scored too. Statements longer than ``max_tokens`` are
truncated; a statement with no token gets NaN.

Two paths give the same numbers:

* by default, :meth:`~toxiforge.models.base.LanguageModel.loglikelihood` with an empty context (which conditions
  on the BOS/EOS token), batched by the backend (transformers: one forward pass per batch, statements sorted by
  length);
* ``use_protocol=True`` or a ``prefix``: through the session protocol, starting every row at ``prefix`` (default:
  the text of the LM's EOS token, GPT-2's ``<|endoftext|>`` convention) and advancing one token at a time. It is
  slower and kept as the reference implementation that the default path is tested against.

A statement longer than ``max_tokens`` is scored on the text of its first ``max_tokens`` tokens (decoded, then
re-tokenized by the backend: for byte-level BPE the same tokens).

The paper used GPT-2 and dropped statements with perplexity over 500 (about 10% of ToxiGen) from its table;
:func:`perplexity_table` does the same (``max_ppl``) and reports how many were dropped. The default LM here is
the embedded SmolLM2-135M (``smollm2-135m``); pass ``--lm gpt2`` with internet access to match the paper.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from toxiforge.analysis._tables import Table, num
from toxiforge.analysis.dataset import AnalysisData, group_display, group_order, load_data, method_order
from toxiforge.errors import InputError
from toxiforge.models.embedded import DEFAULT_LM

DEFAULT_MAX_PPL = 500.0


def _as_lm(lm):
    """A LanguageModel from ``lm`` (a ``(model, tokenizer)`` pair is wrapped in the transformers backend)."""
    if isinstance(lm, tuple) and len(lm) == 2:
        from toxiforge.models.transformers_lm import TransformersLM

        return TransformersLM(lm[0], lm[1])
    return lm


def perplexities(texts: Sequence[str], lm: Any, *, batch_size: int = 16, max_tokens: int = 256,
                 prefix: str | None = None, use_protocol: bool = False,
                 on_progress: Callable[[int], None] | None = None) -> np.ndarray:
    """Perplexity of each text (float64, NaN for a text with no token). ``lm``: a LanguageModel or a
    ``(model, tokenizer)`` pair. ``use_protocol`` scores through sessions instead of ``loglikelihood``."""
    if batch_size < 1:
        raise InputError(f"batch size {batch_size} must be >= 1", hint="use --batch-size 1 or more")
    lm = _as_lm(lm)
    full = [lm.encode(t) for t in texts]
    encoded = [ids[:max_tokens] for ids in full]
    out = np.full(len(texts), np.nan, dtype=np.float64)
    order = sorted((i for i, ids in enumerate(encoded) if ids), key=lambda i: len(encoded[i]))
    start_text = prefix  # None: score through loglikelihood, else through sessions that start with it
    if use_protocol and start_text is None:
        start_text = lm.token_texts()[min(lm.eos_token_ids)] if lm.eos_token_ids else "\n"
    if on_progress is not None and len(order) < len(texts):
        on_progress(len(texts) - len(order))
    for b in range(0, len(order), batch_size):
        rows = order[b:b + batch_size]
        batch = [encoded[i] for i in rows]
        if start_text is not None:
            nll = _batch_nll_protocol(lm, batch, start_text)
        else:
            requests = [("", texts[i] if len(full[i]) <= max_tokens else lm.decode(encoded[i])) for i in rows]
            scores = lm.loglikelihood(requests, batch_size=batch_size)
            nll = np.array([-s.logprob / s.tokens if s.tokens else np.nan for s in scores])
        out[rows] = np.exp(nll)
        if on_progress is not None:
            on_progress(len(rows))
    return out


def _batch_nll_protocol(lm, batch: list[list[int]], start_text: str) -> np.ndarray:
    """Mean token NLL per row through the LanguageModel session protocol."""
    import torch

    session = lm.start([start_text] * len(batch))
    width = max(len(ids) for ids in batch)
    total = torch.zeros(len(batch), dtype=torch.float64)
    lengths = torch.tensor([len(ids) for ids in batch], dtype=torch.float64)
    for t in range(width):
        tokens = torch.tensor([ids[t] if t < len(ids) else ids[-1] for ids in batch], dtype=torch.long)
        logp = session.logprobs().gather(1, tokens.view(-1, 1).to(session.logprobs().device)).squeeze(1).cpu()
        live = torch.tensor([t < len(ids) for ids in batch])
        total -= torch.where(live, logp.double(), torch.zeros_like(total))
        if t + 1 < width:
            session.advance(tokens)
    return (total / lengths).numpy()


@dataclass
class PerplexityResult:
    """Per-row perplexities and the Table 5 style summary."""

    values: np.ndarray                     # per usable row (NaN: no token)
    groups: list[str]
    methods: list[str]
    max_ppl: float
    model: str = ""
    source: str = ""
    seconds: float = 0.0
    cells: list[dict[str, Any]] = field(default_factory=list)

    @property
    def kept(self) -> np.ndarray:
        return np.isfinite(self.values) & (self.values <= self.max_ppl)

    @property
    def dropped(self) -> int:
        return int((np.isfinite(self.values) & (self.values > self.max_ppl)).sum())

    @property
    def empty(self) -> int:
        return int((~np.isfinite(self.values)).sum())

    def line(self) -> str:
        n = len(self.values)
        return (f"{n - self.dropped - self.empty:,} of {n:,} statements kept; {self.dropped:,} "
                f"({100 * self.dropped / n:.1f}%) dropped with perplexity > {self.max_ppl:g}"
                + (f", {self.empty:,} without a token" if self.empty else ""))

    def table(self) -> Table:
        methods = method_order(self.methods)
        by_cell = {(c["group"], c["method"]): c for c in self.cells}
        rows = []
        for group in group_order(self.groups) + ["__total__"]:
            row = [group_display(group) if group != "__total__" else "Total"]
            for m in methods:
                c = by_cell.get((group, m))
                row.append("-" if c is None or c["mean"] is None else f"{c['mean']:.2f}")
            rows.append(row)
        counts = ", ".join(f"{m}: {num(by_cell[('__total__', m)]['kept'])}" for m in methods)
        return Table(f"Perplexity under {self.model} (mean; perplexity > {self.max_ppl:g} dropped)",
                     ["Group"] + methods, rows, note=f"{self.line()}. Kept per method: {counts}.")

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "model": self.model, "max_ppl": self.max_ppl, "rows": len(self.values),
                "dropped": self.dropped, "empty": self.empty, "seconds": round(self.seconds, 3),
                "cells": self.cells}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def perplexity_table(values: np.ndarray, groups: Sequence[str], methods: Sequence[str], *,
                     max_ppl: float = DEFAULT_MAX_PPL) -> list[dict[str, Any]]:
    """Per group × method (and ``__total__`` per method): rows, kept, dropped, mean/median of kept."""
    if not max_ppl > 0 or math.isnan(max_ppl):
        raise InputError(f"max perplexity {max_ppl} must be > 0", hint="use e.g. --max-ppl 500")
    values = np.asarray(values, dtype=np.float64)
    g, m = np.asarray(groups, dtype=object), np.asarray(methods, dtype=object)
    finite = np.isfinite(values)
    cells = []
    for group in group_order(groups) + ["__total__"]:
        for method in method_order(methods):
            mask = (m == method) & ((g == group) if group != "__total__" else True)
            if not mask.any():
                continue
            kept = values[mask & finite & (values <= max_ppl)]
            cells.append({"group": group, "method": method, "rows": int(mask.sum()), "kept": int(kept.size),
                          "dropped": int((mask & finite & (values > max_ppl)).sum()),
                          "mean": float(kept.mean()) if kept.size else None,
                          "median": float(np.median(kept)) if kept.size else None})
    return cells


def dataset_perplexity(data: Any, lm: Any = DEFAULT_LM, *, max_ppl: float = DEFAULT_MAX_PPL,
                       batch_size: int = 16, max_tokens: int = 256, device: str = "auto", dtype: str = "auto",
                       on_progress: Callable[[int], None] | None = None) -> PerplexityResult:
    """Perplexity of every statement of ``data`` and the per group × method table. ``lm``: a LanguageModel,
    a ``(model, tokenizer)`` pair, or a name for :func:`toxiforge.models.load_language_model`."""
    import time

    if not max_ppl > 0:
        raise InputError(f"max perplexity {max_ppl} must be > 0", hint="use e.g. --max-ppl 500")
    d: AnalysisData = load_data(data, need=())
    if isinstance(lm, str):
        from toxiforge.models import load_language_model

        lm = load_language_model(lm, dtype=dtype, device=device)
    lm = _as_lm(lm)
    started = time.perf_counter()
    values = perplexities(d.texts, lm, batch_size=batch_size, max_tokens=max_tokens, on_progress=on_progress)
    groups = d.groups or ["(all)"] * len(d)
    methods = d.methods or ["(none)"] * len(d)
    return PerplexityResult(values=values, groups=groups, methods=methods, max_ppl=max_ppl,
                            model=getattr(lm, "name", type(lm).__name__), source=d.source,
                            seconds=time.perf_counter() - started,
                            cells=perplexity_table(values, groups, methods, max_ppl=max_ppl))


def write_scores(result: PerplexityResult, data: AnalysisData, path) -> Any:
    """Write the usable rows of ``data`` with a ``perplexity`` column (atomic; format by suffix)."""
    import pyarrow as pa

    from toxiforge.records import write_table

    table = data.table
    if "perplexity" in table.column_names:
        table = table.drop(["perplexity"])
    return write_table(table.append_column("perplexity", pa.array(result.values)), path)
