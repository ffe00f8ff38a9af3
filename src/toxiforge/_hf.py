"""Settings every transformers-backed part shares (LMs, classifiers, the trainer, the sentence encoder): which
device and dtype to use, quiet transformers logging, and whether a model argument is a local path or a hub id.

Importing this module does not import torch (the path check runs before anything heavy loads)."""

from __future__ import annotations

import difflib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from toxiforge.errors import InputError

if TYPE_CHECKING:
    import torch

# dtype name -> torch attribute
DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
          "float16": "float16", "fp16": "float16"}
# Files a model argument may name: a GGUF for LMs, weights a user may point at instead of their folder.
MODEL_FILE_SUFFIXES = (".gguf", ".safetensors", ".bin", ".pt", ".pth", ".onnx", ".ckpt")
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9_.-]+$")  # owner/name, the hub's own rule


def resolve_device(device: str | torch.device | None) -> torch.device:
    """'auto'/None -> cuda when available, else cpu; 'cuda' without a GPU is an error."""
    import torch

    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise InputError("device 'cuda' was asked for but no CUDA GPU is visible", hint="use --device cpu or auto")
    return dev


def resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    """'auto'/None -> float32 on CPU, bfloat16 on a GPU that supports it."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype in (None, "auto"):
        if device.type == "cuda" and torch.cuda.is_bf16_supported():
            return torch.bfloat16
        return torch.float32
    try:
        return getattr(torch, DTYPES[str(dtype).lower()])
    except KeyError:
        raise InputError(f"unknown dtype {dtype!r}", hint="use auto, float32/fp32, bfloat16/bf16 or float16") from None


def quiet_transformers() -> None:
    """Turn off transformers' download progress bars and its warnings below ERROR (for clean CLI output)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()


def is_hub_id(spec: str) -> bool:
    """Whether ``spec`` has the hub's ``owner/name`` form (it may still be a local path: see :func:`local_model`)."""
    return bool(_HUB_ID.match(spec))


def looks_like_path(spec: str) -> bool:
    """Whether a model argument can only mean a local path: it starts with ``.``, ``~`` or ``/``, has a
    backslash or more than one ``/``, ends in ``/`` or a model-file suffix (:data:`MODEL_FILE_SUFFIXES`), or is
    ``owner/name`` whose ``owner`` is an existing local directory (``models/minlm`` beside a ``models/`` folder).
    Any other ``owner/name`` is a hub id."""
    if spec.startswith((".", "~", "/")) or "\\" in spec or spec.endswith("/") or spec.count("/") > 1:
        return True
    if spec.lower().endswith(MODEL_FILE_SUFFIXES):
        return True
    return "/" in spec and Path(spec.split("/", 1)[0]).is_dir()


def local_model(spec: str | Path, *, what: str) -> Path | None:
    """The local path a model argument names, None when it names no path (a registry name or a hub id, for the
    caller to resolve), or an :class:`~toxiforge.errors.InputError` when it looks like a path
    (:func:`looks_like_path`) that does not exist, so a mistyped folder fails at once instead of being looked
    up on the hub (which retries for half a minute without a network). ``what`` names the argument in the
    message ("classifier", "language model")."""
    text = str(spec)
    path = Path(text).expanduser()
    if path.exists():
        return path
    if not looks_like_path(text):
        return None
    hint = _nearest(path)
    if is_hub_id(text):  # owner/name read as a path because ./owner exists: say why
        hint += f" ({text} is read as a path, not a hub id, because a folder {text.split('/')[0]}/ exists here)"
    raise InputError(f"{what} {text!r} looks like a local path, and {_missing(path)}", hint=hint)


def _missing(path: Path) -> str:
    """``"models/minlm does not exist"``, naming the first missing folder when its parent is missing too."""
    missing = None
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        missing, parent = parent, parent.parent
    return f"{path} does not exist" + (f" (there is no folder {missing})" if missing is not None else "")


def _nearest(path: Path) -> str:
    """"did you mean" naming the existing siblings closest to ``path`` (folders, and files with a model-file
    suffix), or a plain "check the path"."""
    folder = path.parent
    try:
        siblings = sorted(p.name for p in folder.iterdir()
                          if not p.name.startswith(".")
                          and (p.is_dir() or p.name.lower().endswith(MODEL_FILE_SUFFIXES)))
    except OSError:
        return "check the path"
    close = difflib.get_close_matches(path.name, siblings, n=3, cutoff=0.6)
    if close:
        return "did you mean " + " or ".join(repr(str(folder / c)) for c in close) + "?"
    if siblings:
        shown = ", ".join(siblings[:8]) + (", ..." if len(siblings) > 8 else "")
        return f"check the path ({folder} holds {shown})"
    return "check the path"


__all__ = ["DTYPES", "MODEL_FILE_SUFFIXES", "is_hub_id", "local_model", "looks_like_path", "quiet_transformers",
           "resolve_device", "resolve_dtype"]
