"""toxiforge._hf: the device, dtype and logging settings shared by every transformers-backed part."""

from __future__ import annotations

import pytest
import torch

from toxiforge._hf import quiet_transformers, resolve_device, resolve_dtype
from toxiforge.errors import InputError


def test_resolve_dtype_names_and_auto():
    cpu = torch.device("cpu")
    assert resolve_dtype("auto", cpu) == torch.float32 and resolve_dtype(None, cpu) == torch.float32
    assert resolve_dtype("BF16", cpu) == torch.bfloat16 and resolve_dtype("fp16", cpu) == torch.float16
    assert resolve_dtype(torch.float64, cpu) == torch.float64
    with pytest.raises(InputError, match="unknown dtype 'int3'"):
        resolve_dtype("int3", cpu)


def test_resolve_device(monkeypatch):
    assert resolve_device("cpu") == torch.device("cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(InputError, match="no CUDA GPU"):
        resolve_device("cuda")


def test_quiet_transformers_sets_error_verbosity():
    from transformers.utils import logging as hf_logging

    before = hf_logging.get_verbosity()
    try:
        quiet_transformers()
        assert hf_logging.get_verbosity() == hf_logging.ERROR
    finally:
        hf_logging.set_verbosity(before)
        hf_logging.enable_progress_bar()
