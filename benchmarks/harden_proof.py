"""Issue 55's proof on ../shared/data: does `toxiforge harden` ship a classifier better than C_0, beyond three-seed
noise, on text no decision used? The runs are long (hours per seed on 2 CPU cores), so the script works in steps
that each go on where an earlier call stopped (``--work`` keeps everything):

``prepare``
    * C_0's data: every toxigen-dev sentence of ``--c0-groups`` (default asian, black, jewish, latino: the 4 with
      the fewest sentences, so that the attacked groups' halves can give the rounds' prompts); C_0 is the embedded
      MiniLM fine-tuned on them (``_common.train_minilm``: 10 epochs at 1e-4, 15% held out as ``train`` does).
    * The attacked groups (the other 4): each group x label's sentences split in two by a seeded hash; the
      prompts are built from one half only (``prompt-half.csv``, the ``-d`` of every run), the other half
      (``held-out.csv``) is never in a prompt and is where ROC AUC on the attacked groups is read.
    * The validator V (``--validate-with``): the embedded MiniLM fine-tuned on ``prompt-half.csv`` (10 epochs at
      1e-4), a classifier C_0 never saw; its ROC AUC on ``held-out.csv`` is printed.
    * HateCheck split in two by template (``templ_id``, a seeded shuffle of the distinct ids): the rounds may be
      decided on ``hatecheck-decide.csv`` (``--eval``); results are read on ``hatecheck-report.csv`` only.
``run --seed S``
    ``toxiforge harden`` with C_0, ``--data`` C_0's sentences, ``--eval hc=hatecheck:hatecheck-decide.csv
    --no-guard-slice`` (C_0's 68 sentences give too small a slice to decide on: docs/harden.md), ``-n`` per
    group x label (default 125: 1,000 statements per attack), ``--measure-n`` for the attacks that only measure
    (default 25: 200 statements), ``--rounds 2``, ``--validate-with`` V, ``--no-transfer``, ``-o seed-S``;
    ``--resume`` when the folder exists; ``--shard-size 32``; ``--keep-going``: the design is 2 rounds, so a round
    the paired check finds worse than round 0 is measured on, not a stop (the ship rule still never ships it).
    ``--fpr-tolerance 0.07`` (:data:`FPR_TOLERANCE`). Wall and CPU seconds of each call go to
    ``calls-seed-S.jsonl`` (a line as each call starts, another as it ends). Run it from a checkout of its own (``git
    worktree add``): harden's worker processes import toxiforge anew for every job, so a source tree edited under a
    running run can break it. ``--mix weight3|continue|balanced`` runs item 3's other training mixes
    (``--added-weight 3``; ``--init continue``; ``--add balanced``), ``--mix nocal`` harden without ``--calibrate``,
    each in ``seed-S-MIX``, on the same prompts; a run shares round 0's attack and the top-k pools with a finished run
    of its seed.
``all --seeds 2,0,1``
    Every step in order, each resumable, so one command (run again after a stop) finishes the proof: ``prepare``
    when ``--work`` has no split, then per seed ``run`` and ``report`` of that seed (skipped once its outcomes are
    kept in ``--outcomes``), then ``report`` of all the seeds.
``report --seeds 0,1,2``
    Every classifier of each seed (C_0, C_0 retrained with the seed, each arm's round 2, the one shipped) on
    HateCheck's report half, the held-out sentences and a fresh ALICE attack on round 2's measured prompts, each minus
    C_0 with paired intervals per seed and a t interval over the seeds, then item 5's four targets, each met or
    not and by how much (``_proof_report.targets``); ``report.json`` and ``report.png`` (the four arms side by side)
    in ``--work``. A seed, once read, is kept as per-row outcomes in ``--outcomes`` (in the
    repository; ``_proof_report.py``): the pooled report then needs only those files and the split ``prepare`` makes.

    python benchmarks/harden_proof.py prepare --work /work/runs/proof
    nohup python benchmarks/harden_proof.py run --work /work/runs/proof --seed 0 >> /work/runs/proof/s0.log 2>&1 &
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

from _common import DEMONSTRATIONS, REPO, SHARED_DATA, add_work, parser, train_minilm

HATECHECK = SHARED_DATA / "hatecheck" / "test_suite_cases.csv"
C0_GROUPS = ("asian", "black", "jewish", "latino")
# 32 ALICE statements a shard, ~2.5 min of a core: a stop (a session's end) loses at most that per worker
SHARD_SIZE = 32
SPLIT_SEED = 55  # the halves (sentences, HateCheck templates) are drawn once, the same for every harden seed
# --fpr-tolerance: what HateCheck's decision half can show. Calibrated to C_0's benign counts, a round's paired FPR_NOI
# interval on its 287 benign cases naming a group spans about +-0.06-0.08 (docs/harden.md), so at the default 0.02 no
# round could ship; chosen before the runs at the default calibration, on the decision half only
FPR_TOLERANCE = 0.07
# report: each read seed's per-row outcomes (no text), kept in the repository (_proof_report.py says why)
OUTCOMES = REPO / "benchmarks" / "results" / "harden-proof"


def halves(sentences: list[str]) -> tuple[list[str], list[str]]:
    """A set's sentences in two halves (the first the larger by one at most), ordered by a hash of the seed and
    the text: the prompts' half and the held-out half. Halves of equal size keep every cell's prompt space large
    (7 sentences at least: 2,520 ordered picks of k=5, where a 2-round run needs 875 per cell)."""
    ordered = sorted(sentences, key=lambda t: hashlib.sha256(f"{SPLIT_SEED}:{t}".encode()).hexdigest())
    cut = -(-len(ordered) // 2)
    return ordered[:cut], ordered[cut:]


def write_rows(path: Path, rows: list[tuple[str, int, str]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        out = csv.writer(f)
        out.writerow(["text", "label", "group"])
        out.writerows(rows)


def read_rows(path: Path) -> list:
    from toxiforge.data import load_specs

    return [e for d in load_specs([f"table:{path}"]) for e in d.examples]


def split_hatecheck(work: Path) -> None:
    with HATECHECK.open(newline="", encoding="utf-8") as f:
        reader = csv.reader(f)
        header = next(reader)
        rows = list(reader)
    column = header.index("templ_id")
    templates = sorted({r[column] for r in rows}, key=lambda t: (len(t), t))
    random.Random(SPLIT_SEED).shuffle(templates)
    decide = set(templates[: len(templates) // 2])
    for name, keep in (("decide", True), ("report", False)):
        with (work / f"hatecheck-{name}.csv").open("w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(header)
            out.writerows(r for r in rows if (r[column] in decide) == keep)


def prepare(work: Path, c0_groups: tuple[str, ...]) -> None:
    from toxiforge.demonstrations.sets import load_demonstrations

    sets = load_demonstrations(DEMONSTRATIONS)
    groups = sorted({g for g, _ in sets})
    attacked = [g for g in groups if g not in c0_groups]
    c0 = [(s, label, g) for (g, label), d in sorted(sets.items()) if g in c0_groups for s in d.sentences]
    split: list[list[tuple[str, int, str]]] = [[], []]
    for (g, label), d in sorted(sets.items()):
        if g in attacked:
            for h, part in enumerate(halves(list(d.sentences))):
                split[h] += [(s, label, g) for s in part]
                print(f"{g} label {label}: {len(part)} sentences {('for prompts', 'held out')[h]}")
    work.mkdir(parents=True, exist_ok=True)
    write_rows(work / "c0-data.csv", c0)
    write_rows(work / "prompt-half.csv", split[0])
    write_rows(work / "held-out.csv", split[1])
    split_hatecheck(work)
    (work / "groups.json").write_text(json.dumps({"c0": list(c0_groups), "attacked": attacked}) + "\n")
    print(f"C_0: {len(c0)} sentences of {', '.join(c0_groups)}")
    train_minilm(work / "c0", rows=read_rows(work / "c0-data.csv"))
    train_minilm(work / "validator", rows=read_rows(work / "prompt-half.csv"))
    from sklearn.metrics import roc_auc_score

    from toxiforge.classifiers import load_classifier

    held = read_rows(work / "held-out.csv")
    for name in ("c0", "validator"):
        scores = load_classifier(str(work / name)).predict_proba([e.text for e in held])
        auc = roc_auc_score([e.label for e in held], scores)
        print(f"{name}: ROC AUC {auc:.3f} on held-out.csv ({len(held)} rows)")


# item 3's training mixes (harden/mix.py), each a run of its own in seed-S-MIX: the same prompts and seeds, so
# they pair with seed-S (retrain, harden's default) prompt by prompt
MIXES = {"retrain": [], "weight3": ["--added-weight", "3"], "continue": ["--init", "continue"],
         "nocal": ["--no-calibrate"],  # nocal: each round keeps the threshold its training left (before --calibrate)
         "balanced": ["--add", "balanced"]}  # each group's additions topped up to as many benign as toxic


def run_dir(work: Path, seed: int, mix: str) -> Path:
    """Where seed S's run of ``mix`` is: seed-S for the defaults, else seed-S-MIX."""
    return work / (f"seed-{seed}" if mix == "retrain" else f"seed-{seed}-{mix}")


def donor(work: Path, seed: int, out: Path) -> Path | None:
    """A run of the same seed other than ``out`` (another mix) whose shareable parts are there to copy."""
    return next((d for d in sorted(work.glob(f"seed-{seed}*")) if d != out and (d / "harden.json").exists()), None)


def share_finished(base: Path, out: Path, command: list[str], env: dict[str, str]) -> None:
    """A run shares with another run of its seed (``base``, another mix) what no classifier trained in a round shapes:
    round 0's attack on C_0 and every round's top-k pool (same prompts, seeds and settings). Start this run's harden
    until it has written its harden.json, stop it, and copy in the finished ones, which --resume then skips."""
    import shutil
    import signal

    from toxiforge.records import run_complete

    process = subprocess.Popen(command, env=env, start_new_session=True, stdout=subprocess.DEVNULL)
    while process.poll() is None and not (out / "harden.json").exists():
        time.sleep(1)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    shared = [base / "round-0" / "attack", *sorted(base.glob("round-*/control/topk"))]
    for run_dir in (d for d in shared if run_complete(d)):
        target = out / run_dir.relative_to(base)
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(run_dir, target)
        prompts = run_dir.parent / f"{run_dir.name}.prompts"
        if prompts.is_dir():
            shutil.rmtree(out / prompts.relative_to(base), ignore_errors=True)
            shutil.copytree(prompts, out / prompts.relative_to(base))
        for cache in run_dir.parent.glob(f"{run_dir.name}.validation.json"):
            shutil.copy2(cache, out / cache.relative_to(base))
        print(f"shared {run_dir.relative_to(base)} from {base.name}", flush=True)


def run(work: Path, seed: int, per_cell: int, measure: int, rounds: int, mix: str = "retrain") -> None:
    groups = json.loads((work / "groups.json").read_text())["attacked"]
    out = run_dir(work, seed, mix)
    command = [sys.executable, "-m", "toxiforge", "harden", "-c", str(work / "c0"), "--data",
               str(work / "c0-data.csv"), "--eval", f"hc=hatecheck:{work / 'hatecheck-decide.csv'}",
               "--no-guard-slice", "-d", str(work / "prompt-half.csv"), "--groups", ",".join(groups),
               "-n", str(per_cell), "--measure-n", str(measure), "--rounds", str(rounds),
               "--validate-with", str(work / "validator"), "--no-transfer", "--seed", str(seed), "--device", "cpu",
               "--shard-size", str(SHARD_SIZE), "--fpr-tolerance", str(FPR_TOLERANCE), "--keep-going", *MIXES[mix],
               "-o", str(out), *(["--resume"] if (out / "harden.json").exists() else [])]
    env = {**os.environ, "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    base = donor(work, seed, out)
    if base is not None and not (out / "harden.json").exists():
        share_finished(base, out, command, env)
        command.append("--resume")
    print(" ".join(command), flush=True)
    started, before = time.time(), os.times()
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(started))
    # a line as the call starts (a call killed with the session still shows); beside -o (harden needs an empty -o)
    calls = work / f"calls-{out.name}.jsonl"
    with calls.open("a") as f:
        f.write(json.dumps({"started": stamp, "command": command[3:]}) + "\n")
    code = subprocess.run(command, env=env).returncode
    after = os.times()
    call = {"started": stamp, "wall_s": time.time() - started,
            "cpu_s": (after.children_user - before.children_user) + (after.children_system - before.children_system),
            "exit": code, "load_at_end": os.getloadavg()[0]}
    with calls.open("a") as f:
        f.write(json.dumps(call) + "\n")
    print(json.dumps(call))
    if code:
        sys.exit(f"harden exited with {code}; see its output above")


def main() -> None:
    options = parser(__doc__)
    options.add_argument("step", choices=("prepare", "run", "report", "all"))
    add_work(options, "/tmp/harden-proof")
    options.add_argument("--seed", type=int, default=0, help="run: harden's --seed (default 0)")
    options.add_argument("--seeds", default="0,1,2", help="report: the finished seeds to read (default 0,1,2)")
    options.add_argument("-n", type=int, default=125, help="run: statements per group x label and attack")
    options.add_argument("--measure-n", type=int, default=25, help="run: the same for attacks that only measure")
    options.add_argument("--rounds", type=int, default=2)
    options.add_argument("--mix", choices=sorted(MIXES), default="retrain",
                         help="run, report: the training mix (item 3) or nocal (--no-calibrate), a run of its own "
                              "in seed-S-MIX (default retrain: harden's defaults, in seed-S)")
    options.add_argument("--outcomes", type=Path, default=OUTCOMES,
                         help="report: the folder of each read seed's per-row outcomes, kept in the repository so that "
                              "a seed read once needs no run folder again (default: benchmarks/results/harden-proof)")
    options.add_argument("--c0-groups", default=",".join(C0_GROUPS))
    args = options.parse_args()
    sys.path.insert(0, str(REPO / "src"))
    if args.step == "prepare":
        prepare(args.work, tuple(args.c0_groups.split(",")))
    elif args.step == "run":
        run(args.work, args.seed, args.n, args.measure_n, args.rounds, args.mix)
    else:
        from _proof_report import report  # the report half (beside this script; imports run_dir, read_rows from it)

        seeds = [int(s) for s in args.seeds.split(",")]
        if args.step == "all":  # every step in order, each resumable; a seed whose outcomes are kept is done
            if not (args.work / "groups.json").exists():
                prepare(args.work, tuple(args.c0_groups.split(",")))
            for seed in seeds:
                if not (args.outcomes / f"{run_dir(args.work, seed, args.mix).name}.json").exists():
                    run(args.work, seed, args.n, args.measure_n, args.rounds, args.mix)
                    report(args.work, [seed], args.mix, args.outcomes)
        report(args.work, seeds, args.mix, args.outcomes)


if __name__ == "__main__":
    main()
