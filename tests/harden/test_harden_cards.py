"""Each classifier a harden round trains gets a model card (README.md) whose data lists the base data and every
round's additions and whose command trains the same model with `toxiforge train`."""

from __future__ import annotations

from test_harden import finished, setup, varied_lm  # noqa: F401  (fixtures)


def test_a_rounds_classifier_has_a_model_card_with_its_data_and_train_command(setup, finished):  # noqa: F811
    from huggingface_hub import ModelCard

    _, out = finished
    card = ModelCard.load(out / "round-1" / "alice" / "model" / "README.md")
    added = out / "round-1" / "alice" / "added.jsonl"
    assert card.data.to_dict()["pipeline_tag"] == "text-classification"
    data = f"table:{out / 'data-less-guard-slice.jsonl'}"  # --data less the guard slice (issue 48)
    # the rows it trained on (issue 56): --data less the slice, and the additions; not --data itself
    assert f"`{data}`" in card.text and f"`table:{added}`" in card.text and f"`{setup['data']}`" not in card.text
    assert f"toxiforge train --data {data} --data table:{added} -o {out / 'round-1' / 'alice' / 'model'}" in card.text
    assert "Content warning" in card.text and "placeholder sentence" not in card.content
