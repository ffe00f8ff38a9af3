"""Every generation run writes a dataset card (README.md) in the Hub's conventions: `datasets.load_dataset(RUN)`
reads the rows as they are, the card counts rows per group x label x method and holds no statement's text, and an
interrupted run's card says incomplete until --resume completes it."""

from __future__ import annotations

import pytest
from test_pipeline import FAST, demos, plan_for  # noqa: F401  (demos is a fixture)

from toxiforge.pipeline import JobConfig, RunInterrupted, run_generation
from toxiforge.records import read_rows


def load_card(out):
    from huggingface_hub import DatasetCard

    return DatasetCard.load(out / "README.md")


def test_a_generation_run_loads_with_datasets_as_written(tiny_lm, demos, tmp_path, monkeypatch):  # noqa: F811
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    run_generation(plan_for(demos, n=3), tiny_lm, out, decoder=FAST, config=JobConfig(shard_size=5), progress=False)
    card = load_card(out)
    meta = card.data.to_dict()
    assert meta["configs"] == [{"config_name": "default",
                                "data_files": [{"split": "train", "path": "data/*.parquet"}]}]
    assert meta["license"] == "other" and meta["license_name"] == "toxiforge-generated"
    assert meta["language"] == ["en"] and meta["task_categories"] == ["text-classification"]
    assert meta["size_categories"] == ["n<1K"] and "toxiforge" in meta["tags"]
    assert "| asian | toxic | top-k | 3 |" in card.text and "| mexican | benign | top-k | 3 |" in card.text
    assert "**complete** (12 rows" in card.text and "Content warning" in card.text
    assert "Every row is machine-generated" in card.text and "`tiny-llama`" in card.text
    assert "| `top_k` | `40` |" in card.text  # the decoding settings
    # issue 56 #9: the prompts' folder was named by its absolute path
    assert "| `source` | `demonstrations` |" in card.text and str(tmp_path) not in card.content
    rows = read_rows(out)
    assert "placeholder" not in card.content  # the prompts' demonstrations
    assert not any(r.generation in card.content for r in rows if len(r.generation) > 12)

    ds = datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "hf-cache"))
    table = pa.concat_tables(pq.read_table(p) for p in sorted((out / "data").glob("*.parquet")))
    assert ds.num_rows == table.num_rows == 12 and len(list((out / "data").iterdir())) == 3
    assert ds.column_names == table.column_names
    assert ds.to_list() == table.to_pylist()


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_jsonl_and_csv_runs_load_with_the_row_schemas_types(tiny_lm, demos, tmp_path, monkeypatch, fmt):  # noqa: F811
    """The card's features fix the types: without them datasets guessed (a CSV's all-null `fooled` read as float64,
    `prompt_label` as int64, a JSONL's timestamps as timestamps)."""
    import datasets

    from toxiforge.records import arrow_schema

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    out = tmp_path / "run"
    run_generation(plan_for(demos, n=3), tiny_lm, out, decoder=FAST, config=JobConfig(format=fmt, shard_size=5),
                   progress=False)
    assert load_card(out).data.to_dict()["configs"][0]["data_files"][0]["path"] == f"data/*.{fmt}"
    ds = datasets.load_dataset(str(out), split="train", cache_dir=str(tmp_path / "hf-cache"))
    assert ds.features == datasets.Features.from_arrow_schema(arrow_schema())
    rows = read_rows(out)
    assert ds.num_rows == len(rows) == 12 and len(list((out / "data").iterdir())) == 3
    for name in ("row_id", "generation", "prompt_label", "seed", "fooled", "parse_error", "hypothesis_rank"):
        assert ds[name] == [getattr(r, name) for r in rows], name


def test_an_interrupted_run_has_an_incomplete_card_until_resumed(tiny_lm, demos, tmp_path):  # noqa: F811
    config = JobConfig(batch_size=4, shard_size=4)
    out = tmp_path / "run"

    def stop_after_first_shard(index, path):
        if index == 0:
            raise KeyboardInterrupt

    with pytest.raises(RunInterrupted):
        run_generation(plan_for(demos), tiny_lm, out, decoder=FAST, config=config, progress=False,
                       on_shard=stop_after_first_shard)
    card = load_card(out)
    assert "**incomplete** (interrupted): 4 of 20 planned rows" in card.text and "--resume" in card.text
    assert card.data.to_dict()["size_categories"] == ["n<1K"]
    run_generation(plan_for(demos), tiny_lm, out, decoder=FAST, config=config, resume=True, progress=False)
    card = load_card(out)
    assert "**complete** (20 rows" in card.text and "resumed" in card.text and "incomplete" not in card.text
