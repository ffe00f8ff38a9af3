"""Settings every transformers-backed part shares (LMs, classifiers, the trainer, the sentence encoder): which
device and dtype to use, and quiet transformers logging."""

from __future__ import annotations

import torch

from toxiforge.errors import InputError

DTYPES = {"float32": torch.float32, "fp32": torch.float32, "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
          "float16": torch.float16, "fp16": torch.float16}


def resolve_device(device: str | torch.device | None) -> torch.device:
    """'auto'/None -> cuda when available, else cpu; 'cuda' without a GPU is an error."""
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("device 'cuda' was asked for but no CUDA GPU is visible", hint="use --device cpu or auto")
    return dev


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """'auto'/None -> float32 on CPU, bfloat16 on a GPU that supports it."""
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    try:
        return DTYPES[str(dtype).lower()]
    except KeyError:
        raise InputError(f"unknown dtype {dtype!r}", hint="use auto, float32/fp32, bfloat16/bf16 or float16") from None


def quiet_transformers() -> None:
    """Turn off transformers' download progress bars and its warnings below ERROR (for clean CLI output)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
