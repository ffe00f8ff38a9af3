"""Generation and scoring on a local Ray cluster (``ray.init(num_cpus=2)``) equal the in-process results.

Ray's start and each actor's start (a Python process importing torch) are slow on a small machine, so the tests
are few, share one cluster, and are marked ``ray`` (deselect with ``-m "not ray"``). The tiny random Llama is
saved to a model directory that every Ray worker loads, as a user's workers load a hub id or a shared model
directory. Skipped when Ray is not installed (``pip install 'toxiforge[ray]'``).
"""

from __future__ import annotations

import os
import sys
from functools import partial
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.ray

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


def plan(n=5):
    return GenerationPlan.grid(["asian", "women"], ["benign"], n, seed=3)


def content(rows):
    return sorted(({c: getattr(r, c) for c in CONTENT} for r in rows), key=lambda r: r["row_id"])


def top_k(classifier):
    return FAST


def in_process(tiny_llama_dir, out, **kwargs):
    """The same job without Ray, on one torch thread as each worker (so float reductions match)."""
    import torch

    from toxiforge.models.transformers_lm import TransformersLM

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        lm = TransformersLM.load(tiny_llama_dir, device="cpu")
        return run_generation(plan(), lm, out, decoder=FAST, config=JOB, progress=False, **kwargs)
    finally:
        torch.set_num_threads(threads)


def setup_for(tiny_llama_dir):
    return WorkerSetup(str(tiny_llama_dir), top_k, model_options={"device": "cpu"})


def test_ray_resumes_an_in_process_run_and_writes_its_rows(ray_cluster, tiny_llama_dir, tmp_path):
    """A crashed in-process run, finished on Ray: the rows equal a full in-process run's, and the manifest's
    fingerprint is the same (either runner resumes the other's run)."""
    expected = in_process(tiny_llama_dir, tmp_path / "full")

    def crash(index, path):
        if index == 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        in_process(tiny_llama_dir, tmp_path / "run", on_shard=crash)
    assert len(list((tmp_path / "run" / "data").glob("shard-*"))) == 1
    result = run_generation_ray(plan(), setup_for(tiny_llama_dir), tmp_path / "run", config=JOB, resume=True,
                                ray_config=RayConfig(workers=2), progress=False)
    assert result.rows_written == 6 and len(result.shards) == 3  # 10 items in shards of 4: shards 1 and 2 on Ray
    assert content(read_rows(tmp_path / "run")) == content(read_rows(tmp_path / "full"))
    manifest = result.manifest
    assert manifest["status"] == "complete" and manifest["counts"]["rows"] == 10
    assert len(manifest["resumed_at"]) == 1 and manifest["config"] == expected.manifest["config"]
    assert manifest["model"]["architecture"] == "LlamaForCausalLM"


class CrashOnce:
    """FAST, except that the worker process dies the first time it decodes ``prompt`` (a marker file remembers)."""

    method = "top-k"
    num_return = 1

    def __init__(self, marker: str, prompt: str):
        self.marker, self.prompt = marker, prompt

    def settings(self):
        return FAST.settings()

    def decode(self, lm, prompts, seeds, labels, groups=None):
        if self.prompt in prompts and not os.path.exists(self.marker):
            Path(self.marker).touch()
            os._exit(1)  # a worker killed mid-shard: nothing of this shard has been written
        return FAST.decode(lm, prompts, seeds, labels, groups)


def crashing_setup(tiny_llama_dir, marker, prompt):
    from toxiforge.models.transformers_lm import TransformersLM

    return TransformersLM.load(tiny_llama_dir, device="cpu"), CrashOnce(marker, prompt), None


def test_a_worker_killed_mid_shard_is_retried_without_duplicates(ray_cluster, tiny_llama_dir, tmp_path):
    in_process(tiny_llama_dir, tmp_path / "local")
    items = plan().expand()
    marker = tmp_path / "crashed"
    build = partial(crashing_setup, str(tiny_llama_dir), str(marker), items[5].prompt)  # 2nd batch of shard 1
    result = run_generation_ray(plan(), build, tmp_path / "ray", config=JOB, ray_config=RayConfig(workers=1),
                                progress=False)
    assert marker.exists()  # the worker did die
    rows = read_rows(tmp_path / "ray")
    assert len(rows) == len({r.row_id for r in rows}) == 10 == result.manifest["counts"]["rows"]
    assert content(rows) == content(read_rows(tmp_path / "local"))


def test_a_model_that_cannot_load_is_one_clear_error(ray_cluster, tmp_path):
    with pytest.raises(InputError, match=r"missing.gguf does not exist"):
        run_generation_ray(plan(), WorkerSetup(str(tmp_path / "missing.gguf"), top_k), tmp_path / "out",
                           config=JOB, ray_config=RayConfig(max_restarts=0), progress=False)


def test_cli_generate_and_classify_with_ray(ray_cluster, tiny_llama_dir, tmp_path):
    import numpy as np
    from typer.testing import CliRunner

    from toxiforge.classifiers import load_classifier
    from toxiforge.cli import app
    from toxiforge.records import read_table

    out = tmp_path / "cli"
    runner = CliRunner()
    result = runner.invoke(app, ["generate", "-o", str(out), "--groups", "asian,women", "-n", "5", "--seed", "3",
                                 "--model", str(tiny_llama_dir), "--device", "cpu", "--max-new-tokens", "6",
                                 "--batch-size", "3", "--shard-size", "4", "--ray", "--workers", "2",
                                 "--no-summary", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert content(read_rows(out)) == content(read_rows(in_process(tiny_llama_dir, tmp_path / "local").out_dir))
    result = runner.invoke(app, ["classify", str(out), "-c", "profanity-check", "--ray", "--workers", "2",
                                 "--batch-size", "3"])
    assert result.exit_code == 0, result.output
    assert "10 rows scored" in result.output
    scored = read_table(out / "scored.parquet").to_pydict()
    expected = load_classifier("profanity-check").predict_proba(scored["generation"])
    np.testing.assert_allclose(scored["profanity_check_score"], expected, rtol=0, atol=1e-12)


def test_ray_classifier_keeps_order_and_provenance(ray_cluster):
    import numpy as np

    from toxiforge.classifiers import load_classifier

    texts = [f"placeholder statement {i} about group zorblax" for i in range(9)] + ["damn it", ""]
    local = load_classifier("profanity-check")
    with RayClassifier(partial(load_classifier, "profanity-check"), RayConfig(workers=1), chunk_size=4) as remote:
        assert remote.describe() == {**local.describe(), "ray_workers": 1}
        np.testing.assert_allclose(remote.predict_proba(texts), local.predict_proba(texts), rtol=0, atol=1e-12)
        assert remote.class_log_probs(texts).shape == (11, 2)


def test_unreachable_ray_address_is_a_clear_error():
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(InputError, match=f"cannot reach the Ray cluster at 127.0.0.1:{port}") as info:
        connect(RayConfig(address=f"127.0.0.1:{port}"))  # checked before Ray is joined: no cluster needed
    assert "ray start --head" in info.value.hint
    with pytest.raises(InputError, match="not HOST:PORT"):
        connect(RayConfig(address="ray://:x"))


def build_elsewhere(tiny_llama_dir, root):
    """Load the model in a worker whose working directory is a fresh folder of its own (as on another node)."""
    import tempfile

    from toxiforge.models.transformers_lm import TransformersLM

    os.chdir(tempfile.mkdtemp(dir=root))
    return TransformersLM.load(tiny_llama_dir, device="cpu"), FAST, None


def test_workers_elsewhere_return_rows_and_the_driver_writes_a_relative_out(ray_cluster, tiny_llama_dir, tmp_path,
                                                                            monkeypatch):
    """Two workers whose working directories differ from the driver's (and from each other's): a relative -o is
    the driver's folder, every shard lands there, and nothing is written where the workers run."""
    in_process(tiny_llama_dir, tmp_path / "local")
    (tmp_path / "driver").mkdir()
    (tmp_path / "workers").mkdir()
    monkeypatch.chdir(tmp_path / "driver")
    build = partial(build_elsewhere, str(tiny_llama_dir), str(tmp_path / "workers"))
    result = run_generation_ray(plan(), build, "out", config=JOB, ray_config=RayConfig(workers=2), progress=False)
    assert len(list((tmp_path / "driver" / "out" / "data").glob("shard-*"))) == 3 == len(result.shards)
    assert content(read_rows(tmp_path / "driver" / "out")) == content(read_rows(tmp_path / "local"))
    assert len(list((tmp_path / "workers").iterdir())) >= 1  # the workers did run elsewhere...
    assert not list((tmp_path / "workers").rglob("shard-*"))  # ...and wrote nothing there
    import torch

    versions = result.manifest["worker_versions"]
    assert versions and all(v["torch"] == torch.__version__ and v["node"] for v in versions)


def test_placement_the_cluster_cannot_meet_is_an_error_naming_what_is_missing(ray_cluster, tiny_llama_dir, tmp_path):
    from toxiforge.pipeline.ray_runner import parse_resources

    assert parse_resources("llm_server=1, gpu_slot=0.5") == {"llm_server": 1.0, "gpu_slot": 0.5}
    with pytest.raises(InputError, match="NAME=AMOUNT"):
        parse_resources("llm_server")
    missing = RayConfig(workers=2, resources={"llm_server": 1}, placement_timeout=1)
    with pytest.raises(InputError, match=r"could not place 2 workers.*llm_server 2 \(the cluster has 0\)"):
        run_generation_ray(plan(), setup_for(tiny_llama_dir), tmp_path / "a", config=JOB, ray_config=missing,
                           progress=False)
    spread = RayConfig(workers=2, spread=True, placement_timeout=1)  # one local node, two workers, one per node
    with pytest.raises(InputError, match=r"2 nodes that each hold .*--ray-spread; 1 do"):
        run_generation_ray(plan(), setup_for(tiny_llama_dir), tmp_path / "b", config=JOB, ray_config=spread,
                           progress=False)
    assert ray.util.placement_group_table() == {} or all(
        g["state"] == "REMOVED" for g in ray.util.placement_group_table().values())  # nothing left reserved


class DiesBySignal:
    """A classifier whose worker process dies by SIGILL when it scores (a native library built for another CPU)."""

    name, num_classes, toxic_index, benign_index = "dies", 2, 1, 0

    def describe(self):
        return {"name": self.name}

    def predict_proba(self, texts):
        import signal

        os.kill(os.getpid(), signal.SIGILL)


def test_a_worker_killed_by_a_signal_is_named_with_the_signal_and_its_fix(ray_cluster):
    from toxiforge.pipeline.ray_cluster import WorkerDied

    with RayClassifier(DiesBySignal, RayConfig(workers=1, max_restarts=0)) as remote:
        with pytest.raises(WorkerDied, match=r"a Ray worker \(pid \d+\) was killed by SIGILL \(illegal instruction: "
                                             r"the binary was built for another CPU.*Fix: rebuild it.*see .*\.err"):
            remote.predict_proba(["a placeholder sentence"])


def test_audit_scores_on_ray_as_in_process_and_frees_its_actors(ray_cluster, tmp_path, monkeypatch):
    """`audit --ray`: each classifier scores through a pool of Ray actors; the scores equal the in-process ones,
    the report's provenance names the workers, and the pool is closed once its classifier is done."""
    import numpy as np

    closed = []
    close = RayClassifier.close
    monkeypatch.setattr(RayClassifier, "close", lambda self: (closed.append(len(self._actors)), close(self)))

    from toxiforge.audit.run import AuditSettings, ClassifierSpec, run_audit
    from toxiforge.data.examples import Example, LabeledData

    rows = [Example(f"placeholder statement {i}" + (" damn" if i % 3 == 0 else ""), int(i % 3 == 0))
            for i in range(12)]
    data = LabeledData(name="placeholders", examples=rows, layout="table", source="memory")
    spec = [ClassifierSpec.parse("profanity-check")]
    local = run_audit(spec, [data], tmp_path / "local", AuditSettings(n_boot=0))
    remote = run_audit(spec, [data], tmp_path / "ray", AuditSettings(n_boot=0, ray=RayConfig(workers=1)))
    key = ("profanity-check", "placeholders")
    np.testing.assert_allclose(remote.pairs[key].scores, local.pairs[key].scores, rtol=0, atol=1e-12)
    assert remote.info["profanity-check"]["describe"]["ray_workers"] == 1
    assert closed == [1]


def test_attack_scores_on_ray_as_in_process(ray_cluster, tmp_path):
    """`attack --ray`: the attacked classifier scores on a pool of Ray actors (each lockstep call split evenly
    across them); the rows equal an in-process run's."""
    from typer.testing import CliRunner

    from toxiforge.classifiers import load_classifier
    from toxiforge.cli import app
    from toxiforge.records import is_toxic, read_table

    texts = [f"placeholder statement {i} about the weekend" + (" damn" if i % 2 else "") for i in range(8)]
    scores = load_classifier("profanity-check").predict_proba(texts)
    table = tmp_path / "statements.csv"
    table.write_text("text,label\n" + "".join(f"{t},{int(is_toxic(s))}\n" for t, s in zip(texts, scores)))
    runs = {}
    for name, extra in (("local", []), ("ray", ["--ray", "--workers", "2"])):
        result = CliRunner().invoke(app, ["attack", "--on", str(table), "--family", "obfuscate", "-c",
                                          "profanity-check", "-o", str(tmp_path / name), "--no-progress",
                                          "--shard-size", "4", *extra])
        assert result.exit_code == 0, result.output
        runs[name] = [{k: v for k, v in r.items() if k not in ("timestamp", "run_id")}
                      for r in read_table(tmp_path / name).to_pylist()]
    assert runs["ray"] == runs["local"]
    assert any(r["queries"] > 1 for r in runs["ray"])  # statements were attacked, not only scored
