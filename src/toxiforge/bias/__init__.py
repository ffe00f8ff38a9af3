"""Measure lexical and dialect bias the way Zhou et al. (EACL 2021) do: TOXTRIG word categories (NOI, OI, ONI),
AAE dialect estimation (Blodgett et al., 2016) and the dataset and classifier bias metrics of their Tables 1, 2
and 4, on any labelled data and any classifier.

Reusable pieces (issue 11's filtering and bias-only models build on them): :func:`tag_texts` and
:func:`count_terms` (per-category columns for a list of texts), :func:`predict_dialects` (p(AAE), p(Hispanic),
p(other), p(White-aligned) per text), :func:`measure_bias` (the metrics from arrays).

Reducing bias (issue 11): DataMaps (:class:`DataMapRecorder`, :func:`run_datamap`), AFLite (:func:`aflite`,
:func:`run_aflite`), the random baseline (:func:`random_subset`), bias-only models for LEARNED-MIXIN(+H)
(:data:`BIAS_ONLY`, :func:`bias_only_probabilities`), dialect-aware relabeling (:func:`relabel`) and Zhou et al.'s
comparison (:func:`run_debias_experiment`).
"""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "BiasLexicon": "lexicon:BiasLexicon",
    "CATEGORIES": "lexicon:CATEGORIES",
    "load_bias_lexicon": "lexicon:load_bias_lexicon",
    "default_bias_lexicon": "lexicon:default_bias_lexicon",
    "read_lexicon_file": "lexicon:read_lexicon_file",
    "normalize_text": "lexicon:normalize_text",
    "tag_texts": "lexicon:tag_texts",
    "count_terms": "lexicon:count_terms",
    "DIALECTS": "dialect:DIALECTS",
    "DialectModel": "dialect:DialectModel",
    "load_dialect_model": "dialect:load_dialect_model",
    "predict_dialects": "dialect:predict_dialects",
    "aae_probability": "dialect:aae_probability",
    "BiasReport": "metrics:BiasReport",
    "measure_bias": "metrics:measure_bias",
    "measure_data": "measure:measure_data",
    "write_outputs": "measure:write_outputs",
    "fetch_resource": "fetch:fetch_resource",
    "TOXTRIG_SOURCE": "fetch:TOXTRIG",
    "TWITTERAAE_SOURCE": "fetch:TWITTERAAE",
    "DataMapRecorder": "datamaps:DataMapRecorder",
    "run_datamap": "datamaps:run_datamap",
    "AFLiteConfig": "aflite:AFLiteConfig",
    "aflite": "aflite:aflite",
    "run_aflite": "aflite:run_aflite",
    "random_subset": "subsets:random_subset",
    "BIAS_ONLY": "bias_only:BIAS_ONLY",
    "bias_only_probabilities": "bias_only:bias_only_probabilities",
    "relabel": "relabel:relabel",
    "DebiasSettings": "experiment:DebiasSettings",
    "run_debias_experiment": "experiment:run_debias_experiment",
})
