"""The three human-written benchmarks of the paper's Table 4, in their published column layouts.

**SocialBiasFrames** (Sap et al., ACL 2020; SBIC v2, https://maartensap.com/social-bias-frames/, file
``SBIC.v2.tst.csv`` in ``SBIC.v2.tgz``; hub ``allenai/social_bias_frames``, split ``test``). One row per
*annotation* with ``post``, ``offensiveYN`` ("1.0" yes, "0.5" maybe, "0.0" no), ``targetCategory``,
``WorkerId``, ``HITId`` and more; the aggregated file ``SBIC.v2.agg.tst.csv`` has one row per post with the mean
``offensiveYN``. Both load: annotations are averaged per post and a post is offensive when the mean is
``>= threshold`` (0.5 by default; ToxiGen does not say how it binarized SBF). ``targetCategory`` is annotated for
offensive posts only, so it is not used as a group (per-group AUC would be single-class).

**Implicit Hate Corpus** (ElSherief et al., EMNLP 2021; github.com/SALT-NLP/implicit-hate, released through the
authors' request form). ``implicit_hate_v1_stg1_posts.tsv``: tab-separated ``post`` and ``class`` in
{``implicit_hate``, ``explicit_hate``, ``not_hate``}. Both hate classes are label 1 (``implicit_only=True`` drops
``explicit_hate`` rows instead). There is no hub copy of these stage-1 posts, so a local file is needed.

**DynaHate** (Vidgen et al., ACL 2021; github.com/bvidgen/Dynamically-Generated-Hate-Speech-Dataset,
``Dynamically Generated Hate Dataset v0.2.3.csv``). Columns ``acl.id, X1, text, label, type, target, level, split,
round.base, annotator, round, acl.id.matched`` (plus an unnamed index); ``label`` is ``hate``/``nothate`` and
``split`` ``train``/``dev``/``test``. The ``test`` split is used by default (``split=None`` keeps every row).
Without a local file the CSV is read from the GitHub repository with ``datasets.load_dataset("csv", ...)``.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

from toxiforge.data.examples import (
    Example,
    LabeledData,
    clean_text,
    column,
    finish,
    load_hub_table,
    read_any_table,
    require_columns,
    to_float,
)
from toxiforge.errors import InputError, ToxiforgeError

SBF_HUB_ID = "allenai/social_bias_frames"
SBF_HOME = "https://maartensap.com/social-bias-frames/"
IHC_HOME = "https://github.com/SALT-NLP/implicit-hate"
DYNAHATE_URL = ("https://raw.githubusercontent.com/bvidgen/Dynamically-Generated-Hate-Speech-Dataset/main/"
                "Dynamically%20Generated%20Hate%20Dataset%20v0.2.3.csv")
IHC_CLASSES = {"implicit_hate": 1, "explicit_hate": 1, "not_hate": 0}
DYNAHATE_LABELS = {"hate": 1, "nothate": 0}



def load_sbf(path: str | Path | None = None, *, threshold: float = 0.5, split: str = "test",
             name: str | None = None) -> LabeledData:
    """SocialBiasFrames from ``SBIC.v2.tst.csv`` (or the aggregated file), or the hub when ``path`` is None."""
    if path is None:
        try:
            table = load_hub_table(SBF_HUB_ID, split=split)
        except ToxiforgeError as exc:
            raise ToxiforgeError(f"{exc}; SBF is also at {SBF_HOME} (SBIC.v2.tgz holds SBIC.v2.tst.csv)") from exc
        source = f"hub:{SBF_HUB_ID}/{split}"
    else:
        table, source = read_any_table(path), str(path)
    require_columns(table.column_names, ("post", "offensiveYN"), layout="SocialBiasFrames", path=source)
    ratings: dict[str, list[float]] = defaultdict(list)
    order: list[str] = []
    skipped: Counter = Counter()
    for raw, rating in zip(column(table, "post"), column(table, "offensiveYN")):
        text = clean_text(raw)
        if text is None:
            skipped["empty text"] += 1
            continue
        if text not in ratings:
            order.append(text)
            ratings[text] = []
        value = to_float(rating)
        if value is not None:
            if not 0.0 <= value <= 1.0:
                raise InputError(f"offensiveYN value {rating!r} is outside 0..1", path=source,
                                 hint="SBF codes offensiveYN as 1.0 (yes), 0.5 (maybe), 0.0 (no)")
            ratings[text].append(value)
    examples = []
    for text in order:
        values = ratings[text]
        if not values:
            skipped["no offensiveYN rating"] += 1
            continue
        examples.append(Example(text, int(sum(values) / len(values) >= threshold)))
    repeated = len(table) - skipped["empty text"] - len(order)
    notes = [f"offensive when the mean offensiveYN of a post >= {threshold}"]
    if repeated:
        notes.append(f"{len(table)} annotation rows averaged into {len(order)} posts")
    return finish(name or "SBF test", examples, layout="sbf", source=source, skipped=skipped, notes=notes)


def load_ihc(path: str | Path | None, *, implicit_only: bool = False, name: str | None = None) -> LabeledData:
    """The Implicit Hate Corpus stage-1 posts (``implicit_hate_v1_stg1_posts.tsv``; ``post``, ``class``)."""
    if path is None:
        raise InputError("the Implicit Hate Corpus has no hub copy of its stage-1 posts",
                         hint=f"request the data at {IHC_HOME} and pass implicit_hate_v1_stg1_posts.tsv")
    table, source = read_any_table(path), str(path)
    require_columns(table.column_names, ("post", "class"), layout="Implicit Hate Corpus (stage 1)", path=source)
    skipped: Counter = Counter()
    examples = []
    for i, (raw, cls) in enumerate(zip(column(table, "post"), column(table, "class"))):
        text = clean_text(raw)
        key = str(cls).strip().lower() if cls is not None else ""
        if key not in IHC_CLASSES:
            raise InputError(f"unknown class {cls!r} at data row {i + 1}", path=source,
                             hint=f"stage-1 classes are {', '.join(IHC_CLASSES)}; is this the stg1 file?")
        if text is None:
            skipped["empty text"] += 1
        elif implicit_only and key == "explicit_hate":
            skipped["explicit_hate (implicit_only)"] += 1
        else:
            examples.append(Example(text, IHC_CLASSES[key]))
    note = "label 1 = implicit_hate" + ("" if implicit_only else " or explicit_hate") + ", 0 = not_hate"
    return finish(name or "IHC", examples, layout="ihc", source=source, skipped=skipped, notes=[note])


def load_dynahate(path: str | Path | None = None, *, split: str | None = "test",
                  name: str | None = None) -> LabeledData:
    """DynaHate v0.2.3 from its CSV (``text``, ``label`` hate/nothate, ``split``), or from GitHub when ``path``
    is None. ``split`` ``test`` (default), ``dev``, ``train`` or None for all rows."""
    if path is None:
        table, source = load_hub_table("csv", data_files=DYNAHATE_URL, split="train"), DYNAHATE_URL
    else:
        table, source = read_any_table(path), str(path)
    needed = ("text", "label") + (("split",) if split is not None else ())
    require_columns(table.column_names, needed, layout="DynaHate", path=source)
    splits = column(table, "split")
    if split is not None and split not in {str(s).strip() for s in splits}:
        found = sorted({str(s).strip() for s in splits})
        raise InputError(f"no rows with split {split!r}; the split values are {found}", path=source,
                         hint="use split test, dev or train (or None for all rows)")
    skipped: Counter = Counter()
    examples = []
    for i, (raw, label) in enumerate(zip(column(table, "text"), column(table, "label"))):
        if split is not None and str(splits[i]).strip() != split:
            continue
        key = str(label).strip().lower() if label is not None else ""
        if key not in DYNAHATE_LABELS:
            raise InputError(f"label {label!r} at data row {i + 1} is not hate/nothate", path=source,
                             hint="DynaHate's label column holds 'hate' or 'nothate'")
        text = clean_text(raw)
        if text is None:
            skipped["empty text"] += 1
        else:
            examples.append(Example(text, DYNAHATE_LABELS[key]))
    return finish(name or "DynaHate", examples, layout="dynahate", source=source, skipped=skipped,
                  notes=[f"split {split}" if split is not None else "all splits"])
