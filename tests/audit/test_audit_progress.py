"""What the terminal shows while an audit scores (issue 56, item 10): a bar of rows done, rows/s and ETA per
(classifier, dataset) pair on a terminal, a line with the rate elsewhere, and a resumed audit saying at which row
the pair that was stopped restarts."""

from __future__ import annotations

import io
import re

from audit.test_audit_cli import _audit, _error, fakes, hatecheck  # noqa: F401 (fixtures)
from toxiforge.audit import scores as score_module
from toxiforge.audit.run import AuditSettings, ClassifierSpec, run_audit
from toxiforge.classifiers.wrap import CallableClassifier
from toxiforge.data import load_specs

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def test_scoring_shows_rows_done_rate_and_eta_on_a_terminal(tmp_path, hatecheck, monkeypatch):  # noqa: F811
    from rich.console import Console

    monkeypatch.setattr(score_module, "CHUNK", 12)
    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=160)
    seen: list[int] = []

    def load(spec, **kwargs):
        def fn(texts):
            seen.append(len(texts))
            return [0.5] * len(texts)

        return CallableClassifier(fn, name=spec)

    data = load_specs([f"hatecheck:{hatecheck}"])
    run_audit([ClassifierSpec("one", "one")], data, tmp_path / "out", AuditSettings(n_boot=0), loader=load,
              progress=console)
    shown = ANSI.sub("", screen.getvalue())
    assert seen == [12, 12, 12, 12]
    assert "scoring HateCheck with one" in shown and "48/48" in shown
    assert re.search(r"[0-9.]+ rows/s", shown) and "ETA" in shown


def test_a_resumed_audit_says_where_it_restarts_and_the_rate_of_what_it_scored(tmp_path, hatecheck, fakes,  # noqa: F811
                                                                               monkeypatch):
    monkeypatch.setattr(score_module, "CHUNK", 10)
    out = tmp_path / "audit"
    on = ["--on", f"hatecheck:{hatecheck}", "-o", str(out)]
    assert "after 40 rows" in _error(_audit("-c", "x=fake-broken", *on))   # rows 0-39 kept, row 43 failed
    fakes.clear()
    # the same column, now a classifier that works (say the server came back); the digest is the spec's, so it is
    # given the broken one's spec through a fake that no longer fails
    monkeypatch.setattr("toxiforge.classifiers.load_classifier",
                        lambda spec, **kw: CallableClassifier(lambda texts: [0.5] * len(texts), name=spec))
    resumed = _audit("-c", "x=fake-broken", *on, "--resume")
    assert resumed.exit_code == 0, resumed.output
    assert "scoring HateCheck (48 rows) with x: restarting at row 41 of 48, the 40 rows scored before the stop " \
           "are kept" in resumed.output
    assert re.search(r"scoring HateCheck with x: 8 rows in [0-9.]+ s \([0-9.]+ rows/s\)", resumed.output)
