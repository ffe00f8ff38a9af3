"""A model argument that looks like a local path but does not exist fails at once (issue 33 #3): classifiers,
language models, training's base model and the sentence encoder alike, without ever reaching the hub loaders
(which retry for half a minute without a network). Nothing is downloaded; the hub loaders fail the test if they
are called."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toxiforge import _hf
from toxiforge.classifiers import load_classifier
from toxiforge.classifiers.hf import HFClassifier
from toxiforge.cli import app
from toxiforge.errors import InputError
from toxiforge.models import load_language_model
from toxiforge.models.transformers_lm import TransformersLM
from toxiforge.training.trainer import resolve_base_model


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    """A working folder with models/minilm-clf and models/small-gpt, and hub loaders that fail if called."""
    (tmp_path / "models" / "minilm-clf").mkdir(parents=True)
    (tmp_path / "models" / "small-gpt").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")

    def no_hub(source, *args, **kwargs):
        pytest.fail(f"the hub loader was called for {source!r}")

    monkeypatch.setattr(HFClassifier, "load", no_hub)
    monkeypatch.setattr(TransformersLM, "load", no_hub)
    return tmp_path


@pytest.mark.parametrize(("spec", "expected"), [
    ("./models/x", True), ("~/models/x", True), ("/models/x", True), ("models\\x", True), ("a/b/c", True),
    ("org/name/", True), ("model.gguf", True), ("weights.safetensors", True),
    ("models/minlm", True),  # models/ exists in the working folder: a path
    ("tomh/toxigen_roberta", False), ("org/name", False), ("toxigen-roberta", False), ("smollm2-135m", False),
])
def test_path_looking_arguments(workdir, spec, expected):
    assert _hf.looks_like_path(spec) is expected


@pytest.mark.parametrize("spec", ["models/minlm", "./models/minilm-cl"])
def test_a_mistyped_classifier_folder_fails_at_once_naming_the_nearest_folder(workdir, spec):
    started = time.perf_counter()
    with pytest.raises(InputError) as err:
        load_classifier(spec)
    assert time.perf_counter() - started < 2
    message = str(err.value)
    assert f"classifier {spec!r} looks like a local path" in message and "does not exist" in message
    assert "did you mean 'models/minilm-clf'?" in message


def test_a_mistyped_lm_folder_fails_at_once(workdir):
    with pytest.raises(InputError, match=r"language model 'models/small_gpt' looks like a local path, and "
                                         r"models/small_gpt does not exist\. Fix: did you mean 'models/small-gpt'\?"):
        load_language_model("models/small_gpt")
    with pytest.raises(InputError, match=r"there is no folder nope"):
        load_language_model("./nope/x")
    with pytest.raises(InputError, match=r"'missing\.gguf' looks like a local path"):
        load_language_model("missing.gguf")
    (workdir / "judge-lm").mkdir()
    with pytest.raises(InputError, match="language model 'judge-lm/x' looks like a local path"):
        load_classifier("judge:judge-lm/x")


def test_a_mistyped_base_model_folder_fails_at_once(workdir):
    with pytest.raises(InputError, match="base model 'models/minilm' looks like a local path"):
        resolve_base_model("models/minilm")
    assert resolve_base_model("org/name") == ("org/name", "org/name")  # a hub id: left for transformers


def test_a_mistyped_sentence_encoder_folder_fails_at_once(workdir):
    from toxiforge.analysis.embeddings import load_encoder

    with pytest.raises(InputError, match=r"sentence encoder 'models/minilm-cl' looks like a local path, and "
                                         r"models/minilm-cl does not exist\. Fix: did you mean 'models/minilm-clf'\?"):
        load_encoder("models/minilm-cl")


def test_existing_folders_and_hub_ids_still_reach_their_loaders(workdir, monkeypatch):
    calls = []
    monkeypatch.setattr(HFClassifier, "load", lambda source, **kw: calls.append(str(source)))
    monkeypatch.setattr(TransformersLM, "load", lambda source, **kw: calls.append(str(source)))
    load_classifier("models/minilm-clf")
    load_classifier("org/name")
    load_language_model("./models/small-gpt")
    load_language_model("org/name")
    assert calls == ["models/minilm-clf", "org/name", "./models/small-gpt", "org/name"]
    assert _hf.local_model("models/minilm-clf", what="classifier") == Path("models/minilm-clf")
    assert _hf.local_model("org/name", what="classifier") is None


def test_a_mistyped_folder_in_the_cli_says_so(workdir):
    (workdir / "d.jsonl").write_text('{"generation": "placeholder sentence"}\n')
    result = CliRunner().invoke(app, ["classify", "d.jsonl", "-c", "models/minlm"])
    assert isinstance(result.exception, InputError), result.output
    assert "models/minlm does not exist" in str(result.exception)


def test_the_gguf_conversion_cache_is_keyed_by_content_not_path(tmp_path, monkeypatch):
    """Every virtual environment holds its own copy of the embedded GGUF; keyed by path, each got its own 0.5 GB
    conversion. Keyed by content, copies share one; a changed file gets a new one."""
    from toxiforge.models.transformers_lm import _gguf_cache_path

    monkeypatch.setenv("TOXIFORGE_CACHE", str(tmp_path / "cache"))  # not the shared converted-weights folder

    first, second, other = (tmp_path / d / "model.gguf" for d in ("venv-a", "venv-b", "venv-c"))
    for path, content in ((first, b"GGUF same bytes"), (second, b"GGUF same bytes"), (other, b"GGUF other bytes")):
        path.parent.mkdir()
        path.write_bytes(content)
    assert _gguf_cache_path(first) == _gguf_cache_path(second)
    assert _gguf_cache_path(first) != _gguf_cache_path(other)
    assert _gguf_cache_path(first).name.startswith("model-")


def test_the_gguf_content_key_is_remembered_until_the_file_changes(tmp_path, monkeypatch):
    import os

    from toxiforge._io import cache_dir
    from toxiforge.models.transformers_lm import _gguf_cache_path

    monkeypatch.setenv("TOXIFORGE_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "model.gguf"
    gguf.write_bytes(b"GGUF first bytes")
    first = _gguf_cache_path(gguf)
    assert (cache_dir() / "gguf-fp32" / "index.json").exists()
    assert _gguf_cache_path(gguf) == first
    gguf.write_bytes(b"GGUF other bytes")
    os.utime(gguf, ns=(1, 1))  # a new modification time: hashed again
    assert _gguf_cache_path(gguf) != first
