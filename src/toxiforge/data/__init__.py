"""Labelled data for training and evaluating toxicity classifiers, as plain :class:`Example` rows.

Loaders (each from a local file; most also from the usual online source when the path is None):

* :func:`load_toxigen_annotated` -- ToxiGen's human-annotated data (test split = ToxiGen-HumanVal), label rule
  ``sum`` (upstream) or ``max`` (the paper);
* :func:`load_generated` -- ToxiGen's ``train`` layout and toxiforge's own output (``prompt_label`` as the label);
* :func:`load_sbf`, :func:`load_ihc`, :func:`load_dynahate` -- SocialBiasFrames, the Implicit Hate Corpus and
  DynaHate in their published column layouts;
* :func:`load_hatecheck` -- HateCheck's functional tests (the test name kept per row in ``Example.meta``);
* :func:`load_davidson` -- Davidson et al. 2017's tweets, label rule ``toxic`` (hate or offensive) or ``hate``;
* :func:`load_table` -- any CSV/TSV/JSONL/Parquet with named text and label columns;
* :func:`load_spec` -- a command-line spec ``[NAME=][KIND:]PATH`` (layout detected from the columns when no
  KIND is given).
"""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "load_dynahate": "benchmarks:load_dynahate", "load_ihc": "benchmarks:load_ihc", "load_sbf": "benchmarks:load_sbf",
    "load_davidson": "davidson:load_davidson", "DAVIDSON_RULES": "davidson:DAVIDSON_RULES",
    "load_hatecheck": "hatecheck:load_hatecheck",
    "Example": "examples:Example", "LabeledData": "examples:LabeledData",
    "normalize_method": "examples:normalize_method", "read_any_table": "examples:read_any_table",
    "KINDS": "registry:KINDS", "detect_layout": "registry:detect_layout", "load_spec": "registry:load_spec",
    "load_specs": "registry:load_specs", "parse_spec": "registry:parse_spec",
    "split_option": "registry:split_option", "split_sample": "registry:split_sample",
    "sample_data": "registry:sample_data", "check_column_options": "registry:check_column_options",
    "hub_dataset_id": "registry:hub_dataset_id",
    "load_table": "tables:load_table",
    "LABEL_RULES": "toxigen:LABEL_RULES", "annotated_label": "toxigen:annotated_label",
    "load_generated": "toxigen:load_generated", "load_toxigen_annotated": "toxigen:load_toxigen_annotated",
})
