"""Attack families in a ``toxiforge harden`` run (issue 36): which ones train, which ones are only measured.

* ``attacks`` (``--attacks``, default ``alice``): the families whose fooling statements join the attacked arm's
  training. ``alice`` is the loop's ALICE attack. ``obfuscate`` and ``substitute`` (:mod:`toxiforge.attacks`) attack
  C_{r-1} of the ALICE arm on toxic rows of ``--data`` (never an eval row), a sample seeded by round r's seed of as
  many as the ALICE set that round r selects from has toxic-prompt statements. (Not those statements themselves:
  a family attacks only statements the classifier gets right, and ALICE's toxic-prompt statements are the ones it
  got wrong, so in the issue-36 runs every one was skipped and nothing joined.) Their statements go through the
  ledger and the validator as ALICE's do (sets.py, data.py), and those that fooled it (``--add all``: all) join
  with the source's label. The control arm adds as many top-k statements per label as the ALICE arm adds in all.
* ``eval_attacks`` (``--eval-attacks``): families measured every round but never trained on. Every family other
  than ``alice`` (trained or not) attacks each round's classifier of each arm on one fixed **held-out set**: up to
  ``eval_attack_n`` toxic rows of the ``--eval`` sets (a seeded sample, the same for every round and arm; rows of the
  training data left out). Its statements never join training, no generated statement equal to one of its sources
  is trained on or measured (the ledger), and an attacked statement equal to one the arm trained on is left out of
  the flip rate. ``alice`` is measured every round already (the fresh attack), so it is not an eval family.

Layout: ``round-N/alice/train-FAMILY/`` the training attack of round N (an ``attack`` run), ``round-0/attacks/FAMILY/``
and ``round-N/ARM/attacks/FAMILY/`` the held-out attacks (each with ``FAMILY.validation.json`` beside it with a
validator).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from toxiforge.attacks.base import Source
from toxiforge.attacks.validation import run_rows
from toxiforge.data.examples import Example, LabeledData, fold_text
from toxiforge.errors import InputError
from toxiforge.harden.data import ALICE_ARM, ARMS, Statements
from toxiforge.records import run_complete

ALICE = "alice"
DEFAULT_ATTACKS: tuple[str, ...] = (ALICE,)
DEFAULT_EVAL_ATTACK_N = 100
TRAIN_PREFIX, HELD_OUT_DIR = "train-", "attacks"
HELD_OUT_SET = "held-out attack set"  # where the ledger says a held-out source was seen


def check_families(attacks: Sequence[str], eval_attacks: Sequence[str], has_eval: bool, people: bool,
                   n: int) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(attacks, eval_attacks)`` with names normalised and repeats dropped; every bad combination an InputError
    with its fix, before any work."""
    from toxiforge.attacks.registry import FAMILIES, family_config

    def names(given: Sequence[str], flag: str) -> tuple[str, ...]:
        out = []
        for name in given:
            try:
                family_config(name, {})
            except InputError as error:
                raise InputError(f"{flag}: {error.message}", hint=error.hint) from None
            out.append(FAMILIES.key(name))
        return tuple(dict.fromkeys(out))

    trained, held = names(attacks, "--attacks"), names(eval_attacks, "--eval-attacks")
    if not trained:
        raise InputError("--attacks names no family, so nothing would join training",
                         hint=f"use --attacks with some of {', '.join(FAMILIES.names())} (default {ALICE})")
    both = [f for f in held if f in trained]
    if both:
        raise InputError(f"{', '.join(both)} is in both --attacks and --eval-attacks: a family is either trained on "
                         "or held out", hint=f"drop {', '.join(both)} from one of them")
    if ALICE in held:
        raise InputError("--eval-attacks alice: the ALICE attack is measured every round already (the fresh "
                         "attack's flip rate)", hint="drop alice from --eval-attacks; to keep ALICE statements out "
                                                    "of training, leave alice out of --attacks")
    if held and not has_eval:
        raise InputError(f"--eval-attacks {','.join(held)} attacks the toxic rows of --eval, and no --eval was "
                         "given", hint="add --eval with a labelled human-written set")
    if people and (held or trained != DEFAULT_ATTACKS):
        raise InputError("--validate-with people validates the ALICE and top-k sets only, not other attack "
                         "families' statements", hint="use --attacks alice without --eval-attacks, or validate "
                                                     "with a classifier")
    if not isinstance(n, int) or n < 1:
        raise InputError(f"--eval-attack-n {n} attacks no statement", hint=f"use 1 or more (default "
                                                                           f"{DEFAULT_EVAL_ATTACK_N})")
    return trained, held


def measured(attacks: Sequence[str], eval_attacks: Sequence[str]) -> tuple[str, ...]:
    """The families measured on the held-out set: every one but ``alice``, trained ones first."""
    return tuple(f for f in (*attacks, *eval_attacks) if f != ALICE)


def toxic_sample(named_rows: Sequence[tuple[str, Sequence[Example]]], n: int, seed: int,
                 exclude: Sequence[Example] = ()) -> list[Source]:
    """Up to ``n`` toxic rows of ``named_rows`` (``(name, rows)`` pairs; a row's id is ``name/i``), a sample seeded
    by ``seed`` kept in the rows' order, none a row of ``exclude`` or repeated (texts folded)."""
    from toxiforge.pipeline.plan import row_seed

    seen = {fold_text(e.text) for e in exclude}
    pool = []
    for name, rows in named_rows:
        for i, e in enumerate(rows):
            key = fold_text(e.text)
            if e.label == 1 and key not in seen:
                seen.add(key)
                pool.append(Source(row_id=f"{name}/{i:06d}", text=e.text, label=1, group=e.group,
                                   seed=row_seed(seed, name, 1, i)))
    if len(pool) > n:
        keep = set(random.Random(seed).sample(range(len(pool)), n))
        pool = [s for i, s in enumerate(pool) if i in keep]
    return pool


def held_out_sources(eval_sets: Sequence[LabeledData], training: Sequence[Example], n: int,
                     seed: int) -> list[Source]:
    """Up to ``n`` toxic rows of ``eval_sets`` (a sample seeded by ``seed``, in the sets' order), none a training
    statement or repeated (texts folded)."""
    return toxic_sample([(data.name, data.examples) for data in eval_sets], n, seed, exclude=training)


def train_sources(training: Sequence[Example], statements: Statements, seed: int) -> list[Source]:
    """A trained family's sources in one round: toxic rows of ``training`` (``--data``; repeats folded), a sample
    seeded by ``seed`` of as many as ``statements`` (the ALICE set the round selects from) has kept toxic-prompt
    statements, in the data's order."""
    return toxic_sample([("data", training)], sum(1 for e, _, _ in statements.rows() if e.label == 1), seed)


def load_attacked(classifier: str | Path, device: str, name: str, options: dict[str, Any] | None) -> Any:
    """The classifier the families attack, loaded as every harden step loads one."""
    from toxiforge.classifiers import load_classifier

    return load_classifier(classifier, device=device, name=name, **(options or {}))


def run_families(folder: Path, families: Sequence[str], sources: Sequence[Source], classifier: str | Path,
                 name: str, device: str, options: dict[str, Any] | None = None, progress: bool = False,
                 prefix: str = "") -> dict[str, Path]:
    """Attack ``sources`` with each family (default settings) against ``classifier`` into ``folder/PREFIXFAMILY``
    (an ``attack`` run; resumed, or skipped when complete); the run folders by family. No sources: no runs."""
    if not sources or not families:
        return {}
    runs = {family: folder / (prefix + family) for family in families}
    todo = [family for family, run_dir in runs.items() if not run_complete(run_dir)]
    if todo:
        from toxiforge.attacks.job import run_attack, sources_digest
        from toxiforge.attacks.registry import Resources, family_config, make_family

        loaded = load_attacked(classifier, device, name, options)
        resources = Resources(device=device)
        for family in todo:
            attack = make_family(family_config(family, {}), loaded, resources)
            fingerprint = {"sources": len(sources), "sources_sha256": sources_digest(sources), "family": family,
                           "settings": attack.settings(), "classifier": str(classifier)}
            run_attack(sources, attack, runs[family], classifier_name=name, fingerprint=fingerprint, resume=True,
                       progress=progress)
    return runs


def method_of(run_dir: Path) -> str:
    """The ``generation_method`` an attack run's rows have (its family's method)."""
    from toxiforge.data.examples import column, read_any_table

    methods = column(read_any_table(run_dir), "generation_method")
    return str(methods[0]) if methods else ""


def held_out_statements(run_dir: Path, trained: Sequence[Example], validated: Sequence[float] | None) -> Statements:
    """A held-out attack run's statements, less any the arm trained on (``trained``)."""
    keys = {fold_text(e.text) for e in trained}
    method = method_of(run_dir)
    keep = tuple(fold_text(e.text) not in keys for e, _ in run_rows(run_dir, method))
    return Statements(run_dir, validated, keep, method)


def families_markdown(report: dict[str, Any]) -> list[str]:
    """The held-out set's flip rate per family, round and arm (empty when no family was measured)."""
    from toxiforge.intervals import Share

    rounds = report["rounds"]
    families = list(rounds[0][ALICE_ARM].get("attacks", {})) if rounds else []
    if not families:
        return []
    first = rounds[0][ALICE_ARM]["attacks"]
    confirmed = any("confirmed" in first[f]["flip_rate"] for f in families)
    kinds = [("all", "flip %")] + ([("confirmed", "confirmed flip %")] if confirmed else [])
    header = ["round", "arm"]
    for f in families:
        mark = "held out" if first[f]["held_out"] else "trained"
        header += [f"{f} ({mark}) {title} [95% CI]" for _, title in kinds]
    lines = ["", f"Attack families on the held-out set ({first[families[0]]['sources']} toxic statements of --eval, "
                 "the same every round and arm, never trained on): flip % is the share of the attacked statements "
                 "the classifier gets wrong (a statement it already got wrong is left as it is and counts); "
                 "confirmed: flipped and the validator gives it its label. *Held out*: measured only, never trained "
                 "on; *trained*: what it made of the ALICE statements that fooled the classifier joins the ALICE "
                 "arm's training.", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r, entry in enumerate(rounds):
        for arm in ARMS if r else (ALICE,):
            cells = [str(r), "start" if r == 0 else arm]
            for f in families:
                rates = entry[arm]["attacks"][f]["flip_rate"]
                for kind, _ in kinds:
                    shares = rates if kind == "all" else rates.get(kind)
                    cells.append("-" if shares is None else Share(**shares["all"]).cell())
            lines.append("| " + " | ".join(cells) + " |")
    added = [(r, e[ALICE].get("added_by_method")) for r, e in enumerate(rounds) if r]
    if any(a for _, a in added):
        lines += ["", "ALICE arm additions by method: " + "; ".join(
            f"round {r}: " + ", ".join(f"{m} {n}" for m, n in sorted(a.items())) for r, a in added if a) + "."]
    return lines


def count_methods(examples: Sequence[Example]) -> dict[str, int]:
    """How many of ``examples`` each generation method gave."""
    from collections import Counter

    return dict(Counter(str(e.method) for e in examples))


__all__ = ["ALICE", "DEFAULT_ATTACKS", "DEFAULT_EVAL_ATTACK_N", "HELD_OUT_DIR", "HELD_OUT_SET", "TRAIN_PREFIX",
           "check_families", "count_methods", "families_markdown", "held_out_sources",
           "held_out_statements", "load_attacked", "measured", "method_of", "run_families", "train_sources"]
