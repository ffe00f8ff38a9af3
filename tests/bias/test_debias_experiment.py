"""`toxiforge experiment debias` (Zhou et al.'s comparison) on planted placeholder data with the tiny BERT."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toxiforge.bias.experiment import DebiasSettings, aggregate, run_debias_experiment
from toxiforge.bias.experiment_report import render_markdown
from toxiforge.data.examples import Example, LabeledData
from toxiforge.errors import InputError

from .test_debias import base_dir, one_torch_thread, planted, tiny_config, write_table  # noqa: F401 (fixtures)


def test_aggregate_is_the_mean_and_sample_sd_per_cell():
    runs = [{"method": "Vanilla", "accuracy": 0.5, "f1": {"overall": 0.4, "noi": None}, "n_train": 10},
            {"method": "Vanilla", "accuracy": 0.7, "f1": {"overall": 0.6, "noi": None}, "n_train": 10},
            {"method": "Random", "accuracy": 0.9, "f1": {"overall": 0.8}, "n_train": 4}]
    summary = aggregate(runs)
    assert summary["Vanilla"]["accuracy"] == {"mean": pytest.approx(0.6), "sd": pytest.approx(0.1414213562), "n": 2}
    assert summary["Vanilla"]["f1.noi"] == {"mean": None, "sd": None, "n": 0}
    assert summary["Random"]["accuracy"] == {"mean": 0.9, "sd": None, "n": 1}
    md = render_markdown(summary, runs=2)
    # ours, then the paper's value on Founta (F) and on Davidson (D, Appendix B)
    assert "| Vanilla | 60.0 ± 14.1 ⟨F 94.21 · D 96.37⟩ | 50.0 ± 14.1 ⟨F 92.33 · D 97.81⟩ |" in md
    # Random moved up from Vanilla in accuracy and F1 here; the paper's Random moved down (Founta): 0 of 2 hold
    assert "| Random | 90.0 ⟨F 94.07⟩ | 80.0 ⟨F 92.18⟩ |" in md and "| F 0/2 (not Acc., F1) |" in md
    assert "| Original (Vanilla's) | 10 |" in md  # Table 1's training rows: the same in every run, no s.d.
    with pytest.raises(InputError, match="unknown methods"):
        DebiasSettings(train=None, methods=("Vanila",))


def test_experiment_trains_measures_and_tabulates_every_method(base_dir, tmp_path):  # noqa: F811
    """Two runs of Vanilla, LMIXIN-ONI (the planted token as the only ONI word), Random, DataMaps-Hard and a
    relabeled copy: each has two measured runs in debias.json, the tables average them, the models are gone."""
    train, test = planted(120, seed=0), planted(80, seed=100, test=True)
    lexicon = tmp_path / "lexicon.csv"
    lexicon.write_text("term,category\nzorblax,oni\n")
    relabeled = [Example(e.text, 1 - e.label if i % 10 == 0 else e.label) for i, e in enumerate(train)]
    settings = DebiasSettings(train=tiny_config(base_dir, epochs=2, batch_size=16, learning_rate=1e-2), runs=2,
                              methods=("Vanilla", "LMIXIN-ONI", "Random", "DataMaps-Hard", "AAE-relabeled"),
                              lexicon=str(lexicon))
    evaluation = LabeledData(name="planted-test", examples=test, layout="table", source="memory")
    result = run_debias_experiment(train, evaluation, tmp_path / "x", settings, relabeled=relabeled)
    saved = json.loads((tmp_path / "x" / "debias.json").read_text())
    assert [(r["method"], r["run"], r["seed"]) for r in saved["runs"]] == [
        (m, run, run) for run in (0, 1) for m in ("Vanilla", "LMIXIN-ONI", "Random", "DataMaps-Hard",
                                                  "AAE-relabeled")]
    by = {(r["method"], r["run"]): r for r in saved["runs"]}
    assert by["Vanilla", 0]["n_train"] == 120 and by["Random", 0]["n_train"] == by["DataMaps-Hard", 1]["n_train"] == 40
    labels = np.array([e.label for e in train])
    token = np.array(["zorblax" in e.text.split() for e in train], dtype=float)
    assert by["Vanilla", 0]["train_r"]["oni"] == pytest.approx(np.corrcoef(token, labels)[0, 1])
    for method in ("Vanilla", "LMIXIN-ONI"):
        accs = [by[method, run]["accuracy"] for run in (0, 1)]
        assert saved["summary"][method]["accuracy"]["mean"] == pytest.approx(np.mean(accs))
        assert saved["summary"][method]["accuracy"]["sd"] == pytest.approx(np.std(accs, ddof=1))
    assert by["Vanilla", 0]["fpr"]["oni"] is not None and by["Vanilla", 0]["n_eval"]["all"] == 80
    md = (tmp_path / "x" / "debias.md").read_text()
    assert "## Table 2" in md and "## Table 4" in md and "| LMIXIN-ONI |" in md and "±" in md
    assert "no dialect model" in md and result["settings"]["runs"] == 2
    assert not (tmp_path / "x" / "models").exists()


def test_cli_experiment_debias(base_dir, tmp_path):  # noqa: F811
    from typer.testing import CliRunner

    from toxiforge.cli import app

    train = write_table(planted(60, seed=1), tmp_path / "train.parquet")
    test = write_table(planted(40, seed=2, test=True), tmp_path / "test.parquet")
    lexicon = tmp_path / "lexicon.csv"
    lexicon.write_text("term,category\nzorblax,oni\n")
    args = ["experiment", "debias", "--train", str(train), "--eval", str(test), "-o", str(tmp_path / "x"),
            "--base-model", str(base_dir), "--runs", "1", "--methods", "Vanilla,LMIXIN-TOXTRIG,DataMaps-Easy",
            "--lexicon", str(lexicon), "--smoke", "--lr", "1e-2", "--keep-models"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "x" / "debias.json").read_text())
    assert [r["method"] for r in saved["runs"]] == ["Vanilla", "LMIXIN-TOXTRIG", "DataMaps-Easy"]
    assert saved["settings"]["train"]["epochs"] == 2 and saved["settings"]["train"]["learning_rate"] == 1e-2
    assert (tmp_path / "x" / "models" / "run0" / "LMIXIN-TOXTRIG" / "config.json").exists()
    bad = CliRunner().invoke(app, args[:-1] + ["--methods", "Vanilla,AFlight", "--overwrite"])
    assert isinstance(bad.exception, InputError) and "unknown methods" in str(bad.exception)


def test_paper_direction_and_empty_cells_say_why():
    """The direction column counts only cells where the paper moved away from Vanilla (a tie is no direction);
    an empty FPR cell with no benign row says n = 0; the n row gives the FPR denominators."""
    from toxiforge.bias.experiment_report import TABLE2, direction_summary
    from toxiforge.bias.paper import FOUNTA, paper_direction

    assert paper_direction("Founta", "DataMaps-Hard", "fpr.noi") == -1  # 6.26 < 10.24
    assert paper_direction("Founta", "DataMaps-Hard", "fpr.oi") == 0  # 85.71 both: a tie
    assert paper_direction("Davidson", "LMIXIN-TOXTRIG", "fpr.oi") == -1  # 42.86 < 57.14 (Table 8)
    assert FOUNTA["LMIXIN-ONI"]["fpr.oni"].sd == 3.1
    cell = {"mean": None, "sd": None, "n": 0}

    def stats(noi, oi):
        return {"fpr.noi": {"mean": noi, "sd": None, "n": 1}, "fpr.oi": {"mean": oi, "sd": None, "n": 1}}

    summary = {"Vanilla": stats(0.2, 0.5), "DataMaps-Hard": stats(0.1, 0.9)}
    # FPR NOI fell as in the paper; FPR OI rose but the paper's tie is not counted
    assert direction_summary(summary, "DataMaps-Hard", TABLE2) == "F 1/1"
    summary["DataMaps-Hard"]["fpr.noi"]["mean"] = 0.3
    assert direction_summary(summary, "DataMaps-Hard", TABLE2) == "F 0/1 (not FPR NOI)"
    summary["Vanilla"]["fpr.oni"] = cell
    counts = {"n": {"all": 10, "noi": 4, "oi": 3, "oni": 0}, "n_benign": {"all": 5, "noi": 2, "oi": 1, "oni": 0}}
    md = render_markdown(summary, runs=1, counts=counts)
    assert "| n (evaluation) | 10 rows | 10 rows | 4 rows | benign 2 | 3 rows | benign 1 | 0 rows | benign 0 | |" in md
    assert "| Vanilla | – ⟨F 94.21 · D 96.37⟩ |" in md and "n = 0 ⟨F 64.72 · D 63.64⟩" in md


def test_stratified_split_holds_out_each_label_and_records_it():
    from toxiforge.bias.experiment_split import stratified_split

    rows = [Example(f"placeholder {i}", int(i % 4 == 0)) for i in range(200)]
    train, test, record = stratified_split(rows, 0.2, seed=3)
    assert len(train) + len(test) == 200 and not {e.text for e in train} & {e.text for e in test}
    assert sum(e.label for e in test) == 10 and len(test) == 40  # 20% of 50 toxic and of 150 benign
    assert record["test_positions"] == sorted(int(e.text.split()[1]) for e in test)
    assert record["n_test"] == 40 and record["seed"] == 3 and record["stratified_by"] == "label"
    assert stratified_split(rows, 0.2, seed=3)[2] == record and stratified_split(rows, 0.2, seed=4)[2] != record
    with pytest.raises(InputError, match="--test-fraction"):
        stratified_split(rows, 1.0, seed=0)


def test_experiment_relabels_with_the_first_vanilla_counts_aae_rules_and_plots(base_dir, tmp_path):  # noqa: F811
    """The relabeler runs once, with run 1's Vanilla model; AAE-relabeled trains on what it returns in every
    run; each AAE rule's rows are counted and FPR AAE given per rule; the plot and per-model times are written."""
    from toxiforge.bias.experiment_report import RULES
    from toxiforge.bias.metrics import aae_members

    from .test_zhou_mitigation import fake_dialect_model

    train, test = planted(60, seed=0), planted(40, seed=100, test=True)
    calls = []

    def relabeler(rows, classifier, out):
        calls.append((len(rows), classifier.predict_proba(["placeholder note"]).shape, out))
        return [Example(e.text, 0) if i < 5 else e for i, e in enumerate(rows)]

    settings = DebiasSettings(train=tiny_config(base_dir, epochs=2, batch_size=16, learning_rate=1e-2), runs=2,
                              methods=("Vanilla", "AAE-relabeled"))
    evaluation = LabeledData(name="planted-test", examples=test, layout="table", source="memory")
    model = fake_dialect_model()
    result = run_debias_experiment(train, evaluation, tmp_path / "x", settings, relabeler=relabeler,
                                   dialect_model=model, split={"fraction": 0.4})
    assert calls == [(60, (1,), tmp_path / "x")]
    by = {(r["method"], r["run"]): r for r in result["runs"]}
    expected_ratio = np.mean([0 if i < 5 else e.label for i, e in enumerate(train)])
    assert by["AAE-relabeled", 1]["toxic_ratio"] == pytest.approx(expected_ratio)
    assert all(r["train_seconds"] > 0 for r in result["runs"])
    from toxiforge.bias.dialect import predict_dialects

    p = predict_dialects([e.text for e in test], model)
    labels = np.array([e.label for e in test])
    for rule, cut in RULES:
        member = aae_members(p, cut)
        assert result["aae_rules"]["splits"]["evaluation"][rule] == {
            "n": int(member.sum()), "of": 40, "n_benign": int((member & (labels == 0)).sum())}
    assert by["Vanilla", 0]["fpr_aae_rules"]["argmax"] == by["Vanilla", 0]["fpr"]["aae"]
    saved = json.loads((tmp_path / "x" / "debias.json").read_text())
    assert saved["split"] == {"fraction": 0.4}
    md = (tmp_path / "x" / "debias.md").read_text()
    assert "## AAE rows by selection rule" in md and "![FPR OI and FPR AAE" in md
    assert (tmp_path / "x" / "debias.png").read_bytes()[:4] == b"\x89PNG"


def test_cli_experiment_splits_and_relabels_in_one_command(base_dir, tmp_path, monkeypatch):  # noqa: F811
    """--test-fraction replaces --eval; --relabel-translations supplies every translation, so no LM is loaded;
    the relabeled table and its manifest land in OUT; neither or both of --eval/--test-fraction is an error."""
    from typer.testing import CliRunner

    import toxiforge.models as models
    from toxiforge.cli import app

    from .test_zhou_mitigation import fake_dialect_model

    rows = planted(80, seed=1)
    data = write_table(rows, tmp_path / "all.parquet")
    model = fake_dialect_model()
    import toxiforge.bias.measure as measure

    monkeypatch.setattr(measure, "find_dialect_model", lambda folder: (model, "fake dialect model"))
    monkeypatch.setattr(models, "load_language_model", lambda *a, **k: pytest.fail("no LM should load"))
    translations = tmp_path / "translations.csv"
    import csv

    with translations.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "translation"])
        writer.writerows([e.text, "a calm placeholder sentence"] for e in rows)
    args = ["experiment", "debias", "--train", str(data), "--test-fraction", "0.25", "-o", str(tmp_path / "x"),
            "--base-model", str(base_dir), "--runs", "1", "--methods", "Vanilla,AAE-relabeled", "--smoke",
            "--lr", "1e-2", "--max-length", "16", "--relabel-translations", str(translations), "--bf16"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "x" / "debias.json").read_text())
    assert saved["settings"]["train"]["bf16"] is True  # --bf16: mixed precision, recorded
    assert saved["split"]["n_test"] == 20 and saved["train_rows"] == 60 and saved["eval"]["n"] == 20
    manifest = json.loads((tmp_path / "x" / "relabeled.manifest.json").read_text())
    assert manifest["settings"]["translations_made"] == 0 and manifest["counts"]["rows"] == 60
    assert manifest["counts"]["translated"] == manifest["settings"]["translations_reused"]
    assert [r["method"] for r in saved["runs"]] == ["Vanilla", "AAE-relabeled"]
    neither = [a for a in args if a not in ("--test-fraction", "0.25")] + ["--overwrite"]
    both = args + ["--eval", str(data), "--overwrite"]
    dtype = args + ["--relabel-dtype", "float8", "--overwrite"]
    for bad_args, word in ((neither, "neither"), (both, "both"), (dtype, "--relabel-dtype")):
        bad = CliRunner().invoke(app, bad_args)
        assert isinstance(bad.exception, InputError) and str(bad.exception).count(word) == 1


def test_stratified_subsample_keeps_label_shares():
    from toxiforge.bias.experiment_split import stratified_subsample

    rows = [Example(f"placeholder {i}", int(i % 4 == 0)) for i in range(200)]
    kept = stratified_subsample(rows, 40, seed=1)
    assert len(kept) == 40 and sum(e.label for e in kept) == 10 and set(kept) <= set(rows)
    assert stratified_subsample(rows, 500, seed=1) == rows
    with pytest.raises(InputError, match="--train-rows"):
        stratified_subsample(rows, 1, seed=1)


def test_davidson_split_aae_rules_and_table7_statistics_as_docs_say():
    """The numbers docs/debias-davidson.md quotes, from the real files (../shared/data): the 0.2 split, the
    rows each AAE rule takes, and the Original statistics beside Zhou et al.'s Table 7 (within 0.005)."""
    from toxiforge.bias.dialect import load_dialect_model, predict_dialects
    from toxiforge.bias.experiment_split import aae_rule_counts, stratified_split
    from toxiforge.bias.lexicon import load_bias_lexicon
    from toxiforge.bias.measure import measure_data
    from toxiforge.bias.paper import DAVIDSON
    from toxiforge.data import load_specs

    from .conftest import shared_file

    tweets = shared_file("davidson2017", "labeled_data.csv")
    model = load_dialect_model(shared_file("twitteraae"))
    lexicon = load_bias_lexicon("upstream", oi_list=shared_file("toxic-debias", "word_based_bias_list.csv"))
    data = load_specs([f"davidson:{tweets}"])[0]
    train, test, record = stratified_split(data.examples, 0.2, seed=0)
    assert (len(train), len(test), record["test_toxic"]) == (19826, 4957, 4124)
    rules = aae_rule_counts({"evaluation": (test, predict_dialects([e.text for e in test], model))})["evaluation"]
    assert [(r["n"], r["n_benign"]) for r in rules.values()] == [(2700, 107), (1575, 37), (125, 1)]
    report = measure_data(data, lexicon=lexicon, dialect_model=model).report.to_json()
    original = DAVIDSON["Vanilla"]
    for key in ("noi", "oi", "oni", "aae"):
        assert report["pearson_r"][key] == pytest.approx(original[f"train_r.{key}"].mean, abs=0.005)
    assert report["pct_toxic"]["all"] / 100 == pytest.approx(original["toxic_ratio"].mean, abs=0.005)


def test_measure_data_with_precomputed_tags_and_dialects_equals_computing_them():
    """The experiment tags and dialect-scores its texts once and passes them to every model's measurement."""
    from toxiforge.bias.dialect import predict_dialects
    from toxiforge.bias.lexicon import load_bias_lexicon
    from toxiforge.bias.measure import measure_data

    from .test_zhou_mitigation import fake_dialect_model

    model, lexicon = fake_dialect_model(), load_bias_lexicon({"noi": ["alpha"]})
    rows = [Example(f"placeholder note {w}", i % 2) for i, w in enumerate(["alpha", "beta", "one", "two"] * 3)]
    data = LabeledData(name="x", examples=rows, layout="table", source="memory")
    scores = np.linspace(0.1, 0.9, len(rows))
    plain = measure_data(data, lexicon=lexicon, dialect_model=model, scores=scores).report.to_json()
    given = measure_data(data, lexicon=lexicon, dialect_model=model, scores=scores, flags=lexicon.tag(data.texts),
                         p_dialect=predict_dialects(data.texts, model)).report.to_json()
    assert given == plain and plain["n"]["noi"] == 3


def _without_times(records):
    return [{k: v for k, v in r.items() if k != "train_seconds"} for r in records]


def test_a_stopped_experiment_resumes_where_it_stopped(base_dir, tmp_path):  # noqa: F811
    """Ctrl-C in run 2 keeps run 1's records and run 2's trained models; --resume trains only the models not
    trained yet (run 2's DataMaps-Hard and AAE-relabeled: DataMaps' subset is read back, not drawn from a new
    Vanilla's dynamics) and gives the records of an uninterrupted run; another setting is refused."""
    from dataclasses import replace

    train, test = planted(60, seed=0), planted(40, seed=100, test=True)
    relabeled = [Example(e.text, 1 - e.label if i % 10 == 0 else e.label) for i, e in enumerate(train)]
    methods = ("Vanilla", "Random", "DataMaps-Hard", "AAE-relabeled")
    settings = DebiasSettings(train=tiny_config(base_dir, epochs=2, batch_size=16, learning_rate=1e-2), runs=2,
                              methods=methods)
    evaluation = LabeledData(name="planted-test", examples=test, layout="table", source="memory")
    full = run_debias_experiment(train, evaluation, tmp_path / "full", settings, relabeled=relabeled)
    steps: list[str] = []

    def stop(message):
        steps.append(message)
        if message == "run 2/2: training DataMaps-Hard":
            raise KeyboardInterrupt

    cut = tmp_path / "cut"
    with pytest.raises(KeyboardInterrupt):
        run_debias_experiment(train, evaluation, cut, settings, relabeled=relabeled, on_step=stop)
    kept = [json.loads(line) for line in (cut / "runs.jsonl").read_text().splitlines()]
    assert [(r["run"], r["method"]) for r in kept] == [(0, m) for m in methods]
    with pytest.raises(InputError, match="not empty"):
        run_debias_experiment(train, evaluation, cut, settings, relabeled=relabeled)
    steps.clear()
    resumed = run_debias_experiment(train, evaluation, cut, settings, relabeled=relabeled, resume=True,
                                    on_step=steps.append)
    assert [s for s in steps if "training" in s] == ["run 2/2: training DataMaps-Hard",
                                                     "run 2/2: training AAE-relabeled"]
    assert resumed["records_reused"] == 4
    assert _without_times(resumed["runs"]) == _without_times(full["runs"])
    assert resumed["summary"]["DataMaps-Hard"]["accuracy"] == full["summary"]["DataMaps-Hard"]["accuracy"]
    with pytest.raises(InputError, match="fraction"):
        run_debias_experiment(train, evaluation, cut, replace(settings, fraction=0.5), relabeled=relabeled,
                              resume=True)
    with pytest.raises(InputError, match="nothing to resume"):
        (tmp_path / "other").mkdir()
        (tmp_path / "other" / "x.txt").write_text("x")
        run_debias_experiment(train, evaluation, tmp_path / "other", settings, relabeled=relabeled, resume=True)


def test_relabeler_keeps_translations_as_it_makes_them(tmp_path, monkeypatch):
    """The experiment's relabeler appends each translated chunk to translations.partial.jsonl; a run stopped after
    the first chunk, run again, translates only the texts that are not in that file."""
    import toxiforge.bias.relabel as relabel
    import toxiforge.models as models

    from .test_zhou_mitigation import fake_dialect_model

    rows = planted(80, seed=3)
    model = fake_dialect_model()
    asked: list[list[str]] = []

    def translator(lm, *, batch_size, seed):
        def translate(texts):
            asked.append(list(texts))
            if len(asked) == 2 and stopping:
                raise KeyboardInterrupt
            return [f"calm placeholder {i}" for i, _ in enumerate(texts)]
        return translate

    monkeypatch.setattr(relabel, "lm_translator", translator)
    lm = type("LM", (), {"describe": lambda self: {"name": "fake"}})()
    monkeypatch.setattr(models, "load_language_model", lambda *a, **k: lm)
    classifier = type("C", (), {"predict_proba": lambda self, texts: np.zeros(len(texts)),
                                "describe": lambda self: {"name": "zero"}})()
    stopping = False
    (tmp_path / "fresh").mkdir()
    relabel.experiment_relabeler("lm", dialect_model=model, batch_size=1)(rows, classifier, tmp_path / "fresh")
    candidates = sum(len(a) for a in asked)   # what an uninterrupted run translates
    asked.clear()
    run = relabel.experiment_relabeler("lm", dialect_model=model, batch_size=1)
    stopping = True
    with pytest.raises(KeyboardInterrupt):
        run(rows, classifier, tmp_path)
    assert candidates > 8 and len(asked[0]) == 8   # one chunk: 8 batches of 1
    saved = (tmp_path / relabel.PARTIAL_TRANSLATIONS).read_text().splitlines()
    assert [json.loads(line)["text"] for line in saved] == asked[0]
    asked.clear()
    stopping = False
    again = relabel.experiment_relabeler("lm", dialect_model=model, batch_size=1)(rows, classifier, tmp_path)
    assert len(again) == 80 and not set(sum(asked, [])) & {json.loads(line)["text"] for line in saved}
    assert sum(len(a) for a in asked) == candidates - 8
