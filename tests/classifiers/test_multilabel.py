"""Multi-label heads (Detoxify-style, independent sigmoids) on a tiny random BERT: P(toxic) is the sigmoid of the
toxic label's logit, ``toxic_label`` picks another label, a head without a toxic label fails listing its labels, and
options of one classifier kind given to another are refused."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from test_classifiers import TEXTS, build_tiny_bert, build_wordlevel_tokenizer

from toxiforge.classifiers import HUB_CLASSIFIERS, load_classifier
from toxiforge.classifiers.hf import HFClassifier
from toxiforge.errors import InputError

LABELS = {0: "severe_toxicity", 1: "obscene", 2: "toxicity", 3: "insult"}


def multi_label_bert(tokenizer, labels=LABELS):
    model = build_tiny_bert(tokenizer, num_labels=len(labels), id2label=labels, seed=1)
    model.config.problem_type = "multi_label_classification"
    return model


@pytest.fixture(scope="module")
def tokenizer():
    return build_wordlevel_tokenizer()


def sigmoids(model, tokenizer, texts):
    with torch.no_grad():
        enc = tokenizer(texts, padding=True, return_tensors="pt")
        return torch.sigmoid(model(**enc).logits).numpy()


def test_p_toxic_is_the_sigmoid_of_the_toxic_label(tokenizer, tmp_path):
    model = multi_label_bert(tokenizer)
    clf = HFClassifier(model, tokenizer, name="tiny-multi", batch_size=2)
    assert (clf.multi_label, clf.toxic_label, clf.num_classes, clf.toxic_index, clf.benign_index) == \
        (True, "toxicity", 2, 1, 0)
    expected = np.stack([sigmoids(model, tokenizer, [t])[0] for t in TEXTS])  # one text at a time: no padding
    assert np.allclose(clf.predict_proba(TEXTS), expected[:, 2], atol=1e-5)
    logp = clf.class_log_probs(TEXTS)
    assert torch.allclose(logp.exp().sum(1), torch.ones(len(TEXTS)), atol=1e-5)
    assert clf.describe()["kind"] == "multi-label head"
    other = HFClassifier(model, tokenizer, toxic_label="insult")
    assert np.allclose(other.predict_proba(TEXTS), expected[:, 3], atol=1e-5)
    model.save_pretrained(tmp_path / "clf")   # -c DIR --toxic-label NAME through the registry
    tokenizer.save_pretrained(tmp_path / "clf")
    loaded = load_classifier(tmp_path / "clf", toxic_label="obscene", device="cpu")
    assert np.allclose(loaded.predict_proba(TEXTS), expected[:, 1], atol=1e-5)


def test_a_head_without_a_toxic_label_lists_its_labels(tokenizer):
    model = multi_label_bert(tokenizer, {0: "obscene", 1: "insult", 2: "threat"})
    with pytest.raises(InputError, match="no label named toxic or toxicity; its labels are obscene, insult, threat"):
        HFClassifier(model, tokenizer)
    with pytest.raises(InputError, match="has no label 'toxic'; its labels are obscene, insult, threat"):
        HFClassifier(model, tokenizer, toxic_label="toxic")
    assert HFClassifier(model, tokenizer, toxic_label="threat").toxic_label == "threat"


def test_toxic_label_on_a_softmax_head(tokenizer):
    model = build_tiny_bert(tokenizer, num_labels=3, id2label={0: "neutral", 1: "offensive", 2: "hate"})
    assert HFClassifier(model, tokenizer).toxic_index == 2   # "hate" comes first in TOXIC_LABELS
    assert HFClassifier(model, tokenizer, toxic_label="offensive").toxic_index == 1


def test_registry_has_the_detoxify_checkpoints_and_refuses_mismatched_options():
    assert HUB_CLASSIFIERS["detoxify-original"].hub_id == "unitary/toxic-bert"
    assert HUB_CLASSIFIERS["detoxify-unbiased"].hub_id == "unitary/unbiased-toxic-roberta"
    assert {HUB_CLASSIFIERS[n].kind for n in ("detoxify-original", "detoxify-unbiased")} == {"multi-label head"}
    with pytest.raises(InputError, match="--judge-template apply to judge classifiers"):
        load_classifier("profanity-check", template="humanval")
    with pytest.raises(InputError, match="--toxic-label apply to transformers classification heads"):
        load_classifier("judge:smollm2-135m", toxic_label="toxic")
