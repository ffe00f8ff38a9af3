"""``toxiforge harden --validate-with people``: the run's own annotators validate its statements (issue 34, item 2).

Before round r selects what joins training, the statements it selects from, and the attack statements not yet
labelled, become one **study** in the annotation app's database (:meth:`~toxiforge.annotation.store.Store.
create_study`, so the app serves it with its usual sessions, limits and hot path): the attack that feeds the ALICE
arm (all of its statements, flipped or not, so that flip rates among people-validated statements can be measured),
the previous round's control-arm attack, and the round's top-k control pool. Both arms' statements are shuffled
together (seeded) and stored without their method, so annotators cannot tell the arms apart; a statement that
occurs twice is asked once. After the last round one more study holds the last round's attacks, so every round's
flip rates have people's numbers. harden then stops (:class:`AnnotationPending`, exit code 0) with the number of
statements and annotations awaited and the ``toxiforge annotate serve`` / ``invite`` commands; with ``wait`` it polls
the study until every statement has its annotations (Ctrl-C stops it just as cleanly).

``--resume`` reads the labels once **every** statement has ``min_annotators`` responses (the study's ``per_item``);
before that it stops again, saying how many statements await how many answers (issue 48: it used to go on at the
first answer and never read later ones). Each statement's label is the **majority** of its responses; a response's
vote is the short form's yes/no, or the paper's rule on the full form (toxic when max(harm if an AI wrote it, if a
person wrote it) > 3). Ties are reported and left out (NaN in :class:`~toxiforge.harden.data.Statements`' scores:
they never join and count in no validated rate). ``accept_partial`` goes on with what is in: the majority of the
responses a statement has, however few (``partial`` in the counts; statements with none are under-annotated and
left out), and the report says so. The labels are written beside each run (``RUN.people.json``) and the study's
counts and agreement (:func:`~toxiforge.annotation.agreement.study_agreement`, as ``annotate agreement`` reports it) to
``people/STEP.labels.json``; the study itself to ``people/STEP.json`` (before the database row, so an interrupted
run creates it on resume).
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import shlex
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write_text
from toxiforge.annotation.schema import DEFAULT_LEASE_MINUTES, FORMS
from toxiforge.attacks.validation import run_rows
from toxiforge.data.examples import fold_text
from toxiforge.errors import InputError, check_choice
from toxiforge.harden.data import ALICE_ARM, ARMS, Statements
from toxiforge.pipeline.manifest import now_utc

PEOPLE = "people"  # --validate-with people
DEFAULT_FORM = "short"  # one question per statement: the loop needs one bit (docs/harden.md says why)
STUDIES_DIR, LABELS_SUFFIX = "people", ".people.json"
SHUFFLE_SEED_OFFSET = 30_000  # round r's study is shuffled with seed + 30,000 + r


class AnnotationPending(Exception):
    """harden stopped where people are to label a study: :attr:`lines` say how many statements await how many
    annotations and the commands that serve the study and invite annotators. ``interrupted``: Ctrl-C while
    waiting."""

    def __init__(self, lines: list[str], interrupted: bool = False):
        super().__init__(lines[0])
        self.lines, self.interrupted = lines, interrupted


def check_people(min_annotators: int, form: str) -> None:
    if min_annotators < 1:
        raise InputError(f"--min-annotators {min_annotators} leaves no statement a label",
                         hint="use --min-annotators 3 (the default) or more")
    check_choice(form, FORMS, what="--annotation-form", hint="use short (the default) or full (the paper's form)")


def majority(votes: Sequence[int], min_annotators: int) -> tuple[int | None, str]:
    """(label, status): the votes' strict majority, or None with "under-annotated" (fewer than ``min_annotators``)
    or "tie"."""
    if len(votes) < min_annotators:
        return None, "under-annotated"
    toxic = sum(votes)
    if 2 * toxic == len(votes):
        return None, "tie"
    return int(2 * toxic > len(votes)), "majority"


def labels_path(run_dir: Path) -> Path:
    return run_dir.with_name(run_dir.name + LABELS_SUFFIX)


def read_labels(run_dir: Path) -> list[float] | None:
    """People's label of each statement of ``run_rows(run_dir)`` (1.0, 0.0, NaN: none), or None before they were
    read."""
    path = labels_path(run_dir)
    if not path.exists():
        return None
    saved = json.loads(path.read_text(encoding="utf-8"))
    return [math.nan if v is None else float(v) for v in saved["labels"]]


@dataclass
class People:
    """The annotation database ``db`` (a SQLite path or a URL) and how this run's studies are made and read."""

    db: str
    out: Path
    form: str = DEFAULT_FORM
    min_annotators: int = 3
    seed: int = 0
    wait: float | None = None  # poll the study every this many seconds instead of stopping
    accept_partial: bool = False  # go on before every statement has min_annotators responses (module docstring)
    lease_minutes: int = DEFAULT_LEASE_MINUTES
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    say: Callable[[str], None] = field(default=lambda message: None, repr=False)
    _store: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        check_people(self.min_annotators, self.form)

    @property
    def store(self) -> Any:
        if self._store is None:
            from toxiforge.annotation.store import Store

            self._store = Store(self.db)
        return self._store

    def study_name(self, step: str) -> str:
        """Unique per run directory, so runs can share one database."""
        digest = hashlib.sha256(str(Path(self.out).resolve()).encode()).hexdigest()[:8]
        return f"harden-{Path(self.out).resolve().name}-{digest}-{step}"

    def collect(self, step: str, sets: Sequence[Statements], what: str) -> dict[Path, list[float]]:
        """People's labels of every statement of ``sets`` (keyed by run): read from ``RUN.people.json`` when there,
        else from this step's study, made now when it does not exist (then :class:`AnnotationPending`)."""
        found = {st.run_dir: read_labels(st.run_dir) for st in sets}
        pending = [st for st in sets if found[st.run_dir] is None]
        if pending:
            found.update(self._from_study(step, pending, what))
        return {run: labels for run, labels in found.items() if labels is not None}

    def _from_study(self, step: str, pending: Sequence[Statements], what: str) -> dict[Path, list[float]]:
        plan_path = self.out / STUDIES_DIR / f"{step}.json"
        if not plan_path.exists():
            atomic_write_text(plan_path, json.dumps(self._plan(step, pending), indent=1) + "\n")
        plan = json.loads(plan_path.read_text(encoding="utf-8"))
        study, token = self._study(plan)
        said = False
        while True:
            answers = [len(v) for v in self._votes(study, plan)]
            if all(n >= self.min_annotators for n in answers) or (self.accept_partial and any(answers)):
                return self._read(step, plan, study)
            lines = self._pending_lines(what, plan, answers, token)
            if self.wait is None:
                raise AnnotationPending(lines)
            if not said:
                for line in lines[:-1]:
                    self.say(line)
                self.say(f"waiting: checking the study every {self.wait:g} s (Ctrl-C stops; --resume goes on)")
                said = True
            try:
                self.sleep(self.wait)
            except KeyboardInterrupt:
                raise AnnotationPending(lines, interrupted=True) from None
            token = None

    def _plan(self, step: str, pending: Sequence[Statements]) -> dict[str, Any]:
        """The study's items (each distinct statement once, both arms shuffled together) and, per run, the item
        position of each of its statements (None: left out of the run)."""
        items: list[dict[str, Any]] = []
        index: dict[str, int] = {}
        runs: dict[str, list[int | None]] = {}
        for st in pending:
            rows = run_rows(st.run_dir, st.method)
            keep = st.keep if st.keep is not None else [True] * len(rows)
            where: list[int | None] = []
            for (example, _), kept in zip(rows, keep):
                if not kept:
                    where.append(None)
                    continue
                key = fold_text(example.text)
                if key not in index:
                    index[key] = len(items)
                    items.append({"text": example.text, "target_group": example.group or "", "label": example.label})
                where.append(index[key])
            runs[str(st.run_dir.relative_to(self.out))] = where
        order = list(range(len(items)))
        random.Random(self.seed + SHUFFLE_SEED_OFFSET + _step_number(step)).shuffle(order)
        position = {old: new for new, old in enumerate(order)}
        shuffled = [{**items[old], "method": "", "source_row_id": str(new)} for new, old in enumerate(order)]
        return {"study": self.study_name(step), "db": self.db, "form": self.form, "per_item": self.min_annotators,
                "items": shuffled,
                "runs": {run: [None if i is None else position[i] for i in where] for run, where in runs.items()}}

    def _study(self, plan: dict[str, Any]) -> tuple[Any, str | None]:
        """(the plan's study, its admin token when created now, else None)."""
        if not plan["items"]:
            raise InputError(f"{plan['study']}: no statement to annotate", hint="check the round's attack runs")
        try:
            study = self.store.study(plan["study"])
        except InputError:
            study, token = self.store.create_study(plan["study"], plan["items"], per_item=plan["per_item"],
                                                   source=str(self.out), lease_minutes=self.lease_minutes,
                                                   form=plan["form"])
            return study, token
        if self.store.item_count(study.id) != len(plan["items"]):
            raise InputError(f"study {plan['study']!r} in {self.db} is not this run's ({len(plan['items'])} "
                             "statements expected)", hint="give this run its own --annotation-db")
        return study, None

    def _votes(self, study: Any, plan: dict[str, Any]) -> list[list[int]]:
        """Each study item's votes, in item order."""
        from toxiforge.annotation.agreement import response_vote

        votes: dict[int, list[int]] = defaultdict(list)
        for item, response in self.store.responses(study.id):
            votes[item.position].append(response_vote(response, plan["form"]))
        return [votes[i] for i in range(len(plan["items"]))]

    def _read(self, step: str, plan: dict[str, Any], study: Any) -> dict[Path, list[float]]:
        from toxiforge.annotation.agreement import study_agreement

        votes = self._votes(study, plan)
        decided = [majority(v, 1 if self.accept_partial else self.min_annotators) for v in votes]
        counts = {status: sum(s == status for _, s in decided) for status in ("majority", "tie", "under-annotated")}
        partial = sum(0 < len(v) < self.min_annotators and label is not None for v, (label, _) in zip(votes, decided))
        summary = {"step": step, "study": plan["study"], "form": plan["form"], "statements": len(decided),
                   "responses": sum(len(v) for v in votes), **counts, "accept_partial": self.accept_partial,
                   "partial": partial, "agreement": study_agreement(self.store, study.id).to_dict(),
                   "db": self.db, "read_at": now_utc()}  # with accept_partial: the moment the labels were frozen
        atomic_write_text(self.out / STUDIES_DIR / f"{step}.labels.json", json.dumps(summary, indent=1) + "\n")
        self.say(f"{plan['study']}: {counts['majority']} of {len(decided)} statements have a majority label"
                 + (f" ({partial} of them from fewer than {self.min_annotators} answers: --accept-partial)"
                    if self.accept_partial else "")
                 + f"; {counts['tie']} tie(s) and {counts['under-annotated']} with "
                 + ("no answer" if self.accept_partial else f"fewer than {self.min_annotators} annotations")
                 + " are left out")
        out = {}
        for run, where in plan["runs"].items():
            labels = [None if i is None else decided[i][0] for i in where]
            atomic_write_text(labels_path(self.out / run), json.dumps({
                "study": plan["study"], "labels": labels,
                "votes": [None if i is None else votes[i] for i in where]}) + "\n")
            out[self.out / run] = [math.nan if v is None else float(v) for v in labels]
        return out

    def _pending_lines(self, what: str, plan: dict[str, Any], answers: Sequence[int], token: str | None
                       ) -> list[str]:
        db, name, n, need = shlex.quote(self.db), shlex.quote(plan["study"]), len(plan["items"]), plan["per_item"]
        done = sum(min(a, need) for a in answers)
        lines = [f"{what}: {n} statements await {need} annotations each ({n * need} in all, {done} done) in study "
                 f"{plan['study']} ({plan['form']} form) of {self.db}."]
        if done:
            short = sorted(((need - a) for a in answers if a < need), reverse=True)
            by_missing = ", ".join(f"{short.count(m)} await {m} more" for m in sorted(set(short), reverse=True))
            lines.append(f"{len(short)} of the {n} statements still have fewer than {need} answers ({by_missing}; "
                         f"{sum(short)} answers to come).")
        lines += ["Serve it and invite at least that many annotators, one link each (serve's --host, --port and "
                  "--base-url put it where annotators reach it):",
                  f"  toxiforge annotate serve --db {db}",
                  f"  toxiforge annotate invite --study {name} --annotators {need} --db {db}"]
        if token is not None:
            lines.append(f"The study's admin link (progress, exports; shown once): /admin/login/{token}")
        lines.append(f"Then rerun this harden command with --resume: once every statement has {need} answers it "
                     "reads the labels (each statement's majority) and goes on; --resume --accept-partial goes on "
                     "now with the majority of the answers that are in.")
        return lines


def _step_number(step: str) -> int:
    digits = "".join(c for c in step if c.isdigit())
    return int(digits) if digits else 0


# --- the report ------------------------------------------------------------------------------------------------


def human_shares(statements: Statements) -> dict[str, Any]:
    """People's numbers of an attack run whose statements they labelled: how many have a label; the flip rate among
    the statements people give their prompt label (``validated``); ``flips_confirmed``, the share of the flips
    people confirmed (gave the prompt label the classifier missed); ``confirmed`` (flipped and confirmed, of all
    labelled); ``people_agree`` (the prompt label's share); and the human-validated fool rate, the share whose
    classifier verdict differs from people's label (the paper's fool rate, App. E)."""
    from toxiforge.attacks.validation import agrees, flip_shares
    from toxiforge.intervals import proportion

    rows = [(e, f, s) for e, f, s in statements.rows() if f is not None and s is not None and s == s]
    examples, flipped, scores = [e for e, _, _ in rows], [bool(f) for _, f, _ in rows], [s for _, _, s in rows]
    shares = flip_shares(examples, flipped, scores)
    verdicts = [e.label != f for e, f in zip(examples, flipped)]  # the classifier's label: the prompt's unless flipped
    return {"labelled": len(rows), "flips": sum(flipped), "validated": shares["validated"],
            "confirmed": shares["confirmed"], "people_agree": shares["validator_agrees"],
            "flips_confirmed": proportion([agrees(e, s) for e, f, s in rows if f]).to_dict(),
            "human_fool_rate": proportion([int(v) != int(s) for v, s in zip(verdicts, scores)]).to_dict()}


def people_report(out: Path, rounds: int, sets: dict[Path, Statements]) -> dict[str, Any]:
    """``studies``: each study's counts and agreement; ``rounds``: per round and arm, :func:`human_shares` of the
    attack on that round's classifier, once people labelled it."""
    studies = [json.loads(p.read_text(encoding="utf-8")) for p in sorted((out / STUDIES_DIR).glob("*.labels.json"),
                                                                          key=lambda p: _step_order(p.name))]
    per_round: list[dict[str, Any]] = []
    for r in range(rounds + 1):
        entry = {}
        for arm in ARMS if r else (ALICE_ARM,):
            run = out / "round-0" / "attack" if r == 0 else out / f"round-{r}" / arm / "attack"
            st = sets.get(run)
            if st is not None and st.validated is not None:
                entry[arm] = human_shares(st)
        per_round.append(entry)
    return {"studies": studies, "rounds": per_round}


def _step_order(name: str) -> tuple[int, int]:
    return _step_number(name), name.startswith("after")


def people_markdown(report: dict[str, Any]) -> list[str]:
    """The report's lines on people's validation (none without it)."""
    from toxiforge.intervals import Share

    people = report.get("people")
    if not people:
        return []

    def num(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    lines = ["", "## People's validation", "",
             "Each study: its statements (both arms shuffled together), how many got a majority label, ties and "
             "statements with too few annotations (left out), and agreement as `toxiforge annotate agreement` "
             "computes it (Fleiss' κ; Krippendorff's α, nominal, and ordinal on the 1-5 harm scores for the full "
             "form).", "",
             "| study | form | statements | responses | majority | ties | under-annotated | Fleiss κ | α nominal | "
             "α ordinal |", "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in people["studies"]:
        a = s["agreement"]
        lines.append(f"| {s['step']} | {s['form']} | {s['statements']} | {s['responses']} | {s['majority']} | "
                     f"{s['tie']} | {s['under-annotated']} | {num(a['fleiss_kappa'])} | "
                     f"{num(a['krippendorff_alpha_nominal'])} | {num(a['krippendorff_alpha_ordinal'])} |")
    partial = [s for s in people["studies"] if s.get("accept_partial")]
    if partial:
        lines += ["", "**Read before every statement had its annotations** (`--accept-partial`): " + "; ".join(
            f"{s['step']}: {s['partial']} of {s['statements']} labels are the majority of fewer answers than asked, "
            f"{s['under-annotated']} statements had none (left out)" for s in partial) + ".",
                  "", "These labels were frozen when they were read (" + "; ".join(
            f"{s['step']}: {s.get('read_at', 'time not recorded')}, {s['responses']} answers" for s in partial)
                  + "): every later step of this run was built on them, and answers given after that moment are not "
                    "read by this run, even with --resume. They stay in the study: `toxiforge annotate export "
                    "--study STUDY --db DB -o FILE` (or `annotate agreement`) reads them all, for the studies "
                  + ", ".join(f"`{s['study']}`" for s in partial) + (f" in `{partial[0]['db']}`" if partial[0].get(
                      "db") else "") + ", beside the labels this run used (each run's `RUN.people.json`: `labels` "
                    "and the `votes` they came from)."]
    lines += ["", "Per round and arm, the fresh attack's statements people labelled: flips people confirmed (% of the "
                  "labelled flips people give their prompt label), the flip rate among the statements people give "
                  "their prompt label, people agreeing with the prompt label, and the human-validated fool rate (% "
                  "whose classifier label differs from people's); 95% Wilson intervals.", "",
              "| round | arm | labelled | flips | flips people confirmed % | flip % among people-validated | "
              "people agree % | human fool rate % |", "|---|---|---:|---:|---:|---:|---:|---:|"]
    for r, entry in enumerate(people["rounds"]):
        for arm, h in entry.items():
            cells = [Share(**h["flips_confirmed"]), Share(**h["validated"]["all"]), Share(**h["people_agree"]["all"]),
                     Share(**h["human_fool_rate"])]
            lines.append(f"| {r} | {'start' if r == 0 else arm} | {h['labelled']} | {h['flips']} | "
                         + " | ".join(c.cell() for c in cells) + " |")
    return lines
