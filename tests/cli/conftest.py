"""Fixtures of the command-line tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def model_dir(tiny_llama_dir):
    """The model directory `--model DIR` takes in these tests: the tiny random Llama."""
    return tiny_llama_dir
