"""`audit --model-card DIR` adds the audit's results for the classifier in DIR to its model card: model-index
metadata (huggingface_hub EvalResults) and an Audit section with a block per dataset; a rerun replaces the results
and blocks of the datasets it audits, keeps the others' and changes nothing else; a folder without a card gets one;
a folder that no -c is, is refused before scoring."""

from __future__ import annotations

from audit.test_audit_cli import _audit, _error, fakes, hatecheck, table  # noqa: F401 (fixtures)


def test_the_audit_goes_into_the_model_card_and_a_rerun_adds_to_it(tmp_path, hatecheck, table, fakes):  # noqa: F811
    from huggingface_hub import ModelCard, ModelCardData, metadata_load

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
    assert hc_auc.metric_value == round(auc["value"], 4)
    assert hc_auc.metric_args == {"by": "toxiforge audit", "low": round(auc["low"], 4), "high": round(auc["high"], 4)}
    # issue 56 #9: the Hub's dataset id as the type (it was `hatecheck`), `local` for a local set; model_name kept
    assert {(r.dataset_name, r.dataset_type) for r in results} == {("HateCheck", "Paul/hatecheck"), ("T", "local")}
    assert metadata_load(model / "README.md")["model_name"] == "model"
    assert "## Audit" in card.text and "48 rows (24 toxic), Hub dataset `Paul/hatecheck`" in card.text
    assert "40 rows (20 toxic), a local set (table)" in card.text
    assert f"{auc['value']:.3f} [{auc['low']:.3f}, {auc['high']:.3f}]" in card.text
    assert "Compared with `fake-good`" in card.text and "in the audit's output folder `audit`" in card.text
    assert str(tmp_path) not in card.content  # no absolute local path (the report's was there)

    # issue 56 #7: a rerun on another dataset set replaces T's results and keeps HateCheck's
    second = _audit("-c", f"mine={model}", "--on", f"T=table:{table}", "-o", str(tmp_path / "audit2"),
                    "--model-card", str(model))
    assert second.exit_code == 0, second.output
    again = ModelCard.load(model / "README.md")
    assert again.text.count("## Audit") == 1 and again.text.count("### T") == again.text.count("### HateCheck") == 1
    kept = [(r.dataset_name, r.metric_type, r.metric_value) for r in again.data.eval_results]
    assert [k for k in kept if k[0] == "HateCheck"] == [(r.dataset_name, r.metric_type, r.metric_value)
                                                        for r in results if r.dataset_name == "HateCheck"]
    assert sorted(k[1] for k in kept if k[0] == "T") == sorted(r.metric_type for r in results if r.dataset_name == "T")
    hatecheck_block, t_block = (again.text.split("### HateCheck")[1].split("<!--")[0],
                                again.text.split("### T")[1].split("<!--")[0])
    assert "Compared with `fake-good`" in hatecheck_block and "output folder `audit`" in hatecheck_block
    assert "Compared with" not in t_block and "output folder `audit2`" in t_block
    assert "Written at training." in again.text and metadata_load(model / "README.md")["model_name"] == "model"


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
