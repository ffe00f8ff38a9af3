"""``toxiforge audit --model-card DIR``: the audit's results for the classifier in ``DIR`` added to its model card
(``DIR/README.md``, :mod:`toxiforge.training.card` writes it at training), in the Hugging Face Hub's conventions.

* ``model-index`` metadata: one ``huggingface_hub.EvalResult`` per dataset x metric (task text-classification;
  the dataset's name, and as its type the Hub id of the published set it is (``Paul/hatecheck``,
  ``tdavidson/hate_speech_offensive``, ``toxigen/toxigen-data``, :func:`~toxiforge.data.registry.hub_dataset_id`)
  or :data:`LOCAL_TYPE` for a local set; ROC AUC, average precision, accuracy, F1, FPR, FNR, FPR at 95% TPR,
  Jigsaw's final score, HateCheck's accuracy, ECE, Brier), ``metric_args`` the interval and
  ``by: toxiforge audit``;
* a Markdown section "Audit": a short opening, then one block per dataset: its rows, the settings, a table with the
  95% intervals, the comparison with the first classifier when this one is not it, and where the full report is.

A rerun on the same dataset replaces its results and its block; a rerun on other datasets adds theirs, and keeps
those of the earlier datasets (the section and its blocks sit between markers, :func:`toxiforge.cards.blocks`);
nothing else on the card changes. A folder without a card gets a short one. The classifier is the ``-c`` whose
spec is ``DIR`` (:func:`card_classifier`, checked before any scoring).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from toxiforge.audit.run import ClassifierSpec
from toxiforge.cards import CARD_FILE, block, blocks, make_card, replace_section, table, write_card
from toxiforge.errors import InputError

SOURCE_NAME = "toxiforge audit"
SECTION = "audit"
BLOCK = "audit/"  # a dataset's block within the section: BLOCK + its name
# model-index dataset.type of a set that is no published Hub dataset (a local table, a toxiforge run)
LOCAL_TYPE = "local"
# (section, key in report.json, model-index metric type, metric name); lower is better for the last five
METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("accuracy", "roc_auc", "roc_auc", "ROC AUC"), ("accuracy", "pr_auc", "average_precision",
                                                    "average precision (PR AUC)"),
    ("accuracy", "accuracy", "accuracy", "accuracy"), ("accuracy", "f1", "f1", "F1"),
    ("groups", "final_score", "jigsaw_final_score", "Jigsaw bias final score"),
    ("hatecheck", "overall", "hatecheck_accuracy", "HateCheck accuracy"),
    ("accuracy", "fpr", "false_positive_rate", "false positive rate"),
    ("accuracy", "fnr", "false_negative_rate", "false negative rate"),
    ("accuracy", "fpr_at_95_tpr", "fpr_at_95_tpr", "FPR at 95% TPR"),
    ("calibration", "ece", "expected_calibration_error", "expected calibration error"),
    ("calibration", "brier", "brier_score", "Brier score"),
)


def same_folder(spec: str, folder: str | Path) -> bool:
    path = Path(spec).expanduser()
    return path.is_dir() and path.resolve() == Path(folder).expanduser().resolve()


def card_classifier(classifiers: Sequence[ClassifierSpec], folder: str | Path) -> ClassifierSpec:
    """The audited classifier whose spec is the model folder ``folder``; an InputError with the fix when ``folder``
    is no folder or no ``-c`` names it."""
    if not Path(folder).expanduser().is_dir():
        raise InputError("--model-card: no such model folder", path=folder,
                         hint="pass the folder of a classifier you audit with -c (e.g. one toxiforge train wrote)")
    found = [c for c in classifiers if same_folder(c.spec, folder)]
    if not found:
        raise InputError(f"--model-card {folder}: no -c is that folder (audited: "
                         f"{', '.join(c.spec for c in classifiers)})",
                         hint=f"add -c {folder} (or -c NAME={folder}), or pass --model-card the folder of an "
                              "audited classifier")
    return found[0]


def _value(sections: Mapping[str, Any], section: str, key: str) -> Mapping[str, Any] | None:
    block = sections.get(section)
    estimate = block.get(key) if isinstance(block, Mapping) else None
    return estimate if isinstance(estimate, Mapping) and estimate.get("value") is not None else None


def _interval(estimate: Mapping[str, Any]) -> dict[str, Any]:
    """A result's ``metric_args``: who measured it (what a rerun replaces) and its 95% interval. (The
    model-index's ``source_name`` would need a ``source_url``.)"""
    low, high = estimate.get("low"), estimate.get("high")
    interval = {"low": round(low, 4), "high": round(high, 4)} if low is not None and high is not None else {}
    return {"by": SOURCE_NAME, **interval}


def _ours(result: Any) -> bool:
    return (result.metric_args or {}).get("by") == SOURCE_NAME


def eval_results(report: Mapping[str, Any], name: str) -> list[Any]:
    """The ``model-index`` entries of classifier ``name`` in ``report`` (report.json's dict)."""
    from huggingface_hub import EvalResult

    from toxiforge.data.registry import hub_dataset_id

    out = []
    for data in report["datasets"]:
        sections = report["results"][name][data["name"]]
        for section, key, metric_type, metric_name in METRICS:
            estimate = _value(sections, section, key)
            if estimate is None:
                continue
            out.append(EvalResult(task_type="text-classification", task_name="toxicity classification",
                                  dataset_type=hub_dataset_id(data["layout"]) or LOCAL_TYPE,
                                  dataset_name=data["name"], metric_type=metric_type,
                                  metric_value=round(float(estimate["value"]), 4), metric_name=metric_name,
                                  metric_args=_interval(estimate)))
    return out


def _cell(estimate: Mapping[str, Any] | None) -> str:
    if estimate is None:
        return "n/a"
    low, high = estimate.get("low"), estimate.get("high")
    interval = f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else ""
    return f"{estimate['value']:.3f}{interval}"


INTRO = ("## Audit\n\n"
         "`toxiforge audit` of this classifier, one block per dataset: point values with intervals (Wilson for "
         "proportions, bootstrap for the rest). Lower is better for the rates, ECE and Brier; higher for the rest. "
         "An audit on another dataset adds its block; one on the same dataset replaces it.")


def _block_name(dataset: str) -> str:
    """The marker name of ``dataset``'s block (no ``--`` or line break, which would end the HTML comment)."""
    return BLOCK + " ".join(dataset.split()).replace("--", "-")


def dataset_block(report: Mapping[str, Any], name: str, data: Mapping[str, Any], report_dir: str | Path) -> str:
    """The card's block for classifier ``name`` on one dataset of ``report``: rows, settings, the table with the
    intervals, the comparison with the first classifier, where the full report is."""
    from toxiforge.data.registry import hub_dataset_id

    settings = report["settings"]
    sections = report["results"][name][data["name"]]
    hub = hub_dataset_id(data["layout"])
    where = f"Hub dataset `{hub}`" if hub else f"a local set ({data['layout']})"
    rows = [(label, _cell(_value(sections, section, key))) for section, key, _, label in METRICS
            if _value(sections, section, key) is not None]
    lines = [f"### {data['name']}",
             f"{data['n']} rows ({data['toxic']} toxic), {where}; `-c {name}`; {settings['level']:.0%} intervals "
             f"(bootstrap {settings['bootstrap']} resamples, seed {settings['seed']}); decision rule P(toxic) > "
             f"{settings['threshold']}.",
             table(("metric", f"value [{settings['level']:.0%} interval]"), rows)]
    first = report["classifiers"][0]["name"]
    verdicts = report.get("comparison", {}).get(data["name"], {}).get(name, {}) if name != first else {}
    if verdicts:
        lines.append(f"Compared with `{first}` (paired intervals): "
                     + ", ".join(f"{section} {v['verdict']}" for section, v in verdicts.items()) + ".")
    lines.append(f"The full report (groups, HateCheck's functional tests, lexical and dialect bias, calibration, "
                 f"figures and definitions) is `report.html` (also `report.md`, and `report.json` with every number) "
                 f"in the audit's output folder `{report_dir}`.")
    return "\n\n".join(lines)


def audit_section(report: Mapping[str, Any], name: str, report_dir: str | Path, earlier: str = "") -> str:
    """The card's "Audit" section for classifier ``name``: the blocks of ``earlier`` (the section the card has)
    for datasets ``report`` does not have, then a block per dataset of ``report``."""
    kept = {k: v for k, v in blocks(earlier, BLOCK).items()
            if k not in {_block_name(d["name"]) for d in report["datasets"]}}
    kept |= {_block_name(d["name"]): dataset_block(report, name, d, report_dir) for d in report["datasets"]}
    return "\n\n".join([INTRO, *(block(k, v) for k, v in kept.items())])


def add_audit_to_card(folder: str | Path, report: Mapping[str, Any], name: str, report_dir: str | Path) -> Path:
    """Add (or replace) the audit's ``model-index`` results and blocks on ``folder``'s model card, per dataset
    (the other datasets' stay); a folder without a card gets a short one."""
    from huggingface_hub import ModelCard, ModelCardData

    folder = Path(folder)
    path = folder / CARD_FILE
    if path.is_file():
        card = ModelCard.load(path)
        data, text = card.data, card.text
    else:
        data = ModelCardData(language=["en"], library_name="transformers", pipeline_tag="text-classification",
                             tags=["toxiforge", "toxicity"])
        text = (f"# {folder.name}\n\nA toxicity classifier. This card was started by `toxiforge audit "
                "--model-card`; describe the model, its base model and its training data above the audit.")
    earlier = blocks(text, SECTION).get(SECTION, "")
    # the results of an earlier audit stay for the datasets this one did not audit and whose block the card has
    shown, new = set(blocks(earlier, BLOCK)), {d["name"] for d in report["datasets"]}
    kept = [r for r in (data.eval_results or [])
            if not _ours(r) or (r.dataset_name not in new and _block_name(r.dataset_name) in shown)]
    section = audit_section(report, name, report_dir, earlier)
    data.eval_results = [*kept, *eval_results(report, name)] or None
    data.model_name = data.model_name or folder.name
    body = replace_section(text, SECTION, section)
    return write_card(make_card(ModelCard, data, [body.strip()]), folder)


def update_model_card(result: Any, folder: str | Path, report_dir: str | Path) -> Path:
    """:func:`add_audit_to_card` for an :class:`~toxiforge.audit.run.AuditResult` (its report.json dict), for the
    classifier whose spec is ``folder``."""
    from toxiforge.audit.report import plain, to_json

    spec = card_classifier(result.classifiers, folder)
    return add_audit_to_card(folder, plain(to_json(result)), spec.name, report_dir)
