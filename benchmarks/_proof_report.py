"""``harden_proof.py report``: every classifier of every finished seed, read on what no decision used (HateCheck's
report half, the held-out sentences, a fresh ALICE attack), per seed and pooled over the seeds.

A seed's per-row outcomes, once read, are kept in ``--outcomes`` (default ``benchmarks/results/harden-proof``, in
the repository): one small JSON per run (``seed-S.json``; ``seed-S-MIX.json`` for another mix) holding, per
classifier, its calls on HateCheck's report half, its scores on the held-out sentences and its fresh attack's flips
and confirmations, as bit strings and numbers (no text: the statements stay in ``--work``), with SHA-256 digests of
the files they pair with. A run's folder holds hours of CPU (models, attacks) and may be lost with its machine;
these files are what the pooled report needs, so a seed read once is never run again, and the report checks each
file's digests against this ``--work``'s split before it pairs rows.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from _common import REPO, train_minilm
from harden_proof import read_rows, run_dir

SPLIT_FILES = ("hatecheck-report.csv", "held-out.csv", "c0-data.csv")  # what an outcome file's rows pair with
ARMS_APART = "alice - control"  # the row of item 5's last target: the ALICE arm against the control arm, paired


def fresh_attack(work: Path, seed: int, name: str, classifier: Path, run: Path) -> Path:
    """ALICE (the rounds' settings) on ``classifier`` with the prompts of the last round's measured attacks, which
    no round trained on: the arms were attacked on them in the loop; C_0 and its retrained twin are here."""
    groups = json.loads((work / "groups.json").read_text())["attacked"]
    prompts = run / "round-2" / "measure.prompts"  # the same prompts in every mix's run of the seed
    # C_0 and its retrained twin are the same in every mix's run: attacked once per seed
    out = work / "fresh" / (f"seed-{seed}" if name.startswith("C_0") else run.name) / name
    n = len((prompts / f"hate_{groups[0]}.txt").read_text().splitlines())
    command = [sys.executable, "-m", "toxiforge", "generate", "--method", "alice", "--prompts", str(prompts),
               "--groups", ",".join(groups), "-n", str(n), "-c", str(classifier), "--device", "cpu", "-o",
               str(out), "--no-summary", "--no-progress", *(["--resume"] if (out / "manifest.json").exists() else [])]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO / "src")}
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL)
    return out


def classifiers_of(work: Path, seed: int, run: Path, ship: dict[str, Any]) -> dict[str, Path]:
    """C_0; C_0's recipe retrained with the seed (the noise of C_0 itself); each arm's last round in ``run``; the one
    shipped (``ship``: the run's report.json's)."""
    out = {"C_0": work / "c0",
           "C_0 retrained": train_minilm(work / f"c0-seed-{seed}", rows=read_rows(work / "c0-data.csv"), seed=seed),
           "control": run / "round-2" / "control" / "model", "alice": run / "round-2" / "alice" / "model"}
    out["shipped"] = Path(ship["folder"]) if Path(ship["folder"]).is_absolute() else run / ship["folder"]
    return out


def digest(path: Path) -> str:
    """SHA-256 of a file's bytes: what an outcome file was read against."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def bits(values: Any) -> str:
    """Booleans as a string of 0s and 1s (how the outcome files keep per-row calls)."""
    return "".join("1" if v else "0" for v in values)


def array(bits: str) -> Any:
    """:func:`bits` back to a boolean array."""
    import numpy as np

    return np.array([ch == "1" for ch in bits], dtype=bool)


def read_seed(work: Path, seed: int, mix: str) -> dict[str, Any]:
    """Seed S's run of ``mix`` read whole: per classifier its outcomes on each part (the record ``--outcomes``
    keeps). Scores are cached in ``--work``/scores as they are made, so a stopped read goes on where it was."""
    import numpy as np

    from toxiforge.classifiers import load_classifier
    from toxiforge.classifiers.fingerprint import same_classifier
    from toxiforge.data.registry import load_spec
    from toxiforge.records import read_rows as read_generated

    run = run_dir(work, seed, mix)
    cache = work / "scores" / f"{run.name}.json"
    scores: dict[str, list[float]] = json.loads(cache.read_text()) if cache.exists() else {}
    hatecheck = load_spec(f"hatecheck:{work / 'hatecheck-report.csv'}").examples
    held = read_rows(work / "held-out.csv")
    validator = load_classifier(str(work / "validator"))
    ship = json.loads((run / "report.json").read_text())["ship"]
    folders = classifiers_of(work, seed, run, ship)
    record: dict[str, Any] = {
        "seed": seed, "mix": mix, "run": run.name, "ship": ship,
        "commit": subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                                 text=True).stdout.strip(),
        "digests": {name: digest(work / name) for name in SPLIT_FILES},
        "classifiers": {}}
    for name, folder in folders.items():
        same = [k for k in record["classifiers"] if same_classifier(folders[k], folder)]
        # the shipped classifier is C_0 or an arm's, C_0 retrained with C_0's own seed (0) is C_0, by content: its
        # numbers, not a second attack
        if same:
            record["classifiers"][name] = {"same_as": same[0]}
            continue
        attack = (run / "round-2" / name / "attack" if name in ("alice", "control")
                  else fresh_attack(work, seed, name.replace(" ", "-"), folder, run))
        rows = sorted(read_generated(attack), key=lambda r: (r.group, r.prompt_label, r.prompt))
        texts = {"hc": [e.text for e in hatecheck], "held": [e.text for e in held],
                 "fresh": [r.generation for r in rows]}
        missing = [part for part in texts if f"{name}/{part}" not in scores]
        classifier = load_classifier(str(folder)) if missing else None  # loaded once, only when a part is unscored
        for part in missing:
            scores[f"{name}/{part}"] = classifier.predict_proba(texts[part]).tolist()
        key = f"validator/{name}/fresh"
        if key not in scores:
            scores[key] = validator.predict_proba(texts["fresh"]).tolist()
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(scores))
        label = np.array([r.prompt_label for r in rows])
        record["classifiers"][name] = {
            "hc_toxic": bits(np.array(scores[f"{name}/hc"]) > 0.5), "held_score": scores[f"{name}/held"],
            "fresh_flipped": bits((np.array(scores[f"{name}/fresh"]) > 0.5) != label),
            "fresh_kept_by_validator": bits((np.array(scores[key]) > 0.5) == label),
            "fresh_prompts": hashlib.sha256("\n".join(r.prompt for r in rows).encode()).hexdigest()}
    return record


def seed_outcomes(work: Path, seed: int, mix: str, outcomes: Path) -> dict[str, dict[str, Any]]:
    """Per classifier of seed S's run of ``mix``: each metric's per-row outcomes (or scores) as the report pairs them
    across classifiers; from ``outcomes`` when the seed was read before (its digests checked), else read now and
    kept there."""
    import numpy as np

    from toxiforge.data.registry import load_spec

    run = run_dir(work, seed, mix)
    path = outcomes / f"{run.name}.json"
    if missing := [name for name in SPLIT_FILES if not (work / name).exists()]:
        sys.exit(f"{work} has no {', '.join(missing)}: it is not the work folder `harden_proof.py prepare` wrote. Pass "
                 f"that folder as --work (or make one: harden_proof.py prepare --work {work})")
    if not path.exists() and not (run / "report.json").exists():
        sys.exit(f"seed {seed}: no outcomes in {outcomes} and no finished run in {run}: run it first "
                 f"(harden_proof.py run --work {work} --seed {seed}, or `all`), or pass the --outcomes that holds it")
    if path.exists():
        record = json.loads(path.read_text())
        differ = [name for name, value in record["digests"].items() if digest(work / name) != value]
        if differ:
            sys.exit(f"{path} was read against other data than {work}'s {', '.join(differ)}: its rows cannot be "
                     f"paired with this split. Run `harden_proof.py prepare` into a new --work, or move {path} away "
                     "to read the seed again")
        print(f"seed {seed}: outcomes from {path} (read at {record['commit'][:10]})")
    else:
        record = read_seed(work, seed, mix)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(record, indent=1) + "\n")
        print(f"seed {seed}: outcomes kept in {path}")
    hc_label = np.array([e.label for e in load_spec(f"hatecheck:{work / 'hatecheck-report.csv'}").examples])
    held_label = np.array([e.label for e in read_rows(work / "held-out.csv")])
    out: dict[str, dict[str, Any]] = {}
    for name, c in record["classifiers"].items():
        if "same_as" in c:
            out[name] = out[c["same_as"]]
            continue
        out[name] = {"hc": (array(c["hc_toxic"]), hc_label), "held": (np.array(c["held_score"]), held_label),
                     "fresh": (array(c["fresh_flipped"]), array(c["fresh_kept_by_validator"])),
                     "prompts": c["fresh_prompts"]}
    return out


def metric_of(outcomes: dict[str, Any], fn: Any) -> Any:
    """A metric of one classifier's outcomes over resample weights ``w`` [b, n]; ``fn`` None: ROC AUC on the
    held-out sentences."""
    import numpy as np
    from sklearn.metrics import roc_auc_score

    if fn is not None:
        return lambda w: fn(outcomes, w)
    y_score, y = outcomes["held"]
    return lambda w: np.array([roc_auc_score(y, y_score, sample_weight=row) for row in w])


def report(work: Path, seeds: list[int], mix: str, outcomes: Path) -> None:
    """Per seed and pooled: HateCheck (report half) accuracy, over-blocking, FNR; ROC AUC on the held-out
    sentences; the fresh attack's flips and confirmed flips per 100; each classifier minus C_0 with paired 95%
    intervals (1,000 resamples of the rows, or the prompts), and over the seeds a t interval (2 degrees of freedom
    for 3 seeds: the three-seed noise)."""
    import numpy as np

    from toxiforge.intervals import Proportion, Resampler, interval_cell, mean_over_runs, paired_difference

    metrics = {"HateCheck accuracy": lambda m, w: Proportion((m["hc"][0] == m["hc"][1]), np.ones_like(m["hc"][1]))(w),
               "over-blocking": lambda m, w: Proportion(m["hc"][0], m["hc"][1] == 0)(w),
               "FNR": lambda m, w: Proportion(~m["hc"][0], m["hc"][1] == 1)(w),
               "fresh flips": lambda m, w: Proportion(m["fresh"][0], np.ones_like(m["fresh"][0]))(w),
               "fresh confirmed": lambda m, w: Proportion(m["fresh"][0] & m["fresh"][1],
                                                          np.ones_like(m["fresh"][0]))(w)}
    table: dict[str, dict[str, list[tuple[Any, ...]]]] = {}
    values: dict[str, dict[str, list[float]]] = {}
    for seed in seeds:
        per = seed_outcomes(work, seed, mix, outcomes)
        names = list(per)
        for metric, fn in [*metrics.items(), ("held-out ROC AUC", None)]:
            part = "held" if fn is None else ("fresh" if metric.startswith("fresh") else "hc")
            n = len(per["C_0"][part][0])
            if part == "fresh":
                assert all(per[k]["prompts"] == per["C_0"]["prompts"] for k in names), "fresh attacks' prompts differ"
            sampler = Resampler(n, seed=seed)

            est = sampler.estimates({k: metric_of(per[k], fn) for k in names})
            pairs = [(k, est["C_0"], est[k], est[k].value) for k in names]
            if {"alice", "control"} <= set(names):  # the arms on the same rows (and the same fresh prompts)
                pairs.append((ARMS_APART, est["control"], est["alice"], None))
            for k, base, other, value in pairs:
                d = paired_difference(base, other)
                table.setdefault(metric, {}).setdefault(k, []).append((value, d.value, d.low, d.high))
                values.setdefault(metric, {}).setdefault(k, []).append(d.value)
    print(f"{mix} runs, seeds {seeds}; differences are classifier minus C_0 (paired 95% interval per seed; over the "
          f"seeds the mean and a t interval); '{ARMS_APART}': the ALICE arm's round-2 classifier minus the control "
          "arm's, paired the same way")
    for metric, by in table.items():
        print(f"\n| {metric} | " + " | ".join(f"seed {s}" for s in seeds) + " | mean difference [t 95%] |")
        print("|---|" + "---:|" * (len(seeds) + 1))
        for k, cells in by.items():
            over = mean_over_runs(values[metric][k])
            pooled = interval_cell(over if over["low"] != over["high"] else {"value": over["value"]})  # C_0: 0
            print(f"| {k} | " + " | ".join(("" if v is None else f"{v:.3f} ") + f"({d:+.3f} [{lo:+.3f}, {hi:+.3f}])"
                                           for v, d, lo, hi in cells)
                  + f" | {pooled} |")
    verdicts = targets(table, values)
    print("\nItem 5's targets, each beyond seed noise: the seeds' mean with its t 95% interval, whole on the "
          "target's side\n\n| target | mean [t 95%] over the seeds | needs | met |\n|---|---:|---|---|")
    for v in verdicts:
        print(f"| {v['target']} | {v['reading']} | {v['needs']} | {v['met']} |")
    name = "report" if mix == "retrain" else f"report-{mix}"
    (work / f"{name}.json").write_text(json.dumps({**table, "targets": verdicts}, indent=1))
    figure(table, seeds, work / f"{name}.png")


GAIN = 0.03  # item 5: the shipped classifier's HateCheck accuracy, at least 3 points above C_0's


def targets(table: dict[str, dict[str, list[tuple[Any, ...]]]], values: dict[str, dict[str, list[float]]]
            ) -> list[dict[str, Any]]:
    """Item 5's four targets read over the seeds (fixed on 2026-11-30, before seed 1's report half was read): each
    is met only when the t 95% interval of the seeds' mean (``mean_over_runs``) lies wholly on its side: the shipped
    classifier's HateCheck accuracy minus C_0's at or above +0.03 (its lower end); its fresh confirmed flip rate at
    most half of C_0's (shipped minus half of C_0, per seed: upper end at or below 0); its over-blocking minus C_0's
    not above 0 (upper end); the ALICE arm's fresh confirmed flip rate minus the control arm's below 0 (upper end).
    Each says how far the interval's end is from the target."""
    from toxiforge.intervals import interval_cell, mean_over_runs

    halved = [s[0] - c[0] / 2 for s, c in zip(table["fresh confirmed"]["shipped"], table["fresh confirmed"]["C_0"])]
    # (target, per-seed differences, the interval's end read, the goal it must reach, whether it may equal the goal)
    rows = [("shipped beats C_0 by >= 3 points of HateCheck accuracy", values["HateCheck accuracy"]["shipped"],
             "low", GAIN, True),
            ("shipped halves the fresh attack's confirmed flip rate (shipped minus half of C_0's)", halved,
             "high", 0.0, True),
            ("shipped's over-blocking not higher than C_0's", values["over-blocking"]["shipped"], "high", 0.0, True),
            ("ALICE arm beats the control arm on the fresh attack (confirmed flips)",
             values["fresh confirmed"][ARMS_APART], "high", 0.0, False)]
    out = []
    for target, diffs, end, goal, inclusive in rows:
        side = (">" if end == "low" else "<") + ("=" if inclusive else "")
        needs = f"{side} {goal:+.3f} ({'lower' if end == 'low' else 'upper'} end)"
        over = mean_over_runs(diffs) or {"value": None, "low": None, "high": None}
        reading = interval_cell(over)
        if over["low"] is None:
            met = "no interval (fewer than 2 seeds)"
        else:
            gap = over[end] - goal if end == "low" else goal - over[end]  # > 0: on the target's side
            met = ("yes" if gap > 0 or (inclusive and gap == 0)
                   else f"no: {'short' if end == 'low' else 'over'} by {abs(gap):.3f}")
        out.append({"target": target, "reading": reading, "needs": needs, "met": met, "over_runs": over})
    return out


def figure(table: dict[str, dict[str, list[tuple[Any, ...]]]], seeds: list[int], path: Path) -> None:
    """One panel per metric: each classifier's value per seed (dots) and their mean (bar), side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(table), figsize=(3.2 * len(table), 3.6), squeeze=False)
    for ax, (metric, by) in zip(axes[0], table.items(), strict=True):
        names = [name for name in by if name != ARMS_APART]  # a difference, not a classifier's value
        for i, name in enumerate(names):
            values = [cell[0] for cell in by[name] if cell[0] is not None]
            ax.bar(i, sum(values) / len(values) if values else 0, color="#bbb")
            ax.scatter([i] * len(values), values, s=12, color="black", zorder=3)
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
        ax.set_title(metric, fontsize=9)
    fig.suptitle(f"harden on toxigen-dev, seeds {', '.join(map(str, seeds))} (bars: mean; dots: seeds)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")
