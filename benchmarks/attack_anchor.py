"""``attack obfuscate`` against DeepWordBug, side by side in one run, on human-written toxic sentences.

The human-written sentences of ../shared/data/toxigen-dev (upstream ToxiGen's demonstrations) are split in two
halves, stratified by label (seed 0): the embedded MiniLM (all-MiniLM-L6-v2) is fine-tuned on one half
(toxiforge.training.train_classifier), and the toxic sentences of the other half are attacked, with the same
budget of edited words, by

* toxiforge's ``obfuscate`` family, through the function ``toxiforge attack`` calls (rows written to a run folder);
* DeepWordBug (Gao et al., 2018), re-implemented here from the paper because TextAttack 0.3.11 does not import
  beside toxiforge's libraries (docs/attacks.md says why): words scored by the combined score CS(x_i) = THS(x_i) +
  λ·TTS(x_i), λ = 1 (temporal head score F(x_1..x_i) - F(x_1..x_{i-1}) plus temporal tail score
  F(x_i..x_n) - F(x_{i+1}..x_n), F = P(true label)), the ``--max-edits`` highest-scoring words each changed by one
  of the paper's four character transformations (swap two adjacent letters, substitute a letter, delete a letter,
  insert a letter; positions and letters seeded), then one query to see whether the label flipped. Each
  transformation is a DeepWordBug run of its own, as in the paper's tables.

Printed per attack: attack success rate (flips among the sentences the classifier got right), queries per success
(every query spent on those sentences over the flips), mean queries per attacked sentence, and sentences per second
(wall clock, all sentences). Every text the classifier scores counts one query.

    nice -n 10 python benchmarks/attack_anchor.py                     # trains the classifier once, in --work
    nice -n 10 python benchmarks/attack_anchor.py --max-edits 3
    nice -n 10 python benchmarks/attack_anchor.py --threads 1      # on a machine shared with other jobs
"""

from __future__ import annotations

import os
import random
import string
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import _common

if TYPE_CHECKING:
    from toxiforge.attacks.base import Oracle, Source

TRANSFORMATIONS = ("swap", "substitute", "delete", "insert")


def transform(word: str, how: str, rng: random.Random) -> str:
    """One of DeepWordBug's character transformations of ``word`` (unchanged when too short for it)."""
    if how == "swap":
        if len(word) < 2:
            return word
        p = rng.randrange(len(word) - 1)
        return word[:p] + word[p + 1] + word[p] + word[p + 2:]
    if how == "substitute":
        p = rng.randrange(len(word))
        return word[:p] + rng.choice(string.ascii_lowercase) + word[p + 1:]
    if how == "delete":
        if len(word) < 2:
            return word
        p = rng.randrange(len(word))
        return word[:p] + word[p + 1:]
    p = rng.randrange(len(word) + 1)
    return word[:p] + rng.choice(string.ascii_lowercase) + word[p:]


def combined_scores(oracle: Oracle, words: list[str], label: int, p_full: float, lam: float = 1.0) -> np.ndarray:
    """DeepWordBug's combined score of each word: 2n queries (n prefixes, n suffixes, the empty text among them)."""
    n = len(words)
    prefixes = [" ".join(words[:i]) for i in range(n)]          # x_1..x_{i}, i = 0..n-1
    suffixes = [" ".join(words[i:]) for i in range(1, n + 1)]   # x_{i+1}..x_n, i = 1..n (the last is empty)
    p = oracle.true_class(prefixes + suffixes, label)
    head = np.append(p[:n], p_full)                  # F(x_1..x_i), i = 0..n
    tail = np.insert(p[n:], 0, p_full)               # F(x_i..x_n), i = 1..n+1 (index 0 = the whole text)
    return (head[1:] - head[:-1]) + lam * (tail[:-1] - tail[1:])


def deepwordbug(classifier, source: Source, max_edits: int, how: str) -> tuple[bool, int, bool]:
    """``(attacked, queries, flipped)`` of DeepWordBug on ``source`` with transformation ``how``."""
    from toxiforge.attacks.base import Oracle
    from toxiforge.records import flipped_label

    oracle = Oracle(classifier)
    score = float(oracle.toxic([source.text])[0])
    if flipped_label(score, source.label):
        return False, oracle.queries, False
    words = source.text.split()
    p_label = score if source.label == 1 else 1.0 - score
    scores = combined_scores(oracle, words, source.label, p_label)
    rng = random.Random(source.seed)
    for i in sorted(range(len(words)), key=lambda i: (-scores[i], i))[:max_edits]:
        words[i] = transform(words[i], how, rng)
    after = float(oracle.toxic([" ".join(words)])[0])
    return True, oracle.queries, flipped_label(after, source.label)


def report(name: str, attacked: int, flips: int, queries: int, sentences: int, seconds: float) -> str:
    rate = flips / attacked if attacked else float("nan")
    per_success = queries / flips if flips else float("nan")
    return (f"{name:<28} {flips:>4}/{attacked:<4} {rate:>7.1%} {per_success:>10.1f} {queries / max(attacked, 1):>9.1f} "
            f"{sentences / seconds:>8.1f}")


def train_or_load(work: Path, train, seed: int, epochs: float):
    model_dir = work / "minilm-half-a"
    if not (model_dir / "config.json").exists():
        print(f"fine-tuning all-MiniLM-L6-v2 on {len(train)} sentences into {model_dir} ...", flush=True)
        started = time.perf_counter()
        _common.fine_tune(model_dir, train, base_model="all-minilm-l6-v2", epochs=epochs, learning_rate=5e-5,
                          batch_size=16, seed=seed, eval_fraction=0.0, device="cpu")
        print(f"  trained in {time.perf_counter() - started:.0f} s", flush=True)
    return model_dir


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--dev", type=Path, default=_common.TOXIGEN_DEV, help="the toxigen-dev folder")
    _common.add_work(parser, Path(tempfile.gettempdir()) / "toxiforge-attack-anchor")
    parser.add_argument("--max-edits", type=int, default=5)
    parser.add_argument("--epochs", type=float, default=10.0)
    _common.add_seed(parser)
    _common.add_threads(parser, None)
    parser.add_argument("--dtype", default="float32", help="the classifier's weights: float32 or bfloat16 (attack's "
                        "--dtype)")
    args = parser.parse_args()
    _common.set_torch_threads(args.threads)
    if not args.dev.is_dir():
        raise SystemExit(f"{args.dev} is absent: the shared toxigen-dev data is needed (see its README)")
    from sklearn.metrics import roc_auc_score

    from toxiforge.attacks.registry import Resources
    from toxiforge.attacks.runner import attack
    from toxiforge.classifiers import load_classifier
    from toxiforge.data import load_spec
    from toxiforge.training.trainer import split_heldout

    data = load_spec(f"demonstrations:{args.dev}")
    train, held = split_heldout(data.examples, 0.5, args.seed)
    model_dir = train_or_load(args.work, train, args.seed, args.epochs)
    classifier = load_classifier(model_dir, device="cpu", name="minilm-half-a", dtype=args.dtype)
    auc = roc_auc_score([e.label for e in held], classifier.predict_proba([e.text for e in held]))
    toxic = [e for e in held if e.label == 1]
    table = args.work / "half-b-toxic.csv"
    import csv

    with open(table, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["text", "label", "group"])
        writer.writerows([e.text, 1, e.group] for e in toxic)
    print(f"{time.strftime('%Y-%m-%d')} {len(data)} human-written sentences: trained on {len(train)}, held-out AUC "
          f"{auc:.3f} on {len(held)}; attacking the {len(toxic)} held-out toxic ones, max {args.max_edits} edited "
          f"words, a shard in lockstep, {args.dtype}, {os.cpu_count()} CPUs, torch threads "
          f"{__import__('torch').get_num_threads()}, load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'attack':<28} {'flipped':>9} {'success':>7} {'q/success':>10} {'q/attack':>9} {'sent./s':>8}")
    started = time.perf_counter()
    result = attack([f"table:{table}"], "obfuscate", str(model_dir), args.work / "obfuscate-run",
                    settings={"max_edits": args.max_edits}, seed=args.seed, resources=Resources(device="cpu"),
                    overwrite=True, loaded_classifier=classifier)
    seconds = time.perf_counter() - started
    c = result.manifest["counts"]
    print(report("toxiforge obfuscate", c["attacked"], c["flipped"], c["queries"], len(toxic), seconds), flush=True)
    from toxiforge.attacks.runner import load_sources

    sources = load_sources([f"table:{table}"], seed=args.seed)
    for how in TRANSFORMATIONS:
        started = time.perf_counter()
        runs = [deepwordbug(classifier, s, args.max_edits, how) for s in sources]
        seconds = time.perf_counter() - started
        attacked = [r for r in runs if r[0]]
        print(report(f"DeepWordBug (CS, {how})", len(attacked), sum(r[2] for r in attacked),
                     sum(r[1] for r in attacked), len(sources), seconds), flush=True)


if __name__ == "__main__":
    main()
