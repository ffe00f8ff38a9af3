"""Language-model backends behind one protocol, found by name through a small registry.

``load_language_model("smollm2-135m")`` loads the embedded default offline. Other names are resolved in order:
a registered embedded name (:data:`~toxiforge.models.embedded.EMBEDDED`, case-insensitive), a ``.gguf`` file, a
local model directory, a hub id (a missing path is an error at once, never a hub look-up:
:func:`toxiforge._hf.local_model`). ``openai:BASE_URL[#MODEL]`` is an OpenAI-compatible inference server
(:mod:`toxiforge.models.openai_lm`). Names are imported on first use, backends when a model is loaded.
"""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "DEFAULT_LM": "embedded:DEFAULT_LM", "EMBEDDED": "embedded:EMBEDDED", "EmbeddedModel": "embedded:EmbeddedModel",
    "DEFAULT_ENCODER": "embedded:DEFAULT_ENCODER", "embedded_encoder_dir": "embedded:embedded_encoder_dir",
    "LMSession": "base:LMSession", "LanguageModel": "base:LanguageModel", "Loglikelihood": "base:Loglikelihood",
    "RemoteSampler": "base:RemoteSampler", "API_PREFIX": "loader:API_PREFIX",
    "load_language_model": "loader:load_language_model",
})
