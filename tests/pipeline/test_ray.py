"""Generation and scoring on a local Ray cluster (``ray.init(num_cpus=2)``) equal the in-process results.

The tiny random Llama is saved to a model directory that every Ray worker loads, as a user's workers load a hub id
or a shared model directory. Skipped when Ray is not installed (``pip install 'toxiforge[ray]'``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from toxiforge.decoding import TopKConfig, TopKDecoder  # noqa: E402
from toxiforge.errors import InputError  # noqa: E402
from toxiforge.pipeline import GenerationPlan, JobConfig, run_generation  # noqa: E402
from toxiforge.pipeline.ray_runner import RayClassifier, RayConfig, WorkerSetup, connect, run_generation_ray  # noqa: E402
from toxiforge.records import COLUMNS, read_rows  # noqa: E402

FAST = TopKDecoder(TopKConfig(max_new_tokens=6))
CONTENT = [c for c in COLUMNS if c not in ("timestamp", "run_id")]
JOB = JobConfig(batch_size=3, shard_size=4)


@pytest.fixture(scope="module")
def ray_cluster():
    # workers unpickle this module's helpers by value (the tests folder is not importable there)
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    os.environ["RAY_worker_niceness"] = "0"  # Ray nices workers to 15: starved on a shared CI machine
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="WARNING")
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def model_dir(tiny_lm, tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama")
    tiny_lm.model.save_pretrained(path)
    tiny_lm.tokenizer.save_pretrained(path)
    return path


def plan(n=5):
    return GenerationPlan.grid(["asian", "women"], ["benign"], n, seed=3)


def content(rows):
    return sorted(({c: getattr(r, c) for c in CONTENT} for r in rows), key=lambda r: r["row_id"])


def top_k(classifier):
    return FAST


def in_process(model_dir, out, **kwargs):
    """The same job without Ray, on one torch thread as each worker (so float reductions match)."""
    import torch

    from toxiforge.models.transformers_lm import TransformersLM

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lm = TransformersLM.load(model_dir, device="cpu")
        return run_generation(plan(), lm, out, decoder=FAST, config=JOB, progress=False, **kwargs)
    finally:
        torch.set_num_threads(threads)


def setup_for(model_dir):
    return WorkerSetup(str(model_dir), top_k, model_options={"device": "cpu"})


def test_ray_run_writes_the_rows_of_an_in_process_run(ray_cluster, model_dir, tmp_path):
    expected = in_process(model_dir, tmp_path / "local")
    result = run_generation_ray(plan(), setup_for(model_dir), tmp_path / "ray", config=JOB,
                                ray_config=RayConfig(workers=2), progress=False)
    assert result.rows_written == 10 and len(result.shards) == 3  # 10 items in shards of 4
    assert content(read_rows(tmp_path / "ray")) == content(read_rows(tmp_path / "local"))
    manifest = result.manifest
    assert manifest["status"] == "complete" and manifest["counts"]["rows"] == 10
    assert manifest["config"] == expected.manifest["config"]  # same fingerprint: resumable by either runner
    assert manifest["model"]["architecture"] == "LlamaForCausalLM"


def test_ray_resumes_an_in_process_run_that_crashed(ray_cluster, model_dir, tmp_path):
    in_process(model_dir, tmp_path / "full")

    def crash(index, path):
        if index == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        in_process(model_dir, tmp_path / "run", on_shard=crash)
    assert len(list((tmp_path / "run" / "data").glob("shard-*"))) == 1
    result = run_generation_ray(plan(), setup_for(model_dir), tmp_path / "run", config=JOB, resume=True,
                                ray_config=RayConfig(workers=2), progress=False)
    assert result.rows_written == 6  # shards 1 and 2 only
    assert content(read_rows(tmp_path / "run")) == content(read_rows(tmp_path / "full"))
    assert len(result.manifest["resumed_at"]) == 1


class CrashOnce:
    """FAST, except that the worker process dies the first time it decodes ``prompt`` (a marker file remembers)."""

    method = "top-k"
    num_return = 1

    def __init__(self, marker: str, prompt: str):
        self.marker, self.prompt = marker, prompt

    def settings(self):
        return FAST.settings()

    def decode(self, lm, prompts, seeds, labels):
        if self.prompt in prompts and not os.path.exists(self.marker):
            Path(self.marker).touch()
            os._exit(1)  # a worker killed mid-shard: nothing of this shard has been written
        return FAST.decode(lm, prompts, seeds, labels)


def crashing_setup(model_dir, marker, prompt):
    from toxiforge.models.transformers_lm import TransformersLM

    return TransformersLM.load(model_dir, device="cpu"), CrashOnce(marker, prompt), None


def test_a_worker_killed_mid_shard_is_retried_without_duplicates(ray_cluster, model_dir, tmp_path):
    in_process(model_dir, tmp_path / "local")
    items = plan().expand()
    marker = tmp_path / "crashed"
    build = partial(crashing_setup, str(model_dir), str(marker), items[5].prompt)  # 2nd batch of shard 1
    result = run_generation_ray(plan(), build, tmp_path / "ray", config=JOB, ray_config=RayConfig(workers=1),
                                progress=False)
    assert marker.exists()  # the worker did die
    rows = read_rows(tmp_path / "ray")
    assert len(rows) == len({r.row_id for r in rows}) == 10 == result.manifest["counts"]["rows"]
    assert content(rows) == content(read_rows(tmp_path / "local"))


def test_a_model_that_cannot_load_is_one_clear_error(ray_cluster, tmp_path):
    with pytest.raises(InputError, match="GGUF file not found"):
        run_generation_ray(plan(), WorkerSetup(str(tmp_path / "missing.gguf"), top_k), tmp_path / "out",
                           config=JOB, ray_config=RayConfig(max_restarts=0), progress=False)


def test_ray_classifier_scores_as_the_classifier_does(ray_cluster):
    import numpy as np

    from toxiforge.classifiers import load_classifier

    texts = [f"placeholder statement {i} about group zorblax" for i in range(30)] + ["damn it", ""]
    local = load_classifier("profanity-check")
    with RayClassifier(partial(load_classifier, "profanity-check"), RayConfig(workers=2), chunk_size=7) as remote:
        assert remote.name == local.name
        np.testing.assert_allclose(remote.predict_proba(texts), local.predict_proba(texts), rtol=0, atol=1e-12)
        assert remote.class_log_probs(texts).shape == (32, 2)


def test_cli_generate_and_classify_with_ray(ray_cluster, model_dir, tmp_path):
    from typer.testing import CliRunner

    from toxiforge.cli import app

    out = tmp_path / "cli"
    runner = CliRunner()
    result = runner.invoke(app, ["generate", "-o", str(out), "--groups", "asian,women", "-n", "5", "--seed", "3",
                                 "--model", str(model_dir), "--device", "cpu", "--max-new-tokens", "6",
                                 "--batch-size", "3", "--shard-size", "4", "--ray", "--workers", "2",
                                 "--no-summary", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert content(read_rows(out)) == content(read_rows(in_process(model_dir, tmp_path / "local").out_dir))
    result = runner.invoke(app, ["classify", str(out), "-c", "profanity-check", "--ray", "--workers", "2"])
    assert result.exit_code == 0, result.output
    assert "10 rows scored" in result.output and (out / "scored.parquet").exists()


def test_unreachable_ray_address_is_a_clear_error(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    code = ("from toxiforge.pipeline.ray_runner import RayConfig, connect\n"
            f"connect(RayConfig(address='127.0.0.1:{port}'))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in proc.stderr
    assert "ray start --head" in proc.stderr
    with pytest.raises(InputError, match="not HOST:PORT"):
        connect(RayConfig(address="ray://:x"))
