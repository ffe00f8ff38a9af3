"""The `toxiforge annotate` commands end to end (study create, invite, agreement, export)."""

from __future__ import annotations

import re

from typer.testing import CliRunner

from toxiforge.annotation.store import Store
from toxiforge.cli import app
from toxiforge.data import load_toxigen_annotated
from toxiforge.records import Row, write_rows

ANSWERS = {"author": "human", "harmful_ai": 1, "harmful_human": 4, "stereotyping": "no", "intent": 1, "lewd": "no",
           "group_reference": "indirect", "other_groups": "", "framing": "moral", "framing_other": "",
           "factual": "opinion", "trouble": False}


def test_annotate_commands(tmp_path, database):
    rows = [Row(prompt="p", generation=f"placeholder {g} {lab} {i}", generation_method="top-k", group=g,
                prompt_label=lab, row_id=f"{g}/{lab}/{i}") for g in ("asian", "women") for lab in (0, 1)
            for i in range(5)]
    data = write_rows(rows, tmp_path / "d.jsonl")
    db = database
    runner = CliRunner()
    r = runner.invoke(app, ["annotate", "study", "create", str(data), "--per-item", "2", "--sample", "8",
                            "--stratify", "group,label,method", "--db", db, "--name", "pilot"])
    assert r.exit_code == 0, r.output
    assert "8 statements x 2 annotators" in r.output and "/admin/login/" in r.output
    r = runner.invoke(app, ["annotate", "invite", "--study", "pilot", "-n", "3", "--db", db])
    links = re.findall(r"http://127\.0\.0\.1:8000/a/(\S+)", r.output)
    assert r.exit_code == 0 and len(set(links)) == 3
    store = Store(db)
    for token in links:
        annotator = store.annotator_for(token)
        while (got := store.next_assignment(annotator)) is not None:
            store.submit(annotator.id, got[0].id, ANSWERS)
    r = runner.invoke(app, ["annotate", "agreement", "--study", "pilot", "--db", db])
    assert r.exit_code == 0 and "items with 2 responses: 8" in r.output and "full agreement: 100.00%" in r.output
    out = tmp_path / "annotated.csv"
    r = runner.invoke(app, ["annotate", "export", "--study", "pilot", "--format", "annotated", "-o", str(out),
                            "--db", db])
    assert r.exit_code == 0 and "wrote 8 rows" in r.output
    assert len(load_toxigen_annotated(out).examples) == 8
    r = runner.invoke(app, ["annotate", "export", "--study", "nope", "-o", str(out), "--db", db])
    assert r.exit_code != 0


def _study(tmp_path, db: str) -> None:
    rows = [Row(prompt="p", generation=f"placeholder {i}", generation_method="top-k", group="asian",
                prompt_label=i % 2, row_id=f"asian/x/{i}") for i in range(4)]
    data = write_rows(rows, tmp_path / "d.jsonl")
    r = CliRunner().invoke(app, ["annotate", "study", "create", str(data), "--db", db, "--name", "pilot"])
    assert r.exit_code == 0, r.output
    assert f"next: toxiforge annotate invite --study pilot --annotators 5 --db {db}" in r.output


def test_a_mistyped_db_is_refused_by_every_command_but_study_create(tmp_path):
    """Issue 27 #2: `--db` naming a file that does not exist used to create a new, empty database."""
    _study(tmp_path, str(tmp_path / "study.db"))
    typo = tmp_path / "stduy.db"
    for args in (["invite", "--study", "pilot"], ["release", "--study", "pilot"], ["agreement", "--study", "pilot"],
                 ["export", "--study", "pilot", "-o", str(tmp_path / "x.csv")]):
        r = CliRunner().invoke(app, ["annotate", *args, "--db", str(typo)])
        assert r.exit_code != 0, args
        assert f"{typo}: no such study database" in str(r.exception)
        assert f"toxiforge annotate study create DATA --db {typo}" in str(r.exception)
        assert not typo.exists()


def test_serve_refuses_a_missing_db(tmp_path):
    r = CliRunner().invoke(app, ["annotate", "serve", "--db", str(tmp_path / "none.db"), "--port", "1"])
    assert "no such study database" in str(r.exception) and not (tmp_path / "none.db").exists()


def test_invite_uses_the_address_serve_recorded(tmp_path, monkeypatch):
    """Issue 27 #3: links used port 8000 whatever port `serve` used; now serve records its address in the
    database and invite reads it, or says which address it assumed."""
    db = str(tmp_path / "study.db")
    _study(tmp_path, db)
    r = CliRunner().invoke(app, ["annotate", "invite", "--study", "pilot", "--db", db])
    assert re.search(r"^http://127\.0\.0\.1:8000/a/\S+$", r.output, re.M)
    assert "note: the links use http://127.0.0.1:8000, `annotate serve`'s default host and port" in r.output
    assert "--base-url" in r.output

    import toxiforge.annotation.app as app_module

    monkeypatch.setattr(app_module, "serve", lambda *a, **k: None)  # record the address, do not start a server
    r = CliRunner().invoke(app, ["annotate", "serve", "--db", db, "--port", "8123"])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(app, ["annotate", "invite", "--study", "pilot", "--db", db])
    assert re.search(r"^http://127\.0\.0\.1:8123/a/\S+$", r.output, re.M), r.output
    assert "the address `annotate serve` last recorded" in r.output
    r = CliRunner().invoke(app, ["annotate", "invite", "--study", "pilot", "--db", db, "--base-url", "https://x.org/"])
    assert re.search(r"^https://x\.org/a/\S+$", r.output, re.M) and "note:" not in r.output


def test_an_unknown_study_lists_the_studies_that_exist(tmp_path):
    """Issue 33 #2: `annotate invite --study TYPO` said only "no study 'TYPO'"."""
    db = str(tmp_path / "study.db")
    _study(tmp_path, db)
    Store(db).create_study("second", [{"text": "a placeholder statement", "target_group": "asian"}], per_item=1)
    r = CliRunner().invoke(app, ["annotate", "invite", "--study", "pilto", "--db", db])
    assert r.exit_code != 0
    assert str(r.exception) == ("no study 'pilto'. Fix: did you mean 'pilot'? give a study id or name; this "
                                "database has 1 (pilot), 2 (second)")
    r = CliRunner().invoke(app, ["annotate", "export", "--study", "7", "-o", str(tmp_path / "x.csv"), "--db", db])
    assert str(r.exception).endswith("Fix: give a study id or name; this database has 1 (pilot), 2 (second)")
    empty = tmp_path / "empty.db"
    Store(str(empty))
    r = CliRunner().invoke(app, ["annotate", "invite", "--study", "pilot", "--db", str(empty)])
    assert "no study 'pilot': this database has no studies yet" in str(r.exception)
    assert "toxiforge annotate study create" in str(r.exception)
