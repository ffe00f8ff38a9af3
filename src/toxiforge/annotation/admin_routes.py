"""Admin pages: the admin link, progress and agreement, releasing stale assignments, CSV exports."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Depends, HTTPException, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from toxiforge.annotation.annotator_routes import get_web
from toxiforge.annotation.leases import release_stale
from toxiforge.annotation.store import MAX_ID
from toxiforge.annotation.web import Web, parse_int, read_form
from toxiforge.errors import InputError

router = APIRouter(prefix="/admin")
MAX_RELEASE_MINUTES = 10**7  # about 19 years: anything longer means "none"; keeps timedelta() in range


async def current_admin(request: Request, web: Web = Depends(get_web)):
    """(session id, study) of the request's admin session, or 403."""
    return await web.admin(request)


@router.get("/login/{token}")
async def admin_login(token: str, web: Web = Depends(get_web)):
    return await web.open_link("admin", token)


@router.get("", response_class=HTMLResponse)
async def admin_page(request: Request, web: Web = Depends(get_web), who=Depends(current_admin)):
    from toxiforge.annotation.agreement import study_agreement

    session_id, study = who
    given = request.query_params.get("released")
    released = parse_int(given, "released", 0, MAX_ID) if given is not None else None
    progress = await web.db(web.store.progress, study.id)
    agreement = await web.db(study_agreement, web.store, study.id)
    return web.render("admin.html", study=study, progress=progress, agreement=agreement,
                      csrf=web.csrf_for(session_id, "admin-csrf"), released=released)


@router.post("/release")
async def admin_release(request: Request, web: Web = Depends(get_web), who=Depends(current_admin)):
    session_id, study = who
    form = await read_form(request)
    web.check_csrf(session_id, form.get("csrf", ""), "admin-csrf")
    minutes = parse_int(form.get("minutes"), "minutes", 0, MAX_RELEASE_MINUTES)
    n = await web.db(release_stale, web.store, study.id, older_than=timedelta(minutes=minutes))
    return RedirectResponse(f"/admin?released={n}", status_code=303)


@router.get("/export/{fmt}")
async def admin_export(fmt: str, web: Web = Depends(get_web), who=Depends(current_admin)):
    from toxiforge.annotation.export import FORMATS, export_bytes

    _, study = who
    if fmt not in FORMATS:
        raise HTTPException(404, "unknown export format")
    try:
        data = await web.db(export_bytes, web.store, study.id, fmt)
    except InputError as exc:
        raise HTTPException(409, str(exc)) from exc
    return Response(data, media_type="text/csv", headers={
        "Content-Disposition": f'attachment; filename="{fmt}-study{study.id}.csv"', "Cache-Control": "no-store"})
