"""Annotator pages: the invite link, consent, the form, drafts and submissions.

The submission endpoint (``POST /annotate/{id}``, the hot path) is a plain Starlette route that calls
:meth:`Web.annotator` itself (no FastAPI dependency solving per request); the other pages use ``Depends``. The app
registers it first and directly (:data:`SUBMISSION_PATH`, see ``create_app``), not through :data:`router`: FastAPI
matches the routes of an included router in two more layers per request (about a tenth of a submission's CPU).
A valid submission is answered with the next form directly (200, no redirect): the response, marking the assignment
done and claiming the next one are one write transaction, and a repeated POST stores nothing twice.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse

from toxiforge.annotation.questions import FORM_QUESTIONS, AnswerError, draft_answers, options_of, validate_answers
from toxiforge.annotation.store import MAX_ID, AssignmentReleased
from toxiforge.annotation.web import PAGE_HEADERS, Web, read_form
from toxiforge.errors import InputError

router = APIRouter()
SUBMISSION_PATH = "/annotate/{assignment_id:int}"  # POST: :func:`answer`
RELEASED_NOTICE = ("That statement stayed open too long and was handed to another annotator, so those answers were "
                   "not stored. Here is your next statement.")


def get_web(request: Request) -> Web:
    return request.app.state.web


async def current_annotator(request: Request, web: Web = Depends(get_web)):
    """(session id, annotator row) of the request, or 401."""
    return await web.annotator(request)


@router.get("/", response_class=HTMLResponse)
def index(web: Web = Depends(get_web)):
    return web.render("message.html", title="toxiforge annotation",
                      message="Open the personal link you were given to start annotating.")


@router.get("/a/{token}")
async def invite_link(token: str, web: Web = Depends(get_web)):
    return await web.open_link("annotator", token)


@router.get("/annotate", response_class=HTMLResponse)
async def annotate_page(web: Web = Depends(get_web), who=Depends(current_annotator)):
    session_id, annotator = who
    if annotator.consented_at is None:
        return web.render("consent.html", csrf=web.csrf_for(session_id))
    got, done = await web.hot(web.store.open_assignment, annotator)
    return form_page(web, session_id, annotator, got, done)


@router.post("/consent")
async def consent(request: Request, web: Web = Depends(get_web), who=Depends(current_annotator)):
    session_id, annotator = who  # authenticated before the body is read
    form = await read_form(request)
    web.check_csrf(session_id, form.get("csrf", ""))
    if form.get("agree") != "yes":
        return web.render("consent.html", status=422, csrf=web.csrf_for(session_id),
                          error="Please tick the box to give your consent, or close this page.")
    await web.db(web.store.consent, annotator.id)
    return RedirectResponse("/annotate", status_code=303)


def form_page(web: Web, session_id: str, annotator, got, done: int, errors: dict[str, str] | None = None,
              values: dict[str, Any] | None = None, status: int = 200, notice: str = "") -> HTMLResponse:
    if got is None:
        return web.render("message.html", title="All done",
                          message=f"Thank you! You have annotated {done} statements; nothing is left for you.")
    assignment, item = got
    if values is None:
        values = assignment.draft or {}
    form = web.store.study_form(annotator.study_id)
    html = web.form_template.render(
        item=item, assignment=assignment, csrf=web.csrf_for(session_id), questions=FORM_QUESTIONS[form],
        options_of=options_of, errors=errors or {}, values=values, done=done,
        total=web.store.item_count(annotator.study_id), notice=notice,
        questions_html=None if errors or values else web.blank_questions[form])
    return HTMLResponse(html, status_code=status, headers=PAGE_HEADERS)


async def _released(web: Web, session_id: str, annotator) -> HTMLResponse:
    got, done = await web.hot(web.store.open_assignment, annotator)
    return form_page(web, session_id, annotator, got, done, status=409, notice=RELEASED_NOTICE)


async def answer(request: Request):
    """POST /annotate/{assignment_id}: submit (or save a draft of) one assignment."""
    web: Web = request.app.state.web
    store = web.store
    assignment_id = request.path_params["assignment_id"]
    if not 0 < assignment_id <= MAX_ID:
        raise HTTPException(404, "no such assignment")
    session_id, annotator = await web.annotator(request)
    form = await read_form(request)
    web.check_csrf(session_id, form.get("csrf", ""))
    if annotator.consented_at is None:
        raise HTTPException(403, "consent first")
    questions = FORM_QUESTIONS[store.study_form(annotator.study_id)]
    if form.get("action") == "save":
        if await web.db(store.get_assignment, annotator.id, assignment_id) is None:
            raise HTTPException(404, "no such assignment")
        await web.db(store.save_draft, annotator.id, assignment_id, draft_answers(form, questions))
        return RedirectResponse("/annotate", status_code=303)
    try:
        answers = validate_answers(form, questions)
    except AnswerError as exc:
        found = await web.db(store.get_assignment, annotator.id, assignment_id)
        if found is None:
            raise HTTPException(404, "no such assignment") from None
        if found[0].released_at is not None:
            return await _released(web, session_id, annotator)
        await web.db(store.save_draft, annotator.id, assignment_id, draft_answers(form, questions))
        got, done = await web.hot(store.open_assignment, annotator)
        return form_page(web, session_id, annotator, got, done, errors=exc.errors,
                         values=draft_answers(form, questions), status=422)
    try:
        _, got, done = await web.hot(store.submit_and_next, annotator, assignment_id, answers)
    except AssignmentReleased:
        return await _released(web, session_id, annotator)
    except InputError as exc:
        raise HTTPException(404, "no such assignment") from exc
    return form_page(web, session_id, annotator, got, done)

