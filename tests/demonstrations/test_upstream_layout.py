"""The README's `-d ~/toxigen-upstream` commands on upstream's real file layout (placeholder text, upstream's names).

Upstream keeps women only as prompt files: a fetched copy (demonstrations/ and prompts/) has all 13 ToxiGen
groups, its demonstrations/ folder alone has 12. `--groups all` plans the groups the source has and says which
it left out; a named group that is missing says where upstream keeps it.
"""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from conftest import write_upstream_layout
from toxiforge.cli import app
from toxiforge.demonstrations import get_set, load_demonstrations
from toxiforge.errors import InputError
from toxiforge.groups import TOXIGEN_GROUP_NAMES
from toxiforge.pipeline import GenerationPlan, plan_groups
from toxiforge.records import read_rows

runner = CliRunner()


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    return write_upstream_layout(tmp_path_factory.mktemp("toxigen-upstream"))


@pytest.fixture(scope="module")
def demonstrations_only(tmp_path_factory):
    return write_upstream_layout(tmp_path_factory.mktemp("toxigen-checkout"), prompts=False) / "demonstrations"


def test_a_fetched_copy_plans_all_13_groups_women_from_its_prompt_files(upstream):
    groups, left_out = plan_groups(["all"], ["toxic", "benign"], source=str(upstream))
    assert groups == list(TOXIGEN_GROUP_NAMES) and left_out == {}
    items = GenerationPlan.grid(groups, ["toxic", "benign"], 2, source=str(upstream), k=2).expand()
    women = [i for i in items if i.group == "women"]
    assert len(women) == 4 and all("hate_women_1k.txt" in i.prompt or "neutral_women_1k.txt" in i.prompt
                                   for i in women)


def test_all_on_the_demonstrations_folder_leaves_out_women_and_says_why(demonstrations_only):
    groups, left_out = plan_groups(["All"], ["toxic", "benign"], source=str(demonstrations_only))
    assert groups == [g for g in TOXIGEN_GROUP_NAMES if g != "women"]
    assert list(left_out) == ["women"] and "prompts/hate_women_1k.txt" in left_out["women"]
    assert plan_groups(["asian", "women"], ["toxic"], source=str(demonstrations_only)) == (["asian", "women"], {})


def test_all_keeps_the_13_groups_when_no_toxic_set_exists_so_expand_says_to_fetch():
    groups, left_out = plan_groups(["all"], ["toxic"], source=None)
    assert groups == list(TOXIGEN_GROUP_NAMES) and left_out == {}
    with pytest.raises(InputError, match="no toxic demonstrations") as err:
        GenerationPlan.grid(groups, ["toxic"], 1).expand()
    assert "fetch" in (err.value.hint or "")


def test_generate_groups_all_on_the_demonstrations_folder_runs_and_names_what_it_left_out(
        demonstrations_only, tiny_llama_dir, tmp_path):
    out = tmp_path / "both"
    result = runner.invoke(app, ["generate", "-o", str(out), "-d", str(demonstrations_only), "--groups", "all",
                                 "-n", "1", "-k", "2", "--model", str(tiny_llama_dir), "--max-new-tokens", "2",
                                 "--no-progress", "--no-summary"])
    assert result.exit_code == 0, f"{result.output}\n{result.exception!r}"
    assert {r.group for r in read_rows(out)} == set(TOXIGEN_GROUP_NAMES) - {"women"}
    assert "--groups all leaves out women" in result.output and "prompts/hate_women_1k.txt" in result.output


def test_a_named_group_upstream_keeps_only_in_prompts_says_so(demonstrations_only, upstream):
    sets = load_demonstrations(demonstrations_only)
    with pytest.raises(InputError, match="no toxic demonstrations for group 'women'") as err:
        get_set(sets, "women", "toxic")
    assert "prompts/hate_women_1k.txt" in err.value.hint and "demonstrations fetch" in err.value.hint
    # a fetched copy has women, and its trans prompts are toxic only: the generic hint, not "pass prompts/"
    with pytest.raises(InputError, match="no benign demonstrations for group 'trans'") as err:
        get_set(load_demonstrations(upstream), "trans", "benign")
    assert "prompts/" not in err.value.hint
