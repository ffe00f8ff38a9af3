"""The HTML report renders offline: tables, and plots embedded as non-empty base64 PNGs."""

from __future__ import annotations

import base64
import json
import re

import pytest
from typer.testing import CliRunner

from toxiforge.analysis.report import build_report
from toxiforge.cli import app
from toxiforge.errors import InputError
from toxiforge.records import Row, write_rows

runner = CliRunner()
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def rows():
    out = []
    for group, name in (("asian", "Asian"), ("women", "Women"), ("mental_dis", "Neurodivergent")):
        for label in (0, 1):
            for method in ("top-k", "ALICE"):
                for i in range(3):
                    out.append(Row(prompt="p", generation=f"{name} neighbours planted garden number {i} on day "
                                                          f"{label}{'.' * i}", generation_method=method,
                                   group=group, prompt_label=label))
    return out


def embedded_images(page: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)]


def test_report_with_perplexity_renders_tables_and_images(tiny_lm, tmp_path):
    report = build_report(rows(), tmp_path / "rep", lm=tiny_lm, progress=False)
    page = report.html_path.read_text(encoding="utf-8")
    assert report.html_path.name == "report.html" and page.startswith("<!DOCTYPE html>")
    for title in ("Table 1 row", "Table 2: statistics per group", "Duplicates", "mention their target group",
                  "Other groups mentioned", "Perplexity under tiny-llama"):
        assert title in page
    images = embedded_images(page)
    assert len(images) == 4 and all(img.startswith(PNG_MAGIC) and len(img) > 2000 for img in images)
    assert "http://" not in page and "https://" not in page          # nothing to fetch: readable offline
    numbers = json.loads(report.json_path.read_text())
    assert numbers["stats"]["rows"] == 36 and numbers["perplexity"]["rows"] == 36
    assert set(report.images) == {"counts", "lengths", "mentions", "perplexity"}


def test_report_without_perplexity_and_errors(tmp_path):
    report = build_report(rows(), tmp_path / "rep", lm=None, progress=False)
    assert report.perplexity is None and len(embedded_images(report.html_path.read_text())) == 3
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="not a directory"):
        build_report(rows(), blocker, lm=None, progress=False)
    with pytest.raises(InputError, match="no rows|none of the"):
        build_report([Row(prompt="p", generation="", generation_method="top-k", group="asian", prompt_label=0)],
                     tmp_path / "empty", lm=None, progress=False)
    assert not (tmp_path / "empty").exists()


def test_report_command(tmp_path):
    data = tmp_path / "d.parquet"
    write_rows(rows(), data)
    out = tmp_path / "out"
    result = runner.invoke(app, ["report", str(data), "-o", str(out), "--no-perplexity", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert (out / "report.html").exists() and (out / "report.json").exists()
    assert "| d.parquet | 36 | 100.0 | 50.0 |" in result.output
    bad = runner.invoke(app, ["report", str(tmp_path / "missing.parquet"), "-o", str(tmp_path / "o2"),
                              "--no-perplexity"])
    assert isinstance(bad.exception, InputError) and not (tmp_path / "o2").exists()


def test_report_of_several_runs_names_them_all_and_counts_each_run_its_own_rows(tmp_path):
    """`toxiforge report runs/topk runs/alice`: the page is titled by both runs and Table 1 gives each run its own
    rows (it was titled by the last run, whose name it gave to every row)."""
    topk, alice = tmp_path / "runs" / "topk", tmp_path / "runs" / "alice"
    topk.mkdir(parents=True)
    alice.mkdir()
    all_rows = rows()
    write_rows([r for r in all_rows if r.generation_method == "top-k"], topk / "data.parquet")
    write_rows([r for r in all_rows if r.generation_method == "ALICE"][:12], alice / "data.parquet")
    out = tmp_path / "report"
    result = runner.invoke(app, ["report", str(topk), str(alice), "-o", str(out), "--no-perplexity",
                                 "--no-progress"])
    assert result.exit_code == 0, result.output
    page = (out / "report.html").read_text(encoding="utf-8")
    assert "<h1>Dataset report: topk + alice</h1>" in page
    for line in ("| topk | 18 | 100.0 | 50.0 |", "| alice | 12 | 100.0 | 50.0 |", "| Total | 30 | 100.0 | 50.0 |"):
        assert line in result.output
    numbers = json.loads((out / "report.json").read_text())
    assert [(r["source"], r["size"]) for r in numbers["stats"]["by_run"]] == [("topk", 18), ("alice", 12)]
    assert {m: c["count"] for m, c in numbers["stats"]["by_method"].items()} == {"top-k": 18, "ALICE": 12}
