"""Prompt format (paper Appendix A / upstream prompt files), seeded sampling and prompt files."""

from __future__ import annotations

import pytest

from toxiforge.demonstrations.prompts import (
    Prompt,
    build_prompts,
    format_prompt_file,
    read_prompt_file,
    write_prompt_file,
)
from toxiforge.demonstrations.sets import DemonstrationSet
from toxiforge.errors import InputError

BS_N = "\\n"  # the two characters backslash and n
WORDS = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
SENTENCES = [f"placeholder sentence {w} about group a" for w in WORDS]


def upstream_line(sentences) -> str:
    """A line in upstream's prompt-file format, built by hand (not with the code under test)."""
    return "".join("- " + s + BS_N for s in sentences) + "-"


def demo_set(n=10, group="asian", label=0) -> DemonstrationSet:
    return DemonstrationSet(group, label, tuple(SENTENCES[:n]), ("test",))


# --- format -----------------------------------------------------------------------------------------------------

def test_literal_backslash_n_is_two_characters():
    line = upstream_line(SENTENCES[:6])
    assert "\n" not in line and line.count(BS_N) == 6 and len(BS_N) == 2


@pytest.mark.parametrize("count", [1, 2, 6])
def test_from_line_to_line_round_trip(count):
    line = upstream_line(SENTENCES[:count])
    p = Prompt.from_line(line)
    assert p.demonstrations == tuple(SENTENCES[:count])
    assert p.to_line() == line


def test_round_trip_keeps_odd_spacing_and_punctuation():
    sentences = ["  leading spaces kept", "a - dash inside", "ends with dash -", "unicode café ünïcode"]
    line = upstream_line(sentences)
    assert Prompt.from_line(line).to_line() == line
    assert Prompt.from_line(line).demonstrations == tuple(sentences)


def test_from_line_ignores_line_terminator():
    line = upstream_line(SENTENCES[:6])
    assert Prompt.from_line(line + "\r\n").to_line() == line
    assert Prompt.from_line(line + "\n").to_line() == line


def test_text_is_appendix_a_format_with_real_newlines():
    p = Prompt.from_line(upstream_line(SENTENCES[:3]))
    expected = ("- placeholder sentence one about group a\n"
                "- placeholder sentence two about group a\n"
                "- placeholder sentence three about group a\n"
                "-")
    assert p.text == expected
    assert p.text.replace("\n", BS_N) == p.to_line()


def test_from_line_missing_trailing_dash_names_line():
    bad = "".join("- " + s + BS_N for s in SENTENCES[:3]).rstrip("\\n")
    with pytest.raises(InputError, match=r"p\.txt:7: .*trailing '-'"):
        Prompt.from_line(bad, path="p.txt", line_no=7)
    with pytest.raises(InputError, match="trailing"):
        Prompt.from_line("- a" + BS_N + "- b")


def test_from_line_part_without_bullet():
    with pytest.raises(InputError, match="part 2 .*does not start with '- '"):
        Prompt.from_line("- a" + BS_N + "b" + BS_N + "-")


def test_from_line_without_demonstrations():
    with pytest.raises(InputError, match="no demonstrations"):
        Prompt.from_line("-")


def test_prompt_rejects_newlines_in_demonstrations():
    with pytest.raises(InputError):
        Prompt(("a\nb",))
    with pytest.raises(InputError):
        Prompt(("a" + BS_N + "b",))
    with pytest.raises(InputError):
        Prompt(())


# --- sampling -----------------------------------------------------------------------------------------------------

def test_build_prompts_k_distinct_and_labelled():
    prompts = build_prompts(demo_set(), 50, k=5, seed=1)
    assert len(prompts) == 50
    for p in prompts:
        assert len(p.demonstrations) == 5
        assert len(set(p.demonstrations)) == 5
        assert set(p.demonstrations) <= set(SENTENCES)
        assert (p.group, p.label) == ("asian", 0)


def test_build_prompts_deterministic_for_seed():
    assert build_prompts(demo_set(), 20, k=4, seed=3) == build_prompts(demo_set(), 20, k=4, seed=3)


def test_build_prompts_differs_for_other_seed():
    assert build_prompts(demo_set(), 20, k=4, seed=3) != build_prompts(demo_set(), 20, k=4, seed=4)


def test_prompt_i_does_not_depend_on_n():
    short = build_prompts(demo_set(), 5, k=4, seed=9)
    long = build_prompts(demo_set(), 40, k=4, seed=9)
    assert long[:5] == short


def test_prompts_vary_across_indices():
    prompts = build_prompts(demo_set(), 30, k=3, seed=0)
    assert len({p.demonstrations for p in prompts}) > 20


def test_build_prompts_k_equal_to_set_size_uses_all():
    prompts = build_prompts(demo_set(6), 3, k=6, seed=0)
    assert all(sorted(p.demonstrations) == sorted(SENTENCES[:6]) for p in prompts)


def test_build_prompts_from_list_of_sentences():
    prompts = build_prompts(SENTENCES[:4] + SENTENCES[:2], 3, k=4)
    assert all(len(set(p.demonstrations)) == 4 for p in prompts)
    assert prompts[0].group is None


def test_k_larger_than_set():
    with pytest.raises(InputError, match=r"k=7 .*6 distinct demonstrations.*Fix: use -k 6 or fewer"):
        build_prompts(demo_set(6), 3, k=7)


@pytest.mark.parametrize("n,k", [(-1, 5), (3, 0), (3, -2)])
def test_bad_n_or_k(n, k):
    with pytest.raises(InputError):
        build_prompts(demo_set(), n, k=k)


def test_n_zero_gives_no_prompts():
    assert build_prompts(demo_set(), 0) == []


# --- files ----------------------------------------------------------------------------------------------------------

def test_write_read_round_trip(tmp_path):
    prompts = build_prompts(demo_set(), 12, k=5, seed=2)
    path = write_prompt_file(prompts, tmp_path / "neutral_asian_1k.txt")
    text = path.read_text(encoding="utf-8")
    assert text.endswith("-\n") and text.count("\n") == 12
    back = read_prompt_file(path)
    assert back == prompts
    assert format_prompt_file(back) == text


def test_read_upstream_style_file_exactly(tmp_path):
    lines = [upstream_line(SENTENCES[i:i + 6]) for i in range(4)]
    path = tmp_path / "hate_middle_east_1k.txt"
    path.write_text("\n".join(lines), encoding="utf-8")  # no final newline
    prompts = read_prompt_file(path)
    assert [p.to_line() for p in prompts] == lines
    assert {(p.group, p.label) for p in prompts} == {("middle_east", 1)}
    assert all(len(p.demonstrations) == 6 for p in prompts)


def test_read_prompt_file_name_without_1k_and_explicit_meta(tmp_path):
    path = tmp_path / "neutral_lgbtq.txt"
    path.write_text(upstream_line(SENTENCES[:2]) + "\n", encoding="utf-8")
    assert read_prompt_file(path)[0].group == "lgbtq"
    other = tmp_path / "whatever.txt"
    other.write_text(upstream_line(SENTENCES[:2]) + "\n", encoding="utf-8")
    assert read_prompt_file(other)[0].group is None
    p = read_prompt_file(other, group="Middle Eastern", label="toxic")[0]
    assert (p.group, p.label) == ("middle_east", 1)


def test_read_prompt_file_bad_line_names_line(tmp_path):
    path = tmp_path / "neutral_asian_1k.txt"
    good = upstream_line(SENTENCES[:3])
    path.write_text(good + "\n\n" + good + "\n" + good[:-3] + "\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"neutral_asian_1k\.txt:4: .*trailing '-'"):
        read_prompt_file(path)


def test_read_prompt_file_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_prompt_file(tmp_path / "missing_1k.txt")
    empty = tmp_path / "neutral_asian_1k.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    with pytest.raises(InputError, match="empty"):
        read_prompt_file(empty)
    unknown = tmp_path / "hate_nosuchgroup_1k.txt"
    unknown.write_text(upstream_line(SENTENCES[:2]) + "\n", encoding="utf-8")
    with pytest.raises(InputError, match="unknown group 'nosuchgroup'"):
        read_prompt_file(unknown)


def test_write_refuses_existing_file(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("keep me\n", encoding="utf-8")
    prompts = build_prompts(demo_set(), 2, k=2)
    with pytest.raises(InputError, match="already exists"):
        write_prompt_file(prompts, path)
    assert path.read_text(encoding="utf-8") == "keep me\n"
    write_prompt_file(prompts, path, overwrite=True)
    assert read_prompt_file(path) == [Prompt(p.demonstrations) for p in prompts]
    assert [q.name for q in tmp_path.iterdir()] == ["out.txt"]  # no temporary files left


def test_write_refuses_no_prompts(tmp_path):
    with pytest.raises(InputError, match="no prompts"):
        write_prompt_file([], tmp_path / "x.txt")
    assert not (tmp_path / "x.txt").exists()
