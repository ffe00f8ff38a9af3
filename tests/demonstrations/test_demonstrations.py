"""Demonstration readers for every layout, their errors, fetching (no network) and the CLI."""

from __future__ import annotations

import io
import json
import tarfile
import time
import urllib.error
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toxiforge.demonstrations import sets as sets_mod
from toxiforge.demonstrations.fetch import PINNED_COMMIT, FetchError, fetch_upstream
from toxiforge.demonstrations.prompts import read_prompt_file
from toxiforge.demonstrations.sets import (
    DemonstrationSet,
    get_set,
    load_demonstrations,
    load_shipped_benign,
    read_prompt_demonstrations,
    read_sentence_file,
    read_table,
)
from toxiforge.errors import InputError

BS_N = "\\n"


def sentences(tag: str, n: int = 4) -> list[str]:
    return [f"placeholder sentence {i} about {tag}" for i in range(1, n + 1)]


def write(path: Path, lines, end="\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + end, encoding="utf-8")
    return path


def prompt_line(items) -> str:
    return "".join("- " + s + BS_N for s in items) + "-"


def make_checkout(root: Path, with_prompts=True) -> Path:
    """A miniature upstream layout built from placeholder text."""
    demos = root / "demonstrations"
    write(demos / "race" / "neutral_asian_sentences.txt", sentences("group a"))
    write(demos / "race" / "hate_asian_sentences.txt", sentences("group a toxic label"))
    write(demos / "religion" / "hate_muslim.txt", sentences("group m", 3))
    write(demos / "religion" / "hate_muslim_sentences.txt", sentences("group m", 5)[1:] + ["extra line for m"])
    write(demos / "sexual_orientation" / "neutral_lgbtq.txt", sentences("group l"))
    if with_prompts:
        write(root / "prompts" / "neutral_asian_1k.txt", [prompt_line(sentences("prompt only", 6))])
        write(root / "prompts" / "neutral_chinese_1k.txt",
              [prompt_line(sentences("group c", 6)), prompt_line(sentences("group c", 7)[1:])])
        write(root / "prompts" / "new" / "neutral_bisexual.txt", [prompt_line(sentences("ignored", 2))])
    return root


# --- sentence files ---------------------------------------------------------------------------------------------

def test_sentence_file_with_and_without_sentences_suffix(tmp_path):
    a = read_sentence_file(write(tmp_path / "neutral_middle_east_sentences.txt", sentences("group e")))
    assert (a.group, a.label, a.sentences) == ("middle_east", 0, tuple(sentences("group e")))
    assert a.sources == (str(tmp_path / "neutral_middle_east_sentences.txt"),)
    b = read_sentence_file(write(tmp_path / "hate_lgbtq.txt", sentences("group l")))
    assert (b.group, b.label) == ("lgbtq", 1)
    c = read_sentence_file(write(tmp_path / "neutral_mental_disability_sentences.txt", sentences("d")))
    assert c.group == "mental_disability"


def test_sentence_file_cleanup(tmp_path):
    path = write(tmp_path / "neutral_asian.txt",
                 ["", "  - placeholder one  ", "placeholder two\r", "   ", "-", "placeholder one", "placeholder three"],
                 end="")
    s = read_sentence_file(path)
    assert s.sentences == ("placeholder one", "placeholder two", "placeholder three")


def test_sentence_file_explicit_group_and_label(tmp_path):
    path = write(tmp_path / "mine.txt", sentences("x"))
    s = read_sentence_file(path, group="Middle Eastern", label="benign")
    assert (s.group, s.label) == ("middle_east", 0)
    with pytest.raises(InputError, match="cannot tell group and label"):
        read_sentence_file(path)


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match=r"neutral_asian\.txt: no such file"):
        read_sentence_file(tmp_path / "neutral_asian.txt")
    with pytest.raises(InputError, match="no such file or directory"):
        load_demonstrations(tmp_path / "nowhere")


def test_empty_file(tmp_path):
    path = write(tmp_path / "neutral_asian.txt", ["", "   ", ""])
    with pytest.raises(InputError, match=r"neutral_asian\.txt: file is empty.*Fix:"):
        read_sentence_file(path)


def test_non_utf8_reports_line(tmp_path):
    path = tmp_path / "neutral_asian.txt"
    path.write_bytes(b"placeholder one\nplaceholder two\nbad \xe9 byte here\nplaceholder four\n")
    with pytest.raises(InputError, match=r"neutral_asian\.txt:3: .*not valid UTF-8.*Fix:"):
        read_sentence_file(path)


def test_utf8_bom_is_ignored(tmp_path):
    path = tmp_path / "neutral_asian.txt"
    path.write_bytes(b"\xef\xbb\xbfplaceholder one\n")
    assert read_sentence_file(path).sentences == ("placeholder one",)


def test_unknown_group_in_file_name(tmp_path):
    path = write(tmp_path / "neutral_nosuchgroup_sentences.txt", sentences("x"))
    with pytest.raises(InputError, match=r"unknown group 'nosuchgroup'.*Fix: known names: asian, bisexual"):
        read_sentence_file(path)


def test_unknown_label_word_in_file_name(tmp_path):
    path = write(tmp_path / "angry_asian_sentences.txt", sentences("x"))
    with pytest.raises(InputError, match=r"unknown label word 'angry'.*Fix: start the name with hate_ or neutral_"):
        read_sentence_file(path)
    with pytest.raises(InputError, match="unknown label"):
        read_sentence_file(write(tmp_path / "x.txt", ["a"]), group="asian", label="angry")


# --- layouts --------------------------------------------------------------------------------------------------------

def test_category_folder_tree_and_muslim_merge(tmp_path):
    root = make_checkout(tmp_path / "TOXIGEN", with_prompts=False)
    sets = load_demonstrations(root / "demonstrations")
    assert list(sets) == [("asian", 0), ("asian", 1), ("lgbtq", 0), ("muslim", 1)]
    muslim = sets[("muslim", 1)]
    # hate_muslim.txt first, then hate_muslim_sentences.txt; duplicates dropped, first-seen order kept
    assert muslim.sentences == tuple(sentences("group m", 5) + ["extra line for m"])
    assert [Path(p).name for p in muslim.sources] == ["hate_muslim.txt", "hate_muslim_sentences.txt"]


def test_prompts_folder(tmp_path):
    root = make_checkout(tmp_path / "TOXIGEN")
    sets = load_demonstrations(root / "prompts")
    assert list(sets) == [("asian", 0), ("chinese", 0)]  # prompts/new/ ignored
    assert sets[("chinese", 0)].sentences == tuple(sentences("group c", 7))


def test_upstream_root_prefers_sentence_files(tmp_path):
    root = make_checkout(tmp_path / "TOXIGEN")
    sets = load_demonstrations(root)
    assert list(sets) == [("asian", 0), ("asian", 1), ("chinese", 0), ("lgbtq", 0), ("muslim", 1)]
    assert sets[("asian", 0)].sentences == tuple(sentences("group a"))  # not the prompt-only ones
    assert sets[("chinese", 0)].sources == (str(root / "prompts" / "neutral_chinese_1k.txt"),)


def test_single_files_of_each_kind(tmp_path):
    root = make_checkout(tmp_path / "TOXIGEN")
    one = load_demonstrations(root / "prompts" / "neutral_chinese_1k.txt")
    assert list(one) == [("chinese", 0)] and len(one[("chinese", 0)]) == 7
    two = load_demonstrations(root / "demonstrations" / "religion" / "hate_muslim.txt")
    assert list(two) == [("muslim", 1)] and len(two[("muslim", 1)]) == 3
    s = read_prompt_demonstrations(root / "prompts" / "neutral_asian_1k.txt")
    assert s.sentences == tuple(sentences("prompt only", 6))
    assert len(read_prompt_file(root / "prompts" / "neutral_chinese_1k.txt")) == 2


def test_prompt_file_recognised_by_content_in_plain_folder(tmp_path):
    write(tmp_path / "mine" / "neutral_women.txt", [prompt_line(sentences("w", 3))])
    write(tmp_path / "mine" / "neutral_women_sentences.txt", sentences("w2", 2))
    write(tmp_path / "mine" / "neutral_jewish.txt", [prompt_line(sentences("j", 3))])
    sets = load_demonstrations(tmp_path / "mine")
    assert sets[("women", 0)].sentences == tuple(sentences("w2", 2))
    assert sets[("jewish", 0)].sentences == tuple(sentences("j", 3))


def test_prompt_file_missing_trailing_dash_names_line(tmp_path):
    bad = write(tmp_path / "prompts" / "neutral_asian_1k.txt",
                [prompt_line(sentences("a", 3)), prompt_line(sentences("a", 3))[:-1]])
    with pytest.raises(InputError, match=r"neutral_asian_1k\.txt:2: .*trailing '-'"):
        load_demonstrations(bad)
    with pytest.raises(InputError, match=r":2: "):
        load_demonstrations(tmp_path / "prompts")


def test_empty_folder(tmp_path):
    (tmp_path / "d").mkdir()
    with pytest.raises(InputError, match="found no demonstration or prompt files"):
        load_demonstrations(tmp_path / "d")


# --- tables -------------------------------------------------------------------------------------------------------

ROWS = [
    {"text": "placeholder table one about group a", "group": "asian", "label": "neutral"},
    {"text": "placeholder table two about group a", "group": "Asian people", "label": 0},
    {"text": "placeholder table one about group e", "group": "middle eastern", "label": "hate"},
    {"text": "", "group": "asian", "label": "benign"},
]


def write_table(path: Path, rows) -> Path:
    import pyarrow as pa

    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    else:
        table = pa.Table.from_pylist([{k: str(v) for k, v in r.items()} for r in rows])
        if path.suffix == ".csv":
            import pyarrow.csv as pcsv

            pcsv.write_csv(table, path)
        else:
            import pyarrow.parquet as pq

            pq.write_table(table, path)
    return path


@pytest.mark.parametrize("suffix", [".csv", ".jsonl", ".parquet"])
def test_table_formats(tmp_path, suffix):
    path = write_table(tmp_path / f"demos{suffix}", ROWS)
    for sets in (read_table(path), load_demonstrations(path)):
        assert list(sets) == [("asian", 0), ("middle_east", 1)]
        assert sets[("asian", 0)].sentences == ("placeholder table one about group a",
                                                "placeholder table two about group a")
        assert sets[("middle_east", 1)].sources == (str(path),)


def test_table_custom_columns(tmp_path):
    rows = [{"statement": r["text"], "target": r["group"], "y": r["label"]} for r in ROWS]
    path = write_table(tmp_path / "d.jsonl", rows)
    sets = read_table(path, text_col="statement", group_col="target", label_col="y")
    assert len(sets) == 2


def test_table_missing_column(tmp_path):
    path = write_table(tmp_path / "d.csv", [{"text": "placeholder", "group": "asian"}])
    with pytest.raises(InputError, match=r"no column 'label'; columns found: text, group"):
        read_table(path)


def test_table_unknown_group_and_label_name_row(tmp_path):
    path = write_table(tmp_path / "g.jsonl", ROWS[:1] + [{"text": "placeholder", "group": "nosuch", "label": 0}])
    with pytest.raises(InputError, match=r"g\.jsonl: row 2: unknown group 'nosuch'"):
        read_table(path)
    path = write_table(tmp_path / "l.jsonl", ROWS[:1] + [{"text": "placeholder", "group": "asian", "label": "meh"}])
    with pytest.raises(InputError, match=r"row 2: unknown label 'meh'"):
        read_table(path)


# --- shipped sets and get_set ---------------------------------------------------------------------------------------

def test_load_shipped_benign_reads_neutral_files(tmp_path, monkeypatch):
    write(tmp_path / "neutral_asian.txt", sentences("group a"))
    write(tmp_path / "neutral_women.txt", sentences("group w", 2))
    write(tmp_path / "README.txt", ["not a set"])
    monkeypatch.setattr(sets_mod, "shipped_benign_dir", lambda: tmp_path)
    sets = load_shipped_benign()
    assert list(sets) == [("asian", 0), ("women", 0)]
    assert len(sets[("women", 0)]) == 2


def test_real_shipped_benign_sets_are_benign():
    for key, s in load_shipped_benign().items():
        assert key == (s.group, 0) and len(s) > 0


def test_get_set(tmp_path):
    sets = load_demonstrations(make_checkout(tmp_path / "T"))
    assert get_set(sets, "Muslims", "hate").key == ("muslim", 1)
    assert get_set(sets, "asian", 0).key == ("asian", 0)
    with pytest.raises(InputError, match=r"no benign demonstrations for group 'women' \(available: asian/benign"):
        get_set(sets, "women", "benign")


def test_get_set_toxic_not_shipped_says_fetch():
    benign = {("asian", 0): DemonstrationSet("asian", 0, ("placeholder",))}
    with pytest.raises(InputError, match=r"not shipped.*toxiforge demonstrations fetch --dest DIR.*--demonstrations"):
        get_set(benign, "asian", "toxic")


# --- fetch ----------------------------------------------------------------------------------------------------------

def make_tarball(top="TOXIGEN-abc") -> bytes:
    files = {
        f"{top}/README.md": "readme placeholder\n",
        f"{top}/toxigen/alice.py": "# placeholder\n",
        f"{top}/demonstrations/race/neutral_asian_sentences.txt": "\n".join(sentences("group a")) + "\n",
        f"{top}/demonstrations/religion/hate_muslim.txt": "\n".join(sentences("group m")) + "\n",
        f"{top}/prompts/neutral_asian_1k.txt": prompt_line(sentences("group a", 3)) + "\n",
        f"{top}/prompts/new/neutral_bisexual.txt": prompt_line(sentences("b", 2)) + "\n",
    }
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo(f"{top}/demonstrations/link.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
    return buf.getvalue()


def serving(data: bytes, seen: list):
    def opener(url, timeout=None):
        seen.append((url, timeout))
        return io.BytesIO(data)
    return opener


def test_fetch_with_injected_opener(tmp_path):
    seen: list = []
    dest = fetch_upstream(tmp_path / "up", opener=serving(make_tarball(), seen), timeout=3)
    assert seen == [(f"https://codeload.github.com/microsoft/TOXIGEN/tar.gz/{PINNED_COMMIT}", 3)]
    files = sorted(p.relative_to(dest).as_posix() for p in dest.rglob("*") if p.is_file())
    assert files == ["SOURCE.json", "demonstrations/race/neutral_asian_sentences.txt",
                     "demonstrations/religion/hate_muslim.txt", "prompts/neutral_asian_1k.txt"]
    info = json.loads((dest / "SOURCE.json").read_text(encoding="utf-8"))
    assert info["repo"] == "microsoft/TOXIGEN" and info["commit"] == PINNED_COMMIT
    assert info["license"] == "MIT" and info["url"].endswith(PINNED_COMMIT) and info["fetched_at"]
    assert list(load_demonstrations(dest)) == [("asian", 0), ("muslim", 1)]
    assert [p.name for p in tmp_path.iterdir()] == ["up"]  # no staging leftovers


def test_fetch_refuses_non_empty_dest_unless_overwrite(tmp_path):
    dest = tmp_path / "up"
    write(dest / "keep.txt", ["x"])
    with pytest.raises(FetchError, match="not empty"):
        fetch_upstream(dest, opener=serving(make_tarball(), []))
    assert (dest / "keep.txt").exists()
    fetch_upstream(dest, opener=serving(make_tarball(), []), overwrite=True)
    assert not (dest / "keep.txt").exists() and (dest / "SOURCE.json").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["up"]


def test_fetch_offline_fails_fast_with_local_copy_hint(tmp_path):
    def offline(url, timeout=None):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    dest = tmp_path / "sub" / "up"
    start = time.monotonic()
    with pytest.raises(FetchError) as info:
        fetch_upstream(dest, opener=offline)
    assert time.monotonic() - start < 2
    message = str(info.value)
    assert "could not reach GitHub" in message
    assert "--demonstrations /path/to/TOXIGEN" in message and PINNED_COMMIT in message
    assert not dest.exists() and not (tmp_path / "sub").exists()


def test_fetch_timeout_is_reported(tmp_path):
    def slow(url, timeout=None):
        raise TimeoutError("timed out")

    with pytest.raises(FetchError, match="could not reach GitHub"):
        fetch_upstream(tmp_path / "up", opener=slow)
    assert not (tmp_path / "up").exists()


def test_fetch_rejects_unsafe_archive(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        info = tarfile.TarInfo("TOXIGEN-abc/demonstrations/../../evil.txt")
        info.size = 1
        tar.addfile(info, io.BytesIO(b"x"))
    with pytest.raises(FetchError, match="unsafe path"):
        fetch_upstream(tmp_path / "up", opener=serving(buf.getvalue(), []))
    assert list(tmp_path.iterdir()) == []


def test_fetch_bad_archive_and_commit(tmp_path):
    with pytest.raises(FetchError, match="not a readable"):
        fetch_upstream(tmp_path / "up", opener=serving(b"not a tarball", []))
    with pytest.raises(FetchError, match="not a commit id"):
        fetch_upstream(tmp_path / "up", commit="../x", opener=serving(b"", []))
    assert list(tmp_path.iterdir()) == []


# --- CLI ------------------------------------------------------------------------------------------------------------

def test_cli_prompts_build_writes_readable_file(tmp_path):
    from toxiforge.cli import app

    root = make_checkout(tmp_path / "T")
    out = tmp_path / "out" / "hate_muslim_1k.txt"
    args = ["prompts", "build", "--demonstrations", str(root), "--group", "muslims", "--label", "toxic",
            "-n", "7", "-k", "3", "--seed", "5", "-o", str(out)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    prompts = read_prompt_file(out)
    assert len(prompts) == 7 and all(len(p.demonstrations) == 3 for p in prompts)
    assert {(p.group, p.label) for p in prompts} == {("muslim", 1)}
    again = CliRunner().invoke(app, args)
    assert again.exit_code != 0 and "already exists" in str(again.exception)
    same = tmp_path / "same.txt"
    CliRunner().invoke(app, args[:-1] + [str(same)])
    assert same.read_text(encoding="utf-8") == out.read_text(encoding="utf-8")


def test_cli_toxic_without_demonstrations_says_fetch(tmp_path):
    from toxiforge.cli import app

    result = CliRunner().invoke(app, ["prompts", "build", "--group", "asian", "--label", "toxic",
                                      "-o", str(tmp_path / "x.txt")])
    assert result.exit_code != 0
    assert isinstance(result.exception, InputError)
    assert "toxiforge demonstrations fetch --dest DIR" in str(result.exception)
    assert not (tmp_path / "x.txt").exists()


def test_cli_k_too_large_error(tmp_path):
    from toxiforge.cli import app

    root = make_checkout(tmp_path / "T")
    result = CliRunner().invoke(app, ["prompts", "build", "-d", str(root), "-g", "asian", "-l", "benign",
                                      "-k", "9", "-o", str(tmp_path / "x.txt")])
    assert result.exit_code != 0 and "use -k 4 or fewer" in str(result.exception)


def test_cli_main_prints_error_and_exits_2(tmp_path, monkeypatch, capsys):
    from toxiforge import cli

    monkeypatch.setattr("sys.argv", ["toxiforge", "prompts", "build", "-d", str(tmp_path / "none"), "-g", "asian",
                                     "-l", "benign", "-o", str(tmp_path / "x.txt")])
    with pytest.raises(SystemExit) as info:
        cli.main()
    assert info.value.code == 2
    assert "no such file or directory" in capsys.readouterr().err


def test_cli_demonstrations_list(tmp_path):
    from toxiforge.cli import app

    root = make_checkout(tmp_path / "T")
    result = CliRunner().invoke(app, ["demonstrations", "list", str(root)])
    assert result.exit_code == 0, result.output
    assert "muslim" in result.output and "toxic" in result.output and "hate_muslim.txt" in result.output
    assert CliRunner().invoke(app, ["demonstrations", "list"]).exit_code == 0


def test_cli_fetch_offline(tmp_path, monkeypatch):
    from toxiforge.cli import app
    from toxiforge.demonstrations import fetch as fetch_mod

    def offline(url, timeout=None):
        raise urllib.error.URLError("offline")

    monkeypatch.setattr(fetch_mod.urllib.request, "urlopen", offline)
    result = CliRunner().invoke(app, ["demonstrations", "fetch", "--dest", str(tmp_path / "up")])
    assert result.exit_code != 0 and "could not reach GitHub" in str(result.exception)
    assert not (tmp_path / "up").exists()
