"""Human validation of generated statements: the ToxiGen annotation study (paper §4.1, Appendix B) as a web app.

* :mod:`~toxiforge.annotation.store` -- studies, items, annotators, assignments and responses (SQLAlchemy);
* :mod:`~toxiforge.annotation.sampling` -- study items from a dataset, seeded stratified samples;
* :mod:`~toxiforge.annotation.questions` -- the nine-question form and its validation;
* :mod:`~toxiforge.annotation.agreement` -- Fleiss' kappa, Krippendorff's alpha and the paper's percentages;
* :mod:`~toxiforge.annotation.export` -- ToxiGen ``annotated`` and raw ``annotations`` files;
* :mod:`~toxiforge.annotation.app` -- the FastAPI app (annotator and admin pages).
"""
