"""transformers backend of the :class:`~toxiforge.classifiers.base.ToxicityClassifier` protocol.

:class:`HFClassifier` wraps any ``AutoModelForSequenceClassification`` model: the paper's ``tomh/toxigen_roberta``
and ``tomh/toxigen_hatebert``, ToxDect-RoBERTa, or a local directory written by ``save_pretrained``.

Batching: texts are sorted by length, cut into batches of ``batch_size``, tokenized with the tokenizer's pad
token (right padding) and an attention mask, truncated to ``max_length`` tokens, and scored under
``torch.inference_mode`` in eval mode; results come back in the input order. (Upstream ToxiGen padded with id 0
and no attention mask, which for RoBERTa is ``<s>``; padding here does not change a text's score.)

Which column is toxic (``toxic_index``), in this order:

1. the ``toxic_index`` argument;
2. ``config.id2label``: the first label, in this priority, whose normalized name (lowercase, spaces and dashes as
   ``_``) is exactly one of :data:`TOXIC_LABELS` ("toxic", "toxicity", "hate", "hateful", "hate_speech",
   "offensive", "abusive", ...). Exact names, so "non_toxic" or "not_hate" never count as toxic;
3. ``1`` for a 2-class model (``LABEL_0``/``LABEL_1`` configs, as in the ToxiGen and ToxDect checkpoints,
   where LABEL_1 is toxic);
4. otherwise an :class:`~toxiforge.errors.InputError` asking for ``toxic_index``.

``toxic_label`` (``--toxic-label``) names the toxic column by its label instead (an InputError lists the labels
when no label has that name).

**Multi-label heads** (``problem_type: multi_label_classification``, independent sigmoids: the Detoxify
checkpoints ``unitary/toxic-bert`` and ``unitary/unbiased-toxic-roberta``): P(toxic) is the sigmoid of the toxic
label's logit; the toxic label is ``toxic_label``, else the label named ``toxic`` or ``toxicity``, else an
InputError listing the labels. The classifier then has two classes for ALICE: column 0 = log(1 - sigmoid), column
1 = log sigmoid (``toxic_index`` 1, ``benign_index`` 0); the other labels are not used.

The benign column (``benign_index``): the argument; for 2 classes the other column; for more, the label whose
normalized name is in :data:`BENIGN_LABELS` ("neutral", "benign", "non_toxic", "normal", "not", "neither", ...);
else an InputError asking for ``benign_index``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from toxiforge._hf import quiet_transformers, resolve_device, resolve_dtype
from toxiforge.classifiers._common import as_texts
from toxiforge.classifiers.runtime import DEFAULT_RUNTIME, check_runtime, make_forward
from toxiforge.errors import InputError, ToxiforgeError

TOXIC_LABELS: tuple[str, ...] = ("toxic", "toxicity", "hate", "hateful", "hate_speech", "hatespeech", "offensive",
                                 "offensive_language", "abusive", "label_1")
BENIGN_LABELS: tuple[str, ...] = ("neutral", "benign", "non_toxic", "nontoxic", "not_toxic", "normal", "not",
                                  "neither", "none", "clean", "non_hate", "not_hate", "nothate", "no_hate",
                                  "not_offensive", "non_offensive")

MULTI_LABEL_TOXIC: tuple[str, ...] = ("toxic", "toxicity")  # the default toxic label of a multi-label head
OFFLINE_HINT = ("check the name; without internet pass a local model directory (written by save_pretrained) or "
                "use --classifier profanity-check; set HF_HUB_OFFLINE=1 to fail fast instead of retrying")


def _norm(label: Any) -> str:
    return str(label).strip().lower().replace("-", "_").replace(" ", "_")


def _labels(id2label: Mapping[Any, Any] | None, num_classes: int) -> dict[int, str]:
    labels = {int(k): str(v) for k, v in (id2label or {}).items()}
    return {i: labels.get(i, f"LABEL_{i}") for i in range(num_classes)}


def infer_toxic_index(id2label: Mapping[Any, Any] | None, num_classes: int) -> int:
    """The toxic column by the rule in the module docstring; InputError when it cannot be told."""
    labels = _labels(id2label, num_classes)
    by_name = {_norm(v): i for i, v in sorted(labels.items(), reverse=True)}  # the lowest index wins a tie
    for name in TOXIC_LABELS:
        if name == "label_1" and num_classes != 2:
            continue
        if name in by_name:
            return by_name[name]
    if num_classes == 2:
        return 1
    raise InputError(f"cannot tell which of the {num_classes} classes is toxic from id2label {labels}",
                     hint="pass toxic_index=<column of the toxic class>")


def label_index(id2label: Mapping[Any, Any] | None, num_classes: int, toxic_label: str, source: str) -> int:
    """The column whose label is ``toxic_label`` (normalized names compared); InputError listing the labels."""
    labels = _labels(id2label, num_classes)
    for i, v in labels.items():
        if _norm(v) == _norm(toxic_label):
            return i
    raise InputError(f"{source!r} has no label {toxic_label!r}; its labels are {', '.join(labels.values())}",
                     hint="pass --toxic-label with one of them")


def is_multi_label(config: Any) -> bool:
    return getattr(config, "problem_type", None) == "multi_label_classification"


def infer_benign_index(id2label: Mapping[Any, Any] | None, num_classes: int, toxic_index: int) -> int:
    """The benign column: the other one of two, else a benign-named label; InputError when it cannot be told."""
    if num_classes == 2:
        return 1 - toxic_index
    labels = _labels(id2label, num_classes)
    for name in BENIGN_LABELS:
        for i, v in labels.items():
            if _norm(v) == name and i != toxic_index:
                return i
    raise InputError(f"cannot tell which of the {num_classes} classes is benign from id2label {labels}",
                     hint="pass benign_index=<column of the non-toxic class>")


def _check_config(config: Any, source: str) -> None:
    """Refuse configs that are not single-label sequence classifiers, before any weights are read."""
    archs = list(getattr(config, "architectures", None) or [])
    if archs and not any(a.endswith("ForSequenceClassification") for a in archs):
        raise InputError(
            f"{source!r} is a {', '.join(archs)} checkpoint without a sequence-classification head, so it cannot "
            "score toxicity (a new head would be random)",
            hint="fine-tune it into a classifier first, or use a fine-tuned one such as toxigen-roberta, "
                 "toxigen-hatebert or toxdect-roberta")


class HFClassifier:
    """A transformers sequence classifier as a :class:`~toxiforge.classifiers.base.ToxicityClassifier`.

    ``HFClassifier.load("tomh/toxigen_roberta")``, ``HFClassifier.load("/models/my-clf")``, or wrap objects you
    already have: ``HFClassifier(model, tokenizer)``. ``device=None`` in the constructor keeps the model where
    it is. See the module docstring for how ``toxic_index``/``benign_index`` are chosen.
    """

    def __init__(self, model: Any, tokenizer: Any, *, toxic_index: int | None = None,
                 benign_index: int | None = None, max_length: int = 512, batch_size: int = 32,
                 name: str | None = None, device: str | torch.device | None = None, source: str | None = None,
                 toxic_label: str | None = None, runtime: str = DEFAULT_RUNTIME):
        cls_name = type(model).__name__
        if not cls_name.endswith("ForSequenceClassification"):
            raise InputError(f"model {cls_name} is not a sequence classifier",
                             hint="load it with AutoModelForSequenceClassification, or wrap a function with "
                                  "CallableClassifier")
        config = model.config
        _check_config(config, name or cls_name)
        if max_length < 1 or batch_size < 1:
            raise InputError(f"max_length={max_length} and batch_size={batch_size} must both be at least 1",
                             hint="use e.g. max_length=512, batch_size=32")
        self.multi_label = is_multi_label(config)
        labels = int(config.num_labels)
        self.id2label = _labels(getattr(config, "id2label", None), labels)
        if toxic_label is not None and toxic_index is not None:
            raise InputError("toxic_label and toxic_index both name the toxic column", hint="pass one of them")
        if toxic_label is not None:
            toxic_index = label_index(self.id2label, labels, toxic_label, name or cls_name)
        if self.multi_label:
            # Independent sigmoids: P(toxic) is one label's sigmoid; ALICE sees two columns (benign, toxic).
            if toxic_index is None:
                found = [i for i, v in self.id2label.items() if _norm(v) in MULTI_LABEL_TOXIC]
                if not found:
                    raise InputError(f"multi-label classifier {name or cls_name!r} has no label named toxic or "
                                     f"toxicity; its labels are {', '.join(self.id2label.values())}",
                                     hint="pass --toxic-label (toxic_label=) with the label whose sigmoid is P(toxic)")
                toxic_index = found[0]
            self.num_classes = labels
            self._check_index("toxic_index", toxic_index)
            if benign_index is not None:
                raise InputError("a multi-label classifier has no benign label (its sigmoids are independent)",
                                 hint="drop benign_index; column 0 of class_log_probs is log(1 - P(toxic))")
            self.toxic_label = self.id2label[int(toxic_index)]
            self.label_index = int(toxic_index)
            self.num_classes, self.toxic_index, self.benign_index = 2, 1, 0
        else:
            self.num_classes = labels
            if toxic_index is None:
                toxic_index = infer_toxic_index(self.id2label, self.num_classes)
            self._check_index("toxic_index", toxic_index)
            if benign_index is None:
                benign_index = infer_benign_index(self.id2label, self.num_classes, toxic_index)
            self._check_index("benign_index", benign_index)
            if benign_index == toxic_index:
                raise InputError(f"toxic_index and benign_index are both {toxic_index} (id2label {self.id2label})",
                                 hint="pass two different columns")
            self.toxic_index, self.benign_index = int(toxic_index), int(benign_index)
            self.toxic_label = self.id2label[self.toxic_index]

        if tokenizer.pad_token_id is None:  # decoder-style classifiers (GPT-2) ship without a pad token
            if tokenizer.eos_token_id is None:
                raise InputError(f"tokenizer of {name or cls_name} has neither a pad nor an eos token",
                                 hint="set tokenizer.pad_token before wrapping the model")
            tokenizer.pad_token = tokenizer.eos_token
        if getattr(config, "pad_token_id", None) is None:
            config.pad_token_id = tokenizer.pad_token_id  # sequence-classification heads need it to find the end
        tokenizer.padding_side = "right"
        model_max = getattr(tokenizer, "model_max_length", None)
        if isinstance(model_max, int) and 0 < model_max < 100_000:
            max_length = min(max_length, model_max)
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        if device is not None:
            model.to(resolve_device(device))
        self.model = model.eval()
        self.tokenizer = tokenizer
        self._forward = make_forward(self.model, runtime, list(tokenizer(["x"]).keys()))  # checks the runtime
        self.runtime = runtime
        self.name = name or getattr(config, "_name_or_path", "") or cls_name
        self.source = source or self.name
        self.load_seconds: float | None = None

    def _check_index(self, what: str, index: int) -> None:
        if not isinstance(index, (int, np.integer)) or not 0 <= int(index) < self.num_classes:
            raise InputError(f"{what}={index!r} is out of range for a model with num_classes={self.num_classes} "
                             f"(id2label {self.id2label})",
                             hint=f"pass {what} between 0 and {self.num_classes - 1}")

    @classmethod
    def load(cls, source: str | Path, *, tokenizer: str | Path | Any | None = None, toxic_index: int | None = None,
             benign_index: int | None = None, device: str | torch.device | None = "auto",
             dtype: str | torch.dtype | None = "auto", max_length: int = 512, batch_size: int = 32,
             name: str | None = None, toxic_label: str | None = None, runtime: str = DEFAULT_RUNTIME) -> HFClassifier:
        """Load from a hub id or a local directory.

        ``tokenizer``: a hub id, a directory or a tokenizer object when the checkpoint's own is missing or wrong
        (``tomh/toxigen_hatebert`` needs ``bert-base-uncased``). ``dtype="auto"`` means float32 everywhere, so
        scores match the checkpoint's reference numbers; pass ``"bfloat16"`` for speed on a GPU. ``runtime``: how
        the forward pass runs (:mod:`toxiforge.classifiers.runtime`), checked before any weights are read.
        """
        from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

        quiet_transformers()
        dev = resolve_device(device)
        check_runtime(runtime, dev, installed=True)
        torch_dtype = torch.float32 if dtype in (None, "auto") else resolve_dtype(dtype, dev)
        path = Path(str(source)).expanduser()
        local = path.exists()
        if local and not (path / "config.json").is_file():
            raise InputError("directory has no config.json, so it is not a transformers model", path=path,
                             hint="point at a directory written by save_pretrained")
        load_from: str | Path = path if local else str(source)
        started = time.perf_counter()
        try:
            config = AutoConfig.from_pretrained(load_from)
            _check_config(config, str(source))
            if tokenizer is None or isinstance(tokenizer, (str, Path)):
                tokenizer = AutoTokenizer.from_pretrained(tokenizer if tokenizer is not None else load_from)
            model, info = AutoModelForSequenceClassification.from_pretrained(load_from, dtype=torch_dtype,
                                                                             output_loading_info=True)
        except ToxiforgeError:
            raise
        except OSError as exc:
            where = "" if local else " (not a local directory either)"
            reason = " ".join(str(exc).split()).rstrip(".")
            raise ToxiforgeError(f"could not load classifier {str(source)!r}{where}: {reason}. Fix: {OFFLINE_HINT}") \
                from exc
        missing = sorted(info.get("missing_keys") or [])
        if missing:
            raise InputError(f"{str(source)!r} has no trained classification head: {len(missing)} weights would be "
                             f"newly initialized ({', '.join(missing[:4])}{', ...' if len(missing) > 4 else ''})",
                             hint="fine-tune it into a classifier first, or use toxigen-roberta")
        model.to(dev)
        clf = cls(model, tokenizer, toxic_index=toxic_index, benign_index=benign_index, max_length=max_length,
                  batch_size=batch_size, name=name or str(source), source=str(source), toxic_label=toxic_label,
                  runtime=runtime)
        clf.load_seconds = time.perf_counter() - started
        return clf

    # --- protocol ------------------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def class_log_probs(self, texts: Sequence[str]) -> torch.Tensor:
        """float32 CPU ``[len(texts), num_classes]`` log-softmax of the logits, in the input order."""
        texts = as_texts(texts)
        out = torch.empty((len(texts), self.num_classes), dtype=torch.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), self.batch_size):
            index = order[start:start + self.batch_size]
            out[torch.tensor(index)] = self._score([texts[i] for i in index])
        return out

    def predict_proba(self, texts: Sequence[str]) -> np.ndarray:
        """P(toxic) per text, float64 ``[len(texts)]``."""
        return self.class_log_probs(texts)[:, self.toxic_index].double().exp().numpy()

    @torch.inference_mode()
    def _score(self, batch: list[str]) -> torch.Tensor:
        enc = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        if enc["input_ids"].shape[1] == 0:
            # Only empty texts and a tokenizer that adds no special tokens: give each a single attended pad token
            # (a model cannot run on zero-length inputs; ALICE can ask about an empty continuation).
            pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
            enc = {"input_ids": torch.full((len(batch), 1), pad, dtype=torch.long),
                   "attention_mask": torch.ones((len(batch), 1), dtype=torch.long)}
        enc = {k: v.to(self.device) for k, v in enc.items()}
        logits = self._forward(enc)
        if self.multi_label:
            z = logits[:, self.label_index]
            return torch.stack([torch.nn.functional.logsigmoid(-z), torch.nn.functional.logsigmoid(z)], 1).cpu()
        return torch.log_softmax(logits, dim=-1).cpu()

    def describe(self) -> dict[str, Any]:
        """Name, source, architecture, dtype, device, labels and the chosen columns (for manifests)."""
        return {
            "name": self.name, "source": self.source, "backend": "transformers",
            "architecture": type(self.model).__name__, "dtype": str(self.model.dtype).replace("torch.", ""),
            "device": str(self.device), "num_classes": self.num_classes, "id2label": self.id2label,
            "toxic_index": self.toxic_index, "benign_index": self.benign_index, "max_length": self.max_length,
            "kind": "multi-label head" if self.multi_label else "head", "toxic_label": self.toxic_label,
            "runtime": self.runtime,
        }
