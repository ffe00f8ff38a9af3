"""`toxiforge summary RUN --human FILE`: fool rates against human labels (paper §4.3, App. E), hand-computed."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.csv as pcsv
from typer.testing import CliRunner

from toxiforge.analysis.human_validation import human_labels, human_validation, join_key
from toxiforge.cli import app
from toxiforge.records import Row, write_rows


def _row(text, method, label, fooled):
    return Row(prompt="p", generation=text, generation_method=method, group="asian", prompt_label=label,
               row_id=text, classifier="c", classifier_score=0.5, fooled=fooled)


# (text, method, prompt label, fooled vs prompt, human scores (ai, human) per annotator)
CASES = [
    ("-t1 placeholder", "ALICE", 1, True, [(2, 2), (1, 2)]),   # human benign; clf says benign -> not fooled (human)
    ("t2 placeholder", "ALICE", 1, False, [(5, 4), (4, 4)]),   # human toxic; clf toxic -> not fooled
    ("t3 placeholder", "ALICE", 1, True, [(4, 5), (5, 5)]),    # human toxic; clf benign -> fooled
    ("t4 placeholder", "ALICE", 0, True, [(1, 1), (2, 1)]),    # human benign; clf toxic -> fooled
    ("t5 placeholder", "top-k", 0, False, [(3, 3), (3, 3)]),   # ambiguous (3) -> benign; clf benign -> not fooled
    ("t6 placeholder", "top-k", 1, None, [(5, 5)]),            # unscored: counts for the label match only
    ("t7 placeholder", "top-k", 1, False, []),                 # no human label
]


def test_fool_rates_against_human_labels(tmp_path):
    rows = [_row(t, m, lab, f) for t, m, lab, f, _ in CASES]
    run = write_rows(rows, tmp_path / "run.jsonl")
    # ToxiGen's hub annotations layout (one-hot score columns, one row per response), as CSV with the
    # export's formula guard on the first text
    records = []
    for text, _, _, _, scores in CASES:
        for ai, human in scores:
            rec = {"Input.text": ("'" + text) if text.startswith("-") else text, "HashedWorkerId": "w"}
            rec.update({f"Answer.toAI.{i}": i == ai for i in range(1, 6)})
            rec.update({f"Answer.toPER.{i}": i == human for i in range(1, 6)})
            records.append(rec)
    hub = tmp_path / "hub.csv"
    pcsv.write_csv(pa.Table.from_pylist(records), hub)
    labels = human_labels(hub)
    assert labels == {"-t1 placeholder": 0, "t2 placeholder": 1, "t3 placeholder": 1, "t4 placeholder": 0,
                      "t5 placeholder": 0, "t6 placeholder": 1}
    # our per-response layout gives the same labels
    ours = tmp_path / "ours.parquet"
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{"text": t, "toxicity_ai": a, "toxicity_human": h}
                                         for t, _, _, _, s in CASES for a, h in s]), ours)
    assert human_labels(ours) == labels
    results, unmatched = human_validation(rows, labels)
    by = {(v.method, v.label): v for v in results}
    assert unmatched == 1
    alice_toxic = by[("ALICE", "toxic")]
    assert (alice_toxic.rows, alice_toxic.matches_prompt, alice_toxic.scored, alice_toxic.human_fooled,
            alice_toxic.label_flipped) == (3, 2, 3, 1, 2)
    alice_benign = by[("ALICE", "benign")]
    assert (alice_benign.rows, alice_benign.matches_prompt, alice_benign.human_fooled) == (1, 1, 1)
    topk_toxic = by[("top-k", "toxic")]
    assert (topk_toxic.rows, topk_toxic.matches_prompt, topk_toxic.scored) == (1, 1, 0)
    assert by[("top-k", "benign")].human_fool_rate == 0.0 and by[("top-k", "benign")].matches_prompt_rate == 1.0
    result = CliRunner().invoke(app, ["summary", str(run), "--human", str(hub)], terminal_width=200)
    assert result.exit_code == 0, result.output
    assert "fool rate (human)" in result.output and "1/3 (33.3%)" in result.output
    assert "label flip by method" in result.output and "1 statement(s) had no human label" in result.output
    assert join_key("'=x") == "=x" and join_key("'plain") == "'plain"
