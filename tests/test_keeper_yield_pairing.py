"""benchmarks/alice_keeper_yield.py's --classifier-runtime methods and the check that makes its paired intervals
paired: rows of one (label, index) must answer the same prompt in every method (issue 57 item 1). No model."""

from __future__ import annotations

import argparse

import pytest

from conftest import load_benchmark


@pytest.fixture(scope="module")
def script():
    return load_benchmark("alice_keeper_yield")


def test_runtime_methods_follow_and_skip_leaves_out(script):
    args = argparse.Namespace(lambda_keep=[0.5], skip=["top-k", "keeper"],
                              classifier_runtime=["torch", "onnx-int8", "torch-int8"])
    assert [k for k, _ in script.method_keys(args)] == ["ALICE", "ALICE (runtime onnx-int8)",
                                                         "ALICE (runtime torch-int8)"]
    args = argparse.Namespace(lambda_keep=[0.5, 2.0], skip=[], classifier_runtime=[])
    assert script.method_keys(args) == [("top-k", None), ("ALICE", None), ("ALICE+K λK=0.5", 0.5),
                                        ("ALICE+K λK=2", 2.0)]


def row(method, label, index, prompt, text):
    return {"method": method, "label": label, "index": index, "prompt_sha1": prompt, "text": text}


def test_pairs_only_rows_that_answer_the_same_prompt(script):
    rows = [row("ALICE", 0, 0, "a", "x"), row("ALICE (runtime onnx-int8)", 0, 0, "a", "x"),
            row("ALICE", 1, 0, "b", "y"), row("ALICE (runtime onnx-int8)", 1, 0, "b", "z"),
            {"method": "ALICE", "label": 0, "index": 1, "text": "old row, no hash"}]
    assert script.check_prompts(rows) == 2
    assert script.same_text(rows, "ALICE (runtime onnx-int8)") == "1/2"
    rows.append(row("ALICE (runtime torch-int8)", 1, 0, "c", "y"))
    with pytest.raises(SystemExit, match=r"different prompts at \(label, index\) \[\(1, 0\)\]"):
        script.check_prompts(rows)
