"""The classifier registry and :func:`load_classifier` (rules in the package docstring)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, TypeGuard

from toxiforge._hf import is_hub_id, local_model
from toxiforge._lazy import Registry, did_you_mean
from toxiforge.errors import InputError

JUDGE_PREFIX = "judge:"  # -c judge:MODEL (toxiforge.classifiers.judge)

if TYPE_CHECKING:
    from toxiforge.classifiers.base import ToxicityClassifier


class HubClassifier(NamedTuple):
    """A registry entry for a hub checkpoint: ``(hub_id, tokenizer_id, description, kind)``; ``kind`` is "head"
    (a softmax over classes) or "multi-label head" (independent sigmoids, P(toxic) from the toxic label's)."""

    hub_id: str
    tokenizer: str | None
    description: str
    kind: str = "head"


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
    "detoxify-original": HubClassifier(
        "unitary/toxic-bert", None,
        "Detoxify 'original': BERT-base on the Jigsaw Toxic Comment Classification data, six labels (toxic, "
        "severe_toxic, obscene, threat, insult, identity_hate); P(toxic) = sigmoid of 'toxic'", "multi-label head"),
    "detoxify-unbiased": HubClassifier(
        "unitary/unbiased-toxic-roberta", None,
        "Detoxify 'unbiased': RoBERTa-base on Jigsaw Unintended Bias in Toxicity Classification, toxicity "
        "subtypes and identity labels; P(toxic) = sigmoid of 'toxicity'", "multi-label head"),
}

PROFANITY_CHECK = "profanity-check"


class TrainingSet(NamedTuple):
    """Data a registered classifier is known to have been trained on: ``kind`` the dataset kind
    (:data:`toxiforge.data.registry.KINDS`) whose sets hold that data (None: no loader of toxiforge reads it), what
    it is in words, and where that is said."""

    kind: str | None
    data: str
    said_by: str

    def describe(self) -> str:
        return f"{self.data}, per {self.said_by}"


_TOXIGEN_PAPER = "the ToxiGen paper, section 5 (fine-tuned on the training portion of ToxiGen)"
# Registry name -> its known training data: only what the package or model description says (docs/audit.md).
KNOWN_TRAINING_SETS: dict[str, tuple[TrainingSet, ...]] = {
    PROFANITY_CHECK: (
        TrainingSet("davidson", "Davidson et al. 2017's tweets (t-davidson/hate-speech-and-offensive-language)",
                    "alt-profanity-check's package description"),
        TrainingSet(None, "the Jigsaw Toxic Comment Classification Challenge (Kaggle)",
                    "alt-profanity-check's package description")),
    "toxigen-roberta": (TrainingSet("toxigen-train", "ToxiGen's machine-generated statements", _TOXIGEN_PAPER),),
    "toxigen-hatebert": (TrainingSet("toxigen-train", "ToxiGen's machine-generated statements", _TOXIGEN_PAPER),),
    "detoxify-original": (TrainingSet(None, "the Jigsaw Toxic Comment Classification data",
                                      "the checkpoint's description"),),
    "detoxify-unbiased": (TrainingSet(None, "the Jigsaw Unintended Bias in Toxicity Classification data",
                                      "the checkpoint's description"),),
}


def known_training_sets(spec: str | Path) -> tuple[TrainingSet, ...]:
    """The known training data of the registered classifier ``spec`` names (none for any other -c value: a
    model directory, a hub id, a judge)."""
    text = str(spec)
    return () if Path(text).exists() else KNOWN_TRAINING_SETS.get(Registry.key(text), ())


def contamination(spec: str | Path, kind: str) -> list[str]:
    """The known training data of ``spec`` that a dataset of loader kind ``kind`` holds (``davidson`` for
    profanity-check), described: that classifier's numbers on such a set are not held-out ones."""
    return [t.describe() for t in known_training_sets(spec) if t.kind is not None and t.kind == kind]


JUDGE_OPTIONS = ("template", "policy", "concurrency")   # load_classifier options that only a judge:MODEL takes
SPEED_OPTIONS = ("concurrency",)   # load_classifier options that change how fast a classifier scores, not what


def scoring_options(options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` a resumed run must share with the original: those set (not None) that can change the scores, so
    a run resumed with another ``--judge-concurrency`` reuses what it has."""
    return {k: v for k, v in options.items() if v is not None and k not in SPEED_OPTIONS}
HEAD_OPTIONS = ("toxic_label", "toxic_index", "benign_index", "tokenizer", "max_length")  # transformers heads only
# How a transformers head's forward pass runs (toxiforge.classifiers.runtime); a command's -c values share it, so the
# classifiers without a head (profanity-check's SVM, a judge's LM) run as they are and drop it.
RUNTIME_OPTION = "runtime"
FLAGS = {RUNTIME_OPTION: "--classifier-runtime"}  # load_classifier options whose CLI flag is not --<name>


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


# Registry name -> a factory taking the backend keyword arguments; string targets are imported on first use.
CLASSIFIERS: Registry[Callable[..., ToxicityClassifier]] = Registry("classifier", {
    **{name: _hub_factory(name) for name in HUB_CLASSIFIERS},
    PROFANITY_CHECK: "toxiforge.classifiers.profanity:load_profanity_check",
})


def load_classifier(name_or_path: str | Path, **kwargs: Any) -> ToxicityClassifier:
    """Load a classifier by registry name, local directory or hub id (see the package docstring).

    ``kwargs`` go to the backend (``device``, ``dtype``, ``batch_size``, ``max_length``, ``toxic_index``,
    ``toxic_label``, ``benign_index``, ``tokenizer``, ``name``, ``runtime`` (dropped for classifiers without a
    transformers head); ``template`` and ``policy`` for ``judge:MODEL``);
    None values are dropped, so callers can pass optional settings through unchanged. An option of one kind of
    classifier given to another (``--judge-template`` with a head) is an InputError.
    """
    kwargs = check_classifier_options(name_or_path, kwargs)
    text = str(name_or_path)
    if is_judge(text) or (Registry.key(text) == PROFANITY_CHECK and not Path(text).exists()):
        kwargs.pop(RUNTIME_OPTION, None)
    if is_judge(text):
        from toxiforge.classifiers.judge import load_judge

        return load_judge(text, **kwargs)
    if text in CLASSIFIERS and not Path(text).exists():
        return CLASSIFIERS.get(text)(**kwargs)
    path = local_model(text, what="classifier")
    if path is not None and not path.is_dir():
        raise InputError("a file is not a classifier", path=path,
                         hint="pass a model directory written by save_pretrained, a hub id or a known name")
    if path is not None or is_hub_id(text):
        from toxiforge.classifiers.hf import HFClassifier

        return HFClassifier.load(path if path is not None else text, **kwargs)
    raise InputError(f"unknown classifier {text!r}: not a known name, a local directory or a hub id (owner/name)",
                     hint=f"{did_you_mean(Registry.key(text), CLASSIFIERS.names())} (or pass a model directory, "
                          "or a hub id like tomh/toxigen_roberta)")


SCORE_RULES = {
    "head": "softmax over the classes; P(toxic) = the toxic class's probability",
    "multi-label head": "independent sigmoids; P(toxic) = sigmoid of the toxic label (--toxic-label)",
    "lexical": "TF-IDF words into a calibrated linear SVM",
    "judge": "P(unsafe) = softmax of the two decision words' logits at the decision position (--judge-template)",
}


class CatalogEntry(NamedTuple):
    """One row of ``toxiforge classifiers``."""

    name: str
    kind: str
    source: str
    score: str
    description: str
    trained_on: str   # the known training data (KNOWN_TRAINING_SETS), "-" when none is known


def _trained_on(name: str) -> str:
    return "; ".join(t.describe() for t in known_training_sets(name)) or "-"


def classifier_catalog() -> list[CatalogEntry]:
    """Every registered classifier with its kind, score rule and known training data, then the judge form
    ``judge:MODEL``."""
    rows = [CatalogEntry(name, e.kind, e.hub_id, SCORE_RULES[e.kind], e.description, _trained_on(name))
            for name, e in HUB_CLASSIFIERS.items()]
    rows.append(CatalogEntry(PROFANITY_CHECK, "lexical", "alt-profanity-check (pip, offline)", SCORE_RULES["lexical"],
                             "profanity and explicit insults by their words; not implicit hate",
                             _trained_on(PROFANITY_CHECK)))
    rows.append(CatalogEntry(f"{JUDGE_PREFIX}MODEL", "judge", "any --model name (embedded smollm2-135m offline, hub "
                             "id, directory, .gguf, openai:URL#MODEL)", SCORE_RULES["judge"],
                             "a guard LLM or any instruct model asked a yes/no question", "-"))
    return rows


def is_judge(name_or_path: str | Path | None) -> TypeGuard[str]:
    """Whether a -c value names a judge classifier (``judge:MODEL``)."""
    return name_or_path is not None and str(name_or_path).startswith(JUDGE_PREFIX)


def check_classifier_options(name_or_path: str | Path, options: dict[str, Any]) -> dict[str, Any]:
    """``options`` without None values, or an InputError for one of another kind of classifier than
    ``name_or_path`` (a judge's ``template`` for a head, a head's ``toxic_label`` for ``judge:MODEL``), before
    anything loads."""
    options = {k: v for k, v in options.items() if v is not None}
    text = str(name_or_path)
    if is_judge(text):
        _refuse(options, HEAD_OPTIONS, text, "transformers classification heads")
    else:
        _refuse(options, JUDGE_OPTIONS, text, "judge classifiers (-c judge:MODEL)")
    return options


def option_flags(options: Iterable[str]) -> str:
    """load_classifier option names as the CLI spells them: ``template, toxic_label`` ->
    ``--judge-template, --toxic-label``."""
    return ", ".join(FLAGS.get(k) or "--" + ("judge-" if k in JUDGE_OPTIONS else "") + k.replace("_", "-")
                     for k in options)


def _refuse(kwargs: dict[str, Any], options: tuple[str, ...], name: str, only: str) -> None:
    given = [k for k in options if k in kwargs]
    if given:
        flags = option_flags(given)
        raise InputError(f"{flags} apply to {only} only, not to {name!r}", hint=f"drop {flags}")


def default_score_column(classifier_name: str | Path) -> str:
    """The column a classifier's P(toxic) goes to: ``roberta_prediction`` for toxigen-roberta (ToxiGen's own
    column), else ``<name>_score`` with the name's last path part made identifier-safe
    (``profanity-check`` -> ``profanity_check_score``, ``/models/my-clf/`` -> ``my_clf_score``)."""
    text = str(classifier_name).strip()
    if Registry.key(text) == "toxigen-roberta" or text.lower() == HUB_CLASSIFIERS["toxigen-roberta"].hub_id:
        return "roberta_prediction"
    base = re.split(r"[/\\]", text.rstrip("/\\"))[-1]
    safe = re.sub(r"[^0-9A-Za-z]+", "_", base).strip("_").lower() or "classifier"
    return f"{safe}_score"
