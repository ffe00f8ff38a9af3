"""Toxicity classifiers behind one protocol, found by name through a small registry.

``load_classifier(name_or_path)`` resolves, in order:

0. ``judge:MODEL``: a generative judge (guard LLM or any instruct model asked a yes/no question), any LM name
   ``--model`` takes (:class:`~toxiforge.classifiers.judge.JudgeClassifier`);
1. a registry name (case-insensitive): ``toxigen-roberta``, ``toxigen-hatebert``, ``toxdect-roberta``,
   ``hatebert``, ``detoxify-original``, ``detoxify-unbiased`` (hub checkpoints, see :data:`HUB_CLASSIFIERS`) or
   ``profanity-check`` (offline, ships as a pip package);
2. an existing local directory written by ``save_pretrained`` (:class:`~toxiforge.classifiers.hf.HFClassifier`);
3. a hub id of the form ``owner/name``.

An argument that looks like a path (:func:`toxiforge._hf.looks_like_path`: ``./x``, ``a/b/c``, ``models/x`` beside
a ``models/`` folder) but does not exist is an :class:`~toxiforge.errors.InputError` naming the nearest folders;
it is never looked up on the hub.

Anything else is an :class:`~toxiforge.errors.InputError` that names the closest known name ("did you mean") or
lists them all. Names are imported on first use: ``import toxiforge.classifiers`` imports neither torch,
transformers nor scikit-learn.
"""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "ToxicityClassifier": "base:ToxicityClassifier",
    "CLASSIFIERS": "registry:CLASSIFIERS",
    "HUB_CLASSIFIERS": "registry:HUB_CLASSIFIERS",
    "HubClassifier": "registry:HubClassifier",
    "PROFANITY_CHECK": "registry:PROFANITY_CHECK",
    "check_classifier_options": "registry:check_classifier_options",
    "default_score_column": "registry:default_score_column",
    "load_classifier": "registry:load_classifier",
    "HFClassifier": "hf:HFClassifier",
    "JudgeClassifier": "judge:JudgeClassifier",
    "JudgeTemplate": "judge_templates:JudgeTemplate",
    "ProfanityCheckClassifier": "profanity:ProfanityCheckClassifier",
    "CallableClassifier": "wrap:CallableClassifier",
})
