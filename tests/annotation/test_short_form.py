"""Short-form studies (one yes/no question, as harden --validate-with people asks by default): the same app, sessions
and checks as the paper's form, their own answers stored, agreement on two classes, and only our export layout."""

from __future__ import annotations

import sqlite3

import pytest

from toxiforge.annotation.agreement import fleiss, kripp_alpha, study_agreement, vote_agreement
from toxiforge.annotation.export import export_study
from toxiforge.annotation.store import Response, Store
from toxiforge.errors import InputError

from .test_app import GOOD, action, consented, csrf

ITEMS = [{"text": f"placeholder statement {i}", "target_group": "asian", "label": i % 2, "method": ""}
         for i in range(4)]


@pytest.fixture()
def short(database):
    store = Store(database)
    study, _ = store.create_study("short", ITEMS, per_item=2, form="short")
    return store, study, store.invite(study.id, 2)


def test_the_form_asks_one_question_and_checks_it(short):
    store, study, tokens = short
    c, page = consented(store, tokens[0])
    assert "is this text hateful" in page and 'name="hateful"' in page and 'name="harmful_ai"' not in page
    forged = c.post(action(page), data={"hateful": "yes", "csrf": "forged", "action": "submit"})
    assert forged.status_code == 403
    missing = c.post(action(page), data={**GOOD, "csrf": csrf(page)})  # the full form's answers are not this form's
    assert missing.status_code == 422 and "this answer is required" in missing.text
    bad = c.post(action(page), data={"hateful": "maybe", "csrf": csrf(page), "action": "submit"})
    assert bad.status_code == 422
    ok = c.post(action(page), data={"hateful": "yes", "csrf": csrf(page), "action": "submit"})
    assert ok.status_code == 200 and "Statement 2" in ok.text
    (_, response), = store.responses(study.id)
    assert (response.hateful, response.harmful_ai, response.author, response.trouble) == ("yes", None, None, False)


def test_agreement_and_export_of_a_short_study(short, tmp_path):
    store, study, tokens = short
    votes = {0: ("yes", "yes"), 1: ("yes", "no"), 2: ("no", "no"), 3: ("no", "yes")}
    for k, token in enumerate(tokens):
        annotator = store.annotator_for(token)
        while (got := store.next_assignment(annotator)) is not None:
            position = int(got[1].text.rsplit(" ", 1)[1])
            store.submit(annotator.id, got[0].id, {"hateful": votes[position][k], "trouble": False})
    stats = study_agreement(store, study.id)
    ratings = [[int(v == "yes") for v in votes[i]] for i in range(4)]
    assert stats.n_items == 4 and stats.fleiss_kappa == pytest.approx(fleiss(ratings, n_cat=2))
    assert stats.krippendorff_alpha_nominal == pytest.approx(kripp_alpha(ratings, "nominal", range(2)))
    # by hand: 2 of 4 items agree; Fleiss: P_bar = 0.5, p = (0.5, 0.5), P_e = 0.5, kappa = 0
    assert stats.full_agreement == 0.5 and stats.fleiss_kappa == pytest.approx(0.0)
    assert stats.class_shares == {"not hateful": 0.25, "hateful": 0.25}
    assert stats.human_written_majority is None and "Fleiss' kappa (2 classes)" in stats.lines()[1]
    assert vote_agreement([[1, 1], [0]], 2).n_items == 1  # items without every vote are left out
    with pytest.raises(InputError, match="short-form study.*--format annotations"):
        export_study(store, study.id, tmp_path / "x.csv", "annotated")
    path, n = export_study(store, study.id, tmp_path / "x.jsonl", "annotations")
    assert n == 8 and '"hateful": "yes"' in path.read_text()


def test_a_database_from_before_short_forms_refuses_them_with_the_fix(tmp_path):
    db = tmp_path / "old.db"
    Store(str(db)).engine.dispose()
    with sqlite3.connect(db) as conn:  # the responses table as older toxiforge made it: answers NOT NULL
        conn.execute("DROP TABLE responses")
        columns = ", ".join(f"{c.name} {'TEXT NOT NULL' if c.name == 'author' else 'TEXT'}"
                            for c in Response.__table__.columns if c.name != "id")
        conn.execute(f"CREATE TABLE responses (id INTEGER PRIMARY KEY, {columns})")
    store = Store(str(db))
    with pytest.raises(InputError, match="older toxiforge") as refused:
        store.create_study("short", ITEMS, form="short")
    assert "new database" in str(refused.value.hint)
    assert store.create_study("full", ITEMS)[0].form == "full"
    with pytest.raises(InputError, match="study form"):
        store.create_study("other", ITEMS, form="long")
