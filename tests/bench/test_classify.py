"""Classification mode against lm-evaluation-harness itself: the harness's own ``toxigen`` task (its YAML, its
request construction, its ``HFLM`` model class, its ``process_results``) on the same items and model, compared
request by request (log-likelihoods to 1e-4, greedy flags equal) and item by item (acc, acc_norm exactly).

The task's hub dataset is unreachable offline, so the harness gets the items through its ``custom_dataset`` hook.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from toxiforge.bench.classify import (
    CHOICES,
    PROMPT,
    classify_requests,
    demonstration_examples,
    run_classify,
    score_items,
)
from toxiforge.data import Example, LabeledData, annotated_label
from toxiforge.errors import InputError
from toxiforge.intervals import proportion
from toxiforge.models.embedded import DEFAULT_LM

lm_eval = pytest.importorskip("lm_eval", reason="lm-eval is in the test extra: pip install -e '.[test]'")

TOXIGEN_DEV = Path(__file__).resolve().parents[2] / ".." / "shared" / "data" / "toxigen-dev" / "demonstrations"
# Neutral placeholder items with ToxiGen annotated's two rating columns (1-5); gold = ai + human > 5.5.
ROWS = [{"text": f"placeholder statement number {i} about group {g}", "toxicity_ai": float(1 + i % 5),
         "toxicity_human": float(1 + (i * 3) % 5), "target_group": g}
        for i, g in enumerate(["alpha", "beta", "gamma", "alpha", "beta", "gamma", "alpha", "beta", "zorblax"])]
runner = CliRunner()


def harness_toxigen(model, tokenizer, rows, batch_size=4):
    """(per-request (logprob, is_greedy) in our request order, per-item {acc, acc_norm}) from the harness."""
    import datasets
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks._yaml_loader import load_yaml  # the harness's loader for its task YAML (!function tags)

    split = datasets.Dataset.from_list(rows)
    config = load_yaml(Path(lm_eval.__file__).parent / "tasks" / "toxigen" / "toxigen.yaml")
    config["custom_dataset"] = lambda **_: datasets.DatasetDict({"train": split, "test": split})
    task = ConfigurableTask(config=config)
    task.build_all_requests(rank=0, world_size=1)
    hflm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=batch_size)
    responses = hflm.loglikelihood(task.instances, disable_tqdm=True)
    for instance, response in zip(task.instances, responses):
        instance.resps.append(response)
    task.apply_filters()
    per_doc: dict[int, list] = {}
    for instance in task.instances:
        per_doc.setdefault(instance.doc_id, []).append(instance)
    requests, metrics = [], []
    for doc_id in sorted(per_doc):
        instances = sorted(per_doc[doc_id], key=lambda x: x.idx)
        assert [x.args for x in instances] == classify_requests([rows[doc_id]["text"]])  # same requests as ours
        requests += [x.resps[0] for x in instances]
        metrics.append(task.process_results(instances[0].doc, [x.filtered_resps["none"] for x in instances]))
    return requests, metrics


def labelled(rows) -> LabeledData:
    return LabeledData(name="placeholder", layout="toxigen-annotated", source="test",
                       examples=[Example(r["text"], annotated_label(r["toxicity_ai"], r["toxicity_human"]),
                                         group=r["target_group"]) for r in rows])


def assert_agrees_with_harness(lm, rows, batch_size):
    ours = run_classify(lm, labelled(rows), batch_size=batch_size)
    requests, metrics = harness_toxigen(lm.model, lm.tokenizer, rows)
    ll = [x for item in ours.items for x in (item["ll_no"], item["ll_yes"])]
    greedy = [x for item in ours.items for x in (item["greedy_no"], item["greedy_yes"])]
    assert np.allclose(ll, [r[0] for r in requests], atol=1e-4, rtol=0)
    assert greedy == [r[1] for r in requests]
    gold = [item["label"] for item in ours.items]
    assert [float(i["pred"] == g) for i, g in zip(ours.items, gold)] == [m["acc"] for m in metrics]
    assert [float(i["pred_norm"] == g) for i, g in zip(ours.items, gold)] == [m["acc_norm"] for m in metrics]
    assert ours.metrics["acc"]["value"] == np.mean([m["acc"] for m in metrics])
    assert ours.metrics["acc_norm"]["value"] == np.mean([m["acc_norm"] for m in metrics])
    return ours


def test_tiny_model_agrees_with_the_harness_request_by_request(tiny_lm):
    ours = assert_agrees_with_harness(tiny_lm, ROWS, batch_size=3)
    # multi-token choices on the tiny tokenizer, so the sums are over several tokens
    assert len(tiny_lm._encode_pair(PROMPT.format(text="x"), " Yes")[1]) > 1
    assert ours.metrics["n"] == len(ROWS) and set(ours.groups) == {"alpha", "beta", "gamma", "zorblax"}


def test_loglikelihood_does_not_depend_on_batching(tiny_lm):
    requests = classify_requests([r["text"] for r in ROWS]) + [("", "a plain line of text"), ("the quick ", "fox")]
    one = tiny_lm.loglikelihood(requests, batch_size=1)
    many = tiny_lm.loglikelihood(requests, batch_size=16)
    assert np.allclose([x.logprob for x in one], [x.logprob for x in many], atol=1e-5)
    assert tiny_lm.loglikelihood([("context", "")]) == [(0.0, True, 0)]


@pytest.mark.embedded
def test_smollm2_agrees_with_the_harness_request_by_request():
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from toxiforge.models import load_language_model

    lm = load_language_model(DEFAULT_LM, dtype="float32", device="cpu")
    assert_agrees_with_harness(lm, ROWS[:6], batch_size=4)


@pytest.mark.embedded
@pytest.mark.skipif(not TOXIGEN_DEV.is_dir(), reason="../shared/data/toxigen-dev is not here")
def test_smollm2_agrees_with_the_harness_on_real_sentences():
    """Upstream's human-written sentences: on some of them SmolLM2's most likely next token after the question is
    a newline, which the judge path once skipped (scoring another position than the harness)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from toxiforge.models import load_language_model

    lm = load_language_model(DEFAULT_LM, dtype="float32", device="cpu")
    texts = demonstration_examples(TOXIGEN_DEV).texts[:8]
    rows = [{**row, "text": text} for row, text in zip(ROWS, texts)]
    assert_agrees_with_harness(lm, rows, batch_size=4)


def test_metrics_by_hand():
    # item 0: No wins by log-likelihood; by log-likelihood / length (-1/2 = -0.5 vs -1.2/3 = -0.4) Yes wins
    # item 1: a tie goes to No (numpy.argmax, as in the harness); item 2: Yes wins both ways
    scored = score_items([1, 0, 1], ll_no=[-1.0, -2.0, -3.0], ll_yes=[-1.2, -2.0, -0.5])
    assert scored["pred"].tolist() == [0, 0, 1] and scored["pred_norm"].tolist() == [1, 1, 1]
    assert scored["acc"].tolist() == [0, 1, 1] and scored["acc_norm"].tolist() == [1, 0, 1]
    assert scored["score"][2] == pytest.approx(np.exp(-0.5) - np.exp(-3.0))
    assert CHOICES == ("No", "Yes") and classify_requests(["s"])[1] == (PROMPT.format(text="s"), " Yes")
    share = proportion([1, 0, 1, 1])
    assert share.value == 0.75 and 0 <= share.low <= 0.75 <= share.high <= 1 and share.n == 4
    assert proportion([1, 1, 1]).low < 1.0 and proportion([]).value is None  # Wilson: no collapse at 1


def test_classify_command_writes_results_and_rejects_bad_tables(tiny_lm, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from toxiforge.cli import app

    model_dir = tmp_path / "model"
    tiny_lm.model.save_pretrained(model_dir)
    tiny_lm.tokenizer.save_pretrained(model_dir)
    data = tmp_path / "annotated.parquet"
    full = [{**r, **{c: None for c in ("factual?", "ingroup_effect", "lewd", "framing", "predicted_group",
                                         "stereotyping", "intent", "predicted_author", "actual_method")}}
            for r in ROWS]
    pq.write_table(pa.Table.from_pylist(full), data)
    out = tmp_path / "out"
    result = runner.invoke(app, ["bench", "classify", "--model", str(model_dir), "--on", f"humanval:{data}",
                                 "-o", str(out), "--device", "cpu", "--no-progress"])
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "results.json").read_text())
    direct = run_classify(tiny_lm, labelled(ROWS))
    assert saved["metrics"]["acc"]["value"] == direct.metrics["acc"]["value"] and saved["metrics"]["n"] == 9
    assert "acc_norm" in (out / "results.md").read_text() and len(pq.read_table(out / "items.parquet")) == 9
    table = tmp_path / "t.csv"
    table.write_text("sentence,score\nplaceholder a,1\n")
    bad = runner.invoke(app, ["bench", "classify", "--model", str(model_dir), "--on", f"table:{table}",
                              "-o", str(tmp_path / "bad"), "--device", "cpu"])
    assert isinstance(bad.exception, InputError) and "column" in str(bad.exception)


@pytest.mark.skipif(not TOXIGEN_DEV.is_dir(), reason="../shared/data/toxigen-dev is not here")
def test_demonstrations_become_a_labelled_table():
    data = demonstration_examples(TOXIGEN_DEV, groups=["asian", "muslim"])
    assert {e.group for e in data.examples} == {"asian", "muslim"} and data.counts()["toxic"] > 0
    assert 0 < data.counts()["benign"] < len(data)
    with pytest.raises(InputError, match="no demonstrations"):
        demonstration_examples(TOXIGEN_DEV, groups=["women"])


def test_data_without_its_label_columns_is_an_error_before_the_model_loads(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    from toxiforge.cli import app

    no_human = tmp_path / "annotated.parquet"  # ToxiGen annotated without toxicity_human: no gold label
    pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "toxicity_human"} for r in ROWS]),
                   no_human)
    unlabelled = tmp_path / "t.csv"
    unlabelled.write_text("sentence,score\nplaceholder a,1\n")
    cases = [([f"humanval:{no_human}"], "missing column(s) ['toxicity_human']"),
             ([f"table:{unlabelled}"], "no label column (looked for label,"),
             ([f"table:{unlabelled}", "--label-column", "hateful"], "no label column 'hateful'")]
    for (spec, *options), message in cases:
        result = runner.invoke(app, ["bench", "classify", "--on", spec, *options, "-o", str(tmp_path / "out"),
                                     "--model", "no-such-model-is-loaded"])
        assert isinstance(result.exception, InputError) and message in str(result.exception), result.output
        assert "columns found are" in str(result.exception) and result.exception.hint
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
