"""Human validation of generated statements: the ToxiGen annotation study (paper §4.1, Appendix B) as a web app.

* :mod:`~toxiforge.annotation.store` -- studies, items, annotators, sessions, assignments and responses
  (SQLAlchemy), on :mod:`~toxiforge.annotation.database` -- the engine, sessions and the hot path's transactions;
  :mod:`~toxiforge.annotation.hotpath` -- the claim/submit statements (one Core source, two
  executors); :mod:`~toxiforge.annotation.leases` -- releasing stale assignments;
  :mod:`~toxiforge.annotation.checkpoint` -- SQLite WAL checkpoints off the request path;
* :mod:`~toxiforge.annotation.sampling` -- study items from a dataset, seeded stratified samples;
* :mod:`~toxiforge.annotation.questions` -- the nine-question form and its validation;
* :mod:`~toxiforge.annotation.agreement` -- Fleiss' kappa, Krippendorff's alpha and the paper's percentages;
* :mod:`~toxiforge.annotation.export` -- ToxiGen ``annotated``, our ``annotations`` and ToxiGen's
  ``annotations`` (``toxigen-annotations``) files;
* :mod:`~toxiforge.annotation.app` -- the FastAPI app, with the routers
  :mod:`~toxiforge.annotation.annotator_routes` and :mod:`~toxiforge.annotation.admin_routes` and their shared
  :mod:`~toxiforge.annotation.web` (sessions, limits, headers).
"""
