"""The README's example commands, parsed from README.md and run as written, in order, in one working folder.

A changed example is what gets tested (nothing here copies the README). Where a command as written needs what a
test may not use -- the network, a long run, a model from the hub -- a substitution stands in, and each one is in
the test's name:

* ``shared-data``: ``~/toxigen-upstream`` (what ``demonstrations fetch`` writes) is ``../shared/data/toxigen-dev``,
  upstream's own demonstrations for 8 groups, without upstream's ``prompts/``; ``--groups all`` plans those 8
  groups (the command names the others it left out), a group the folder lacks becomes muslim (``women-is-muslim``);
  ``~/toxigen-upstream/prompts`` is a folder of prompt files built from them with ``toxiforge prompts build``;
* ``tiny-llama``: a 2-layer random Llama saved in-process replaces the language model (the embedded SmolLM2 or a
  placeholder such as ``M``); ``max-new-tokens-3`` and, for ALICE, ``beams-2-candidates-8`` keep decoding short;
* ``n-2``: ``-n``/``--per-group``/``--test-size``/``--sample`` become 2 (or 4);
* ``tiny-bert``: a 2-layer random BERT replaces the encoder that ``train``/``experiment``/``bias datamap``
  fine-tune, with 1 epoch (2 for DataMaps);
* ``profanity-check``: the offline classifier replaces a hub classifier (``toxigen-roberta``) or a placeholder;
* ``tiny-multilabel-bert``: a 2-layer random BERT with independent sigmoids (labels ``toxicity``, ``insult``)
  replaces a Detoxify checkpoint from the hub;
* ``prompt-file-groups``: ``bench generate`` on the built prompt files asks for their groups (asian, muslim), not
  open-instruct's 14;
* ``shared-dialect-model``: ``../shared/data/twitteraae`` stands for what ``bias dialect fetch`` caches;
* ``one-method``: ``experiment debias`` runs Vanilla only; ``aflite-m-4``: AFLite's ensemble has 4 models, not 64;
* ``answers-submitted-by-the-test``: before ``annotate export``, every invited annotator's assignments are answered
  through the store, as annotators would in the browser;
* placeholders: ``data.parquet`` is ``runs/topk/scored.parquet``, ``runs/b-other`` is ``runs/b-m``.

Commands that need a server, a Ray cluster or the network, or that block (``annotate serve``), are skipped, and
the reason is printed. At the end the tier lists the README lines that passed only on a substitute for upstream's
files (``tests/readme/conftest.py``): a green tier says they run on toxigen-dev, not on a fetched copy. The
commands share one folder and run in README order, so each reads what the ones before wrote, as a user following
the README would.
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
DEMOS = SHARED / "toxigen-dev"
DIALECT = SHARED / "twitteraae"
DAVIDSON = SHARED / "davidson2017" / "labeled_data.csv"
TOXTRIG = SHARED / "toxic-debias" / "word_based_bias_list.csv"
SHARED_GROUPS = "asian,black,jewish,latino,native_american,muslim,mental_disability,physical_disability"
UPSTREAM = "~/toxigen-upstream"


def readme_commands(text: str) -> list[tuple[int, str]]:
    """``(line number, command)`` of every ``toxiforge ...`` line in the README's bash blocks (continuation lines
    joined, comments dropped)."""
    out, in_bash, pending, start = [], False, "", 0
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("```"):
            in_bash = line.strip() == "```bash"
            continue
        if not in_bash:
            continue
        if not pending:
            start = number
        pending += line.rstrip().removesuffix("\\") + (" " if line.rstrip().endswith("\\") else "")
        if line.rstrip().endswith("\\"):
            continue
        words = shlex.split(pending, comments=True)
        if words and words[0] == "toxiforge":
            out.append((start, shlex.join(words)))
        pending = ""
    return out


SKIP = [  # (pattern on the command, reason)
    (r"--model openai:|--ray\b|--ray-address", "needs an inference server or a Ray cluster"),
    (r"^toxiforge (demonstrations|bias lexicon|bias dialect) fetch", "needs the network (the tier uses the shared "
                                                                     "copies instead)"),
    (r"^toxiforge annotate serve", "starts a server that runs until stopped"),
    (r"--aae-column p_aae", "needs a table with a p_aae column (from `bias dialect predict`)"),
]


def split_groups(value: str) -> list[str]:
    return [g.strip() for g in value.split(",") if g.strip()]


def _value(args: list[str], *names: str) -> int | None:
    return next((i for i, a in enumerate(args) if a in names), None)


def _set(args: list[str], names: tuple[str, ...], value: str) -> bool:
    """Replace the value of the first of ``names`` present; False when none is."""
    i = _value(args, *names)
    if i is None:
        return False
    args[i + 1] = value
    return True


def adapt(command: str, tiny_llama: str = "TINY_LLAMA", tiny_bert: str = "TINY_BERT") -> tuple[list[str], list[str]]:
    """The README command as argv with the test's substitutions, and their names (module docstring)."""
    args = shlex.split(command)[1:]
    tags: list[str] = []
    head = " ".join(args[:2])
    if any(UPSTREAM in a for a in args):
        prompts = any(a.startswith(UPSTREAM + "/prompts") for a in args)
        args = [a.replace(UPSTREAM + "/prompts", "UPSTREAM_PROMPTS").replace(UPSTREAM, str(DEMOS)) for a in args]
        tags.append("shared-data" + ("-prompts-built" if prompts else ""))
        if prompts or "--demonstrations" in args or "-d" in args:
            # --groups all (generate's default) plans the shared groups and prints the ones it left out
            group = _value(args, "--groups", "--group")
            shared = SHARED_GROUPS.split(",")
            named = split_groups(args[group + 1]) if group is not None else []
            absent = [g for g in named if g not in shared + ["all"]]
            if group is not None and absent:
                kept = [g if g in shared else "muslim" for g in split_groups(args[group + 1])]
                args[group + 1] = ",".join(dict.fromkeys(kept))
                tags.append("-".join(absent) + "-is-muslim")
            elif group is None and head == "bench generate" and prompts:  # open-instruct's 14 default groups
                args += ["--groups", "asian,muslim"]
                tags.append("prompt-file-groups")
    llm_commands = ("generate", "perplexity", "report", "bench generate", "bench classify", "bias relabel", "harden")
    if args[0] in llm_commands or head in llm_commands:
        option = {"perplexity": "--lm", "report": "--lm", "bias relabel": "--lm"}.get(
            args[0] if args[0] in ("perplexity", "report") else head, "--model")
        if not _set(args, (option, "-m"), tiny_llama):
            args += [option, tiny_llama]
        tags.append("tiny-llama")
        if args[0] in ("generate", "harden") or head == "bench generate":
            args += ["--max-new-tokens", "3", "--no-progress"] + (["--no-summary"] if args[0] == "generate" else [])
        if "alice" in args or args[0] == "harden":  # harden's attack is ALICE
            args += ["--beams", "2", "--candidates", "8"]
            tags.append("beams-2-candidates-8")
    if any(_set(args, (name,), "2") for name in ("-n", "--per-group", "--test-size")) or _set(args, ("--sample",),
                                                                                            "4"):
        tags.append("n-2")
    if "toxigen-roberta" in args or "./my-finetuned-model" in args:
        args = ["profanity-check" if a in ("toxigen-roberta", "./my-finetuned-model") else a for a in args]
        tags.append("profanity-check")
    if head == "bench generate" and "--classifier" not in args and "-c" not in args:
        args += ["-c", "profanity-check"]
        tags.append("profanity-check")
    if "detoxify-unbiased" in args:
        args = [a if a != "detoxify-unbiased" else "TINY_MULTILABEL_BERT" for a in args]
        tags.append("tiny-multilabel-bert")
    trains = args[0] in ("train", "harden") or head in ("experiment table4", "experiment debias", "bias datamap")
    if trains:
        args += ["--base-model", tiny_bert, "--epochs", "2" if head in ("bias datamap", "experiment debias") else "1",
                 "--max-length", "16"]
        tags.append("tiny-bert")
    if args[0] == "harden":  # the tiny BERT, trained 1 epoch on a few rows, calls every text one class in some
        args += ["--auc-tolerance", "1", "--fpr-tolerance", "1"]  # rounds: the paired check (off here) stops those
        tags.append("paired-check-off")                             # (tests/harden/test_harden_guard.py tests it)
    if head == "experiment debias":
        args += ["--methods", "Vanilla"]
        tags.append("one-method")
    if head == "bias relabel":
        args += ["--dialect-model", str(DIALECT), "--max-new-tokens", "3"]
        tags.append("shared-dialect-model")
    if args[0] in ("train", "evaluate", "split") or head in ("experiment table4", "bias datamap"):
        args += ["--device", "cpu"]
    if "data.parquet" in args:  # the README's placeholder for "a dataset file"
        args = [a if a != "data.parquet" else "runs/topk/scored.parquet" for a in args]
        tags.append("data.parquet-is-runs-topk-scored")
    if head == "bias aflite":
        args += ["-m", "4"]
        tags.append("aflite-m-4")
    if head == "experiment debias":
        args += ["--aflite-ensemble", "4"]
    if "davidson:labeled_data.csv" in args:  # Davidson et al.'s file: the shared copy, a sample of it
        args = [a if a != "davidson:labeled_data.csv" else f"davidson:{DAVIDSON}#sample=200" for a in args]
        tags.append("shared-davidson-200")
    if "--lexicon" in args and args[args.index("--lexicon") + 1] == "upstream" and "--oi-list" not in args:
        args += ["--oi-list", str(TOXTRIG), "--dialect-model", str(DIALECT)]  # what `bias ... fetch` would cache
        tags.append("shared-word-list")
    if head == "annotate export":
        tags.append("answers-submitted-by-the-test")
    if head == "bench compare":
        args = [a if a != "runs/b-other" else "runs/b-m" for a in args]
        tags.append("b-other-is-b-m")
    if (args[0] == "train" or head == "experiment table4") and "--no-progress" not in args:
        args.append("--no-progress")
    return args, tags


pytestmark = pytest.mark.readme
COMMANDS = readme_commands((ROOT / "README.md").read_text(encoding="utf-8"))


def _cases(commands: list[tuple[int, str]]) -> list:
    """One parameter per command. Without the shared data the commands that read it are skipped, and so is every
    later one: they run in order in one folder, each on what the ones before wrote."""
    cases, missing_from = [], None
    for line, command in commands:
        reason = next((why for pattern, why in SKIP if re.search(pattern, command)), None)
        _, tags = adapt(command)
        name = f"L{line}-" + "-".join(shlex.split(command)[1:3]) + "".join(f"[{t}]" for t in tags)
        if not reason and "davidson:" in command and not DAVIDSON.is_file():
            reason = f"the shared data is absent ({DAVIDSON})"
        if not reason and not DEMOS.is_dir():
            if missing_from is None and any(t.startswith("shared-data") for t in tags):
                missing_from = line
            if missing_from == line:
                reason = f"the shared data is absent ({DEMOS})"
            elif missing_from is not None:
                reason = (f"the shared data is absent ({DEMOS}), so the README's line {missing_from} was skipped "
                          "and the commands after it lack what it and the ones after it write")
        cases.append(pytest.param(command, id=name, marks=[pytest.mark.skip(reason=reason)] if reason else []))
    return cases


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, tiny_tokenizer):
    """One folder for every command, with the tiny models, and the prompt files built from the shared data."""
    from transformers import BertForSequenceClassification, BertModel

    from conftest import build_tiny_llama, build_word_tokenizer, tiny_bert_config

    folder = tmp_path_factory.mktemp("readme")
    llama = folder / "_tiny-llama"
    build_tiny_llama(tiny_tokenizer, newline_bias=3.0).save_pretrained(llama)
    tiny_tokenizer.save_pretrained(llama)
    bert = folder / "_tiny-bert"
    words = build_word_tokenizer(["placeholder people enjoy music food sports weekend history plans"] * 3)
    BertModel(tiny_bert_config(words)).save_pretrained(bert)
    words.save_pretrained(bert)
    multilabel = folder / "TINY_MULTILABEL_BERT"
    BertForSequenceClassification(tiny_bert_config(
        words, num_labels=2, problem_type="multi_label_classification", id2label={0: "toxicity", 1: "insult"},
        label2id={"toxicity": 0, "insult": 1})).save_pretrained(multilabel)
    words.save_pretrained(multilabel)
    old = Path.cwd()
    os.chdir(folder)
    try:
        if DEMOS.is_dir():
            from toxiforge.cli import app

            prompts = folder / "UPSTREAM_PROMPTS"
            prompts.mkdir()
            for group in ("muslim", "asian"):
                for label in ("toxic", "benign"):
                    result = CliRunner().invoke(app, ["prompts", "build", "-d", str(DEMOS), "--group", group,
                                                      "--label", label, "-n", "4", "-k", "2", "-o", str(prompts)])
                    assert result.exit_code == 0, result.output
        yield folder, str(llama), str(bert)
    finally:
        os.chdir(old)


def test_the_readme_has_commands_to_test():
    assert len(COMMANDS) > 30
    assert sum(1 for _, c in COMMANDS if not any(re.search(p, c) for p, _ in SKIP)) > 25


def test_substitutes_for_upstream_are_named_and_groups_all_runs_as_written():
    args, tags = adapt("toxiforge harden -c m -d ~/toxigen-upstream --groups asian,women -n 50")
    assert args[args.index("--groups") + 1] == "asian,muslim" and args[args.index("-d") + 1] == str(DEMOS)
    assert tags[:2] == ["shared-data", "women-is-muslim"]
    args, tags = adapt("toxiforge generate -o runs/both -d ~/toxigen-upstream --groups all -n 500")
    assert args[args.index("--groups") + 1] == "all" and tags[0] == "shared-data"


@pytest.mark.parametrize("command", _cases(COMMANDS))
def test_readme_command(command, workdir, monkeypatch, record_property):
    from toxiforge.cli import app

    folder, llama, bert = workdir
    monkeypatch.chdir(folder)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    args, tags = adapt(command, llama, bert)
    record_property("readme_substitutes", tags)  # the tier's summary lists them (tests/readme/conftest.py)
    if "answers-submitted-by-the-test" in tags:
        _answer_everything(args[args.index("--db") + 1])
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, f"{command}\nran as: toxiforge {shlex.join(args)}\n{result.output}\n" \
                                  f"{result.exception!r}"


def _answer_everything(db: str) -> None:
    """Submit the same placeholder answers for every open assignment of every annotator of the database."""
    from sqlalchemy import select

    from toxiforge.annotation.schema import Annotator
    from toxiforge.annotation.store import Store

    answers = {"author": "human", "harmful_ai": 1, "harmful_human": 1, "stereotyping": "no", "intent": 1,
               "lewd": "no", "group_reference": "indirect", "other_groups": "", "framing": "moral",
               "framing_other": "", "factual": "opinion", "trouble": False}
    store = Store(db)
    with store.ReadSession() as session:
        ids = list(session.scalars(select(Annotator.id)))
    for annotator_id in ids:
        with store.ReadSession() as session:
            annotator = session.get(Annotator, annotator_id)
        while (got := store.next_assignment(annotator)) is not None:
            store.submit(annotator.id, got[0].id, answers)
