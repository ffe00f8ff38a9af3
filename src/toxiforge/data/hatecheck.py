"""HateCheck (Röttger et al., ACL 2021): functional tests for hate speech classifiers.

Published as ``test_suite_cases.csv`` in github.com/paul-rottger/hatecheck-data (CC BY 4.0): 3,728 short cases in
29 functional tests over 7 target groups, each case's gold label confirmed by at least 4 of 5 annotators. Columns
(after an unnamed index): ``functionality`` (the test, e.g. ``ident_neutral_nh``; the suffix ``_h``/``_nh`` is the
gold label), ``case_id``, ``test_case`` (the text), ``label_gold`` (``hateful``/``non-hateful``),
``target_ident`` (empty for tests without a target group, e.g. ``target_obj_nh``), ``direction``,
``focus_words``, ``focus_lemma``, ``ref_case_id``, ``ref_templ_id``, ``templ_id``, ``case_templ``.

Each case becomes an :class:`~toxiforge.data.examples.Example`: ``hateful`` = 1; ``group`` from ``target_ident``
through :func:`~toxiforge.data.examples.normalize_group` (``gay people`` -> ``lgbtq``, ``Muslims`` -> ``muslim``;
the 7 groups stay distinct; no target -> None); ``meta`` keeps ``functionality``, ``case_id`` and ``target_ident``,
so results can be broken down per functional test as the paper reports them (``data.meta_column("functionality")``)
and a report can name a group as HateCheck does ("gay people (lgbtq)").

Without a local file, the CSV is read from GitHub at :data:`HATECHECK_COMMIT` (the commit the shared copy came
from), never from a moving branch.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from toxiforge.data.examples import (
    Example,
    LabeledData,
    clean_text,
    column,
    finish,
    normalize_group,
    read_local_or_pinned,
    require_columns,
)
from toxiforge.errors import InputError

HATECHECK_REPO = "paul-rottger/hatecheck-data"
HATECHECK_COMMIT = "d84302298ceeb34f4b0dde2d8a1f4932c2caa612"
HATECHECK_FILE = "test_suite_cases.csv"
HATECHECK_URL = f"https://raw.githubusercontent.com/{HATECHECK_REPO}/{HATECHECK_COMMIT}/{HATECHECK_FILE}"
HATECHECK_HUB_ID = "Paul/hatecheck"  # the same 3,728 cases on the Hub (cards name it)
HATECHECK_COLUMNS: tuple[str, ...] = ("functionality", "case_id", "test_case", "label_gold", "target_ident")
HATECHECK_LABELS = {"hateful": 1, "non-hateful": 0}
TARGET_COLUMN = "target_ident"   # kept in meta: HateCheck's own name of a group ("gay people"), for reports


def load_hatecheck(path: str | Path | None = None, *, name: str | None = None) -> LabeledData:
    """HateCheck's ``test_suite_cases.csv`` (module docstring), or the pinned GitHub copy when ``path`` is None."""
    table, source = read_local_or_pinned(path, HATECHECK_URL, f"hatecheck:{HATECHECK_FILE} (from "
                                                               f"github.com/{HATECHECK_REPO} at commit "
                                                               f"{HATECHECK_COMMIT})")
    require_columns(table.column_names, HATECHECK_COLUMNS, layout="HateCheck", path=source,
                    hint=f"expected HateCheck's {HATECHECK_FILE} (github.com/{HATECHECK_REPO}), which has "
                         f"{', '.join(HATECHECK_COLUMNS)} among its columns")
    tests, case_ids, groups = column(table, "functionality"), column(table, "case_id"), column(table, "target_ident")
    skipped: Counter = Counter()
    examples = []
    for i, (raw, gold) in enumerate(zip(column(table, "test_case"), column(table, "label_gold"))):
        key = str(gold).strip().lower() if gold is not None else ""
        if key not in HATECHECK_LABELS:
            raise InputError(f"label_gold {gold!r} at data row {i + 1} is not hateful/non-hateful", path=source,
                             hint=f"HateCheck's label_gold holds 'hateful' or 'non-hateful'; is this "
                                  f"{HATECHECK_FILE}?")
        text = clean_text(raw)
        if text is None:
            skipped["empty text"] += 1
            continue
        meta = {"functionality": tests[i], "case_id": case_ids[i], TARGET_COLUMN: groups[i]}
        examples.append(Example(text, HATECHECK_LABELS[key], normalize_group(groups[i]), row=i, meta=meta))
    n_tests = len({e.meta["functionality"] for e in examples if e.meta})
    return finish(name or "HateCheck", examples, layout="hatecheck", source=source, skipped=skipped,
                  notes=[f"label 1 = hateful; {n_tests} functional tests (meta 'functionality')"])
