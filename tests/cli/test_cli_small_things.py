"""Small things a careful user notices (issue 27 #18)."""

from __future__ import annotations

import numpy as np
import pytest
from typer.testing import CliRunner

from toxiforge.cli import app
from toxiforge.errors import ToxiforgeWarning

runner = CliRunner()


def test_a_near_constant_bias_only_feature_warns():
    from toxiforge.cli.training import warn_if_constant

    with pytest.warns(ToxiforgeWarning, match=r"only 1 of 135 training rows get another p\(toxic\)"):
        warn_if_constant(np.array([0.3] * 134 + [0.8]), "oni")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_if_constant(np.array([0.3] * 100 + [0.8] * 35), "toxtrig")


def test_debias_methods_are_case_insensitive():
    from toxiforge.bias.experiment import DebiasSettings
    from toxiforge.errors import InputError
    from toxiforge.training.trainer import TrainConfig

    chosen = DebiasSettings(train=TrainConfig(), methods=("vanilla", "lmixin-oni", "DATAMAPS-EASY")).methods
    assert chosen == ("Vanilla", "LMIXIN-ONI", "DataMaps-Easy")
    with pytest.raises(InputError, match="unknown methods"):
        DebiasSettings(train=TrainConfig(), methods=("Vanila",))


@pytest.mark.parametrize("args, message", [
    (["generate", "-o", "{tmp}/o", "--dtype", "fp8"], "unknown --dtype 'fp8'"),
    (["generate", "-o", "{tmp}/o", "--device", "gpu"], "unknown --device 'gpu'"),
    (["perplexity", "{data}", "--batch-size", "0"], "--batch-size 0 must be at least 1"),
    (["report", "{data}", "-o", "{tmp}/r", "--dtype", "half"], "unknown --dtype 'half'"),
    (["classify", "{data}", "-c", "profanity-check", "--device", "tpu"], "unknown --device 'tpu'"),
    (["bench", "classify", "-o", "{tmp}/b", "--on", "{data}", "--dtype", "int4"], "unknown --dtype 'int4'"),
])
def test_arguments_are_checked_before_a_model_loads(tmp_path, monkeypatch, args, message):
    import toxiforge.classifiers.registry as registry
    from toxiforge.cli import analysis, bench, generate
    from toxiforge.records import Row, write_rows

    def no_model(*a, **k):
        raise AssertionError("a model was loaded before the arguments were checked")

    for module in (analysis, bench, generate):
        monkeypatch.setattr(module, "load_lm", no_model)
    monkeypatch.setattr(registry, "load_classifier", no_model)
    data = write_rows([Row(prompt="p", generation="placeholder", generation_method="top-k", group="asian",
                           prompt_label=0)], tmp_path / "d.parquet")
    result = runner.invoke(app, [a.replace("{tmp}", str(tmp_path)).replace("{data}", str(data)) for a in args])
    assert message in str(result.exception), result.output


def test_mentions_without_methods_has_no_none_column(tmp_path):
    import pyarrow as pa

    from toxiforge.records import write_table

    data = write_table(pa.table({"text": ["placeholder about asian people", "placeholder line"],
                                 "group": ["asian", "asian"], "label": [0, 1]}), tmp_path / "t.csv")
    result = runner.invoke(app, ["mentions", str(data)])
    assert result.exit_code == 0 and "(none)" not in result.output and "| Group | all statements |" in result.output
