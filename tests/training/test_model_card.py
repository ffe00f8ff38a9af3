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
    assert (f"```bash\ntoxiforge train --data {run} --out {out} --base-model {base_dir} --epochs 2.0 --batch-size 8 "
            "--learning-rate 0.003 --max-length 16 --seed 3 --device cpu --no-progress\n```") in text
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
    assert "Warning from training: trained on only 10 rows" in card.text
    assert "No command was recorded" in card.text


def test_the_base_model_id_comes_from_the_hub_id_or_the_base_folders_card(tmp_path):
    assert base_model_id({"base_model": "roberta-large", "base_model_source": "roberta-large"}) == "roberta-large"
    (tmp_path / "README.md").write_text("---\nbase_model: org/encoder\nlicense: mit\n---\n\n# round 1\n")
    assert base_model_id({"base_model": str(tmp_path), "base_model_source": str(tmp_path)}) == "org/encoder"
    card = model_card({"base_model": str(tmp_path), "base_model_source": str(tmp_path)})
    assert card.data.to_dict()["license"] == "mit"
