"""--classifier-runtime: a tiny BERT's scores under ONNX Runtime equal torch's up to float noise, int8 moves them a
little, exports are cached by content, and a runtime that cannot run says so before anything loads."""

from __future__ import annotations

import sys

import pytest
import torch
from test_classifiers import TEXTS, build_tiny_bert, build_wordlevel_tokenizer
from typer.testing import CliRunner

from floats import noise_tolerance
from toxiforge.classifiers import load_classifier
from toxiforge.classifiers import runtime as rt
from toxiforge.classifiers.base import scoring_settings
from toxiforge.classifiers.hf import HFClassifier
from toxiforge.cli import app
from toxiforge.errors import InputError

pytest.importorskip("onnxruntime", reason="the ONNX runtimes need onnxruntime (pip install 'toxiforge[onnx]')")

# A batch with padding (texts of several lengths) and an empty text; batch_size 3 cuts it into batches of other
# shapes than the export's example (2 x 4)
BATCH = [*TEXTS, "placeholder sentence beta about group gamma and more words", "people"]
DEPTH = 2 + 3  # the tiny BERT's 2 layers, the embeddings, the head and the log-softmax (tests/floats.py)


@pytest.fixture(scope="module")
def tokenizer():
    return build_wordlevel_tokenizer()


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TOXIFORGE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "onnx"


def _clf(tokenizer, runtime, seed=0):
    return HFClassifier(build_tiny_bert(tokenizer, seed=seed), tokenizer, batch_size=3, device="cpu", runtime=runtime)


def test_onnx_scores_equal_torchs_up_to_float_noise(tokenizer, cache):
    reference = _clf(tokenizer, "torch").class_log_probs(BATCH)
    onnx = _clf(tokenizer, "onnx")
    tol = noise_tolerance(DEPTH)
    assert torch.allclose(onnx.class_log_probs(BATCH), reference, rtol=tol, atol=tol)
    assert onnx.describe()["runtime"] == "onnx" and len(list(cache.iterdir())) == 1
    # a resumed run compares these: another runtime than the run's is refused; torch adds nothing (older runs)
    assert scoring_settings(onnx) == {"toxic_label": "LABEL_1", "runtime": "onnx"}
    assert scoring_settings(_clf(tokenizer, "torch")) == {"toxic_label": "LABEL_1"}


@pytest.mark.parametrize("runtime", ["torch-int8", "onnx-int8"])
def test_int8_moves_scores_a_little(tokenizer, cache, runtime):
    reference = _clf(tokenizer, "torch").class_log_probs(BATCH)
    quantized = _clf(tokenizer, runtime).class_log_probs(BATCH)
    gap = (quantized.exp() - reference.exp()).abs().max().item()
    # int8 weights: not float noise, but the probabilities stay within a few points (the head is sharpened x100)
    assert noise_tolerance(DEPTH) < gap < 0.05
    assert (quantized.argmax(1) == reference.argmax(1)).float().mean() >= 0.8


def test_exports_are_cached_by_content(tokenizer, cache, monkeypatch):
    exports = []
    export = rt._export
    monkeypatch.setattr(rt, "_export", lambda *args: exports.append(args[2]) or export(*args))
    first = _clf(tokenizer, "onnx")
    _clf(tokenizer, "onnx")  # the same weights: the cached export
    assert len(exports) == 1
    retrained = build_tiny_bert(tokenizer)
    with torch.no_grad():
        retrained.classifier.bias[1] += 0.5  # one weight changed, as training would: a new export
    other = HFClassifier(retrained, tokenizer, batch_size=3, device="cpu", runtime="onnx")
    assert len(exports) == 2 and exports[0].parent != exports[1].parent
    assert not torch.allclose(other.class_log_probs(BATCH), first.class_log_probs(BATCH))
    assert {p.name for p in cache.iterdir()} == {p.parent.name for p in exports}


def test_a_runtime_that_cannot_run_is_refused_with_its_fix(tokenizer, monkeypatch, tmp_path):
    with pytest.raises(InputError, match="unknown classifier runtime 'onx'") as unknown:
        rt.check_runtime("onx")
    assert "did you mean 'onnx'" in str(unknown.value)
    with pytest.raises(InputError, match="CPU only"):
        rt.check_runtime("torch-int8", "cuda")
    folder = tmp_path / "clf"
    build_tiny_bert(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"not weights")  # refused before the weights are read
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # not installed
    with pytest.raises(InputError, match="need onnx and onnxruntime") as missing:
        load_classifier(folder, runtime="onnx-int8")
    assert "pip install 'toxiforge[onnx]'" in str(missing.value)
    assert rt.check_runtime("torch-int8", "cpu", installed=True) == "torch-int8"


def test_cli_option_reaches_heads_and_is_dropped_for_other_classifiers(tokenizer, cache, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "clf"
    build_tiny_bert(tokenizer).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    data = tmp_path / "texts.parquet"
    pq.write_table(pa.table({"generation": BATCH}), data)
    runner = CliRunner()
    scores = {}
    for runtime in ("torch", "onnx"):
        out = tmp_path / f"{runtime}.parquet"
        result = runner.invoke(app, ["classify", str(data), "-c", str(folder), "--classifier-runtime", runtime,
                                     "-o", str(out)])
        assert result.exit_code == 0, result.output
        scores[runtime] = torch.tensor(pq.read_table(out).column("clf_score").to_pylist())
    assert torch.allclose(scores["onnx"], scores["torch"], rtol=noise_tolerance(DEPTH), atol=noise_tolerance(DEPTH))
    assert load_classifier("profanity-check", runtime="onnx").describe()["name"] == "profanity-check"
    wrong = runner.invoke(app, ["classify", str(data), "-c", str(folder), "--classifier-runtime", "int8"])
    assert wrong.exit_code != 0 and "unknown classifier runtime 'int8'" in str(wrong.exception)
