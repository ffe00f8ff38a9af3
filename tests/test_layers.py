"""The package's layers import downward only: a model backend never imports a decoder or anything built on one,
and of two modules that share a constant one owns it (no import cycle)."""

from __future__ import annotations

import ast
from pathlib import Path

import toxiforge

PACKAGE = Path(toxiforge.__file__).parent


def imported_modules(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside a function."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_model_backends_import_no_decoder_job_or_benchmark():
    upward = ("toxiforge.decoding", "toxiforge.pipeline", "toxiforge.bench")
    offenders = {f"{path.name}: {name}" for path in (PACKAGE / "models").glob("*.py")
                 for name in imported_modules(path) if name.startswith(upward)}
    assert not offenders


def test_bench_report_and_generate_do_not_import_each_other():
    report = imported_modules(PACKAGE / "bench" / "report.py")
    generate = imported_modules(PACKAGE / "bench" / "generate.py")
    assert not ("toxiforge.bench.generate" in report and "toxiforge.bench.report" in generate)
    assert "toxiforge.bench.generate" not in report  # report.py owns CONTINUATIONS and CHART


def _offenders(package: str, upward: tuple[str, ...]) -> set[str]:
    return {f"{path.relative_to(PACKAGE)}: {name}" for path in (PACKAGE / package).rglob("*.py")
            for name in imported_modules(path) if name.startswith(upward)}


def test_audit_imports_nothing_from_harden():
    """harden builds on the audit (it measures rounds with the audit's sections), never the other way: what both
    need (intervals, flips, validation) lives below them, in toxiforge.intervals and toxiforge.attacks.validation."""
    assert not _offenders("audit", ("toxiforge.harden",))


def test_bench_and_attacks_import_nothing_from_audit_or_harden():
    """bench and the attack families sit below the audit and harden; the intervals all of them report live in
    toxiforge.intervals, which imports no stage."""
    assert not _offenders("bench", ("toxiforge.audit", "toxiforge.harden"))
    assert not _offenders("attacks", ("toxiforge.audit", "toxiforge.harden"))
    stages = ("toxiforge.audit", "toxiforge.harden", "toxiforge.bench", "toxiforge.attacks")
    assert not {name for name in imported_modules(PACKAGE / "intervals.py") if name.startswith(stages)}


def test_classifiers_import_no_stage():
    """The classifiers layer (its fingerprint among it: issue 56) sits below every stage that scores with it."""
    stages = ("toxiforge.attacks", "toxiforge.audit", "toxiforge.harden", "toxiforge.decoding", "toxiforge.pipeline",
              "toxiforge.bench")
    assert not _offenders("classifiers", stages)


# The pipeline's layers, lowest first (DEVELOPERS.md's folder tree read as the pipeline): a package imports only
# from its own layer or those below it, at the top or inside a function. The base modules (records, groups,
# intervals, cards, errors and the _helpers) sit below every package.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("demonstrations", "models"),
    ("classifiers",),
    ("decoding",),
    ("pipeline",),
    ("data",),
    ("annotation",),
    ("analysis", "training"),
    ("attacks",),
    ("bias",),
    ("audit", "bench"),
    ("harden",),
    ("cli",),
)
BASE = ("records", "groups", "intervals", "cards", "errors", "_hf", "_io", "_lazy", "_net", "_proc", "_tokens")


def _layer(module: str) -> int | None:
    """The layer of a toxiforge module (-1: a base module; None: the package itself, __main__)."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    if parts[1] in BASE:
        return -1
    return next((i for i, names in enumerate(LAYERS) if parts[1] in names), None)


def test_every_package_imports_from_its_layer_or_below():
    """What a table *is* (generation rows, attack rows) is records' knowledge, and hub ids belong to data/: so data/
    and analysis/ never reach up to attacks/, and the base modules never reach into a package."""
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages == {name for names in LAYERS for name in names}, "a package is missing from LAYERS"
    offenders = set()
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        mine = _layer(".".join(rel.parts))
        if mine is None:
            continue
        for name in imported_modules(path):
            theirs = _layer(name) if name.startswith("toxiforge.") else None
            if theirs is not None and theirs > mine:
                offenders.add(f"{path.relative_to(PACKAGE)}: {name}")
    assert not offenders


MAX_LINES = 400  # DEVELOPERS.md: modules over ~400 lines are split along their seams (issue 58)


def test_no_module_is_over_400_lines():
    """A module a newcomer opens has one job its name says; past 400 lines it is doing two (split it, the way
    decoding/alice.py and harden/loop.py were: issue 58)."""
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"split these along their seams: {long}"
