"""The annotation web app through FastAPI's TestClient: consent, form, validation, escaping, access control."""

from __future__ import annotations

import logging
import re

import pytest
from fastapi.testclient import TestClient

from toxiforge.annotation.app import RedactTokens, create_app
from toxiforge.annotation.store import Store
from toxiforge.errors import InputError

MARKUP = "a placeholder with <b>placeholder</b> and <script>x()</script>"
GOOD = {"author": "human", "harmful_ai": "2", "harmful_human": "3", "stereotyping": "no", "intent": "1",
        "lewd": "maybe", "group_reference": "other", "other_groups": "veterans", "framing": "none",
        "factual": "neither", "action": "submit"}


@pytest.fixture()
def env(database):
    store = Store(database)
    items = [{"text": MARKUP, "target_group": "asian", "label": 0, "method": "top-k"},
             {"text": "a second placeholder statement", "target_group": "women", "label": 1, "method": "ALICE"}]
    study, admin_token = store.create_study("s", items, per_item=2)
    tokens = store.invite(study.id, 2)
    return store, study, admin_token, tokens


def client_for(store, token=None) -> TestClient:
    client = TestClient(create_app(store))
    if token:
        assert client.get(f"/a/{token}", follow_redirects=False).status_code == 303
    return client


def csrf(html: str) -> str:
    return re.search(r'name="csrf" value="([^"]+)"', html).group(1)


def action(html: str) -> str:
    return re.search(r'action="(/annotate/\d+)"', html).group(1)


def consented(store, token) -> tuple[TestClient, str]:
    c = client_for(store, token)
    page = c.get("/annotate").text
    assert "Content warning" in page and "annotation-form" not in page
    r = c.post("/consent", data={"csrf": csrf(page), "agree": "yes"}, follow_redirects=True)
    assert r.status_code == 200
    return c, r.text


def test_consent_required_before_any_statement(env):
    store, _, _, tokens = env
    c = client_for(store, tokens[0])
    page = c.get("/annotate").text
    assert "Content warning" in page and "placeholder" not in page
    refused = c.post("/consent", data={"csrf": csrf(page)})
    assert refused.status_code == 422 and "placeholder" not in refused.text
    assert c.post("/consent", data={"csrf": "forged", "agree": "yes"}).status_code == 403
    ok = c.post("/consent", data={"csrf": csrf(page), "agree": "yes"}, follow_redirects=True)
    assert "Targeted group" in ok.text and "1) Do you think the text is human- or machine-generated?" in ok.text


def test_statement_markup_is_escaped(env):
    store, _, _, tokens = env
    c, page = consented(store, tokens[0])
    while "&lt;b&gt;placeholder&lt;/b&gt;" not in page:  # the markup item may be second
        c.post(action(page), data={**GOOD, "csrf": csrf(page)})
        page = c.get("/annotate").text
    assert "<b>placeholder</b>" not in page and "<script>x()</script>" not in page


def test_validation_refuses_bad_and_missing_answers(env):
    store, _, _, tokens = env
    c, page = consented(store, tokens[0])
    bad = c.post(action(page), data={**GOOD, "harmful_ai": "7", "csrf": csrf(page)})
    assert bad.status_code == 422 and "&#39;7&#39; is not one of 1, 2, 3, 4, 5" in bad.text
    missing = {k: v for k, v in GOOD.items() if k != "factual"}
    r = c.post(action(page), data={**missing, "csrf": csrf(page)})
    assert r.status_code == 422 and "this answer is required" in r.text
    no_detail = c.post(action(page), data={**GOOD, "other_groups": "", "csrf": csrf(page)})
    assert no_detail.status_code == 422 and "please fill this in" in no_detail.text
    assert store.responses(env[1].id) == []
    # the refused answers were kept as a draft: the reloaded form still shows them
    assert 'value="neither" selected' in c.get("/annotate").text


def test_drafts_are_revisable_until_submitted(env):
    store, study, _, tokens = env
    c, page = consented(store, tokens[0])
    target = action(page)
    c.post(target, data={"author": "ai", "harmful_ai": "4", "action": "save", "csrf": csrf(page)})
    again = c.get("/annotate").text
    assert action(again) == target and 'value="ai" checked' in again
    done = c.post(target, data={**GOOD, "csrf": csrf(page)}, follow_redirects=False)
    # answered with the next form directly (no redirect round trip)
    assert done.status_code == 200 and "Statement 2" in done.text and action(done.text) != target
    (item, resp), = store.responses(study.id)
    assert resp.author == "human" and resp.harmful_ai == 2 and resp.other_groups == "veterans"
    # a repeated POST of the same assignment (a reload) is not stored twice and shows the next form again
    again = c.post(target, data={**GOOD, "csrf": csrf(page)})
    assert again.status_code == 200 and action(again.text) == action(done.text)
    assert len(store.responses(study.id)) == 1
    assert "Statement 2" in c.get("/annotate").text


def test_access_control(env):
    store, study, admin_token, tokens = env
    anon = client_for(store)
    assert anon.get("/annotate").status_code == 401
    assert anon.get("/a/not-a-token").status_code == 404
    c, page = consented(store, tokens[0])
    assert c.get("/admin").status_code == 403
    assert c.get("/admin/export/annotated").status_code == 403
    assert c.get(f"/admin/login/{tokens[0]}").status_code == 404
    # annotator B cannot post to (or see) annotator A's assignment, even with B's own CSRF token
    b = client_for(store, tokens[1])
    b_page = b.get("/annotate").text
    b.post("/consent", data={"csrf": csrf(b_page), "agree": "yes"})
    assert b.post(action(page), data={**GOOD, "csrf": csrf(b.get('/annotate').text)}).status_code == 404
    # A's CSRF token does not work for B
    assert b.post(action(b.get('/annotate').text), data={**GOOD, "csrf": csrf(page)}).status_code == 403
    assert store.responses(study.id) == []


def test_admin_pages_and_export(env):
    store, study, admin_token, tokens = env
    for t in tokens:
        c, page = consented(store, t)
        while "annotation-form" in page:
            c.post(action(page), data={**GOOD, "csrf": csrf(page)})
            page = c.get("/annotate").text
        assert "All done" in page
    a = client_for(store)
    assert a.get(f"/admin/login/{admin_token}", follow_redirects=False).status_code == 303
    page = a.get("/admin").text
    assert "4 of 4 responses" in page and "Fleiss" in page and "&lt;b&gt;" not in page
    progress = re.search(r'<p id="progress">(.*?)</p>', page, re.S).group(1)
    assert " ".join(progress.split()) == "4 of 4 responses (100.0%), 2 items &times; 2 annotators."
    assert "built-in method" not in page
    export = a.get("/admin/export/annotated")
    assert export.status_code == 200 and export.text.startswith('"text","target_group","factual?"')
    assert "<b>placeholder</b>" in export.text  # CSV is data, not HTML: stored verbatim
    assert a.get("/admin/export/other").status_code == 404


def test_access_log_redacts_tokens():
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5", "GET", "/a/SECRETTOKEN123", "1.1", 303), None)
    RedactTokens().filter(record)
    assert "SECRETTOKEN123" not in record.getMessage() and "/a/[redacted]" in record.getMessage()
    record = logging.LogRecord("uvicorn.access", logging.INFO, "", 0, '%s - "%s %s HTTP/%s" %d',
                               ("127.0.0.1:5", "GET", "/admin/login/ADMINTOKEN?x=1", "1.1", 303), None)
    RedactTokens().filter(record)
    assert "ADMINTOKEN" not in record.getMessage()


def test_a_nul_character_in_a_free_text_answer_is_not_a_server_error(env):
    store, study, _, tokens = env
    c, page = consented(store, tokens[0])
    r = c.post(action(page), data={**GOOD, "other_groups": "veter\x00ans", "csrf": csrf(page)})
    assert r.status_code in (200, 422)


def test_assignment_ids_out_of_range_are_not_found(env):
    store, study, _, tokens = env
    c, page = consented(store, tokens[0])
    assert c.post(f"/annotate/{2**31}", data={"action": "save", "author": "ai", "csrf": csrf(page)}
                  ).status_code == 404
    with pytest.raises(InputError):  # annotate invite/export/agreement --study 2147483648
        store.study(str(2**31))
