"""toxiforge.classifiers.fingerprint: one content fingerprint of what decides a classifier's scores (weights, config,
tokenizer), read whole whatever the size, and not moved by a README, a log or a checkpoint; names have none."""

from __future__ import annotations

import os
import shutil

import pytest

from toxiforge.classifiers import fingerprint as fp
from toxiforge.classifiers.fingerprint import fingerprint, same_classifier

BIG = 3 << 20   # weights larger than the 1 MiB the audit's old digest read by content


def model_folder(root, weights: bytes = b"\1" * BIG):
    root.mkdir()
    (root / "model.safetensors").write_bytes(weights)
    (root / "config.json").write_text('{"id2label": {"0": "benign", "1": "toxic"}}')
    (root / "tokenizer.json").write_text('{"vocab": ["a", "b"]}')
    (root / "tokenizer_config.json").write_text("{}")
    return root


def rewrite_keeping_size_and_mtime(path, data: bytes):
    st = path.stat()
    assert len(data) == st.st_size
    path.write_bytes(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_files_that_decide_scores_change_it_and_others_do_not(tmp_path):
    folder = model_folder(tmp_path / "m")
    first = fingerprint(folder)
    assert first is not None and first.startswith(fp.PREFIX)
    (folder / "README.md").write_text("a model card, as audit --model-card writes it\n")
    (folder / "training_log.json").write_text("{}")
    (folder / "checkpoint-10").mkdir()
    (folder / "checkpoint-10" / "model.safetensors").write_bytes(b"\2" * 10)
    assert fingerprint(folder) == first == fingerprint(f"{folder.parent}/./{folder.name}")
    for name, text in (("config.json", '{"id2label": {"0": "toxic", "1": "benign"}}'),
                       ("tokenizer.json", '{"vocab": ["a", "c"]}'), ("special_tokens_map.json", "{}")):
        (folder / name).write_text(text)
        assert fingerprint(folder) != first, name
        first = fingerprint(folder)


def test_weights_over_1_mib_replaced_with_the_same_size_and_mtime_change_it(tmp_path):
    folder = model_folder(tmp_path / "m")
    before = fingerprint(folder)
    rewrite_keeping_size_and_mtime(folder / "model.safetensors", b"\1" * (BIG - 1) + b"\2")
    fp._FILE_DIGESTS.clear()   # as a new process sees it (tests/audit/test_audit_score_cache.py: this process)
    assert fingerprint(folder) != before


def test_kinds_files_and_names(tmp_path):
    folder = model_folder(tmp_path / "m")
    assert fingerprint(f"judge:{folder}") != fingerprint(folder)   # the same folder as a judge scores otherwise
    gguf = tmp_path / "lm.gguf"
    gguf.write_bytes(b"GGUF" + b"\0" * 100)
    judge = fingerprint(f"judge:{gguf}")
    gguf.write_bytes(b"GGUF" + b"\1" * 100)
    assert judge is not None and fingerprint(f"judge:{gguf}") != judge
    for name in ("profanity-check", "toxigen-roberta", "owner/model", "judge:openai:http://127.0.0.1:8000/v1#guard",
                 "judge:smollm2-135m"):
        assert fingerprint(name) is None


def test_same_classifier_compares_weights_by_content(tmp_path):
    folder = model_folder(tmp_path / "m")
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    (copy / "README.md").write_text("its own card\n")
    other = model_folder(tmp_path / "other", b"\3" * BIG)
    assert same_classifier(folder, copy) and same_classifier("toxigen-roberta", "toxigen-roberta")
    assert not same_classifier(folder, other) and not same_classifier(folder, f"judge:{folder}")
    assert not same_classifier(folder, "toxigen-roberta")


@pytest.mark.parametrize(("spec", "options"), [("profanity-check", {}),
                                               ("judge:openai:http://127.0.0.1:8000/v1#guard", {"template": "t"})])
def test_the_audit_digests_names_as_before(spec, options):
    """Non-folder classifiers keep their identity, and so their cached scores: b0be6af's formula."""
    import hashlib
    import json

    from toxiforge.audit.scores import DIGEST_CHARS, classifier_digest

    before = hashlib.sha256(json.dumps({"spec": spec, "options": options}).encode()).hexdigest()
    assert classifier_digest(spec, {**options, "concurrency": 4}) == before[:DIGEST_CHARS]
