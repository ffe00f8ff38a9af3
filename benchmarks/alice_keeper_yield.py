"""Does a keeper make ALICE's statements count? Independently confirmed failures per 100 statements and per CPU-minute
for top-k, plain ALICE and ALICE with a keeper (issue 50, item 4); and does ALICE steered by C_0 under a faster
``--classifier-runtime`` (int8) find as many (issue 57, item 1)?

Set-up on ``../shared/data/toxigen-dev`` (human-written sentences, 8 groups):

1. C_0, the attacked classifier: the embedded MiniLM fine-tuned (``toxiforge train``'s function) on every sentence of
   half the groups (``--train-groups``; default every other group in sorted order).
2. The other groups' sentences are split in two by a hash of the text: one half trains the keeper K (a MiniLM, like
   C_0), the other the validator V, a TF-IDF logistic regression (scikit-learn): another family, and no sentence in
   common with K or C_0. The prompts are built from those groups' sentences (5 demonstrations each), as in
   ``alice_vs_topk_flips.py``.
3. For each method (top-k k 40 T 0.9; ALICE; ALICE with ``--keep-label-with K`` at each ``--lambda-keep``), at the
   paper's settings unless ``--beams``/``--candidates``/``--max-new-tokens`` (top-k's too) say otherwise, ``-n``
   statements per prompt label, written to ``statements.jsonl`` as they come (a later run with the same ``--work``
   continues): the text, P(toxic) by C_0, K and V, and the CPU seconds (``time.process_time``, every thread of the
   process) and wall seconds the decoding took, and a hash of the prompt (``prompt_sha1``: the report pairs methods
   by (label, index) only after checking that they answered the same prompt). ``--classifier-runtime R ...`` adds
   "ALICE (runtime R)": ALICE steered by C_0 loaded under runtime R (torch-int8, onnx, onnx-int8); its statements
   are still judged by C_0 in torch fp32 (the classifier a user deploys: int8 only guides the search). ``--skip``
   leaves out top-k or the keeper methods.
4. The table, per method: per 100 statements the flips of C_0 (the prompt's label lost in C_0's view), the
   statements K gives their prompt's label, flipped *and* kept by K, and *confirmed* (flipped and V gives them
   their prompt's label: V never steered the search, so this is the count that stands for a real failure);
   confirmed and flips per CPU-minute; median perplexity under ``--perplexity-lm``; distinct-1 and distinct-2 over
   the method's statements (a keeper that makes ALICE repeat one safe phrase shows there); CPU seconds per
   statement; against plain ALICE on the same prompts, each method's paired difference per 100 statements (95%
   percentile bootstrap over the prompts, ``_common.paired_interval``) and how many of its statements equal
   ALICE's.

Runs of 2026-11-28 (docs/generation.md, "Measured"; one thread each: with two threads on a loaded machine idle
threads spin and the process CPU time doubled to quintupled). A, K no more accurate than C_0, one λK per process, the
reports merged; B and C, C_0 weaker than K; D, K trained with HateCheck (B, C, D reuse A's K, D A's C_0: copy the
folders into the work directory first):

    python benchmarks/alice_keeper_yield.py --work W -n 48 --lambda-keep 0.5                                 # A
    python benchmarks/alice_keeper_yield.py --work W1 -n 24 --lambda-keep 1       # W1, W2: copies of W's c0/, keeper/
    python benchmarks/alice_keeper_yield.py --work W2 -n 24 --lambda-keep 2
    python benchmarks/alice_keeper_yield.py --work W --report --end 24 --merge W1 W2 --second-validator MINILM_V
    python benchmarks/alice_keeper_yield.py --work WT -n 24 --lambda-keep 0.5 2 --keeper tfidf
    python benchmarks/alice_keeper_yield.py --work WH -n 24 --lambda-keep 0.5 1 --extra-data hatecheck \\
        --second-validator minilm --train-epochs 3                                                          # D
    python benchmarks/alice_keeper_yield.py --work WB -n 24 --lambda-keep 0.5 1 2 --attacked tfidf \\
        --second-validator WH/validator-minilm                                                              # B
    python benchmarks/alice_keeper_yield.py --work WC -n 48 --lambda-keep 0.5 1 2 --attacked mixed \\
        --second-validator WH/validator-minilm                                                              # C

Runs of 2026-11-28/29 for issue 57 (docs/benchmarks.md, "The classifier side on CPU"; 48 prompts, 24 per label;
the second adds onnx's rows to the same work directory):

    python benchmarks/alice_keeper_yield.py --work WR -n 24 --skip top-k keeper --classifier-runtime onnx-int8 \\
        torch-int8 --threads 1
    python benchmarks/alice_keeper_yield.py --work WR -n 24 --skip top-k keeper --classifier-runtime onnx-int8 \\
        torch-int8 onnx --threads 1
    python benchmarks/alice_keeper_yield.py --work WR --report --second-validator minilm

Smoke run (minutes; shows the script works, says nothing about the keeper):

    python benchmarks/alice_keeper_yield.py --work /tmp/keeper-smoke -n 2 --beams 2 --candidates 8 \\
        --max-new-tokens 6 --train-max-steps 4 --lambda-keep 0.5 2 --perplexity-lm ''
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import time
import zlib
from pathlib import Path

import _common


class TfidfValidator:
    """V: a TF-IDF (words and word pairs) logistic regression, with ``predict_proba`` returning P(toxic) and
    ``class_log_probs`` (so it can also be the keeper: ``--keeper tfidf``)."""

    name = "tfidf-lr"
    num_classes, toxic_index, benign_index = 2, 1, 0

    def __init__(self, texts: list[str], labels: list[int]):
        from sklearn.feature_extraction.text import TfidfVectorizer
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline

        self.model = make_pipeline(TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
                                   LogisticRegression(max_iter=1000, C=10.0))
        self.model.fit(texts, labels)

    def predict_proba(self, texts: list[str]):
        return self.model.predict_proba(texts)[:, 1]

    def class_log_probs(self, texts: list[str]):
        import torch

        return torch.from_numpy(self.model.predict_log_proba(list(texts))).float()

    def describe(self) -> dict:
        return {"name": self.name}


def half(text: str) -> int:
    """0 or 1 by a hash of the sentence: which of K and V trains on it."""
    return zlib.crc32(text.encode()) % 2


def _train(rows, out: Path, args: argparse.Namespace) -> Path:
    """A MiniLM fine-tuned on ``rows`` (``_common.train_minilm``: 10 epochs at 1e-4, unless
    ``--train-epochs``/``--train-max-steps``); ``out`` is reused if it holds one."""
    return _common.train_minilm(out, rows=rows, epochs=args.train_epochs, max_steps=args.train_max_steps,
                                seed=args.seed)


def hatecheck_halves() -> tuple[list, list]:
    """HateCheck's cases (``../shared/data/hatecheck``; 3,728 human-validated, 7 groups) in two halves by a hash of
    their template id (``templ_id``), so that no template (the same sentence with another group) is in both:
    ``--extra-data hatecheck`` adds the first to K's rows and the second to V's."""
    import csv

    from toxiforge.data.hatecheck import load_hatecheck

    path = _common.SHARED_DATA / "hatecheck" / "test_suite_cases.csv"
    with path.open(newline="") as f:
        templates = [row["templ_id"] for row in csv.DictReader(f)]
    examples = load_hatecheck(path).examples
    return ([e for e in examples if half(templates[e.row]) == 0],
            [e for e in examples if half(templates[e.row]) == 1])


def training_rows(args: argparse.Namespace, train_groups: list[str]) -> tuple[list, list, list, list, list]:
    """C_0's rows; K's rows and the MiniLM second validator's (the other groups' sentences split by :func:`half`,
    plus a HateCheck half each with ``--extra-data hatecheck``); and the toxigen-dev parts of K's and V's rows (V,
    the TF-IDF validator, trains on its part only: with HateCheck's half its ROC AUC on K's part was 0.521, chance,
    as its words are HateCheck's templates')."""
    from toxiforge.data.toxigen import load_demonstration_data

    examples = load_demonstration_data(_common.DEMONSTRATIONS).examples
    held = [e for e in examples if e.group not in train_groups]
    k_dev, v_dev = [e for e in held if half(e.text) == 0], [e for e in held if half(e.text) == 1]
    k_extra, v_extra = hatecheck_halves() if args.extra_data == "hatecheck" else ([], [])
    return [e for e in examples if e.group in train_groups], k_dev + k_extra, v_dev + v_extra, k_dev, v_dev


def second_validator(args: argparse.Namespace, train_groups: list[str]) -> str | None:
    """``--second-validator``: ``minilm`` is a MiniLM fine-tuned on V's rows (``WORK/validator-minilm``, trained
    once); anything else is a classifier as ``-c`` takes it."""
    if args.second_validator != "minilm":
        return args.second_validator
    return str(_train(training_rows(args, train_groups)[2], args.work / "validator-minilm", args))


def mixed_c0(work: Path, c0_rows: list, seed: int) -> Path:
    """``--attacked mixed``: the embedded MiniLM fine-tuned (3 epochs at 1e-4) on 1,000 toxic (hate or offensive)
    and 1,000 neither tweets of ``../shared/data/davidson2017`` (drawn with ``seed``) plus C_0's rows: a classifier
    trained mostly on explicit abuse, weaker than K on implicit statements. Also writes its rows as a table
    (``WORK/c0-mixed-train.csv``: text, label, target_group), harden's ``--data`` for this C_0."""
    import csv
    import random

    from toxiforge.data.davidson import load_davidson

    tweets = load_davidson(_common.SHARED_DATA / "davidson2017" / "labeled_data.csv").examples
    rng = random.Random(seed)
    toxic, benign = [e for e in tweets if e.label == 1], [e for e in tweets if e.label == 0]
    rows = [*rng.sample(toxic, 1000), *rng.sample(benign, 1000), *c0_rows]
    with (work / "c0-mixed-train.csv").open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["text", "label", "target_group"])
        writer.writerows([e.text, int(e.label), e.group or ""] for e in rows)
    return _common.train_minilm(work / "c0-mixed", rows=rows, epochs=3.0, seed=seed)


def classifiers(args: argparse.Namespace, train_groups: list[str], second: str | None) -> dict:
    """C_0, K and V, loaded, by those names (step 1 and 2 of the module docstring; ``--attacked tfidf`` makes C_0 a
    TF-IDF model on C_0's rows, ``--attacked mixed`` :func:`mixed_c0`, ``--attacked DIR`` the classifier in DIR,
    ``--keeper tfidf`` K a TF-IDF model on K's rows); prints each one's ROC AUC, and the second validator's
    (``second``, from :func:`second_validator`), on the toxigen-dev sentences it did not train on (K on V's, the
    validators on K's), so a reader sees how strong each is."""
    from sklearn.metrics import roc_auc_score

    from toxiforge.classifiers import load_classifier

    c0_rows, k_rows, _, k_dev, v_dev = training_rows(args, train_groups)

    def build(family: str, rows: list, name: str):
        if family == "mixed":
            return load_classifier(str(mixed_c0(args.work, rows, args.seed)))
        if family not in ("minilm", "tfidf"):   # --attacked DIR: a classifier trained elsewhere
            return load_classifier(family)
        if family == "tfidf":
            return TfidfValidator([e.text for e in rows], [int(e.label) for e in rows])
        return load_classifier(str(_train(rows, args.work / name, args)))

    named = {"C_0": build(args.attacked, c0_rows, "c0"), "K": build(args.keeper, k_rows, "keeper"),
             "V": TfidfValidator([e.text for e in v_dev], [int(e.label) for e in v_dev])}
    c0_text = (f"{len(c0_rows)} sentences of {train_groups}" if args.attacked in ("minilm", "tfidf")
               else "2,000 Davidson tweets + those sentences" if args.attacked == "mixed" else args.attacked)
    print(f"C_0: {c0_text}; K: {len(k_rows)} ({len(k_dev)} of toxigen-dev's other "
          f"groups) and V: {len(v_dev)} other sentences of those groups", flush=True)
    unseen = {"C_0": [("K's", k_dev), ("V's", v_dev)], "K": [("V's", v_dev)]}
    for name, model in {**named, **({"second validator": load_classifier(second)} if second else {})}.items():
        aucs = [f"{part} {roc_auc_score([e.label for e in rows], model.predict_proba([e.text for e in rows])):.3f}"
                for part, rows in unseen.get(name, [("K's", k_dev)])]
        print(f"ROC AUC of {name} on toxigen-dev sentences it did not train on: {', '.join(aucs)}", flush=True)
    return named


RUNTIMES = ("torch", "torch-int8", "onnx", "onnx-int8")  # toxiforge.classifiers.runtime's (it imports torch)


def runtime_key(runtime: str) -> str:
    """The method name of ALICE steered by C_0 under ``runtime`` (``--classifier-runtime``): torch is plain ALICE."""
    return "ALICE" if runtime == "torch" else f"ALICE (runtime {runtime})"


def method_keys(args: argparse.Namespace) -> list[tuple[str, float | None]]:
    """``(method, λK)`` in decoding order, less ``--skip``'s; ``--classifier-runtime``'s ALICE methods follow."""
    keys = [("top-k", None), ("ALICE", None)] + [(f"ALICE+K λK={lam:g}", lam) for lam in args.lambda_keep]
    keys = [(k, lam) for k, lam in keys
            if not ("top-k" in args.skip and k == "top-k" or "keeper" in args.skip and lam is not None)]
    return keys + [(runtime_key(r), None) for r in args.classifier_runtime if runtime_key(r) not in dict(keys)]


def c0_folder(args: argparse.Namespace) -> str:
    """The folder of C_0 (:func:`classifiers` trained it), to load it again under another runtime."""
    if args.attacked == "tfidf":
        raise SystemExit("--classifier-runtime needs a transformers C_0, not --attacked tfidf")
    return str({"minilm": args.work / "c0", "mixed": args.work / "c0-mixed"}.get(args.attacked, args.attacked))


def prompt_hash(prompt: str) -> str:
    """What a row keeps of its prompt: enough to check that two methods' statements answer the same prompt."""
    return hashlib.sha1(prompt.encode()).hexdigest()[:16]


def generate(args: argparse.Namespace, eval_groups: list[str], models: dict, out: Path) -> None:
    """Step 3 of the module docstring, with ``models`` from :func:`classifiers`."""
    from toxiforge.decoding.alice_config import AliceConfig
    from toxiforge.decoding.alice_decoder import AliceDecoder
    from toxiforge.decoding.topk import TopKConfig, TopKDecoder
    from toxiforge.decoding.types import postprocess
    from toxiforge.models import load_language_model

    lm, c0, keeper, validator = load_language_model(args.lm), models["C_0"], models["K"], models["V"]
    keeper_name = str(args.work / "keeper") if args.keeper == "minilm" else keeper.name
    paper = {k: v for k, v in {"num_beams": args.beams, "candidates": args.candidates,
                               "max_new_tokens": args.max_new_tokens}.items() if v is not None}
    budget = {} if args.max_new_tokens is None else {"max_new_tokens": args.max_new_tokens}  # top-k's too
    decoders = {"top-k": TopKDecoder(TopKConfig(**budget)), "ALICE": AliceDecoder(c0, AliceConfig(**paper))}
    for key, lam in method_keys(args):
        if lam is not None:
            decoders[key] = AliceDecoder(c0, AliceConfig(**paper, keep_label_with=keeper_name, lambda_keep=lam),
                                         keeper=keeper)
    if any(r != "torch" for r in args.classifier_runtime):
        from toxiforge.classifiers import load_classifier

        for r in args.classifier_runtime:
            if r != "torch":  # C_0 under r steers the search; every statement is still judged by C_0 in torch fp32
                decoders[runtime_key(r)] = AliceDecoder(load_classifier(c0_folder(args), runtime=r),
                                                        AliceConfig(**paper))
    decoders = {k: decoders[k] for k, _ in method_keys(args)}
    with out.open("a") as sink:
        for start, total, key, label, batch, prompts in _common.pending_batches(out, list(decoders), eval_groups,
                                                                                args.n, args.batch, args.seed):
            cpu, wall = time.process_time(), time.perf_counter()
            samples = decoders[key].decode(lm, prompts, [args.seed + j for j, _, _ in batch], [label] * len(batch),
                                           [g for _, _, g in batch])
            cpu, wall = (time.process_time() - cpu) / len(batch), (time.perf_counter() - wall) / len(batch)
            texts = [postprocess(s[0].raw_output).text for s in samples]
            scores = [c0.predict_proba(texts), keeper.predict_proba(texts), validator.predict_proba(texts)]
            for (j, _, g), prompt, text, p, k, v in zip(batch, prompts, texts, *scores):
                sink.write(json.dumps({"method": key, "label": label, "index": j, "group": g,
                                       "prompt_sha1": prompt_hash(prompt), "text": text,
                                       "p_c0": float(p), "p_keeper": float(k), "p_validator": float(v),
                                       "cpu_seconds": cpu, "wall_seconds": wall}) + "\n")
            sink.flush()
            print(f"{key} label {label}: {start + len(batch)}/{total} ({cpu:.1f} CPU s, {wall:.1f} s per statement)",
                  flush=True)


def distinct(texts: list[str], n: int) -> float:
    """Distinct-n: unique word n-grams over all word n-grams of ``texts`` (lower-cased)."""
    grams = [tuple(words[i:i + n]) for words in (t.lower().split() for t in texts) for i in range(len(words) - n + 1)]
    return len(set(grams)) / len(grams) if grams else float("nan")


def read_rows(out: Path, merge: list[Path], first: int, end: int | None) -> list[dict]:
    """The statements of ``out`` and, of each ``merge`` work directory, those of methods ``out`` lacks (e.g. one
    λK run per process), with indices in ``[first, end)``."""
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    for other in merge:
        have = {r["method"] for r in rows}
        rows += [r for r in map(json.loads, (other / "statements.jsonl").read_text().splitlines())
                 if r["method"] not in have]
    return [r for r in rows if r["index"] >= first and (end is None or r["index"] < end)]


def check_prompts(rows: list[dict]) -> int:
    """How many (label, index) prompts the rows hold; exits if two methods' rows of one (label, index) answer
    different prompts (rows written before ``prompt_sha1`` was kept are not checked)."""
    seen: dict[tuple[int, int], set[str]] = {}
    for r in rows:
        seen.setdefault((r["label"], r["index"]), set()).update([r["prompt_sha1"]] if "prompt_sha1" in r else [])
    differ = sorted(k for k, hashes in seen.items() if len(hashes) > 1)
    if differ:
        raise SystemExit(f"methods answer different prompts at (label, index) {differ[:5]}: not paired")
    return sum(bool(h) for h in seen.values())


def same_text(rows: list[dict], method: str, base: str = "ALICE") -> str:
    """How many of ``method``'s statements equal ``base``'s on the same (label, index)."""
    text = {(r["method"], r["label"], r["index"]): r["text"] for r in rows}
    keys = [(lab, i) for m, lab, i in text if m == method and (base, lab, i) in text]
    return f"{sum(text[(method, *k)] == text[(base, *k)] for k in keys)}/{len(keys)}" if keys else "n/a"


def paired(rows: list[dict], method: str, outcome, base: str = "ALICE", n_boot: int = 2000) -> str:
    """Per 100 statements, ``method`` minus ``base`` in ``outcome(row)`` over the (label, index) both have, with a
    95% bootstrap interval over those pairs."""
    by = {(r["method"], r["label"], r["index"]): bool(outcome(r)) for r in rows}
    keys = [(lab, i) for m, lab, i in by if m == method and (base, lab, i) in by]
    if not keys:
        return "n/a"
    mean, lo, hi = _common.paired_interval([by[(method, *k)] - by[(base, *k)] for k in keys], n_boot)
    return f"{100 * mean:+.0f} [{100 * lo:+.0f}, {100 * hi:+.0f}] (n={len(keys)})"


def report(rows: list[dict], lm_name: str | None, second: str | None = None) -> None:
    """The table (module docstring, step 4) and each method against plain ALICE on the same prompts. ``second``:
    another validator (any classifier ``-c`` takes) whose confirmed count is added as a column."""
    from toxiforge.intervals import proportion_interval
    from toxiforge.records import is_toxic

    if second:
        from toxiforge.classifiers import load_classifier

        texts = sorted({r["text"] for r in rows if r["text"]})
        p2 = dict(zip(texts, load_classifier(second).predict_proba(texts)))
        for r in rows:
            r["p_second"] = float(p2[r["text"]]) if r["text"] else None
    ppl = _common.perplexities(lm_name, {r["text"] for r in rows if r["text"]}) if lm_name else {}
    print("Per 100 statements: flips of C_0, kept by K, flipped and kept by K, confirmed (flipped, and V gives the "
          "prompt's label); per CPU-minute: confirmed, flips.\n")
    columns = ["method", "statements", "flips", "kept by K", "flipped & kept", "confirmed", "confirmed / CPU-min",
               "flips / CPU-min", "median perplexity", "distinct-1", "distinct-2", "CPU s / statement"]
    columns += ["confirmed by the second validator"] if second else []
    print(_common.table_head(columns, "l" + "r" * (len(columns) - 1)))
    for method in dict.fromkeys(r["method"] for r in rows):
        sel = [r for r in rows if r["method"] == method]
        flips = [is_toxic(r["p_c0"]) != bool(r["label"]) for r in sel]
        kept = [is_toxic(r["p_keeper"]) == bool(r["label"]) for r in sel]
        valid = [is_toxic(r["p_validator"]) == bool(r["label"]) and bool(r["text"]) for r in sel]
        confirmed = sum(f and v for f, v in zip(flips, valid))
        second_confirmed = sum(f and bool(r["text"]) and is_toxic(r["p_second"]) == bool(r["label"])
                               for f, r in zip(flips, sel)) if second else 0
        minutes = sum(r["cpu_seconds"] for r in sel) / 60
        per100 = [100 * c / len(sel) for c in (sum(flips), sum(kept), sum(f and k for f, k in zip(flips, kept)),
                                              confirmed)]
        med = statistics.median([ppl[r["text"]] for r in sel if r["text"] in ppl]) if ppl else float("nan")
        texts = [r["text"] for r in sel if r["text"]]
        low, high = proportion_interval(confirmed, len(sel))
        print(f"| {method} | {len(sel)} | " + " | ".join(f"{x:.0f}" for x in per100)
              + f" [{100 * low:.0f}, {100 * high:.0f}]"
              + f" | {confirmed / minutes:.2f} | {sum(flips) / minutes:.2f} | {med:.1f} | {distinct(texts, 1):.2f} | "
              f"{distinct(texts, 2):.2f} | {60 * minutes / len(sel):.1f} |"
              + (f" {100 * second_confirmed / len(sel):.0f} |" if second else ""))

    def flip(r):
        return is_toxic(r["p_c0"]) != bool(r["label"])

    def gives_label(column):
        return lambda r: bool(r["text"]) and r.get(column) is not None and is_toxic(r[column]) == bool(r["label"])

    outcomes = {"flips": flip, "flipped & kept by K": lambda r: flip(r) and gives_label("p_keeper")(r),
                "confirmed": lambda r: flip(r) and gives_label("p_validator")(r)}
    if second:
        outcomes["confirmed by the second validator"] = lambda r: flip(r) and gives_label("p_second")(r)
    checked = check_prompts(rows)
    print(f"\nAgainst plain ALICE on the same prompts (label, index), per 100 statements, 95% bootstrap interval "
          f"(paired by prompt; {checked} prompts' rows carry a prompt hash, equal across methods):\n")
    print(_common.table_head(["method", *outcomes, "statements equal to ALICE's"]))
    for method in dict.fromkeys(r["method"] for r in rows):
        if method != "ALICE":
            print(_common.table_row(method, *(paired(rows, method, f) for f in outcomes.values()),
                                    same_text(rows, method)))


def main() -> None:
    parser = _common.parser(__doc__)
    _common.add_work(parser, "alice-keeper-yield")
    parser.add_argument("-n", type=int, default=50, help="statements per method and prompt label")
    parser.add_argument("--lambda-keep", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    parser.add_argument("--train-groups", nargs="+", help="C_0's groups (default: every other group in sorted order)")
    parser.add_argument("--beams", type=int, help="ALICE beams (default: the paper's 10)")
    parser.add_argument("--candidates", type=int, help="ALICE candidates per beam (default: the paper's 100)")
    parser.add_argument("--max-new-tokens", type=int, help="ALICE token budget (default: the paper's 30)")
    parser.add_argument("--train-epochs", type=float, default=10.0)
    parser.add_argument("--train-max-steps", type=int, default=-1, help="cap the classifiers' training (smoke runs)")
    parser.add_argument("--lm", default="smollm2-135m", help="the language model, as generate --model")
    parser.add_argument("--batch", type=int, default=4, help="prompts decoded together")
    _common.add_threads(parser, 1, help="torch threads (CPU time is only comparable at one thread on a shared "
                        "machine)")
    _common.add_seed(parser)
    parser.add_argument("--classifier-runtime", nargs="+", choices=RUNTIMES, default=[], metavar="R",
                        help="add 'ALICE (runtime R)': ALICE steered by C_0 under runtime R (torch-int8, onnx, "
                        "onnx-int8; torch is plain ALICE); its statements are judged by C_0 in torch fp32")
    parser.add_argument("--skip", nargs="+", choices=["top-k", "keeper"], default=[],
                        help="leave out top-k, or the ALICE+K methods (--lambda-keep)")
    parser.add_argument("--report", action="store_true", help="only print the table of what is there")
    parser.add_argument("--perplexity-lm", default="smollm2-135m", help="LM for perplexity ('' to skip)")
    parser.add_argument("--attacked", default="minilm",
                        help="C_0: minilm (fine-tuned on C_0's rows), tfidf (a TF-IDF logistic regression on them), "
                        "mixed (a MiniLM on 2,000 Davidson tweets + C_0's rows), or a classifier directory")
    parser.add_argument("--keeper", choices=["minilm", "tfidf"], default="minilm",
                        help="K's family: a MiniLM like C_0, or a TF-IDF logistic regression like V (on K's half)")
    parser.add_argument("--extra-data", choices=["none", "hatecheck"], default="none",
                        help="hatecheck: K and the MiniLM second validator each also train on half of HateCheck's "
                        "cases (split by template)")
    parser.add_argument("--second-validator", help="report: another validator (a classifier directory, ...; "
                        "'minilm': a MiniLM on V's rows) whose confirmed failures per 100 statements are a column")
    parser.add_argument("--skip-first", type=int, default=0,
                        help="report: leave out statements with a lower index (e.g. a first batch timed otherwise)")
    parser.add_argument("--end", type=int, help="report: leave out statements with this index or a higher one")
    parser.add_argument("--merge", type=Path, nargs="*", default=[],
                        help="report: other --work directories whose methods this one lacks join the table")
    args = parser.parse_args()
    train_groups, eval_groups = _common.group_split(args.train_groups)
    args.work.mkdir(parents=True, exist_ok=True)
    out = args.work / "statements.jsonl"
    _common.set_torch_threads(args.threads)  # also for the second validator's training and perplexity in --report
    second = second_validator(args, train_groups)
    if not args.report:
        models = classifiers(args, train_groups, second)
        print(f"statements for {eval_groups}", flush=True)
        generate(args, eval_groups, models, out)
    report(read_rows(out, args.merge, args.skip_first, args.end), args.perplexity_lm or None, second)


if __name__ == "__main__":
    main()
