"""Commands: annotate serve / study create / invite / release / agreement / export (paper §4.1)."""

from __future__ import annotations

import shlex
from pathlib import Path

import typer

from toxiforge.cli._app import App, console, err_console

annotate_app = App(help="Human validation: the ToxiGen annotation study as a web app.", no_args_is_help=True)
annotate_study_app = App(help="Create annotation studies.", no_args_is_help=True)
annotate_app.add_typer(annotate_study_app, name="study")
DB_OPTION = typer.Option("annotation.db", "--db", help="SQLite file path or database URL (postgresql://...)")
DEFAULT_SERVE_URL = "http://127.0.0.1:8000"  # annotate serve's default --host and --port
SERVE_URL_KEY = "serve_url"  # the meta key where annotate serve records the address annotators use


def open_store(db: str, *, create: bool = False):
    """The study database ``db``. Only ``annotate study create`` (``create=True``) may make a new SQLite file:
    every other command refuses a path that does not exist, so a mistyped --db never starts an empty database."""
    from toxiforge.annotation.store import Store
    from toxiforge.errors import InputError

    if not create and "://" not in db and not Path(db).exists():
        raise InputError("no such study database", path=db,
                         hint=f"check --db, or create one with `toxiforge annotate study create DATA --db {db}`")
    return Store(db)


@annotate_app.command("serve")
def annotate_serve(db: str = DB_OPTION, host: str = typer.Option("127.0.0.1", "--host"),
                   port: int = typer.Option(8000, "--port"),
                   workers: int | None = typer.Option(
                       None, "--workers", min=1,
                       help="server processes (default $TOXIFORGE_ANNOTATE_WORKERS or 1; with SQLite one process "
                            "is fastest, as writes are serialised)"),
                   secure_cookies: bool = typer.Option(
                       False, "--secure-cookies",
                       help="mark session cookies Secure (sent over HTTPS only); on by itself when --base-url is "
                            "https://"),
                   base_url: str = typer.Option("", "--base-url",
                                                help="the public address annotators use, e.g. "
                                                     "https://annotate.example.org (behind a reverse proxy)")) -> None:
    """Run the annotation web app (annotator links /a/TOKEN, admin link /admin/login/TOKEN)."""
    from toxiforge.annotation.app import serve

    secure = secure_cookies or base_url.lower().startswith("https://")
    # record where annotators reach this server, so `annotate invite` prints links that work
    open_store(db).set_meta(SERVE_URL_KEY, base_url.rstrip("/") or f"http://{host}:{port}")
    serve(db, host=host, port=port, workers=workers, secure_cookies=secure)


@annotate_study_app.command("create")
def annotate_study_create(
    data: Path = typer.Argument(..., help="toxiforge dataset (file or generation directory) or ToxiGen file"),
    db: str = DB_OPTION,
    name: str | None = typer.Option(None, "--name", help="study name (default: the dataset's name)"),
    per_item: int = typer.Option(3, "--per-item", help="annotators per statement"),
    sample: int | None = typer.Option(None, "--sample", help="number of statements (default: all)"),
    stratify: str = typer.Option("", "--stratify", help="comma-separated subset of group,label,method"),
    seed: int = typer.Option(0, "--seed"),
    lease_minutes: int = typer.Option(120, "--lease-minutes", min=0,
                                      help="release an assignment still open after this many minutes to other "
                                           "annotators (0: never)"),
    form: str = typer.Option("full", "--form", help="full (the paper's nine questions) or short (one question: is "
                                                    "the text hateful? yes/no)"),
) -> None:
    """Create a study from a dataset; prints the study id and its admin token (shown once)."""
    from toxiforge.annotation.sampling import items_from_table, stratified_sample

    strata = tuple(s.strip() for s in stratify.split(",") if s.strip())
    items = stratified_sample(items_from_table(data), sample, stratify=strata, seed=seed)
    store = open_store(db, create=True)
    study, admin_token = store.create_study(name or data.stem, items, per_item=per_item, source=str(data),
                                            lease_minutes=lease_minutes, form=form)
    console.print(f"study {study.id} ({study.name}): {len(items)} statements x {per_item} annotators", highlight=False)
    console.print(f"admin link (keep it private, shown once): /admin/login/{admin_token}", highlight=False,
                  soft_wrap=True)
    console.print(f"next: toxiforge annotate invite --study {shlex.quote(study.name)} --annotators 5 "
                  f"--db {shlex.quote(db)}", highlight=False, soft_wrap=True)


@annotate_app.command("invite")
def annotate_invite(study: str = typer.Option(..., "--study", help="study id or name"), db: str = DB_OPTION,
                    n: int = typer.Option(1, "--annotators", help="number of annotators"),
                    base_url: str | None = typer.Option(
                        None, "--base-url", help="address annotators open (default: the one `annotate serve` "
                                                 f"recorded in --db, else {DEFAULT_SERVE_URL})")) -> None:
    """Create annotators and print one private link per annotator."""
    store = open_store(db)
    found = store.study(study)
    recorded = store.get_meta(SERVE_URL_KEY)
    url = (base_url or recorded or DEFAULT_SERVE_URL).rstrip("/")
    for token in store.invite(found.id, n):
        console.print(f"{url}/a/{token}", highlight=False, soft_wrap=True)
    if base_url is None:
        where = (f"the address `annotate serve` last recorded in {db}" if recorded else
                 f"`annotate serve`'s default host and port (no serve has run on {db} yet)")
        err_console.print(f"note: the links use {url}, {where}; if annotators reach the server elsewhere, rerun "
                          f"with --base-url URL (e.g. --base-url http://HOST:PORT)", highlight=False,
                          soft_wrap=True)


@annotate_app.command("release")
def annotate_release(study: str = typer.Option(..., "--study", help="study id or name"), db: str = DB_OPTION,
                     older_than: int | None = typer.Option(
                         None, "--older-than", min=0,
                         help="minutes an assignment has been open (default: the study's lease; 0: all open)")
                     ) -> None:
    """Release open assignments (annotators who stopped) so other annotators can take their slots."""
    from datetime import timedelta

    from toxiforge.annotation.leases import release_stale
    store = open_store(db)
    found = store.study(study)
    n = release_stale(store, found.id, older_than=None if older_than is None else timedelta(minutes=older_than))
    console.print(f"released {n} open assignment(s) of study {found.id} ({found.name})", highlight=False)


@annotate_app.command("agreement")
def annotate_agreement(study: str = typer.Option(..., "--study", help="study id or name"), db: str = DB_OPTION,
                       as_json: bool = typer.Option(False, "--json")) -> None:
    """Fleiss' kappa, Krippendorff's alpha and the paper's agreement percentages."""
    import json

    from toxiforge.annotation.agreement import study_agreement
    store = open_store(db)
    stats = study_agreement(store, store.study(study).id)
    text = json.dumps(stats.to_dict(), indent=2) if as_json else "\n".join(stats.lines())
    console.print(text, markup=False, highlight=False, soft_wrap=True)


@annotate_app.command("export")
def annotate_export(study: str = typer.Option(..., "--study", help="study id or name"), db: str = DB_OPTION,
                    fmt: str = typer.Option(
                        "annotated", "--format",
                        help="annotated (ToxiGen's per-item layout), annotations (ours, per response) or "
                             "toxigen-annotations (the hub's per-response layout)"),
                    out: Path = typer.Option(..., "-o", "--out", help=".csv, .jsonl or .parquet"),
                    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing file.")) -> None:
    """Write the study: ToxiGen's annotated layout (per item), our annotations (per response), or ToxiGen's
    annotations layout (per response, Input.* / Answer.* / HashedWorkerId). CSV cells that would run as spreadsheet
    formulas get a leading ' (Parquet and JSONL keep the exact text)."""
    from toxiforge._io import require_new_files
    from toxiforge.annotation.export import export_study

    require_new_files(out, overwrite=overwrite)
    store = open_store(db)
    path, n = export_study(store, store.study(study).id, out, fmt)
    console.print(f"wrote {n} rows to {path}", highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add the annotate group to ``app``."""
    app.add_typer(annotate_app, name="annotate")
