"""Annotation server load: submissions/s and p50/p99 submission latency, 50 concurrent annotators, SQLite, loopback.

    .venv/bin/python benchmarks/annotate_load.py [--annotators 50] [--per-annotator 20]

Starts ``toxiforge annotate serve`` on a free loopback port with a fresh SQLite study (placeholder statements,
3 annotators per item), runs one real HTTP client thread per annotator (open link, consent, then GET the form and
POST the answers repeatedly) and reports acknowledged submissions per second (over the whole run, the form GETs
included) and the latency of the POSTs. Targets from the issue: >= 500/s and p99 < 50 ms on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path

from toxiforge.annotation.loadgen import free_port, run_annotators, start_server
from toxiforge.annotation.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--annotators", type=int, default=50)
    parser.add_argument("--per-annotator", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "bench.db")
        store = Store(db)
        n_items = args.annotators * args.per_annotator
        study, _ = store.create_study("bench", [{"text": f"placeholder statement {i}", "target_group": "asian",
                                                 "label": i % 2, "method": "top-k"} for i in range(n_items)])
        tokens = store.invite(study.id, args.annotators)
        port = free_port()
        server = start_server(db, port)
        try:
            result = run_annotators(f"http://127.0.0.1:{port}", tokens, per_annotator=args.per_annotator,
                                    timeout=600)
        finally:
            server.terminate()
            server.wait(10)
        stored = len(store.responses(study.id))
    lat = sorted(result.latencies)
    p = lambda q: lat[min(len(lat) - 1, int(q * len(lat)))] * 1000  # noqa: E731
    report = {"annotators": args.annotators, "submissions": len(lat), "stored": stored, "errors": len(result.errors),
              "seconds": round(result.elapsed, 2), "submissions_per_s": round(len(lat) / result.elapsed, 1),
              "p50_ms": round(p(0.50), 1), "p99_ms": round(p(0.99), 1),
              "mean_ms": round(statistics.mean(lat) * 1000, 1) if lat else None}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
