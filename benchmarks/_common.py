"""What the benchmark scripts share (benchmarks/README.md lists the scripts): where the shared data lie, the options
every script spells the same way, torch threads, the toxigen-dev prompts and the MiniLM the ALICE scripts train, a
paired bootstrap interval on toxiforge.intervals' resamples, markdown tables, and a process's CPU seconds.

A script imports this as ``import _common`` (``python benchmarks/X.py`` puts benchmarks/ first on ``sys.path``).
Module level holds the standard library only: ``--help`` must not import torch or transformers nor load a model
(tests/test_benchmarks_help.py checks every script), so each function imports what it needs, and so does each
script, below ``parse_args()``.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

# --- where things lie -------------------------------------------------------------------------------------------

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO / ".." / "shared" / "data"        # the data sets beside the checkout (see its README)
TOXIGEN_DEV = SHARED_DATA / "toxigen-dev"              # upstream ToxiGen's human-written sentences, 8 groups
DEMONSTRATIONS = TOXIGEN_DEV / "demonstrations"       # hate_*/neutral_* sentence files, one folder per group


# --- options: one spelling for every script ---------------------------------------------------------------------


def parser(doc: str | None) -> argparse.ArgumentParser:
    """A script's parser: its module docstring (what it measures, how it was run for the docs) is the help text."""
    return argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)


def add_threads(parser: argparse.ArgumentParser, default: int | None, help: str | None = None) -> None:
    """``--threads``: torch threads of this process (None: torch's own choice). On a machine shared with other jobs
    CPU seconds are only comparable at one thread."""
    shown = default or "torch's own choice"
    parser.add_argument("--threads", type=int, default=default, help=help or f"torch threads (default: {shown})")


def add_seed(parser: argparse.ArgumentParser) -> None:
    """``--seed``: the seed of every draw the script makes (default 0)."""
    parser.add_argument("--seed", type=int, default=0, help="seed of the script's draws (default: 0)")


def add_repeats(parser: argparse.ArgumentParser, default: int, help: str | None = None) -> None:
    """``--repeats``: timed runs (sides alternate where there are several); scripts report the median."""
    parser.add_argument("--repeats", type=int, default=default,
                        help=help or f"timed runs, sides alternating; medians reported (default: {default})")


def add_work(parser: argparse.ArgumentParser, default: str | Path, *aliases: str) -> None:
    """``--work``: the folder for what a run trains and writes; a later run with the same folder reuses it."""
    parser.add_argument("--work", *aliases, dest="work", type=Path, default=Path(default),
                        help=f"folder for trained models and results, reused by a later run (default: {default})")


def set_torch_threads(threads: int | None) -> None:
    """``torch.set_num_threads(threads)``; None or 0 leaves torch's own choice."""
    if threads:
        import torch

        torch.set_num_threads(threads)


# --- inputs: prompts, rows, classifiers -------------------------------------------------------------------------


def demonstration_prompts(n: int) -> tuple[list[str], list[int]]:
    """``n`` prompts of 5 toxigen-dev demonstration lines each, hate and neutral files alternately (labels 1 and 0),
    so targets of both classes share a batch; placeholder lines when the data are absent."""
    files = sorted(DEMONSTRATIONS.glob("*/*.txt")) if DEMONSTRATIONS.is_dir() else []
    hate = [(f, 1) for f in files if f.name.startswith("hate")]
    chosen = [pair for two in zip(hate, [(f, 0) for f in files if f.name.startswith("neutral")]) for pair in two]
    out, labels = [], []
    for i in range(n):
        if chosen:
            path, label = chosen[i % len(chosen)]
            lines = [line.strip().lstrip("- ") for line in path.read_text().splitlines() if line.strip()]
            lines = lines[5 * (i // len(chosen)):][:5]
        else:
            lines, label = [f"placeholder statement {i} number {j}" for j in range(5)], i % 2
        out.append("".join(f"- {line}\n" for line in lines) + "-")
        labels.append(label)
    return out, labels


def placeholder_examples(n: int) -> list:
    """``n`` neutral placeholder statements as ``Example`` rows; label 1 for the 'alpha' template, 0 for 'beta'."""
    from toxiforge.data import Example

    topics = ["music", "cooking", "gardening", "football", "painting", "history", "travel", "chess"]
    return [Example(f"placeholder sentence {i} of template {'alpha' if i % 2 else 'beta'} about "
                    f"{topics[(i // 2) % len(topics)]} and the weekend", i % 2) for i in range(n)]


def fine_tune(out: Path, rows: Sequence, *, reuse: bool = True, **config: Any) -> Path:
    """A classifier fine-tuned on ``rows`` into ``out`` with ``toxiforge train``'s function (``config``: fields of
    :class:`~toxiforge.training.trainer.TrainConfig`, the rest its defaults); with ``reuse`` an ``out`` that
    holds a model is returned as it is, without ``reuse`` it is trained again over it."""
    if reuse and (out / "config.json").is_file():
        return out
    from toxiforge.training.trainer import TrainConfig, train_classifier

    train_classifier(rows, out, TrainConfig(**config), progress=False, **({} if reuse else {"overwrite": True}))
    return out


def train_minilm(out: Path, groups: list[str] | None = None, *, rows: list | None = None, epochs: float = 10.0,
                 learning_rate: float = 1e-4, **config: Any) -> Path:
    """The classifier the ALICE scripts attack: the embedded MiniLM fine-tuned on the human-written toxigen-dev
    sentences of ``groups`` (all: None), or on ``rows`` when given (:func:`fine_tune`; ``out`` reused).

    10 epochs at 1e-4: with ``toxiforge train``'s defaults (3 epochs, 2e-5) the ~200 sentences give ~20 steps
    and a classifier whose P(toxic) stays within 0.48-0.50 for everything (training loss 0.687, ln 2 = 0.693),
    against which ALICE (and its pruning) would be measured on a near-constant term."""
    if (out / "config.json").is_file():
        return out
    if rows is None:
        from toxiforge.data.toxigen import load_demonstration_data

        rows = [e for e in load_demonstration_data(DEMONSTRATIONS).examples if groups is None or e.group in groups]
    return fine_tune(out, rows, epochs=epochs, learning_rate=learning_rate, **config)


def random_head_minilm(name: str | None = None) -> Any:
    """The embedded all-MiniLM-L6-v2 with a random 2-class head (drawn after ``torch.manual_seed(0)``) as an
    ``HFClassifier``: a fine-tuned MiniLM's compute, for timing; its scores mean nothing."""
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    from toxiforge.classifiers.hf import HFClassifier
    from toxiforge.models.embedded import embedded_encoder_dir

    folder = embedded_encoder_dir()
    torch.manual_seed(0)
    model = BertForSequenceClassification.from_pretrained(folder, num_labels=2).eval()
    model.config.architectures = ["BertForSequenceClassification"]  # the folder's config names the bare encoder
    return HFClassifier(model, AutoTokenizer.from_pretrained(folder), **({"name": name} if name else {}))


# --- the ALICE flip experiments (alice_vs_topk_flips.py, alice_keeper_yield.py) -----------------------------------


def group_split(train_groups: list[str] | None) -> tuple[list[str], list[str]]:
    """toxigen-dev's groups split into the classifier's (``train_groups``; default every other group in sorted
    order) and the others, whose prompts are decoded."""
    from toxiforge.demonstrations.sets import load_demonstrations

    groups = sorted({g for g, _ in load_demonstrations(DEMONSTRATIONS)})
    train = train_groups or groups[::2]
    return train, [g for g in groups if g not in train]


def pending_batches(out: Path, keys: list[str], eval_groups: list[str], n: int, batch: int,
                    seed: int) -> Iterator[tuple[int, int, str, int, list[tuple[int, int, str]], list[str]]]:
    """What is left to decode, a batch at a time: ``(start, total, key, label, items, prompts)`` where ``items`` are
    ``(statement index, demonstration index, group)`` that ``out`` lacks for method ``key`` and prompt ``label`` and
    ``prompts`` their prompt texts (5 demonstrations of one group and label). The ``n`` statements per key and
    label go over ``eval_groups`` in turn; each batch of them is decoded by every key, both labels, before the next,
    so a run stopped early has the same prompts for every method."""
    import json

    from toxiforge.demonstrations.prompts import build_prompts
    from toxiforge.demonstrations.sets import load_demonstrations

    sets = load_demonstrations(DEMONSTRATIONS)
    done = {(r["method"], r["label"], r["index"]) for r in map(json.loads, out.read_text().splitlines())} \
        if out.exists() else set()
    per_group = math.ceil(n / len(eval_groups))
    plan = [(i, g) for i in range(per_group) for g in eval_groups][:n]  # demonstration index, group
    for start in range(0, len(plan), batch):
        for key in keys:
            for label in (0, 1):
                items = [(j, i, g) for j, (i, g) in enumerate(plan[start:start + batch], start)
                         if (key, label, j) not in done]
                if items:
                    prompts = [build_prompts(sets[(g, label)], i + 1, k=5, seed=seed)[-1].text for _, i, g in items]
                    yield start, len(plan), key, label, items, prompts


def perplexities(lm_name: str, texts: set[str]) -> dict[str, float]:
    """Each text's perplexity under ``lm_name`` (``exp`` of minus its mean token log-probability)."""
    from toxiforge.models import load_language_model

    ordered = sorted(texts)
    scores = load_language_model(lm_name).loglikelihood([("", t) for t in ordered])
    return {t: math.exp(-s.logprob / max(1, s.tokens)) for t, s in zip(ordered, scores)}


# --- intervals and tables ---------------------------------------------------------------------------------------


def paired_interval(diff: Sequence[float], n_boot: int, seed: int = 0) -> tuple[float, float, float]:
    """The mean of paired differences ``diff`` (one per pair) and its 95% percentile bootstrap interval over the
    pairs: ``n_boot`` resamples of :class:`toxiforge.intervals.Resampler` (the draws of
    ``numpy.random.default_rng(seed).choice(diff, (n_boot, len(diff)))``, which the scripts used before), each
    resample's mean as its weights times ``diff``, which for 0/±1 differences is exact."""
    import numpy as np

    from toxiforge.intervals import Resampler

    values = np.asarray(diff, dtype=float)
    means = np.concatenate([w @ values / len(values) for w in Resampler(len(values), n_boot, seed).blocks()])
    # 2.5 and 97.5 as written: 100 * (1 - intervals.LEVEL) / 2 is 2.500000000000002 in floats
    low, high = np.percentile(means, [2.5, 97.5])
    return float(values.mean()), float(low), float(high)


def table_row(*cells: object) -> str:
    """One markdown table row."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table_head(columns: Sequence[str], align: str = "") -> str:
    """A markdown table's header row and separator line; ``align`` has an ``l`` or ``r`` (right: numbers) per
    column, left where it is short."""
    return table_row(*columns) + "\n|" + "".join("---:|" if a == "r" else "---|" for a in align.ljust(len(columns)))


# --- processes --------------------------------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (fields 14 and 15 of /proc/PID/stat, Linux): unlike
    wall time, this barely changes when other jobs share the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_server(command: list[str], port: int, log: Path, env: dict[str, str] | None = None,
                 what: str | None = None) -> tuple[Any, str]:
    """Start an OpenAI-compatible server (``command``, listening on ``port``, output to ``log``) and wait until
    ``/v1/models`` answers; ``(process, base URL)``."""
    import subprocess

    from toxiforge._net import wait_until_answering

    proc = subprocess.Popen(command, stdout=open(log, "wb"), stderr=subprocess.STDOUT, env=env)
    url = f"http://127.0.0.1:{port}/v1"
    wait_until_answering(proc, f"{url}/models", timeout=300, what=what or command[0], log=log)
    return proc, url


def llama_cpp_python(threads: int, log: Path, extra: Sequence[str] = ()) -> tuple[Any, str]:
    """llama-cpp-python's server on the embedded SmolLM2's Q4_1 GGUF (alias ``smollm2``), on a free port: one
    request at a time, no parallel slots."""
    from toxiforge._net import free_port
    from toxiforge.models.embedded import smollm2_gguf

    port = free_port()
    return start_server([sys.executable, "-m", "llama_cpp.server", "--model", str(smollm2_gguf()), "--model_alias",
                         "smollm2", "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--n_threads",
                         str(threads), "--verbose", "False", *extra], port, log)
