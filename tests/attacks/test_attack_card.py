"""An attack run writes a dataset card (README.md) that `datasets.load_dataset(RUN)` reads the rows with, counts
rows per group x label x family, gives the attack's settings and results, and holds no statement's text;
--overwrite replaces it."""

from __future__ import annotations

from test_attack_cli import TEXTS, attack_args, runner, setup  # noqa: F401  (setup is a fixture)

from toxiforge.cli import app


def test_an_attack_run_has_a_dataset_card_that_datasets_reads(setup, tmp_path, monkeypatch):  # noqa: F811
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq
    from huggingface_hub import DatasetCard

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    result = runner.invoke(app, attack_args(setup, out, "--max-edits", "2"))
    assert result.exit_code == 0, result.output
    card = DatasetCard.load(out / "README.md")
    meta = card.data.to_dict()
    assert "adversarial-attack" in meta["tags"] and meta["task_categories"] == ["text-classification"]
    assert meta["configs"][0]["data_files"] == [{"split": "train", "path": "data/*.parquet"}]
    table = pa.concat_tables(pq.read_table(p) for p in sorted((out / "data").glob("*.parquet")))
    toxic = sum(table.column("prompt_label").to_pylist())
    assert f"| - | toxic | obfuscate | {toxic} |" in card.text  # no groups in a plain table: None
    assert f"| - | benign | obfuscate | {len(TEXTS) - toxic} |" in card.text
    assert "## Attack: obfuscate" in card.text and "| `max_edits` | `2` |" in card.text
    assert "## Attack results" in card.text and f"| `rows` | `{len(TEXTS)}` |" in card.text
    assert "attacked classifier" in card.text and "**complete**" in card.text
    assert not any(text in card.content for text in TEXTS)

    ds = datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert ds.num_rows == table.num_rows == len(TEXTS)
    assert ds.column_names == table.column_names and ds.to_list() == table.to_pylist()

    again = runner.invoke(app, attack_args(setup, out, "--max-edits", "1", "--overwrite"))
    assert again.exit_code == 0, again.output
    assert "| `max_edits` | `1` |" in DatasetCard.load(out / "README.md").text
