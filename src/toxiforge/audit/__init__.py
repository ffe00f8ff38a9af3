"""``toxiforge audit``: one report card for several classifiers on several datasets, with bootstrap intervals.

:func:`run_audit` scores (through a per-pair cache) and computes the sections; :func:`write_report` writes
``report.json``, ``report.md``, ``report.html`` and the figures. The metrics are in :mod:`toxiforge.audit.metrics`
(accuracy, Borkan et al.'s bias AUCs, calibration), :mod:`toxiforge.audit.sections` (HateCheck, Zhou et al.) and
:mod:`toxiforge.audit.compare` (paired differences), their intervals in :mod:`toxiforge.intervals`;
docs/audit.md describes the report's schema.
"""

from toxiforge._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "AuditSettings": "run:AuditSettings", "ClassifierSpec": "run:ClassifierSpec", "run_audit": "run:run_audit",
    "write_report": "report:write_report",
})
