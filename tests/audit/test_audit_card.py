"""`audit --model-card DIR` adds the audit's results for the classifier in DIR to its model card: model-index
metadata (huggingface_hub EvalResults) and an Audit section; a rerun replaces both and nothing else; a folder
without a card gets one; a folder that no -c is, is refused before scoring."""

from __future__ import annotations

from audit.test_audit_cli import _audit, _error, fakes, hatecheck, table  # noqa: F401 (fixtures)


def test_the_audit_goes_into_the_model_card_and_a_rerun_replaces_it(tmp_path, hatecheck, table, fakes):  # noqa: F811
    from huggingface_hub import ModelCard, ModelCardData

    model = tmp_path / "model"
    model.mkdir()
    ModelCard.from_template(ModelCardData(language=["en"], base_model="org/encoder", model_name="model"),
                            template_str="---\n{{ card_data }}\n---\n\n# model\n\nWritten at training.\n").save(
        model / "README.md")
    out = tmp_path / "audit"
    on = ["--on", f"hatecheck:{hatecheck}", "--on", f"T=table:{table}"]
    first = _audit("-c", "fake-good", "-c", f"mine={model}", *on, "-o", str(out), "--model-card", str(model))
    assert first.exit_code == 0, first.output
    card = ModelCard.load(model / "README.md")
    results = card.data.eval_results
    assert card.data.base_model == "org/encoder" and "Written at training." in card.text  # kept
    assert {(r.dataset_name, r.metric_type) for r in results} >= {("HateCheck", "roc_auc"), ("T", "accuracy"),
                                                                  ("HateCheck", "hatecheck_accuracy"), ("T", "f1")}
    assert all(r.task_type == "text-classification" and r.metric_args["by"] == "toxiforge audit" for r in results)
    report = __import__("json").loads((out / "report.json").read_text())
    auc = report["results"]["mine"]["HateCheck"]["accuracy"]["roc_auc"]
    (hc_auc,) = [r for r in results if r.dataset_name == "HateCheck" and r.metric_type == "roc_auc"]
    assert hc_auc.metric_value == round(auc["value"], 4) and hc_auc.dataset_type == "hatecheck"
    assert hc_auc.metric_args == {"by": "toxiforge audit", "low": round(auc["low"], 4), "high": round(auc["high"], 4)}
    assert "## Audit" in card.text and "| rows (toxic) | 48 (24) | 40 (20) |" in card.text
    assert f"{auc['value']:.3f} [{auc['low']:.3f}, {auc['high']:.3f}]" in card.text
    assert "Compared with `fake-good`" in card.text and f"`{out / 'report.html'}`" in card.text

    second = _audit("-c", f"mine={model}", "--on", f"T=table:{table}", "-o", str(out), "--overwrite",
                    "--model-card", str(model))
    assert second.exit_code == 0, second.output
    again = ModelCard.load(model / "README.md")
    assert again.text.count("## Audit") == 1 and "| rows (toxic) | 40 (20) |" in again.text
    assert "HateCheck accuracy" not in again.text and "Compared with" not in again.text
    assert {r.dataset_name for r in again.data.eval_results} == {"T"} and "Written at training." in again.text


def test_a_folder_without_a_card_gets_one_and_a_folder_no_c_names_is_refused(tmp_path, table, fakes):  # noqa: F811
    from huggingface_hub import ModelCard

    model = tmp_path / "model"
    model.mkdir()
    refused = _audit("-c", "fake-good", "--on", f"T=table:{table}", "-o", str(tmp_path / "a"),
                     "--model-card", str(model))
    assert "no -c is that folder" in _error(refused) and f"add -c {model}" in _error(refused)
    assert not fakes and not (model / "README.md").exists()  # refused before anything was scored
    done = _audit("-c", str(model), "--on", f"T=table:{table}", "-o", str(tmp_path / "b"), "--model-card", str(model))
    assert done.exit_code == 0, done.output
    card = ModelCard.load(model / "README.md")
    assert card.data.pipeline_tag == "text-classification" and card.data.model_name == "model"
    assert "## Audit" in card.text and {r.dataset_name for r in card.data.eval_results} == {"T"}
