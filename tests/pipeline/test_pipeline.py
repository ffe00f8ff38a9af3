"""Generation jobs on a tiny random Llama: rows, manifest, shards, resume after a crash, bad input."""

from __future__ import annotations

import json

import pytest

from toxiforge.decoding import TopKConfig, TopKDecoder
from toxiforge.errors import InputError, ToxiforgeWarning
from toxiforge.pipeline import GenerationPlan, JobConfig, run_generation
from toxiforge.records import COLUMNS, read_rows

FAST = TopKDecoder(TopKConfig(max_new_tokens=6))
CONTENT = [c for c in COLUMNS if c not in ("timestamp", "run_id")]


@pytest.fixture()
def demos(tmp_path):
    """Upstream-layout demonstration folder with placeholder sentences for two groups and both labels."""
    root = tmp_path / "demonstrations"
    for category, group in [("race", "asian"), ("nationality", "mexican")]:
        (root / category).mkdir(parents=True, exist_ok=True)
        for prefix in ("hate", "neutral"):
            lines = [f"placeholder {prefix} sentence {i} about {group}" for i in range(8)]
            (root / category / f"{prefix}_{group}_sentences.txt").write_text("\n".join(lines) + "\n")
    return root


def plan_for(demos, n=5, seed=7, groups=("asian", "mexican"), labels=("toxic", "benign")):
    return GenerationPlan.grid(groups, labels, n, source=str(demos), k=3, seed=seed)


def content(rows):
    return [{c: getattr(r, c) for c in CONTENT} for r in rows]


def test_job_writes_rows_with_provenance(tiny_lm, demos, tmp_path):
    out = tmp_path / "run"
    result = run_generation(plan_for(demos), tiny_lm, out, decoder=FAST,
                            config=JobConfig(batch_size=4, shard_size=6), progress=False)
    rows = read_rows(out)
    assert len(rows) == 20 == result.rows_written
    assert [r.row_id for r in rows][:2] == ["asian/toxic/000000", "asian/toxic/000001"]
    assert {(r.group, r.prompt_label) for r in rows} == {("asian", 1), ("asian", 0), ("mexican", 1), ("mexican", 0)}
    for r in rows:
        assert r.generation_method == "top-k" and r.machine_generated and r.model == "tiny-llama"
        assert r.prompt.startswith("- placeholder") and r.prompt.endswith("\n-") and r.prompt.count("\n- ") == 2
        assert json.loads(r.decoding)["top_k"] == 40 and r.seed is not None and r.run_id and r.timestamp
        assert r.finish_reason in ("newline", "eos", "length")
        assert (r.parse_error is None) == bool(r.generation)
    assert len(result.shards) == 4  # 20 rows in shards of 6
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and manifest["machine_generated"] is True
    assert manifest["counts"]["rows"] == 20 and manifest["counts"]["cells"]["mexican/benign"] == 5
    assert manifest["model"]["architecture"] == "LlamaForCausalLM"
    assert set(manifest["versions"]) >= {"toxiforge", "torch", "transformers", "python"}


def test_parquet_loads_with_datasets(tiny_lm, demos, tmp_path):
    import datasets

    out = tmp_path / "run"
    run_generation(plan_for(demos, n=2), tiny_lm, out, decoder=FAST, progress=False)
    ds = datasets.load_dataset("parquet", data_files=str(out / "data" / "*.parquet"), split="train")
    assert ds.num_rows == 8
    assert {"prompt", "generation", "generation_method", "group", "prompt_label", "roberta_prediction"} <= set(
        ds.column_names)


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_other_formats_round_trip(tiny_lm, demos, tmp_path, fmt):
    out = tmp_path / fmt
    run_generation(plan_for(demos, n=2), tiny_lm, out, decoder=FAST, config=JobConfig(format=fmt), progress=False)
    parquet = tmp_path / "pq"
    run_generation(plan_for(demos, n=2), tiny_lm, parquet, decoder=FAST, progress=False)
    assert content(read_rows(out)) == content(read_rows(parquet))


def test_resume_after_crash_gives_the_uninterrupted_rows(tiny_lm, demos, tmp_path):
    config = JobConfig(batch_size=3, shard_size=4)
    reference = tmp_path / "reference"
    run_generation(plan_for(demos), tiny_lm, reference, decoder=FAST, config=config, progress=False)

    class Crash(RuntimeError):
        pass

    def crash_after_second_shard(index, path):
        if index == 1:
            raise Crash()

    out = tmp_path / "crashed"
    with pytest.raises(Crash):
        run_generation(plan_for(demos), tiny_lm, out, decoder=FAST, config=config, progress=False,
                       on_shard=crash_after_second_shard)
    assert sorted(p.name for p in (out / "data").iterdir()) == ["shard-00000.parquet", "shard-00001.parquet"]
    assert json.loads((out / "manifest.json").read_text())["status"] == "running"

    result = run_generation(plan_for(demos), tiny_lm, out, decoder=FAST, config=config, resume=True, progress=False)
    assert result.rows_written == 12
    resumed, uninterrupted = read_rows(out), read_rows(reference)
    assert len(resumed) == 20 and len({r.row_id for r in resumed}) == 20
    assert content(resumed) == content(uninterrupted)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["resumed_at"]) == 1

    again = run_generation(plan_for(demos), tiny_lm, out, decoder=FAST, config=config, resume=True, progress=False)
    assert again.rows_written == 0 and len(read_rows(out)) == 20


def test_existing_output_needs_resume(tiny_lm, demos, tmp_path):
    out = tmp_path / "run"
    run_generation(plan_for(demos, n=1), tiny_lm, out, decoder=FAST, progress=False)
    with pytest.raises(InputError, match="--resume"):
        run_generation(plan_for(demos, n=1), tiny_lm, out, decoder=FAST, progress=False)


def test_resume_with_other_options_is_refused(tiny_lm, demos, tmp_path):
    out = tmp_path / "run"
    run_generation(plan_for(demos, n=1), tiny_lm, out, decoder=FAST, progress=False)
    with pytest.raises(InputError, match=r"--seed 7 \(the run\) vs 8 \(now\)"):
        run_generation(plan_for(demos, n=1, seed=8), tiny_lm, out, decoder=FAST, resume=True, progress=False)


def test_bad_plan_writes_nothing(tiny_lm, demos, tmp_path):
    out = tmp_path / "run"
    plan = GenerationPlan.grid(["asian", "women"], ["benign"], 2, source=str(demos), k=3)
    with pytest.raises(InputError, match="women"):
        run_generation(plan, tiny_lm, out, decoder=FAST, progress=False)
    assert not out.exists()
    with pytest.raises(InputError, match="larger"):
        run_generation(GenerationPlan.grid(["asian"], ["benign"], 2, source=str(demos), k=9), tiny_lm, out,
                       decoder=FAST, progress=False)
    assert not out.exists()


def test_plan_validation():
    with pytest.raises(InputError, match="unknown group"):
        GenerationPlan.grid(["martians"], ["benign"], 2)
    with pytest.raises(InputError, match="unknown label"):
        GenerationPlan.grid(["asian"], ["spicy"], 2)
    with pytest.raises(InputError, match="n=0"):
        GenerationPlan.grid(["asian"], ["benign"], 0)


def test_unparseable_output_is_kept_with_a_parse_error(tiny_tokenizer, demos, tmp_path):
    from conftest import build_tiny_llama
    from toxiforge.models.transformers_lm import TransformersLM

    always_newline = TransformersLM(build_tiny_llama(tiny_tokenizer, newline_bias=50.0), tiny_tokenizer,
                                    name="nl")
    out = tmp_path / "run"
    run_generation(plan_for(demos, n=2), always_newline, out, decoder=FAST, progress=False)
    rows = read_rows(out)
    assert len(rows) == 8
    assert all(r.generation == "" and r.parse_error and r.raw_output == "\n" for r in rows)


def test_prompt_files_as_source(tiny_lm, tmp_path):
    from toxiforge.demonstrations import Prompt, write_prompt_file

    folder = tmp_path / "prompts"
    prompts = [Prompt((f"placeholder a{i}", f"placeholder b{i}")) for i in range(3)]
    write_prompt_file(prompts, folder / "neutral_asian_1k.txt")
    plan = GenerationPlan.grid(["asian"], ["benign"], 5, source=str(folder), prompt_source="prompts")
    run_generation(plan, tiny_lm, tmp_path / "run", decoder=FAST, progress=False)
    rows = read_rows(tmp_path / "run")
    assert [r.prompt for r in rows] == [prompts[i % 3].text for i in range(5)]


# --- several outputs per prompt ------------------------------------------------------------------------------

def alice_decoder(num_return):
    from toxiforge.decoding import AliceConfig, AliceDecoder

    return AliceDecoder(None, AliceConfig(lambda_clf=0.0, num_beams=5, candidates=10, max_new_tokens=5,
                                          num_return=num_return))


def letter_classifier():
    from toxiforge.classifiers.wrap import CallableClassifier

    return CallableClassifier(lambda texts: [min(0.99, 0.01 + 0.2 * t.count("e")) for t in texts], name="letter-e")


def test_resume_with_num_return_gives_the_uninterrupted_rows(tiny_lm, demos, tmp_path):
    config, decoder, clf = JobConfig(batch_size=3, shard_size=4), alice_decoder(3), letter_classifier()
    reference = tmp_path / "reference"
    run_generation(plan_for(demos, n=3), tiny_lm, reference, decoder=decoder, config=config, classifier=clf,
                   progress=False)
    uninterrupted = read_rows(reference)
    assert len(uninterrupted) == 36 and len({r.row_id for r in uninterrupted}) == 36
    assert [r.hypothesis_rank for r in uninterrupted] == [0, 1, 2] * 12
    assert all(r.classifier == "letter-e" for r in uninterrupted if r.parse_error is None)

    def crash(index, path):
        if index == 1:
            raise RuntimeError("simulated crash")

    out = tmp_path / "crashed"
    with pytest.raises(RuntimeError, match="simulated"):
        run_generation(plan_for(demos, n=3), tiny_lm, out, decoder=decoder, config=config, classifier=clf,
                       progress=False, on_shard=crash)
    with pytest.warns(ToxiforgeWarning, match="the run is still running, or killed: 24 of 36 planned rows"):
        assert len(read_rows(out)) == 24  # shards of 4 work items × 3 hypotheses
    result = run_generation(plan_for(demos, n=3), tiny_lm, out, decoder=decoder, config=config, classifier=clf,
                            resume=True, progress=False)
    assert result.rows_written == 12
    assert content(read_rows(out)) == content(uninterrupted)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["config"]["num_return"] == 3 and manifest["counts"]["rows"] == 36

    with pytest.raises(InputError, match="num_return"):
        run_generation(plan_for(demos, n=3), tiny_lm, out, decoder=alice_decoder(2), config=config, classifier=clf,
                       resume=True, progress=False)


def test_files_without_hypothesis_columns_read_as_rank_0(tiny_lm, demos, tmp_path):
    import pyarrow.parquet as pq

    out = tmp_path / "run"
    run_generation(plan_for(demos, n=2), tiny_lm, out, decoder=FAST, config=JobConfig(shard_size=4), progress=False)
    first = out / "data" / "shard-00000.parquet"  # rewrite one shard as an older toxiforge wrote it
    pq.write_table(pq.read_table(first).drop_columns(["hypothesis_rank", "hypothesis_score"]), first)
    rows = read_rows(out)
    assert len(rows) == 8 and all(r.hypothesis_rank == 0 and r.hypothesis_score is None for r in rows)
    assert read_rows(first)[0].hypothesis_rank == 0

    manifest = json.loads((out / "manifest.json").read_text())  # a manifest from before num_return existed
    del manifest["config"]["num_return"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    again = run_generation(plan_for(demos, n=2), tiny_lm, out, decoder=FAST, config=JobConfig(shard_size=4),
                           resume=True, progress=False)
    assert again.rows_written == 0


class TwoSamples:
    """A decoder returning its own list of outputs per prompt (the protocol, not ALICE)."""

    method, num_return = "top-k", 2

    def __init__(self, extra=0):
        self.extra = extra

    def settings(self):
        return {"method": "two-samples"}

    def decode(self, lm, prompts, seeds, labels, groups):
        first = FAST.decode(lm, prompts, seeds, labels, groups)
        second = FAST.decode(lm, prompts, [s + 1 for s in seeds], labels, groups)
        return [a + b + b * self.extra for a, b in zip(first, second)]


def test_decoder_protocol_lists_per_prompt(tiny_lm, demos, tmp_path):
    from toxiforge.errors import ToxiforgeError

    run_generation(plan_for(demos, n=1), tiny_lm, tmp_path / "two", decoder=TwoSamples(), progress=False)
    rows = read_rows(tmp_path / "two")
    assert [r.hypothesis_rank for r in rows] == [0, 1] * 4
    assert [r.row_id for r in rows[:2]] == ["asian/toxic/000000", "asian/toxic/000000/1"]
    assert all(r.hypothesis_score is None for r in rows)
    with pytest.raises(ToxiforgeError, match="num_return is 2"):
        run_generation(plan_for(demos, n=1), tiny_lm, tmp_path / "three", decoder=TwoSamples(extra=1),
                       progress=False)
