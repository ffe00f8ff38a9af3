"""Commands: bias measure, bias lexicon fetch/show, bias dialect fetch/predict (Zhou et al. 2021); the
mitigation commands (datamap, aflite) join the group from cli/debias.py at the bottom."""

from __future__ import annotations

from pathlib import Path

import typer

from toxiforge.cli import _options as opt
from toxiforge.cli._app import App, console
from toxiforge.cli.debias import register_bias_commands
from toxiforge.records import TOXIC_THRESHOLD

bias_app = App(help="Lexical (TOXTRIG) and dialect (AAE) bias of datasets and classifiers, as Zhou et al. "
                            "(2021) measure them.", no_args_is_help=True)
lexicon_app = App(help="The TOXTRIG word lists (NOI, OI, ONI).", no_args_is_help=True)
dialect_app = App(help="Blodgett et al.'s (2016) dialect model (p(AAE) per text).", no_args_is_help=True)
bias_app.add_typer(lexicon_app, name="lexicon")
bias_app.add_typer(dialect_app, name="dialect")


def register(app: typer.Typer) -> None:
    """Add ``toxiforge bias ...`` to ``app``."""
    app.add_typer(bias_app, name="bias")


_DATA_HELP = ("Labelled data: a toxiforge run, ToxiGen annotated/train, a demonstrations folder or any table, as a "
              "spec [NAME=][KIND:]PATH (docs/training.md).")
_LEXICON_HELP = ("upstream (paper mode: Zhou et al.'s own word list, regular expressions, for NOI, OI and ONI) or a "
                 "CSV term,category[,match] replacing those categories' default lists.")
_MATCH_HELP = ("raw: upstream's regexes on the text as given (the default in paper mode, so counts equal upstream's "
               "code); normalized: on normalised text (hashtags split, URLs/@mentions dropped; the default "
               "otherwise). docs/bias.md.")
_OI_HELP = ("Upstream's word_based_bias_list.csv or its folder; kept in the cache once given (default: the cached "
            "copy, from `bias lexicon fetch` or an earlier --oi-list).")
_DIALECT_HELP = ("Folder with twitteraae's model_vocab.txt and model_count_table.txt; kept in the cache once given "
                 "(default: the cached copy).")


@bias_app.command("measure")
def measure(
    data: str = typer.Argument(..., help=_DATA_HELP),
    classifier: str | None = typer.Option(None, "--classifier", "-c", help="Classifier to measure (registry "
                                             "name, model directory or hub id)."),
    judge_template: str | None = opt.JUDGE_TEMPLATE,
    judge_policy: str | None = opt.JUDGE_POLICY,
    judge_concurrency: int | None = opt.JUDGE_CONCURRENCY,
    classifier_runtime: str | None = opt.CLASSIFIER_RUNTIME,
    toxic_label: str | None = opt.TOXIC_LABEL,
    predictions: str | None = typer.Option(None, "--predictions", help="Column of DATA's table with P(toxic) "
                                              "or 0/1 predictions (instead of --classifier)."),
    lexicon: str | None = typer.Option(None, "--lexicon", help=_LEXICON_HELP),
    lexicon_match: str | None = typer.Option(None, "--lexicon-match", help=_MATCH_HELP),
    oi_list: Path | None = typer.Option(None, "--oi-list", help=_OI_HELP),
    dialect_model: Path | None = typer.Option(None, "--dialect-model", help=_DIALECT_HELP),
    json_out: Path | None = typer.Option(None, "--json", help="Write the metrics as JSON."),
    markdown_out: Path | None = typer.Option(None, "--markdown", help="Write Markdown tables (and the FPR "
                                                "chart beside it as .png when there are predictions)."),
    png_out: Path | None = typer.Option(None, "--png", help="Write the FPR chart here."),
    text_column: str | None = typer.Option(None, "--text-column", help="Text column of a plain table."),
    label_column: str | None = typer.Option(None, "--label-column", help="Label column (tables; toxiforge and "
                                               "ToxiGen train default to prompt_label)."),
    label_rule: str = typer.Option("sum", "--label-rule", help="ToxiGen annotated: sum (upstream) or max."),
    threshold: float = typer.Option(TOXIC_THRESHOLD, "--threshold", help="A prediction is toxic when its score is "
                                   "above this (a score equal to it is benign)."),
    aae_threshold: float | None = typer.Option(None, "--aae-threshold", help="AAE texts: p(AAE) above this "
                                                  "(default: AAE is the most probable dialect, as upstream)."),
    batch_size: int | None = typer.Option(None, "--batch-size", help="Classifier batch size."),
    device: str = typer.Option("auto", "--device", help="auto, cpu or cuda (transformers classifiers)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing --json/--markdown/--png files."),
) -> None:
    """Dataset bias (Table 1) and, with a classifier or predictions, classifier bias (Tables 2 and 4)."""
    from toxiforge._io import require_new_files
    from toxiforge.bias.lexicon import load_bias_lexicon
    from toxiforge.bias.measure import find_dialect_model, measure_data, predictions_from_column, write_outputs
    from toxiforge.data import load_spec
    from toxiforge.errors import InputError

    if classifier and predictions:
        raise InputError("--classifier and --predictions both given", hint="pass one of them")
    beside = markdown_out.with_suffix(".png") if markdown_out and not png_out and (classifier or predictions) else None
    require_new_files(json_out, markdown_out, png_out, beside, overwrite=overwrite)  # the chart goes beside the .md
    labelled = load_spec(data, label_rule=label_rule, text_column=text_column, label_column=label_column)
    lex = load_bias_lexicon(lexicon, oi_list=oi_list, match=lexicon_match)
    model, dialect_source = find_dialect_model(dialect_model)
    scores, model_name = None, None
    if predictions:
        scores, model_name = predictions_from_column(labelled, predictions), f"predictions column {predictions}"
    elif classifier:
        from toxiforge.classifiers import load_classifier
        from toxiforge.classifiers.scoring import score_texts

        with console.status(f"loading {classifier}"):
            clf = load_classifier(classifier, device=device, batch_size=batch_size,
                                  **opt.classifier_options(judge_template, judge_policy, toxic_label,
                                                           judge_concurrency, classifier_runtime))
        with console.status(f"scoring {len(labelled)} texts with {clf.name}"):
            scores = score_texts(clf, labelled.texts)
        model_name = classifier
    result = measure_data(labelled, lexicon=lex, dialect_model=model, scores=scores, model=model_name,
                          threshold=threshold, aae_threshold=aae_threshold, dialect_source=dialect_source)
    from toxiforge.bias.measure import describe
    from toxiforge.bias.report import render_markdown

    console.print(render_markdown(result.report, name=result.name, model=model_name, details=describe(result)),
                  highlight=False, soft_wrap=True, markup=False)
    for kind, path in write_outputs(result, json_path=json_out, markdown_path=markdown_out, png_path=png_out).items():
        console.print(f"wrote {kind}: {path}", highlight=False)


def _fetch(resource_name: str, dest: Path | None, commit: str | None, timeout: float) -> Path:
    from toxiforge.bias import fetch

    resource = getattr(fetch, resource_name)
    console.print(f"Fetching {resource.repo} at {commit or resource.commit} ...", highlight=False)
    out = fetch.fetch_resource(resource, dest, commit=commit, timeout=timeout)
    console.print(f"[green]Wrote[/] {', '.join(Path(p).name for p in resource.files)} to {out}", highlight=False)
    return out


_DEST_HELP = "Folder to write to (default: toxiforge's cache, where `bias measure` looks)."


@lexicon_app.command("fetch")
def lexicon_fetch(
    dest: Path | None = typer.Option(None, "--dest", help=_DEST_HELP),
    commit: str | None = typer.Option(None, "--commit", help="Upstream commit (default: the pinned one)."),
    timeout: float = typer.Option(20.0, "--timeout", help="Seconds to wait for GitHub."),
) -> None:
    """Download Zhou et al.'s TOXTRIG word list (XuhuiZhou/Toxic_Debias, pinned commit); its OI rows become OI."""
    _fetch("TOXTRIG", dest, commit, timeout)


@lexicon_app.command("show")
def lexicon_show(
    lexicon: str | None = typer.Option(None, "--lexicon", help=_LEXICON_HELP),
    lexicon_match: str | None = typer.Option(None, "--lexicon-match", help=_MATCH_HELP),
    oi_list: Path | None = typer.Option(None, "--oi-list", help=_OI_HELP),
) -> None:
    """How many entries each category has and which source (file, cached copy) each uses (the terms themselves
    are not printed)."""
    from toxiforge.bias.lexicon import load_bias_lexicon

    lex = load_bias_lexicon(lexicon, oi_list=oi_list, match=lexicon_match)
    for category, info in lex.describe().items():
        kind = f" ({info['regex']} regular expressions)" if info["regex"] else ""
        console.print(f"{category.upper():4} {info['terms']:5d} entries{kind}  {info['source']}", highlight=False,
                      soft_wrap=True)
    for note in (lex.toxtrig_note(), lex.match_note()):
        if note:
            console.print(f"note: {note}", highlight=False, soft_wrap=True)


@dialect_app.command("fetch")
def dialect_fetch(
    dest: Path | None = typer.Option(None, "--dest", help=_DEST_HELP),
    commit: str | None = typer.Option(None, "--commit", help="Upstream commit (default: the pinned one)."),
    timeout: float = typer.Option(20.0, "--timeout", help="Seconds to wait for GitHub."),
) -> None:
    """Download Blodgett et al.'s dialect model (slanglab/twitteraae, pinned commit)."""
    _fetch("TWITTERAAE", dest, commit, timeout)


@dialect_app.command("predict")
def dialect_predict(
    data: str = typer.Argument(..., help=_DATA_HELP),
    out: Path = typer.Option(..., "-o", "--out", help="Output table (.parquet, .csv or .jsonl)."),
    dialect_model: Path | None = typer.Option(None, "--dialect-model", help=_DIALECT_HELP),
    text_column: str | None = typer.Option(None, "--text-column", help="Text column of a plain table."),
    label_column: str | None = typer.Option(None, "--label-column", help="Label column of a plain table."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing output files."),
) -> None:
    """Write text, label, group, the TOXTRIG columns and p_aae, p_hispanic, p_other, p_white per row."""
    import numpy as np
    import pyarrow as pa

    from toxiforge._io import require_new_files
    from toxiforge.bias.dialect import DIALECTS, load_dialect_model, predict_dialects
    from toxiforge.bias.lexicon import tag_texts
    from toxiforge.bias.measure import find_dialect_model
    from toxiforge.data import load_spec
    from toxiforge.records import write_table

    require_new_files(out, overwrite=overwrite)
    labelled = load_spec(data, text_column=text_column, label_column=label_column)
    model, source = find_dialect_model(dialect_model)
    if model is None:
        model = load_dialect_model()  # raises the error with its fix
    console.print(f"dialect model: {source}", highlight=False, soft_wrap=True)
    texts = labelled.texts
    probs = predict_dialects(texts, model)
    columns = {"text": texts, "label": labelled.labels, "group": [e.group for e in labelled.examples]}
    columns.update({k: v.tolist() for k, v in tag_texts(texts).items()})
    columns.update({f"p_{d}": [None if np.isnan(x) else float(x) for x in probs[:, i]]
                    for i, d in enumerate(DIALECTS)})
    write_table(pa.table(columns), out)
    console.print(f"wrote {len(texts)} rows to {out}", highlight=False)


register_bias_commands(bias_app)  # datamap, aflite, relabel: the mitigation side (cli/debias.py, issue 11)
