"""harden.json's record of -c is the classifier's content fingerprint, the audit's (issue 56, item 6): the weights,
config and tokenizer, not the README; a run recorded by weight files alone (before) is refused on --resume with that
reason, not as "retrained". No model is loaded: a folder of placeholder files stands in."""

from __future__ import annotations

import json

import pytest

from toxiforge.decoding import decoder_config
from toxiforge.errors import InputError
from toxiforge.harden.config import AttackPlan, HardenConfig
from toxiforge.harden.guard import SETTINGS_FILE, check_out_dir


def config_of(folder) -> HardenConfig:
    return HardenConfig(1, AttackPlan(("asian",)), decoder_config("alice", {}), decoder_config("top-k", {}),
                        data=("placeholder.csv",), classifier=str(folder))


@pytest.fixture
def folder(tmp_path):
    folder = tmp_path / "c0"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"],
                                                    "id2label": {"0": "benign", "1": "toxic"}}))
    (folder / "model.safetensors").write_bytes(b"\1" * 4096)
    (folder / "tokenizer.json").write_text('{"vocab": ["a"]}')
    return folder


def test_harden_records_what_decides_the_scores(folder):
    from toxiforge.audit.scores import classifier_digest

    first = config_of(folder).fingerprint()["weights"]["classifier"]
    audit_key = classifier_digest(str(folder), {})
    (folder / "README.md").write_text("# c0\n\nA model card.\n")
    (folder / "training_log.json").write_text("{}")
    assert config_of(folder).fingerprint()["weights"]["classifier"] == first
    assert classifier_digest(str(folder), {}) == audit_key
    (folder / "config.json").write_text(json.dumps({"architectures": ["BertForSequenceClassification"],
                                                    "id2label": {"0": "toxic", "1": "benign"}}))  # labels swapped
    assert config_of(folder).fingerprint()["weights"]["classifier"] != first
    assert classifier_digest(str(folder), {}) != audit_key


def test_a_run_recorded_by_weight_files_alone_is_refused_with_that_reason(folder, tmp_path):
    settings = config_of(folder).fingerprint()
    out = tmp_path / "h"
    out.mkdir()
    old = {**settings, "weights": {"classifier": "ab" * 32, "validate_with": None}}   # a bare SHA-256, as before
    (out / SETTINGS_FILE).write_text(json.dumps({"settings": old, "rounds": 1}))
    with pytest.raises(InputError, match="by their weight files alone") as refused:
        check_out_dir(out, settings, resume=True)
    assert "-c" in str(refused.value) and "new -o" in refused.value.hint
    (out / SETTINGS_FILE).write_text(json.dumps({"settings": settings, "rounds": 1}))
    check_out_dir(out, settings, resume=True)   # the same fingerprint: resumes
