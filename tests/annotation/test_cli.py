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
