"""Target-group mention shares (Table 6) and other groups named, on hand-built neutral statements."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from toxiforge.analysis.mentions import ALL, mention_stats
from toxiforge.cli import app
from toxiforge.errors import InputError

runner = CliRunner()


def row(text, group, method="top-k"):
    return {"generation": text, "group": group, "prompt_label": 0, "generation_method": method}


ROWS = [
    row("Many Asian families enjoy the lantern festival.", "asian"),                       # mentions
    row("The festival has music and food stalls.", "asian"),                               # no mention
    row("Asian American and Latino students share a club.", "asian", "ALICE"),             # mentions + latino
    row("Women lead the local chess club.", "women"),                                      # mentions
    row("The club meets on Tuesdays.", "women", "ALICE"),                                  # no mention
    row("People with autism often enjoy quiet rooms.", "mental_dis"),                      # alias; mentions
    row("A line about an unregistered group.", "martians"),                                # unknown group
]


def test_shares_per_group_and_method():
    m = mention_stats(ROWS)
    assert m.cells[("asian", "top-k")] == [2, 1] and m.share("asian", "top-k") == 0.5
    assert m.share("asian", "ALICE") == 1.0
    assert m.share("women", "top-k") == 1.0 and m.share("women", "ALICE") == 0.0
    assert m.cells[("mental_disability", "top-k")] == [1, 1]          # "mental_dis" resolved to its group
    assert m.cells[(ALL, "top-k")] == [4, 3] and m.cells[(ALL, "ALICE")] == [2, 1]
    assert m.unknown_groups == {"martians": 1}
    assert m.flags == [True, False, True, True, False, True, None]


def test_other_groups_mentioned():
    m = mention_stats(ROWS)
    assert m.others["asian"]["latino"] == 1 and m.any_other["asian"] == 1 and m.rows_by_group["asian"] == 3
    assert m.any_other["women"] == 0
    others = m.others_table().markdown()
    assert "| Asian people | 3 | 33.3 | Latino/Latina people (1) |" in others


def test_markdown_and_json():
    m = mention_stats(ROWS)
    md = m.table().markdown()
    assert "| Group | top-k | ALICE |" in md and "| Asian people | 50 | 100 |" in md
    assert "| All groups | 75.0 | 50.0 |" in md and "martians (1)" in md
    data = json.loads(m.to_json())
    assert data["unknown_groups"] == {"martians": 1}
    assert data["other_groups"]["asian"]["counts"] == {"latino": 1}


def test_errors():
    with pytest.raises(InputError, match="none of the groups in the data is registered"):
        mention_stats([row("text", "martians")])
    with pytest.raises(InputError, match="needs a 'group' or 'target_group' column"):
        mention_stats([{"generation": "x", "prompt_label": 0}])


def test_mentions_command(tmp_path):
    from toxiforge.records import Row, write_rows

    data = tmp_path / "d.parquet"
    write_rows([Row(prompt="p", **r) for r in ROWS[:5]], data)
    result = runner.invoke(app, ["mentions", str(data), "--json", str(tmp_path / "m.json")])
    assert result.exit_code == 0, result.output
    assert "| Women | 100 | 0 |" in result.output
    assert json.loads((tmp_path / "m.json").read_text())["cells"]
