"""Toxicity classifiers behind one protocol, found by name through a small registry.

``load_classifier(name_or_path)`` resolves, in order:

1. a registry name (case-insensitive): ``toxigen-roberta``, ``toxigen-hatebert``, ``toxdect-roberta``,
   ``hatebert`` (hub checkpoints, see :data:`HUB_CLASSIFIERS`) or ``profanity-check`` (offline, ships as a pip
   package);
2. an existing local directory written by ``save_pretrained`` (:class:`~toxiforge.classifiers.hf.HFClassifier`);
3. a hub id of the form ``owner/name``.

Anything else is an :class:`~toxiforge.errors.InputError` listing the known names. Backends are imported lazily:
``import toxiforge.classifiers`` imports neither transformers nor scikit-learn.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, NamedTuple

from toxiforge.classifiers.base import ToxicityClassifier
from toxiforge.errors import InputError

if TYPE_CHECKING:
    from toxiforge.classifiers.hf import HFClassifier
    from toxiforge.classifiers.profanity import ProfanityCheckClassifier
    from toxiforge.classifiers.wrap import CallableClassifier


class HubClassifier(NamedTuple):
    """A registry entry for a hub checkpoint: ``(hub_id, tokenizer_id, description)``."""

    hub_id: str
    tokenizer: str | None
    description: str


HUB_CLASSIFIERS: dict[str, HubClassifier] = {
    "toxigen-roberta": HubClassifier(
        "tomh/toxigen_roberta", None,
        "ToxiGen's RoBERTa-large fine-tuned on ToxiGen (fills ToxiGen's roberta_prediction column)"),
    "toxigen-hatebert": HubClassifier(
        "tomh/toxigen_hatebert", "bert-base-uncased",
        "ToxiGen's HateBERT fine-tuned on ToxiGen; the checkpoint's own tokenizer files are not the right ones, "
        "so the bert-base-uncased tokenizer is used (a wrong tokenizer caused upstream issues #8 and #29)"),
    "toxdect-roberta": HubClassifier(
        "Xuhui/ToxDect-roberta-large", None,
        "ToxDect RoBERTa-large (Zhou et al., 2021), the classifier the paper's ALICE runs attacked"),
    "hatebert": HubClassifier(
        "GroNLP/hateBERT", None,
        "pre-trained HateBERT (Caselli et al., 2021): a masked LM without a classification head; loading it as "
        "a classifier fails with a clear error, fine-tune it first (or use toxigen-hatebert)"),
}

PROFANITY_CHECK = "profanity-check"
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$")


def _hub_factory(name: str) -> Callable[..., ToxicityClassifier]:
    def load(**kwargs: Any) -> ToxicityClassifier:
        from toxiforge.classifiers.hf import HFClassifier

        entry = HUB_CLASSIFIERS[name]
        kwargs.setdefault("name", name)
        if entry.tokenizer is not None:
            kwargs.setdefault("tokenizer", entry.tokenizer)
        return HFClassifier.load(entry.hub_id, **kwargs)

    load.__doc__ = f"Load {name} ({HUB_CLASSIFIERS[name].hub_id}): {HUB_CLASSIFIERS[name].description}."
    return load


def _profanity_factory(*, batch_size: int | None = None, name: str = PROFANITY_CHECK, device: Any = None,
                       dtype: Any = None, **kwargs: Any) -> ToxicityClassifier:
    """profanity-check runs on the CPU; ``device`` and ``dtype`` are accepted (for a uniform CLI) and ignored."""
    from toxiforge.classifiers.profanity import ProfanityCheckClassifier

    unknown = sorted(kwargs)
    if unknown:
        raise InputError(f"profanity-check takes no {', '.join(unknown)} option",
                         hint="those options apply to transformers classifiers only")
    return ProfanityCheckClassifier(name=name, **({} if batch_size is None else {"batch_size": batch_size}))


CLASSIFIERS: dict[str, Callable[..., ToxicityClassifier]] = {
    **{name: _hub_factory(name) for name in HUB_CLASSIFIERS},
    PROFANITY_CHECK: _profanity_factory,
}


def _registry_key(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def load_classifier(name_or_path: str | Path, **kwargs: Any) -> ToxicityClassifier:
    """Load a classifier by registry name, local directory or hub id (see the module docstring).

    ``kwargs`` go to the backend (``device``, ``dtype``, ``batch_size``, ``max_length``, ``toxic_index``,
    ``benign_index``, ``tokenizer``, ``name``); None values are dropped, so callers can pass optional settings
    through unchanged.
    """
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    text = str(name_or_path)
    key = _registry_key(text)
    if key in CLASSIFIERS and not Path(text).exists():
        return CLASSIFIERS[key](**kwargs)
    path = Path(text).expanduser()
    if path.is_dir() or _HUB_ID.match(text):
        from toxiforge.classifiers.hf import HFClassifier

        return HFClassifier.load(text if not path.is_dir() else path, **kwargs)
    if path.exists():
        raise InputError("a file is not a classifier", path=path,
                         hint="pass a model directory written by save_pretrained, a hub id or a known name")
    raise InputError(f"unknown classifier {text!r}: not a known name, a local directory or a hub id (owner/name)",
                     hint=f"use one of {', '.join(CLASSIFIERS)}, a model directory, or a hub id like "
                          "tomh/toxigen_roberta")


def default_score_column(classifier_name: str | Path) -> str:
    """The column a classifier's P(toxic) goes to: ``roberta_prediction`` for toxigen-roberta (ToxiGen's own
    column), else ``<name>_score`` with the name's last path part made identifier-safe
    (``profanity-check`` -> ``profanity_check_score``, ``/models/my-clf/`` -> ``my_clf_score``)."""
    text = str(classifier_name).strip()
    if _registry_key(text) == "toxigen-roberta" or text.lower() == HUB_CLASSIFIERS["toxigen-roberta"].hub_id:
        return "roberta_prediction"
    base = re.split(r"[/\\]", text.rstrip("/\\"))[-1]
    safe = re.sub(r"[^0-9A-Za-z]+", "_", base).strip("_").lower() or "classifier"
    return f"{safe}_score"


def __getattr__(attr: str) -> Any:
    """Lazy access to the backend classes (so importing this package stays light)."""
    if attr == "HFClassifier":
        from toxiforge.classifiers.hf import HFClassifier

        return HFClassifier
    if attr == "ProfanityCheckClassifier":
        from toxiforge.classifiers.profanity import ProfanityCheckClassifier

        return ProfanityCheckClassifier
    if attr == "CallableClassifier":
        from toxiforge.classifiers.wrap import CallableClassifier

        return CallableClassifier
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


__all__ = ["CLASSIFIERS", "HUB_CLASSIFIERS", "PROFANITY_CHECK", "CallableClassifier", "HFClassifier",
           "HubClassifier", "ProfanityCheckClassifier", "ToxicityClassifier", "default_score_column",
           "load_classifier"]
