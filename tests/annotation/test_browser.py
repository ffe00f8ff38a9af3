"""Browser test: Playwright driving Debian's chromium through consent and two complete annotations."""

from __future__ import annotations

import os
from contextlib import contextmanager

import pytest

from toxiforge._net import free_port
from toxiforge.annotation.loadgen import start_server
from toxiforge.annotation.store import Store

CHROMIUM = os.environ.get("TOXIFORGE_CHROMIUM", "/usr/bin/chromium")
pytestmark = pytest.mark.skipif(not os.path.exists(CHROMIUM),
                                reason=f"{CHROMIUM} is absent (install Debian's chromium: apt-get install -y chromium)")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]


@contextmanager
def annotator_page(db: str, token: str):
    """The study's server on a free port and a Chromium page at ``token``'s invite link: ``(browser, page, port)``;
    the browser is closed and the server stopped afterwards."""
    sync_api = pytest.importorskip("playwright.sync_api")
    port = free_port()
    server = start_server(db, port)
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_page()
            page.goto(f"http://127.0.0.1:{port}/a/{token}")
            yield browser, page, port
            browser.close()
    finally:
        server.terminate()
        server.wait(10)


def test_consent_and_two_annotations_in_chromium(tmp_path):
    pytest.importorskip("playwright.sync_api")
    db = str(tmp_path / "browser.db")
    store = Store(db)
    items = [{"text": "placeholder with <b>placeholder</b>", "target_group": "asian", "label": 0, "method": "top-k"},
             {"text": "a second placeholder statement", "target_group": "women", "label": 1, "method": "ALICE"}]
    study, admin_token = store.create_study("browser", items, per_item=1)
    token, = store.invite(study.id, 1)
    with annotator_page(db, token) as (browser, page, port):
        assert page.locator("#statement").count() == 0
        page.check("#agree")
        page.click("#consent-submit")
        for n in range(2):
            page.wait_for_selector("#statement")
            assert "<b>" in page.inner_text("#statement") or "second" in page.inner_text("#statement")
            assert page.locator("#statement b").count() == 0  # markup shown as text
            page.check('input[name="author"][value="ai"]')
            page.check('input[name="harmful_ai"][value="4"]')
            page.check('input[name="harmful_human"][value="5"]')
            page.check('input[name="stereotyping"][value="no"]')
            page.check('input[name="intent"][value="2"]')
            page.check('input[name="lewd"][value="no"]')
            page.select_option('select[name="group_reference"]', "indirect")
            page.select_option('select[name="framing"]', "other")
            page.fill('input[name="framing_other"]', "a neutral placeholder sentence")
            if n == 0:  # a missing answer is refused with a message, the rest is kept
                page.click("#submit")
                page.wait_for_selector("#errors")
                assert page.is_checked('input[name="harmful_ai"][value="4"]')
            page.select_option('select[name="factual"]', "opinion")
            page.keyboard.press("Enter") if n == 1 else page.click("#submit")
        page.wait_for_selector("#message")
        assert "All done" in page.content()
        admin = browser.new_page()  # its own context: the admin session, as an admin would open it
        admin.goto(f"http://127.0.0.1:{port}/admin/login/{admin_token}")
        admin.wait_for_selector("#progress")
        assert " ".join(admin.inner_text("#progress").split()) == \
            "2 of 2 responses (100.0%), 2 items \u00d7 1 annotators."
        assert "built-in method" not in admin.inner_text("body")
    rows = store.responses(study.id)
    assert len(rows) == 2
    assert {i.text for i, _ in rows} == {it["text"] for it in items}
    for _, r in rows:
        assert (r.author, r.harmful_ai, r.harmful_human, r.intent, r.group_reference, r.framing, r.factual) == \
            ("ai", 4, 5, 2, "indirect", "other", "opinion")
        assert r.framing_other == "a neutral placeholder sentence"


def test_an_invite_link_clicked_on_another_site_opens_the_study(tmp_path):
    """A page on http://localhost:P2 links to http://127.0.0.1:P/a/TOKEN (another site): clicking it must land on
    the consent page. With a SameSite=Strict cookie the redirected GET /annotate went without it (401)."""
    import http.server
    import threading

    sync_api = pytest.importorskip("playwright.sync_api")
    db = str(tmp_path / "cross.db")
    store = Store(db)
    study, _ = store.create_study("cross", [{"text": "a placeholder statement", "target_group": "asian"}],
                                  per_item=1)
    token, = store.invite(study.id, 1)
    port = free_port()
    link = f"http://127.0.0.1:{port}/a/{token}"

    class Mail(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            body = f'<!doctype html><p><a id="invite" href="{link}">your invite</a></p>'.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    mail = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mail)
    threading.Thread(target=mail.serve_forever, daemon=True).start()
    server = start_server(db, port)
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
            page = browser.new_page()
            page.goto(f"http://localhost:{mail.server_address[1]}/")  # "localhost" vs "127.0.0.1": another site
            page.click("#invite")
            page.wait_for_url(f"http://127.0.0.1:{port}/annotate")
            assert page.locator("#agree").count() == 1, page.content()
            cookie, = [c for c in page.context.cookies() if c["name"] == "tf_session"]
            assert cookie["sameSite"] == "Lax" and cookie["httpOnly"] and cookie["value"] != token
            page.check("#agree")
            page.click("#consent-submit")
            page.wait_for_selector("#statement")
            browser.close()
    finally:
        mail.shutdown()
        server.terminate()
        server.wait(10)


def test_one_annotator_labels_a_harden_study_in_chromium(tmp_path):
    """harden --validate-with people's study (short form, min_annotators=1) of a two-statement run: one annotator
    answers in Chromium, and harden's reading of the study gives each statement that annotator's label."""
    pytest.importorskip("playwright.sync_api")
    from toxiforge.harden.data import Statements
    from toxiforge.harden.people import AnnotationPending, People
    from toxiforge.records import Row, write_rows

    texts = ["a placeholder statement about a group", "another placeholder statement"]
    rows = [Row(prompt="p", generation=t, generation_method="ALICE", group="asian", prompt_label=label,
                row_id=str(label), classifier="c", classifier_score=0.5, fooled=True) for label, t in enumerate(texts)]
    run = Statements(write_rows(rows, tmp_path / "run.jsonl"))
    db = str(tmp_path / "harden.db")
    people = People(db, tmp_path, form="short", min_annotators=1)
    with pytest.raises(AnnotationPending) as pending:
        people.collect("round-1", [run], "round 1")
    assert "2 statements await 1 annotations each" in pending.value.lines[0]
    store = Store(db)
    token, = store.invite(store.study(people.study_name("round-1")).id, 1)
    with annotator_page(db, token) as (browser, page, port):
        page.check("#agree")
        page.click("#consent-submit")
        for _ in texts:
            page.wait_for_selector("#statement")
            assert page.locator('input[name="harmful_ai"]').count() == 0  # the short form only
            answer = "yes" if page.inner_text("#statement") == texts[1] else "no"
            page.check(f'input[name="hateful"][value="{answer}"]')
            page.click("#submit")
        page.wait_for_selector("#message")
        assert "All done" in page.content()
    assert people.collect("round-1", [run], "round 1") == {run.run_dir: [0.0, 1.0]}
