"""Labelled data for training and evaluating toxicity classifiers, as plain :class:`Example` rows.

Loaders (each from a local file; most also from the usual online source when the path is None):

* :func:`load_toxigen_annotated` -- ToxiGen's human-annotated data (test split = ToxiGen-HumanVal), label rule
  ``sum`` (upstream) or ``max`` (the paper);
* :func:`load_generated` -- ToxiGen's ``train`` layout and toxiforge's own output (``prompt_label`` as the label);
* :func:`load_sbf`, :func:`load_ihc`, :func:`load_dynahate` -- SocialBiasFrames, the Implicit Hate Corpus and
  DynaHate in their published column layouts;
* :func:`load_table` -- any CSV/TSV/JSONL/Parquet with named text and label columns;
* :func:`load_spec` -- a command-line spec ``[NAME=][KIND:]PATH`` (layout detected from the columns when no
  KIND is given).
"""

from toxiforge.data.benchmarks import load_dynahate, load_ihc, load_sbf
from toxiforge.data.examples import Example, LabeledData, normalize_method, read_any_table
from toxiforge.data.registry import KINDS, detect_layout, load_spec, load_specs, parse_spec
from toxiforge.data.tables import load_table
from toxiforge.data.toxigen import LABEL_RULES, annotated_label, load_generated, load_toxigen_annotated

__all__ = ["KINDS", "LABEL_RULES", "Example", "LabeledData", "annotated_label", "detect_layout", "load_dynahate",
           "load_generated", "load_ihc", "load_sbf", "load_spec", "load_specs", "load_table",
           "load_toxigen_annotated", "normalize_method", "parse_spec", "read_any_table"]
