"""Benchmark language models with ToxiGen: % toxic continuations per group, and HumanVal classification."""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "CHOICES": "classify:CHOICES",
    "PROMPT": "classify:PROMPT",
    "ClassifyResult": "classify:ClassifyResult",
    "classify_requests": "classify:classify_requests",
    "demonstration_examples": "classify:demonstration_examples",
    "run_classify": "classify:run_classify",
    "GenerateConfig": "generate:GenerateConfig",
    "GenerateResult": "generate:GenerateResult",
    "run_generate": "generate:run_generate",
    "compare_results": "report:compare_results",
    "load_result": "report:load_result",
})
