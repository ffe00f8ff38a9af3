"""Each classifier a harden round trains gets a model card (README.md) whose data lists the base data and every
round's additions and whose command trains the same model with `toxiforge train`."""

from __future__ import annotations


def test_a_rounds_classifier_has_a_model_card_with_its_data_and_train_command(setup, finished):
    from huggingface_hub import ModelCard

    _, out = finished
    card = ModelCard.load(out / "round-1" / "alice" / "model" / "README.md")
    added = out / "round-1" / "alice" / "added.jsonl"
    assert card.data.to_dict()["pipeline_tag"] == "text-classification"
    # the rows it trained on (issue 56 #7): --data less the guard slice (issue 48) and the additions, not --data
    # itself; local paths by their names (issue 56 #9)
    data = "table:data-less-guard-slice.jsonl"
    assert f"`{data}`" in card.text and f"`table:{added.name}`" in card.text
    assert f"`{setup['data'].name}`" not in card.text
    assert f"toxiforge train --data {data} --data table:{added.name} -o model" in card.text
    assert str(out) not in card.content
    assert "Content warning" in card.text and "placeholder sentence" not in card.content
