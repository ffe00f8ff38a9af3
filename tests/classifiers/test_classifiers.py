"""Classifiers: a tiny random BERT classifier (built in-process), profanity-check, callables, the registry and
``toxiforge classify``. Nothing is downloaded; all texts are neutral placeholders."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from toxiforge.classifiers import (
    CLASSIFIERS,
    HUB_CLASSIFIERS,
    ToxicityClassifier,
    default_score_column,
    load_classifier,
)
from toxiforge.classifiers.hf import HFClassifier, infer_benign_index, infer_toxic_index
from toxiforge.classifiers.profanity import ProfanityCheckClassifier
from toxiforge.classifiers.wrap import CallableClassifier
from toxiforge.cli import app
from toxiforge.errors import InputError, ToxiforgeError

CORPUS = [
    "placeholder sentence alpha",
    "placeholder sentence beta about group gamma",
    "a neutral line of text for the tokenizer test",
    "people enjoy music food and sports",
    "the quick brown fox jumps over the lazy dog",
] * 10
TEXTS = ["placeholder sentence alpha", "a neutral line of text", "people enjoy music food and sports on weekends",
         "", "unseen words become unknown tokens"]


def build_wordlevel_tokenizer():
    from conftest import build_word_tokenizer

    return build_word_tokenizer(CORPUS)


def build_tiny_bert(tokenizer, *, num_labels: int = 2, id2label: dict | None = None, head: bool = True, seed: int = 0):
    from transformers import BertForSequenceClassification, BertModel

    from conftest import tiny_bert_config

    torch.manual_seed(seed)
    extra = {"id2label": id2label, "label2id": {v: k for k, v in id2label.items()}} if id2label else {}
    config = tiny_bert_config(tokenizer, num_labels=num_labels, **extra)
    if not head:
        return BertModel(config).eval()
    model = BertForSequenceClassification(config).eval()
    with torch.no_grad():  # a random head gives ~0.5 everywhere; a sharper one makes padding errors visible
        model.classifier.weight.mul_(100.0)
    return model


@pytest.fixture(scope="module")
def bert_tokenizer():
    return build_wordlevel_tokenizer()


@pytest.fixture(scope="module")
def tiny_clf(bert_tokenizer):
    return HFClassifier(build_tiny_bert(bert_tokenizer), bert_tokenizer, name="tiny-bert", batch_size=4, device="cpu")


@pytest.fixture(scope="module")
def profanity():
    return ProfanityCheckClassifier()


# --- HFClassifier ----------------------------------------------------------------------------------------------


def test_hf_shapes_and_probabilities(tiny_clf):
    assert isinstance(tiny_clf, ToxicityClassifier)
    assert (tiny_clf.num_classes, tiny_clf.toxic_index, tiny_clf.benign_index) == (2, 1, 0)
    logp = tiny_clf.class_log_probs(TEXTS)
    assert logp.dtype == torch.float32 and logp.device.type == "cpu" and logp.shape == (len(TEXTS), 2)
    assert torch.allclose(logp.exp().sum(-1), torch.ones(len(TEXTS)), atol=1e-5)
    p = tiny_clf.predict_proba(TEXTS)
    assert p.dtype == np.float64 and p.shape == (len(TEXTS),)
    assert np.allclose(p, logp[:, 1].exp().numpy(), atol=1e-6)
    assert tiny_clf.class_log_probs([]).shape == (0, 2)


def test_hf_padding_and_batch_order_do_not_change_scores(tiny_clf):
    alone = tiny_clf.class_log_probs(["placeholder sentence alpha"])
    longer = ["placeholder sentence beta about group gamma and the quick brown fox jumps over the lazy dog " * 2,
              "people enjoy music food and sports"]
    batched = tiny_clf.class_log_probs(longer[:1] + ["placeholder sentence alpha"] + longer[1:])
    assert torch.allclose(alone[0], batched[1], atol=1e-5)
    # the check has teeth: without the attention mask the padded text scores differently
    enc = tiny_clf.tokenizer([longer[0], "placeholder sentence alpha"], padding=True, return_tensors="pt")
    with torch.inference_mode():
        unmasked = torch.log_softmax(tiny_clf.model(input_ids=enc["input_ids"]).logits, -1)
    assert (unmasked[1] - alone[0]).abs().max() > 1e-3
    # the input order is kept although batches are sorted by length
    each = torch.cat([tiny_clf.class_log_probs([t]) for t in TEXTS])
    assert torch.allclose(each, tiny_clf.class_log_probs(TEXTS), atol=1e-5)


def test_hf_truncates_long_texts(bert_tokenizer):
    clf = HFClassifier(build_tiny_bert(bert_tokenizer), bert_tokenizer, max_length=16)
    logp = clf.class_log_probs(["placeholder sentence alpha " * 200, "placeholder"])
    assert logp.shape == (2, 2) and torch.isfinite(logp).all()
    # positions beyond 16 are cut: the long text scores like its first 14 words (+ [CLS] and [SEP])
    first = " ".join(("placeholder sentence alpha " * 200).split()[:14])
    assert torch.allclose(logp[0], clf.class_log_probs([first])[0], atol=1e-5)


def test_toxic_and_benign_index_inference():
    assert infer_toxic_index({0: "LABEL_0", 1: "LABEL_1"}, 2) == 1
    assert infer_toxic_index(None, 2) == 1
    assert infer_toxic_index({0: "toxic", 1: "non-toxic"}, 2) == 0
    assert infer_benign_index({0: "toxic", 1: "non-toxic"}, 2, 0) == 1
    assert infer_toxic_index({0: "not hate", 1: "hate"}, 2) == 1
    labels = {0: "neither", 1: "offensive language", 2: "hate speech"}
    assert infer_toxic_index(labels, 3) == 2 and infer_benign_index(labels, 3, 2) == 0
    with pytest.raises(InputError, match="toxic_index"):
        infer_toxic_index({0: "LABEL_0", 1: "LABEL_1", 2: "LABEL_2"}, 3)
    with pytest.raises(InputError, match="benign_index"):
        infer_benign_index({0: "a", 1: "toxic", 2: "b"}, 3, 1)


def test_hf_reads_labels_and_validates_indices(bert_tokenizer):
    model = build_tiny_bert(bert_tokenizer, num_labels=3, id2label={0: "normal", 1: "offensive", 2: "hate"})
    clf = HFClassifier(model, bert_tokenizer)
    assert (clf.num_classes, clf.toxic_index, clf.benign_index) == (3, 2, 0)
    assert clf.class_log_probs(TEXTS[:2]).shape == (2, 3)
    with pytest.raises(InputError, match=r"num_classes=2.*LABEL_1"):
        HFClassifier(build_tiny_bert(bert_tokenizer), bert_tokenizer, toxic_index=5)
    with pytest.raises(InputError, match="both 1"):
        HFClassifier(build_tiny_bert(bert_tokenizer), bert_tokenizer, toxic_index=1, benign_index=1)
    with pytest.raises(InputError, match="not a sequence classifier"):
        HFClassifier(build_tiny_bert(bert_tokenizer, head=False), bert_tokenizer)


def test_save_and_load_classifier_from_a_directory(tiny_clf, bert_tokenizer, tmp_path):
    folder = tmp_path / "my-clf"
    tiny_clf.model.save_pretrained(folder)
    bert_tokenizer.save_pretrained(folder)
    loaded = load_classifier(folder, device="cpu", batch_size=2)
    assert isinstance(loaded, HFClassifier) and loaded.batch_size == 2 and loaded.load_seconds is not None
    assert torch.allclose(loaded.class_log_probs(TEXTS), tiny_clf.class_log_probs(TEXTS), atol=1e-5)
    assert default_score_column(str(folder)) == "my_clf_score"


def test_loading_a_base_model_without_a_head_is_refused(bert_tokenizer, tmp_path):
    base = tmp_path / "base"
    build_tiny_bert(bert_tokenizer, head=False).save_pretrained(base)
    bert_tokenizer.save_pretrained(base)
    with pytest.raises(InputError, match="classification head"):
        load_classifier(base)
    # no architectures in config.json: the newly initialized head weights give it away
    config = json.loads((base / "config.json").read_text())
    config.pop("architectures")
    (base / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="newly initialized"):
        load_classifier(base)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="config.json"):
        load_classifier(empty)


# --- profanity-check -------------------------------------------------------------------------------------------


def test_profanity_check_shapes_and_ranges(profanity):
    assert isinstance(profanity, ToxicityClassifier)
    assert (profanity.name, profanity.num_classes, profanity.toxic_index, profanity.benign_index) == \
        ("profanity-check", 2, 1, 0)
    logp = profanity.class_log_probs(TEXTS)
    assert logp.dtype == torch.float32 and logp.shape == (len(TEXTS), 2) and torch.isfinite(logp).all()
    assert torch.allclose(torch.logsumexp(logp, dim=-1), torch.zeros(len(TEXTS)), atol=1e-5)
    p = profanity.predict_proba(TEXTS)
    assert p.dtype == np.float64 and p.shape == (len(TEXTS),) and ((p >= 0) & (p <= 1)).all()
    assert np.allclose(p, logp[:, 1].exp().numpy(), atol=1e-5)
    assert (p < 0.5).all()  # neutral placeholders are not profane
    assert profanity.class_log_probs([]).shape == (0, 2)
    small = ProfanityCheckClassifier(batch_size=2)
    assert np.allclose(small.predict_proba(TEXTS), p)


def test_profanity_check_missing_package_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "profanity_check", None)  # makes the import fail
    with pytest.raises(InputError, match="pip install alt-profanity-check"):
        ProfanityCheckClassifier()


# --- CallableClassifier ----------------------------------------------------------------------------------------


def test_callable_classifier_one_and_two_dimensional():
    one = CallableClassifier(lambda texts: [0.25] * len(texts), name="const")
    assert (one.num_classes, one.toxic_index, one.benign_index) == (2, 1, 0)
    assert np.allclose(one.predict_proba(["a", "b"]), 0.25)
    assert torch.allclose(one.class_log_probs(["a"]).exp(), torch.tensor([[0.75, 0.25]]))
    flipped = CallableClassifier(lambda texts: np.full(len(texts), 0.25), toxic_index=0)
    assert torch.allclose(flipped.class_log_probs(["a"]).exp(), torch.tensor([[0.25, 0.75]]))
    three = CallableClassifier(lambda texts: [[0.2, 0.5, 0.3]] * len(texts), num_classes=3, toxic_index=2,
                               benign_index=0, batch_size=2)
    assert three.class_log_probs(["a", "b", "c"]).shape == (3, 3)
    assert np.allclose(three.predict_proba(["a"]), 0.3)
    zero = CallableClassifier(lambda texts: [0.0] * len(texts))
    assert torch.isfinite(zero.class_log_probs(["a"])).all()
    assert one.predict_proba([]).shape == (0,)
    assert isinstance(three, ToxicityClassifier)
    assert three.describe() == {"name": "callable", "backend": "callable", "function":
                                "test_callable_classifier_one_and_two_dimensional.<locals>.<lambda>",
                                "num_classes": 3, "toxic_index": 2, "benign_index": 0}


@pytest.mark.parametrize("fn, match", [
    (lambda texts: [0.5] * (len(texts) + 1), "3 scores for 2 texts"),
    (lambda texts: [1.5] * len(texts), r"outside \[0, 1\]"),
    (lambda texts: [float("nan")] * len(texts), "NaN"),
    (lambda texts: [[0.5, 0.5, 0.0]] * len(texts), "3 columns"),
    (lambda texts: [[0.9, 0.9]] * len(texts), "summing to 1.8"),
    (lambda texts: 0.5, "shape"),
    (lambda texts: ["x"] * len(texts), "not numbers"),
])
def test_callable_classifier_rejects_bad_outputs(fn, match):
    with pytest.raises(InputError, match=match):
        CallableClassifier(fn, name="bad").predict_proba(["a", "b"])


def test_callable_classifier_rejects_bad_settings():
    with pytest.raises(InputError, match="benign_index is needed"):
        CallableClassifier(lambda t: t, num_classes=3)
    with pytest.raises(InputError, match="out of range"):
        CallableClassifier(lambda t: t, toxic_index=2)
    with pytest.raises(InputError, match="not a function"):
        CallableClassifier("nope")
    with pytest.raises(InputError, match="single string"):
        CallableClassifier(lambda t: [0.1] * len(t)).predict_proba("one text")


# --- registry --------------------------------------------------------------------------------------------------


def test_registry_names_map_to_hub_ids_and_tokenizers():
    assert HUB_CLASSIFIERS["toxigen-roberta"][:2] == ("tomh/toxigen_roberta", None)
    assert HUB_CLASSIFIERS["toxigen-hatebert"][:2] == ("tomh/toxigen_hatebert", "bert-base-uncased")
    assert HUB_CLASSIFIERS["toxdect-roberta"][:2] == ("Xuhui/ToxDect-roberta-large", None)
    assert HUB_CLASSIFIERS["hatebert"][:2] == ("GroNLP/hateBERT", None)
    assert set(CLASSIFIERS) == set(HUB_CLASSIFIERS) | {"profanity-check"}
    assert isinstance(load_classifier("Profanity_Check", device="cuda", dtype="auto", batch_size=None),
                      ProfanityCheckClassifier)
    with pytest.raises(InputError, match="takes no toxic_index"):
        load_classifier("profanity-check", toxic_index=1)


def test_unknown_classifier_lists_known_names(tmp_path):
    with pytest.raises(InputError, match="toxigen-roberta, toxigen-hatebert") as err:
        load_classifier("no-such-classifier")
    assert "profanity-check" in str(err.value)
    with pytest.raises(InputError, match="did you mean 'toxigen-roberta'"):
        load_classifier("toxigen-robreta")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(InputError, match="a file is not a classifier"):
        load_classifier(tmp_path / "f.txt")


def test_default_score_column():
    assert default_score_column("toxigen-roberta") == "roberta_prediction"
    assert default_score_column("tomh/toxigen_roberta") == "roberta_prediction"
    assert default_score_column("profanity-check") == "profanity_check_score"
    assert default_score_column("Xuhui/ToxDect-roberta-large") == "toxdect_roberta_large_score"
    assert default_score_column("/models/my clf/") == "my_clf_score"


def test_offline_hub_load_fails_fast_with_a_clear_message(monkeypatch):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    started = time.perf_counter()
    with pytest.raises(ToxiforgeError) as err:
        load_classifier("toxigen-roberta")
    assert time.perf_counter() - started < 10
    message = str(err.value)
    assert "could not load classifier 'tomh/toxigen_roberta'" in message
    assert "local model directory" in message and "profanity-check" in message


def test_importing_the_package_stays_light():
    code = ("import sys, toxiforge.classifiers as c; "
            "print(any(m in sys.modules for m in ('transformers', 'sklearn', 'profanity_check')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --- toxiforge classify ----------------------------------------------------------------------------------------

runner = CliRunner()


def _write_dataset(path, n=4):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"generation": f"placeholder sentence alpha {i}", "group": "asian", "extra": i} for i in range(n)]
    rows[1]["generation"] = None
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("suffix", [".parquet", ".jsonl"])
def test_classify_cli_adds_a_score_column(tmp_path, suffix):
    from toxiforge.records import read_table

    data = _write_dataset(tmp_path / f"gen{suffix}")
    result = runner.invoke(app, ["classify", str(data), "--classifier", "profanity-check"])
    assert result.exit_code == 0, result.output
    out = tmp_path / f"gen.scored{suffix}"
    table = read_table(out)
    assert table.column_names == ["generation", "group", "extra", "profanity_check_score"]
    scores = table.column("profanity_check_score").to_pylist()
    assert scores[1] is None and all(0 <= s < 0.5 for s in scores if s is not None)
    assert table.column("extra").to_pylist() == [0, 1, 2, 3]
    assert "3 rows scored" in result.output and "1 null texts" in result.output

    again = runner.invoke(app, ["classify", str(data), "-c", "profanity-check"])
    assert again.exit_code != 0 and isinstance(again.exception, InputError)
    assert "--overwrite" in str(again.exception)
    assert runner.invoke(app, ["classify", str(data), "-c", "profanity-check", "--overwrite",
                               "--column", "p"]).exit_code == 0
    assert read_table(out).column_names[-1] == "p"


def test_classify_cli_missing_text_column_names_the_columns(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    data = tmp_path / "d.parquet"
    pq.write_table(pa.Table.from_pylist([{"sentence": "placeholder sentence alpha"}]), data)
    result = runner.invoke(app, ["classify", str(data), "-c", "profanity-check"])
    assert isinstance(result.exception, InputError)
    assert "'generation' or 'text'" in str(result.exception) and "sentence" in str(result.exception)
    result = runner.invoke(app, ["classify", str(data), "-c", "profanity-check", "--text-column", "nope"])
    assert isinstance(result.exception, InputError) and "sentence" in str(result.exception)
    ok = runner.invoke(app, ["classify", str(data), "-c", "profanity-check", "--text-column", "sentence",
                             "-o", str(tmp_path / "o.csv")])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "o.csv").exists()


def test_classify_cli_on_a_generation_directory_with_a_model_dir(tmp_path, tiny_clf, bert_tokenizer):
    from toxiforge.records import Row, read_table, write_rows

    run = tmp_path / "run"
    rows = [Row(prompt="- p\n-", generation=f"placeholder sentence alpha {i}", generation_method="top-k",
                group="asian", prompt_label=0) for i in range(3)]
    write_rows(rows, run / "data" / "shard-00000.parquet")
    model_dir = tmp_path / "clf"
    tiny_clf.model.save_pretrained(model_dir)
    bert_tokenizer.save_pretrained(model_dir)
    result = runner.invoke(app, ["classify", str(run), "-c", str(model_dir), "--device", "cpu", "--column",
                                 "roberta_prediction", "--no-progress"])
    assert result.exit_code == 0, result.output
    table = read_table(run / "scored.parquet")
    expected = tiny_clf.predict_proba([r.generation for r in rows])
    assert np.allclose(table.column("roberta_prediction").to_pylist(), expected, atol=1e-6)
    assert read_table(run).num_rows == 3  # the scored file is not read back as a shard


def test_empty_text_with_a_tokenizer_that_adds_no_special_tokens(tiny_tokenizer):
    """ALICE can ask about an empty continuation; a zero-length batch must not crash the model."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from toxiforge.classifiers.hf import HFClassifier

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tiny_tokenizer), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, num_labels=2, pad_token_id=tiny_tokenizer.pad_token_id)
    clf = HFClassifier(BertForSequenceClassification(config).eval(), tiny_tokenizer, name="no-specials")
    out = clf.class_log_probs(["", "", "placeholder sentence"])
    assert out.shape == (3, 2) and torch.isfinite(out).all()
    assert torch.allclose(out[0], out[1])


def test_score_texts_accepts_a_classifier_that_returns_a_tensor():
    from toxiforge.classifiers.scoring import score_texts

    class TensorClassifier:  # a third-party classifier that hands back a torch tensor (on its own device)
        name, num_classes, toxic_index, benign_index = "tensor", 2, 1, 0

        def predict_proba(self, texts):
            return torch.tensor([len(t) / 10 for t in texts], dtype=torch.float16, requires_grad=False)

    out = score_texts(TensorClassifier(), ["a", "abcde", "abcdefghij"], chunk_size=2)
    assert out.dtype == np.float64 and np.allclose(out, [0.1, 0.5, 1.0], atol=1e-3)
