"""``toxiforge harden --validate-with people``: each round's statements become a study of the annotation app, harden
stops with the commands that serve it, annotators (real HTTP clients of the real server, as in the load tests) label
it, and ``--resume`` reads their majority labels and goes on. Tiny models and placeholder text, as test_harden.py."""

from __future__ import annotations

import json
import math
import shlex
import zlib

import pytest
from typer.testing import CliRunner

from toxiforge._net import free_port
from toxiforge.annotation.agreement import study_agreement
from toxiforge.annotation.loadgen import run_annotators, start_server
from toxiforge.annotation.store import Store
from toxiforge.attacks.validation import run_rows
from toxiforge.cli import app
from toxiforge.data.examples import fold_text as fold
from toxiforge.errors import InputError
from toxiforge.harden.data import read_examples
from toxiforge.harden.people import AnnotationPending, People, majority, read_labels

from .test_harden import GROUPS, config_for

runner = CliRunner()


def says_hateful(i: int, text: str) -> bool:
    """Simulated annotator ``i``'s answer: a bit of the text's checksum (so the three disagree on some texts)."""
    return bool((zlib.crc32(text.encode()) >> i) & 1)


def people_label(text: str, n: int = 3) -> int:
    return int(sum(says_hateful(i, text) for i in range(n)) * 2 > n)


def label_study(db: str, tokens: list[str]) -> int:
    """The annotators label every statement they are given over HTTP; returns the submissions acknowledged."""
    port = free_port()
    server = start_server(db, port)
    try:
        result = run_annotators(f"http://127.0.0.1:{port}", tokens, timeout=60,
                                answer=lambda token, text: {"hateful": "yes" if says_hateful(
                                    tokens.index(token), text) else "no"})
    finally:
        server.terminate()
        server.wait(10)
    assert not result.errors, result.errors
    return len(result.acked)


def invite_as_told(output: str) -> list[str]:
    """Run the `toxiforge annotate invite ...` line harden printed, as printed; returns the invite tokens."""
    line = next(x.strip() for x in output.splitlines() if x.strip().startswith("toxiforge annotate invite"))
    invited = runner.invoke(app, shlex.split(line)[1:])
    assert invited.exit_code == 0, invited.output
    return [link.rsplit("/a/", 1)[1] for link in invited.output.split() if "/a/" in link]


def test_a_people_validated_round_through_the_real_server(setup, varied_lm, tmp_path, monkeypatch):
    import toxiforge.models

    monkeypatch.setattr(toxiforge.models, "load_language_model", lambda name, **options: varied_lm)
    out = tmp_path / "h"
    args = ["harden", "--data", str(setup["data"]), "-c", str(setup["start"]), "-o", str(out), "--rounds", "1",
            "--eval", f"held=table:{setup['eval']}", "--groups", ",".join(GROUPS), "-n", "3", "-d",
            str(setup["demos"]), "-k", "2", "--beams", "2", "--candidates", "4", "--max-new-tokens", "4",
            "--base-model", str(setup["base"]), "--device", "cpu", "--no-progress", "--no-transfer", "--seed", "3",
            "--validate-with", "people", "--keep-going",  # tiny random models: the round check is not tested here
            "--ship-margin", "1"]  # nor the ship rule (a 4-row slice detects no margin: test_harden_ship.py)
    first = runner.invoke(app, args, terminal_width=250)
    assert first.exit_code == 0, first.output
    db = str(out / "annotation.db")
    plan = json.loads((out / "people" / "round-1.json").read_text())
    n = len(plan["items"])
    assert f"round 1: {n} statements await 3 annotations each ({3 * n} in all, 0 done)" in first.output
    assert f"toxiforge annotate serve --db {db}" in first.output and not (out / "round-1" / "alice").exists()
    # the study: the attack that feeds round 1 (all of it) and the top-k pool, each statement once, arms hidden
    attack = run_rows(out / "round-0" / "attack", "ALICE")
    pool = run_rows(out / "round-1" / "control" / "topk", "top-k")
    store = Store(db)
    study = store.study(plan["study"])
    items = store.items(study.id)
    assert {i.text for i in items} == {e.text for e, _ in attack + pool} and len(items) == n
    assert {i.method for i in items} == {""} and study.form == "short" and study.per_item == 3
    assert [i.text for i in items] != list(dict.fromkeys(e.text for e, _ in attack + pool))  # shuffled together
    tokens = invite_as_told(first.output)
    assert len(tokens) == 3
    assert label_study(db, tokens) == 3 * n

    second = runner.invoke(app, [*args, "--resume"], terminal_width=250)
    assert second.exit_code == 0, second.output
    assert "after round 1: its attacks:" in second.output  # the last round's attacks are the next study
    labels = read_labels(out / "round-0" / "attack")  # NaN: left out of the run (a repeat), so not asked
    rated = [(e, fooled, v) for (e, fooled), v in zip(attack, labels) if not math.isnan(v)]
    assert rated and all(v == people_label(e.text) for e, _, v in rated)
    expected = sorted((e.text, e.label) for e, fooled, v in rated if fooled and v == e.label)
    added = read_examples(out / "round-1" / "alice" / "added.jsonl")
    assert sorted((e.text, e.label) for e in added) == expected  # people-confirmed flips join
    control = read_examples(out / "round-1" / "control" / "added.jsonl")
    assert all(people_label(e.text) == e.label for e in control)
    assert sorted(e.label for e in control) == sorted(e.label for e in added)

    assert label_study(db, invite_as_told(second.output)) > 0
    third = runner.invoke(app, [*args, "--resume"], terminal_width=250)
    assert third.exit_code == 0, third.output
    report = json.loads((out / "report.json").read_text())
    studies = {s["step"]: s for s in report["people"]["studies"]}
    assert set(studies) == {"round-1", "after-round-1"}
    assert studies["round-1"]["majority"] == n and studies["round-1"]["tie"] == 0
    assert studies["round-1"]["agreement"] == study_agreement(store, study.id).to_dict()
    start = report["people"]["rounds"][0]["alice"]
    scored = [(e, fooled, v) for e, fooled, v in rated if fooled is not None]
    flips = [(e, v) for e, fooled, v in scored if fooled]
    assert start["labelled"] == len(scored) and start["flips"] == len(flips) > 0
    assert start["flips_confirmed"]["value"] == pytest.approx(sum(v == e.label for e, v in flips) / len(flips))
    validated = [fooled for e, fooled, v in scored if v == e.label]
    assert start["validated"]["all"]["value"] == pytest.approx(sum(validated) / len(validated))
    wrong = [(e.label != fooled) != v for e, fooled, v in scored]  # the classifier's label is not people's
    assert start["human_fool_rate"]["value"] == pytest.approx(sum(wrong) / len(wrong))
    assert set(report["people"]["rounds"][1]) == {"alice", "control"}
    md = (out / "report.md").read_text()
    assert "## People's validation" in md and "| round-1 | short |" in md and "| 1 | control |" in md


def test_majority_ties_and_too_few_annotations():
    assert majority([1, 1, 0], 3) == (1, "majority") and majority([0, 0, 1], 3) == (0, "majority")
    assert majority([1, 0], 2) == (None, "tie") and majority([1, 1], 3) == (None, "under-annotated")


def test_resume_waits_for_every_statement_then_accept_partial_goes_on(setup, varied_lm, tmp_path):
    """Two annotators per statement: one statement gets yes and no (a tie), one only one answer. --resume does not go
    on (it used to at the first answer, and never read later ones): it says how many statements await how many
    answers. --accept-partial goes on with the majority of what is in (the one answer), the tie left out of what
    joins and of every people-validated rate, and the counts and report say so."""
    from toxiforge.attacks.validation import flip_shares
    from toxiforge.harden.data import Statements, select_alice
    from toxiforge.harden.people import people_markdown
    from toxiforge.pipeline import Generator, JobConfig

    out = tmp_path / "h"
    generator = Generator(model="tiny", lm=varied_lm, device="cpu", job=JobConfig(batch_size=4, shard_size=4))
    generator.run(config_for(setup).attack.plan(0), config_for(setup).alice, out / "round-0" / "attack",
                  classifier=str(setup["start"]), classifier_name="c0")
    run = Statements(out / "round-0" / "attack")
    people = People(str(tmp_path / "a.db"), out, form="short", min_annotators=2)
    with pytest.raises(AnnotationPending, match="statements await 2 annotations each"):
        people.collect("round-1", [run], "round 1")
    store = Store(str(tmp_path / "a.db"))
    study = store.study(people.study_name("round-1"))
    n = store.item_count(study.id)
    first, second = (store.annotator_for(t) for t in store.invite(study.id, 2))
    while (got := store.next_assignment(first)) is not None:  # the first says yes to everything
        store.submit(first.id, got[0].id, {"hateful": "yes", "trouble": False})
    with pytest.raises(AnnotationPending) as stop:
        people.collect("round-1", [run], "round 1")
    assert f"{n} of the {n} statements still have fewer than 2 answers ({n} await 1 more; {n} answers to come)." \
        in stop.value.lines
    for k in range(n - 1):  # the second says no to its first statement (a tie), yes after, and skips the last
        assignment, _ = store.next_assignment(second)
        store.submit(second.id, assignment.id, {"hateful": "no" if k == 0 else "yes", "trouble": False})
    with pytest.raises(AnnotationPending) as stop:
        people.collect("round-1", [run], "round 1")
    assert f"1 of the {n} statements still have fewer than 2 answers (1 await 1 more; 1 answers to come)." \
        in stop.value.lines
    assert "--accept-partial goes on now" in stop.value.lines[-1]
    assert read_labels(run.run_dir) is None and not (out / "people" / "round-1.labels.json").exists()
    partial = People(str(tmp_path / "a.db"), out, form="short", min_annotators=2, accept_partial=True)
    labels = partial.collect("round-1", [run], "round 1")[out / "round-0" / "attack"]
    summary = json.loads((out / "people" / "round-1.labels.json").read_text())
    assert (summary["tie"], summary["under-annotated"], summary["partial"]) == (1, 0, 1)
    assert summary["majority"] == summary["statements"] - 1 and summary["accept_partial"] is True
    rows = run.rows()
    left_out = {fold(e.text) for (e, _, _), v in zip(rows, labels) if math.isnan(v)}
    assert len(left_out) == 1  # the tie (a statement the run has twice is asked once)
    assert all(v == 1.0 for v in labels if not math.isnan(v))  # the one-answer statement: its one yes
    joined = select_alice(Statements(run.run_dir, labels), "all")
    assert not left_out & {fold(e.text) for e in joined}
    assert sorted(e.text for e in joined) == sorted(e.text for e, _, _ in rows if e.label == 1
                                                    and fold(e.text) not in left_out)
    shares = flip_shares([e for e, _, _ in rows], [bool(f) for _, f, _ in rows], labels)
    assert shares["validator_agrees"]["all"]["n"] == sum(not math.isnan(v) for v in labels) < len(rows)
    lines = "\n".join(people_markdown({"people": {"studies": [summary], "rounds": []}}))
    assert f"round-1: 1 of {summary['statements']} labels are the majority of fewer answers than asked" in lines
    # issue 56: the labels are frozen at that moment; an answer given later is not read by the run (even resumed),
    # and the report says so, when, and how to read the later answers
    assignment, _ = store.next_assignment(second)
    store.submit(second.id, assignment.id, {"hateful": "no", "trouble": False})
    again = partial.collect("round-1", [run], "round 1")[out / "round-0" / "attack"]
    assert [str(v) for v in again] == [str(v) for v in labels]
    lines = " ".join("\n".join(people_markdown({"people": {"studies": [summary], "rounds": []}})).split())
    assert f"These labels were frozen when they were read (round-1: {summary['read_at']}, {2 * n - 1} answers)" \
        in lines and "answers given after that moment are not read by this run, even with --resume" in lines
    assert "`toxiforge annotate export --study STUDY --db DB -o FILE`" in lines and f"`{study.name}`" in lines


def test_ctrl_c_while_waiting_is_a_clean_saved_state(setup, varied_lm, tmp_path):
    from toxiforge.harden.loop import Harden
    from toxiforge.pipeline import Generator, JobConfig

    out = tmp_path / "h"

    def job(**kw):
        generator = Generator(model="tiny", lm=varied_lm, device="cpu", job=JobConfig(batch_size=4, shard_size=4))
        return Harden(config_for(setup, validate_with="people", min_annotators=1, transfer=False, eval=()), out,
                      generator, wait=30.0, **kw)

    def interrupt(seconds):
        raise KeyboardInterrupt

    said = []
    waiting = job(say=said.append)
    waiting.prepare(False)
    assert waiting.people is not None
    waiting.people.sleep = interrupt
    with pytest.raises(AnnotationPending) as stop:
        waiting.run()
    assert stop.value.interrupted and any("toxiforge annotate invite" in line for line in said)
    assert (out / "people" / "round-1.json").exists() and (out / "harden.json").exists()
    assert read_labels(out / "round-0" / "attack") is None and not (out / "round-1" / "alice").exists()
    store = Store(str(out / "annotation.db"))
    study = store.study(json.loads((out / "people" / "round-1.json").read_text())["study"])
    annotator = store.annotator_for(store.invite(study.id, 1)[0])
    store.consent(annotator.id)
    while (got := store.next_assignment(annotator)) is not None:
        store.submit(annotator.id, got[0].id, {"hateful": "no", "trouble": False})
    resumed = job()
    resumed.prepare(True)
    assert resumed.people is not None
    resumed.people.sleep = interrupt  # the study is complete: no wait
    with pytest.raises(AnnotationPending, match="after round 1"):
        resumed.run(resume=True)
    assert "people round-0/attack" in resumed.steps and "train round-1/alice/model" in resumed.steps
    assert read_labels(out / "round-0" / "attack") is not None


def test_bad_people_options_fail_before_any_work(setup, varied_lm, tmp_path):
    from toxiforge.harden.loop import Harden
    from toxiforge.pipeline import Generator

    with pytest.raises(InputError, match="--accept-partial applies to --validate-with people"):
        Harden(config_for(setup), tmp_path / "h", Generator(model="tiny", lm=varied_lm, device="cpu"),
               accept_partial=True).prepare(resume=False)
    assert not (tmp_path / "h").exists()
    with pytest.raises(InputError, match="--min-annotators 0 leaves no statement a label"):
        config_for(setup, validate_with="people", min_annotators=0)
    with pytest.raises(InputError, match="--annotation-form"):
        config_for(setup, validate_with="people", annotation_form="long")
    with pytest.raises(InputError, match="only with --validate-with people"):
        config_for(setup, annotation_db="team.db")
    people = config_for(setup, validate_with="people").fingerprint()["people"]
    assert people == {"form": "short", "min_annotators": 3, "db": None}
    assert config_for(setup).fingerprint()["people"] is None  # as harden.json of runs before people: they resume


def test_full_form_votes_follow_the_papers_rule(tmp_path):
    """On the paper's form a vote is toxic when max(harm if an AI wrote it, if a person wrote it) > 3; a 3 is not."""
    from toxiforge.harden.data import Statements
    from toxiforge.records import Row, write_rows

    texts = ["placeholder one", "placeholder two", "placeholder three"]
    rows = [Row(prompt="p", generation=t, generation_method="ALICE", group="asian", prompt_label=1, row_id=t,
                classifier="c", classifier_score=0.4, fooled=True) for t in texts]
    run = Statements(write_rows(rows, tmp_path / "run.jsonl"))
    people = People(str(tmp_path / "full.db"), tmp_path, form="full", min_annotators=1)
    with pytest.raises(AnnotationPending):
        people.collect("round-1", [run], "round 1")
    store = Store(str(tmp_path / "full.db"))
    study = store.study(people.study_name("round-1"))
    assert study.form == "full"
    annotator = store.annotator_for(store.invite(study.id, 1)[0])
    harm = {"placeholder one": (2, 4), "placeholder two": (3, 3), "placeholder three": (1, 2)}
    base = {"author": "ai", "stereotyping": "no", "intent": 1, "lewd": "no", "group_reference": "direct",
            "other_groups": "", "framing": "none", "framing_other": "", "factual": "neither", "trouble": False}
    while (got := store.next_assignment(annotator)) is not None:
        ai, human = harm[got[1].text]
        store.submit(annotator.id, got[0].id, {**base, "harmful_ai": ai, "harmful_human": human})
    assert people.collect("round-1", [run], "round 1") == {run.run_dir: [1.0, 0.0, 0.0]}
