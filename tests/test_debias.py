"""Bias mitigation (Zhou et al. 2021 §3): DataMaps and the label-ratio subsets.

Everything trains a tiny random BERT with a word-level tokenizer built in-process, on neutral placeholder text.
The planted-shortcut proofs (the stand-in token "zorblax" occurs almost only in toxic training rows) are at the
end. Nothing is downloaded.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from toxiforge.bias.datamaps import REGIONS, DataMapRecorder, Dynamics, region_subset, run_datamap, \
    training_dynamics
from toxiforge.bias.subsets import keep_label_ratio, label_quota, pearson_r, random_subset
from toxiforge.data import Example
from toxiforge.errors import InputError
from toxiforge.training.trainer import TrainConfig, train_classifier

SIGNALS = ["alpha", "beta"]
FILLERS = ["one", "two", "three", "four", "five", "six", "seven", "eight"]
SHORTCUT = "zorblax"


def shortcut_data(n: int, *, seed: int, signal_rate: float = 0.8, shortcut_toxic: float = 0.9,
                  shortcut_benign: float = 0.05) -> list[Example]:
    """Placeholder rows: label 1 rows say "alpha" with ``signal_rate`` (else "beta"), label 0 the reverse; the
    shortcut token appears in ``shortcut_toxic`` of label-1 rows and ``shortcut_benign`` of label-0 rows."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        label = i % 2
        signal = SIGNALS[0 if (rng.random() < signal_rate) == bool(label) else 1]
        words = ["placeholder", "note", signal, FILLERS[rng.integers(len(FILLERS))]]
        if rng.random() < (shortcut_toxic if label else shortcut_benign):
            words.insert(int(rng.integers(len(words) + 1)), SHORTCUT)
        rows.append(Example(" ".join(words), label))
    return rows


def has_shortcut(rows) -> np.ndarray:
    return np.array([SHORTCUT in e.text.split() for e in rows], dtype=float)


def build_tokenizer():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator([" ".join(["placeholder note", SHORTCUT] + SIGNALS + FILLERS)],
                            trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]")


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """A tiny random BertModel without dropout (so training-time and eval-time passes agree), saved."""
    from transformers import BertConfig, BertModel

    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=32, pad_token_id=tokenizer.pad_token_id,
                        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    folder = tmp_path_factory.mktemp("tiny-bert-debias")
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def tiny_config(base_dir, **kwargs) -> TrainConfig:
    settings = dict(base_model=str(base_dir), epochs=4, batch_size=16, learning_rate=5e-3, max_length=16,
                    eval_fraction=0.0, logging_steps=5, device="cpu")
    settings.update(kwargs)
    return TrainConfig(**settings)


def gold_probabilities(model_dir, rows) -> np.ndarray:
    from toxiforge.classifiers import load_classifier

    toxic = load_classifier(model_dir, device="cpu").predict_proba([e.text for e in rows])
    return np.where(np.array([e.label for e in rows]) == 1, toxic, 1 - toxic)


# --- subsets and the random baseline ---------------------------------------------------------------------------


def test_keep_label_ratio_samples_the_pool_with_the_original_ratio():
    labels = [1] * 30 + [0] * 70
    assert label_quota(labels, 33) == {1: 10, 0: 23}
    picked = keep_label_ratio(range(100), labels, 33, seed=3)
    assert len(picked) == 33 and sum(labels[i] for i in picked) == 10 and len(set(picked)) == 33
    assert np.array_equal(picked, keep_label_ratio(range(100), labels, 33, seed=3))
    # a pool short of toxic rows is filled from the fallback ranking, in its order
    pool = list(range(30, 80))  # benign only
    picked = keep_label_ratio(pool, labels, 20, seed=0, fallback=[9, 8, 7, 6, 5, 4, 3, 2] + pool)
    assert sorted(i for i in picked if labels[i]) == [4, 5, 6, 7, 8, 9] and len(picked) == 20
    with pytest.raises(InputError, match="fewer than the 6"):
        keep_label_ratio(pool, labels, 20, seed=0)
    assert np.array_equal(random_subset(labels, 33, seed=1), keep_label_ratio(range(100), labels, 33, seed=1))


def test_pearson_r_matches_numpy_and_is_none_for_constants():
    x, y = [1, 0, 1, 1, 0, 0], [1, 0, 1, 0, 0, 1]
    assert pearson_r(x, y) == pytest.approx(1 / 3)
    assert pearson_r([1, 1, 1], [0, 1, 0]) is None


# --- DataMaps --------------------------------------------------------------------------------------------------


def test_training_dynamics_by_hand():
    p = np.array([[0.9, 0.2, 0.5], [0.7, 0.4, 0.5], [0.8, 0.9, 0.5]])
    c = np.array([[1, 0, 0], [1, 0, 1], [1, 1, 0]])
    d = training_dynamics(p, c)
    assert np.allclose(d.confidence, [0.8, 0.5, 0.5])
    assert np.allclose(d.variability, [np.sqrt(0.02 / 3), np.sqrt(0.26 / 3), 0.0])
    assert np.allclose(d.correctness, [1.0, 1 / 3, 1 / 3]) and d.epochs == 3
    with pytest.raises(InputError, match="1 examples were not seen"):
        training_dynamics(np.array([[0.5, np.nan]]), np.zeros((1, 2)))


def test_regions_rank_by_confidence_and_variability():
    confidence = np.linspace(0.05, 0.95, 12)
    variability = np.array([0.3, 0.0, 0.29, 0.0, 0.28, 0.0, 0.27, 0.0, 0.0, 0.0, 0.0, 0.0])
    d = Dynamics(confidence=confidence, variability=variability, correctness=confidence, epochs=3)
    labels = [0, 1] * 6
    easy = region_subset(d, labels, "easy", fraction=1 / 3, pool_fraction=1 / 3)
    hard = region_subset(d, labels, "hard", fraction=1 / 3, pool_fraction=1 / 3)
    ambiguous = region_subset(d, labels, "ambiguous", fraction=1 / 3, pool_fraction=1 / 2)
    assert list(easy) == [8, 9, 10, 11] and list(hard) == [0, 1, 2, 3]
    assert set(ambiguous) <= {0, 2, 4, 6, 1, 3} and sum(labels[i] for i in ambiguous) == 2
    with pytest.raises(InputError, match="unknown data-map region"):
        region_subset(d, labels, "medium")


def test_recorder_sees_every_example_with_its_own_probability(base_dir, tmp_path):
    """With learning rate 0 the model never changes, so each recorded p(gold) must equal a separate forward pass
    of the saved model on that very example: the positions in the batches line up with the examples."""
    rows = shortcut_data(40, seed=1)
    rec = DataMapRecorder(len(rows))
    train_classifier(rows, tmp_path / "m", tiny_config(base_dir, epochs=2, learning_rate=0.0, batch_size=8),
                     progress=False, callbacks=[rec])
    assert len(rec.probabilities) == 2
    reference = gold_probabilities(tmp_path / "m", rows)
    for epoch in rec.probabilities:
        assert np.allclose(epoch, reference, atol=1e-5)
    assert np.allclose(rec.dynamics().variability, 0, atol=1e-5)


def test_datamap_writes_dynamics_subsets_and_plot(base_dir, tmp_path):
    rows = shortcut_data(60, seed=2)
    result = run_datamap(rows, tmp_path / "dm", tiny_config(base_dir, epochs=3), model_dir=tmp_path / "model")
    table = pq.read_table(tmp_path / "dm" / "dynamics.parquet")
    assert table.column_names == ["id", "text", "label", "group", "method", "confidence", "variability",
                                  "correctness"] and table.num_rows == 60
    assert set(np.round(np.array(table.column("correctness")) * 3, 6)) <= {0, 1, 2, 3}
    for region in REGIONS:
        subset = pq.read_table(tmp_path / "dm" / f"{region}.parquet")
        assert subset.num_rows == 20 and sum(subset.column("label").to_pylist()) == 10
        assert subset.column("id").to_pylist() == sorted(result.subsets[region].tolist())
    easy = pq.read_table(tmp_path / "dm" / "easy.parquet").column("confidence").to_numpy()
    hard = pq.read_table(tmp_path / "dm" / "hard.parquet").column("confidence").to_numpy()
    assert easy.mean() > hard.mean()
    assert (tmp_path / "dm" / "datamap.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    log = json.loads((tmp_path / "dm" / "datamap.json").read_text())
    assert log["epochs"] == 3 and log["sizes"] == {"easy": 20, "ambiguous": 20, "hard": 20}
    with pytest.raises(InputError, match="at least 2 whole epochs"):
        run_datamap(rows, tmp_path / "dm2", tiny_config(base_dir, epochs=1))
