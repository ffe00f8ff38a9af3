"""A people-validated harden run with simulated annotators: each one a classifier plus noise, as real HTTP clients.

    .venv/bin/python benchmarks/harden_people_round.py --people-model DIR [--noise 0.15] \
        -- HARDEN_ARGS...      # a `toxiforge harden` command line after `harden`, with --validate-with people

Runs ``toxiforge harden HARDEN_ARGS`` (then ``--resume``) until it finishes. Each time it stops for a study, this
runs the ``toxiforge annotate invite`` line it printed (``--min-annotators`` annotators), starts ``toxiforge
annotate serve`` on the study database (a free loopback port) and lets the invited annotators label every statement
over HTTP (:func:`~toxiforge.annotation.loadgen.run_annotators`). Annotator i answers the short form's question with
the verdict of ``--people-model`` (P(toxic) > 0.5), flipped with probability ``--noise`` (independently per
annotator and statement, seeded), so annotators agree often but not always. Prints each stop's counts, the wall time
of each part and, at the end, the people tables of the run's report.md.
"""

from __future__ import annotations

import argparse
import random
import shlex
import subprocess
import sys
import time
from pathlib import Path

import _common


def harden(args: list[str]) -> str:
    done = subprocess.run([sys.executable, "-m", "toxiforge", "harden", *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"harden failed ({done.returncode}):\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return done.stdout


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--people-model", required=True, help="classifier directory the simulated annotators share")
    parser.add_argument("--noise", type=float, default=0.15, help="chance an annotator flips the model's verdict")
    parser.add_argument("harden", nargs=argparse.REMAINDER, help="-- then harden's arguments")
    args = parser.parse_args()
    harden_args = [a for a in args.harden if a != "--"]
    out = Path(harden_args[harden_args.index("-o") + 1])

    from toxiforge._net import free_port
    from toxiforge.annotation.loadgen import run_annotators, start_server
    from toxiforge.annotation.store import Store
    from toxiforge.classifiers import load_classifier

    model = load_classifier(args.people_model, device="cpu", name="people-model")
    resume: list[str] = []
    while True:
        started = time.perf_counter()
        output = harden([*harden_args, *resume])
        print(f"harden{' --resume' if resume else ''}: {time.perf_counter() - started:.0f} s")
        resume = ["--resume"]
        invite = [line.strip() for line in output.splitlines() if line.strip().startswith("toxiforge annotate invite")]
        if not invite:
            break
        print(next(line for line in output.splitlines() if "statements await" in line))
        words = shlex.split(invite[0])
        db = words[words.index("--db") + 1]
        links = subprocess.run([sys.executable, "-m", "toxiforge", *words[1:]], capture_output=True, text=True,
                               check=True).stdout.split()  # the invite line as harden printed it
        tokens = [link.rsplit("/a/", 1)[1] for link in links if "/a/" in link]
        store = Store(db)
        study = store.study(words[words.index("--study") + 1])
        texts = [item.text for item in store.items(study.id)]
        verdict = {t: float(p) > 0.5 for t, p in zip(texts, model.predict_proba(texts))}

        def answer(token: str, text: str, tokens=tokens, verdict=verdict) -> dict[str, str]:
            flip = random.Random(f"{tokens.index(token)}:{text}").random() < args.noise
            return {"hateful": "yes" if verdict[text] != flip else "no"}

        port = free_port()
        server = start_server(db, port)
        started = time.perf_counter()
        try:
            result = run_annotators(f"http://127.0.0.1:{port}", tokens, timeout=600, answer=answer)
        finally:
            server.terminate()
            server.wait(10)
        if result.errors:
            sys.exit(f"annotators failed: {result.errors[:3]}")
        print(f"{len(tokens)} annotators: {len(result.acked)} answers in {time.perf_counter() - started:.1f} s")
    report = (out / "report.md").read_text(encoding="utf-8")
    print(report[report.index("## People's validation"):])


if __name__ == "__main__":
    main()
