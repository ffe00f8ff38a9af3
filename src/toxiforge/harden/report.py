"""The numbers and outputs of ``toxiforge harden``: the statements of a run with their flips, a classifier's
metrics (:func:`measure`), and ``report.json`` (settings and every round's metrics), ``report.md`` (one table row
per round and arm) and ``report.png`` (flip rate, eval AUC and FPR_NOI per round, ALICE vs control)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from toxiforge._io import atomic_write, atomic_write_text
from toxiforge.attacks.validation import flip_shares
from toxiforge.harden.arms import versus_markdown
from toxiforge.harden.data import ALICE_ARM, ARMS, CONTROL_ARM, Statements
from toxiforge.intervals import Share
from toxiforge.records import TOXIC_THRESHOLD, is_toxic

REPORT_JSON, REPORT_MD, REPORT_PNG = "report.json", "report.md", "report.png"
ARM_STYLE = {ALICE_ARM: ("ALICE arm", "#b4543a", "-"), CONTROL_ARM: ("top-k control", "#3a6db4", "--")}
# An AUC panel's y axis spans at least this much, so that a change smaller than the AUC's own uncertainty does not
# fill the panel (a 0.004 change drawn on a 0.467-0.471 axis looked like a steep drop). It is about the width of
# the 95% bootstrap intervals of the eval sets in docs/harden.md (0.12-0.13 on 106 sentences); a wider interval
# widens the axis to hold it (auc_limits).
MIN_AUC_SPAN = 0.1


def flip_rates(statements: Statements) -> dict[str, Any]:
    """:func:`flip_shares` of an attack run's kept statements, its ``fooled`` column being the flips."""
    rows = statements.rows()
    validated = None if statements.validated is None else [s for _, _, s in rows if s is not None]
    return flip_shares([e for e, _, _ in rows], [f for _, f, _ in rows], validated)


def measure(classifier: str | Path, name: str, sections: Mapping[str, Mapping[str, Any]], attack: Statements,
            device: str = "auto", threshold: float = TOXIC_THRESHOLD, options: dict[str, Any] | None = None,
            transfer: Statements | None = None) -> dict[str, Any]:
    """The round's numbers for one classifier: per eval set, read from the audit's ``sections`` of it (by set name;
    :meth:`~toxiforge.harden.guardset.GuardCheck.sections`, the scores the paired check reads too, so no eval set
    is scored twice): ROC AUC with its 95% bootstrap interval, FPR_NOI and, on a HateCheck set, the ``spell_*``
    accuracy; the flip rate of the attack on it and, with ``transfer``, of a fixed attack set (statements made once
    against C_0, never trained on) that it scores here (loaded with ``options``, e.g. a judge's template)."""
    out: dict[str, Any] = {"classifier": str(classifier), "flip_rate": flip_rates(attack), "eval": {}}
    if transfer is not None:
        from toxiforge.classifiers import load_classifier

        loaded = load_classifier(classifier, device=device, name=name, **(options or {}))
        rows = transfer.rows()
        examples = [e for e, _, _ in rows]
        scores = loaded.predict_proba([e.text for e in examples]) if examples else []
        flipped = [bool(is_toxic(float(s), threshold)) != bool(e.label) for e, s in zip(examples, scores)]
        validated = None if transfer.validated is None else [v for _, _, v in rows if v is not None]
        out["transfer"] = flip_shares(examples, flipped, validated)
    out["eval"] = {set_name: eval_numbers(s) for set_name, s in sections.items()}
    return out


def eval_numbers(sections: Mapping[str, Any]) -> dict[str, Any]:
    """A round's numbers on one eval set, from the audit's sections of the classifier on it: ROC AUC and its
    interval, FPR_NOI and its benign rows, FNR, the rows, and on a HateCheck set the ``spell_*`` accuracy (the audit's
    obfuscation accuracy, with its Wilson interval)."""
    auc, noi = sections["accuracy"]["roc_auc"], sections["lexical"]["fpr"]["noi"]
    entry = {"auc": auc.value, "auc_interval": None if auc.low is None else [auc.low, auc.high],
             "fpr_noi": None if noi is None else noi.value, "noi_benign": sections["lexical"]["n_benign"]["noi"],
             "fnr": sections["accuracy"]["fnr"].value, "texts": sections["n"], "toxic": sections["toxic"]}
    if "hatecheck" in sections:
        entry["spell_accuracy"] = sections["hatecheck"]["obfuscation_accuracy"].to_dict()
    return entry


# --- outputs ---------------------------------------------------------------------------------------------------


def _auc_cell(entry: dict[str, Any]) -> str:
    interval = entry.get("auc_interval")
    if entry.get("auc") is None:
        return "n/a"
    return f"{entry['auc']:.3f}" + (f" [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


def flip_measure(m: dict[str, Any], kind: str) -> dict[str, Any] | None:
    """A measure's flip shares of ``kind``: attack, validated or confirmed (attack, among or of validated
    statements), transfer, transfer-validated or transfer-confirmed; None when the run did not measure it."""
    source = m.get("transfer") if kind.startswith("transfer") else m["flip_rate"]
    for part in ("validated", "confirmed"):
        if source is not None and kind.endswith(part):
            source = source.get(part)
    return source


def flip_columns(rounds: Sequence[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The flip columns the rounds have: ``(kind, share key, header)``."""
    columns = [("attack", "all", "flip % [95% CI]"), ("attack", "toxic_prompts", "flip % toxic→benign"),
               ("attack", "benign_prompts", "flip % benign→toxic")]
    first = rounds[0][ALICE_ARM] if rounds else {}
    if first and flip_measure(first, "validated") is not None:
        columns += [("confirmed", "all", "confirmed flip %"), ("validated", "all", "validated flip %"),
                    ("kept", "all", "validator agrees %")]
    if first and flip_measure(first, "transfer") is not None:
        columns += [("transfer", "all", "transfer flip %")]
        if flip_measure(first, "transfer-validated") is not None:
            columns += [("transfer-validated", "all", "validated transfer flip %")]
    return columns


def _flip_cell(m: dict[str, Any], kind: str, key: str) -> str:
    shares = m["flip_rate"].get("validator_agrees") if kind == "kept" else flip_measure(m, kind)
    return "-" if shares is None else Share(**shares[key]).cell()


def markdown(report: dict[str, Any]) -> str:
    """One row per round and arm: additions, training rows, flip rates (both directions; validated and transfer
    ones when measured), AUC and FPR_NOI per set."""
    from toxiforge.harden.families import families_markdown
    from toxiforge.harden.people import people_markdown

    settings, rounds = report["settings"], report["rounds"]
    names = list(rounds[0][ALICE_ARM]["eval"]) if rounds else []
    columns = flip_columns(rounds)
    validator = settings.get("validate_with")
    kept_by = "" if not validator else (" that people give their prompt label" if validator == "people" else
                                        f" that {validator} gives their prompt label")
    keeper = (settings.get("alice") or {}).get("keep_label_with")
    kept_with = "" if not keeper else (f" with the keeper {keeper} (--keep-label-with, λK "
                                       f"{settings['alice']['lambda_keep']}: the search keeps each statement's prompt "
                                       "label in its view, so it confirms nothing)")
    lines = ["# toxiforge harden", "",
             f"{len(rounds) - 1} round(s); attack: ALICE{kept_with} on {settings['attack']['per_cell']} statements "
             "per group × "
             f"label ({', '.join(settings['attack']['groups'])}; {', '.join(settings['attack']['labels'])}), a new "
             f"seed every round; statements added: {settings['add']} ones"
             f"{kept_by}; each classifier trained "
             f"{'from the base model on the union' if settings['init'] == 'base' else 'on from the previous one'}.",
             "", "Flip rate: % of a fresh attack's statements whose label the classifier got wrong (toxic prompts "
             "scored benign, benign prompts scored toxic), 95% Wilson interval. AUC: ROC AUC with a 95% bootstrap "
             "interval. FPR_NOI: % of benign eval texts naming a group (no offensive word) scored toxic. FNR: % of "
             "toxic eval texts scored benign."]
    if calibrated(rounds):
        lines += ["", "Each round's threshold was moved so that it calls no more of each decision set's benign texts, "
                      "all and those naming a group, toxic than round 0 (--calibrate): FPR_NOI stays at round 0's "
                      "there, and what a round pays for it shows in FNR."]
    if validator and validator != "people":  # people's numbers: their own section (people_markdown)
        lines += ["", f"Confirmed flip rate: % of the attack's statements that flipped and that the validator "
                      f"({validator}) gives their prompt label (real failures found). Validated flip rate: the flip "
                      "rate among the statements it gives their prompt label. Validator agrees: % of statements it "
                      "gives their prompt label."]
    if any(kind.startswith("transfer") for kind, _, _ in columns):
        lines += ["", "Transfer flip rate: the flip rate on one fixed set of ALICE statements made against C_0 "
                      "(round-0/transfer, never trained on), scored by each round's classifier."]
    spelled = [n for n in names if any("spell_accuracy" in entry[arm]["eval"][n]
                                      for r, entry in enumerate(rounds) for arm in (ARMS if r else (ALICE_ARM,)))]
    header = ["round", "arm", "added", "train rows", *(h for _, _, h in columns)]
    for name in names:
        header += [f"AUC {name}", f"FPR_NOI % {name}", f"FNR % {name}"]
        header += [f"spell_* accuracy {name}"] if name in spelled else []
    lines += ["", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for r, entry in enumerate(rounds):
        for arm in ARMS if r else (ALICE_ARM,):
            m = entry[arm]
            cells = [str(r), "start" if r == 0 else arm, str(m.get("added_this_round", 0)),
                     str(m.get("train_rows", "-")), *(_flip_cell(m, kind, key) for kind, key, _ in columns)]
            for name in names:
                e = m["eval"][name]
                cells += [_auc_cell(e), f"{_pct(e['fpr_noi'])} (n={e['noi_benign']})", _pct(e.get("fnr"))]
                if name in spelled:
                    spell = e.get("spell_accuracy") or {}
                    cells.append("-" if spell.get("value") is None else
                                 f"{spell['value']:.3f}" + (f" [{spell['low']:.3f}, {spell['high']:.3f}]"
                                                            if spell.get("low") is not None else ""))
            lines.append("| " + " | ".join(cells) + " |")
    short = [(r, e[CONTROL_ARM].get("control_shortfall", 0)) for r, e in enumerate(rounds) if r]
    for r, missing in short:
        if missing:
            lines += ["", f"Note: round {r}'s top-k pool had {missing} usable statement(s) too few, so the control "
                          "arm added fewer than the ALICE arm."]
    lines += versus_markdown(rounds)
    lines += families_markdown(report)
    lines += checks_markdown(report)
    lines += people_markdown(report)
    lines += ["", f"![metric per round]({REPORT_PNG})"]
    return "\n".join(lines) + "\n"


EVAL_SERIES = ("auc", "fpr_noi", "fnr")  # per eval set, in each round's ``eval`` (:func:`eval_numbers`)


def calibrated(rounds: Sequence[dict[str, Any]]) -> bool:
    """Whether the rounds' thresholds were moved to round 0's benign calls (``harden --calibrate``)."""
    return any("calibration" in entry.get(arm, {}) for entry in rounds[1:] for arm in ARMS)


def series(rounds: Sequence[dict[str, Any]], arm: str, metric: str, name: str | None = None) -> list[float | None]:
    """One value per round for ``arm``: a flip kind of :func:`flip_measure` (attack, validated, transfer,
    transfer-validated; the overall share), or :data:`EVAL_SERIES` of eval set ``name`` (None where a round has no
    such value: FNR is in rounds measured since it was recorded)."""
    out: list[float | None] = []
    for r, entry in enumerate(rounds):
        m = entry[ALICE_ARM if r == 0 else arm]
        if metric in EVAL_SERIES:
            out.append(m["eval"][name].get(metric) if name is not None else None)
        else:
            shares = flip_measure(m, metric)
            out.append(None if shares is None else shares["all"]["value"])
    return out


def auc_limits(values: Iterable[float | None], intervals: Iterable[Sequence[float] | None] = ()) -> tuple[float, float]:
    """y limits of an AUC panel: every value and interval inside (with matplotlib's 5% margin), at least
    :data:`MIN_AUC_SPAN` wide around them, within [0, 1]."""
    points = [v for v in values if v is not None and math.isfinite(v)]
    points += [end for interval in intervals if interval for end in interval[:2]]
    if not points:
        return 0.0, 1.0
    low, high = min(points), max(points)
    margin = 0.05 * (high - low)
    low, high = low - margin, high + margin
    if high - low < MIN_AUC_SPAN:
        middle = (low + high) / 2
        low, high = middle - MIN_AUC_SPAN / 2, middle + MIN_AUC_SPAN / 2
    if low < 0.0:  # move the window into [0, 1] rather than narrow it
        low, high = 0.0, min(1.0, high - low)
    if high > 1.0:
        low, high = max(0.0, low - (high - 1.0)), 1.0
    return low, high


def _auc_intervals(rounds: Sequence[dict[str, Any]], arm: str, name: str) -> list[list[float] | None]:
    """The 95% bootstrap interval of eval set ``name``'s AUC per round for ``arm`` (as :func:`series`)."""
    return [entry[ALICE_ARM if r == 0 else arm]["eval"][name].get("auc_interval") for r, entry in enumerate(rounds)]


def plot(rounds: Sequence[dict[str, Any]], path: Path) -> Path:
    """Flip rate (confirmed when measured), the transfer flip rate when measured and, per the first eval set, AUC
    (with its bootstrap interval as a band, on an axis at least :data:`MIN_AUC_SPAN` wide), FPR_NOI and FNR against
    the round (FNR where the rounds recorded it), one line per arm; calibrated rounds (:func:`calibrated`) hold
    FPR_NOI at round 0's, and its title says so."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(rounds[0][ALICE_ARM]["eval"])
    kinds = {kind for kind, _, _ in flip_columns(rounds)}
    attack = "confirmed" if "confirmed" in kinds else "attack"
    panels = [(attack, None, f"{'confirmed ' if attack == 'confirmed' else ''}flip rate, fresh attack (%)")]
    if "transfer" in kinds:
        transfer = "transfer-validated" if "transfer-validated" in kinds else "transfer"
        panels += [(transfer, None, f"{'validated ' if transfer != 'transfer' else ''}flip rate, fixed C_0 attack "
                                    "(%)")]
    if names:
        held = ", held at round 0's (--calibrate)" if calibrated(rounds) else ""
        panels += [("auc", names[0], f"ROC AUC, {names[0]}"), ("fpr_noi", names[0], f"FPR_NOI (%), {names[0]}{held}")]
        if any(v is not None for arm in ARMS for v in series(rounds, arm, "fnr", names[0])):  # none before it was kept
            panels.append(("fnr", names[0], f"FNR (%), {names[0]}"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.4), squeeze=False)
    x = list(range(len(rounds)))
    nan = float("nan")
    for ax, (metric, name, _) in zip(axes[0], panels):
        scale = 1.0 if metric == "auc" else 100.0
        shown: list[float | None] = []
        intervals: list[list[float] | None] = []
        for arm, (label, color, style) in ARM_STYLE.items():
            values = [None if v is None else scale * v for v in series(rounds, arm, metric, name)]
            ax.plot(x, [nan if v is None else v for v in values], style, marker="o", color=color, label=label)
            if metric == "auc" and name is not None:  # the AUC's 95% bootstrap interval as a band
                arm_intervals = _auc_intervals(rounds, arm, name)
                ax.fill_between(x, [i[0] if i else nan for i in arm_intervals],
                                [i[1] if i else nan for i in arm_intervals], color=color, alpha=0.12, linewidth=0)
                shown += values
                intervals += arm_intervals
        if metric == "auc":
            ax.set_ylim(*auc_limits(shown, intervals))
    return save_round_figure(fig, list(axes[0]), [title for _, _, title in panels], x, path)


def save_round_figure(fig: Any, axes: Sequence[Any], titles: Sequence[str], x: Sequence[int], path: Path) -> Path:
    """Title each panel, label its x axis with the rounds ``x``, add the arms' legend to the first, and write the
    figure as a PNG (atomically), then close it."""
    import matplotlib.pyplot as plt

    for ax, title in zip(axes, titles):
        ax.set_title(title, fontsize=9)
        ax.set(xlabel="round")
        ax.set_xticks(x)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    try:
        return atomic_write(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110))
    finally:
        plt.close(fig)


def write_harden_report(out: Path, config: Any, rounds: list[dict[str, Any]],
                        extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """Write ``report.json``, ``report.md`` and ``report.png`` into ``out``; return the JSON content. ``extra``: the
    rounds' training ``recipe``, the generated ``sets`` (prompts re-drawn, statements left out) and the rounds'
    ``problems`` (the paired check's, guardset.py)."""
    report = {"settings": config.fingerprint(), "rounds": rounds, **(extra or {})}
    atomic_write_text(out / REPORT_JSON, json.dumps(report, indent=2, default=str) + "\n")
    atomic_write_text(out / REPORT_MD, markdown(report))
    plot(rounds, out / REPORT_PNG)
    return report


def checks_markdown(report: dict[str, Any]) -> list[str]:
    """The lines that say how the rounds trained, what was kept apart and which rounds went wrong."""
    from toxiforge.harden.inputs import overlap_markdown

    lines = []
    recipe = report.get("recipe")
    if recipe:
        t = recipe["train"]
        steps = f"max {t['max_steps']} steps" if t["max_steps"] > 0 else f"{t['epochs']:g} epochs"
        objective = recipe.get("objective") or {}
        loss = objective.get("loss", "cross-entropy")
        if objective.get("bias_only"):
            loss += f" against bias-only {objective['bias_only']}"
        lines += ["", f"Every round trains with this recipe ({recipe['source']}): {t['base_model']}, lr "
                      f"{t['learning_rate']:g}, batch {t['batch_size']}, {steps}, max length {t['max_length']}, "
                      f"{t['eval_fraction']:g} of the rows held out, {loss}."]
        lines += ["", f"Note: {recipe['note']}."] if recipe.get("note") else []
        from toxiforge.harden.mix import mix_markdown

        lines += mix_markdown((report.get("settings") or {}).get("mix"), t["learning_rate"])
        from toxiforge.harden.calibration import calibration_markdown

        lines += calibration_markdown({f"round-{r}-{arm}": m["calibration"] for r, entry in enumerate(report["rounds"])
                                       for arm, m in entry.items() if isinstance(m, dict) and "calibration" in m})
    sets = report.get("sets") or []
    if sets:
        lines += ["", "Generated sets, kept apart (no prompt in two sets or twice in one; a statement of the training "
                      "data, of an earlier set or twice in one is left out: never trained on twice, never measured "
                      "after being trained on):", "",
                  "| set | prompts | prompts re-drawn | statements | left out: training data | --eval | earlier set | "
                  "twice in set |", "|---|---:|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {s['set']} | {s['prompts']} | {s['prompts_redrawn']} | {s['statements']} | "
                  f"{s['in_training_data']} | {s.get('in_eval', 0)} | {s['in_earlier_set']} | {s['repeated_in_set']} |"
                  for s in sets]
    lines += overlap_markdown(report.get("eval_overlap"))
    for r, problems in (report.get("problems") or {}).items():
        lines += ["", f"**Round {r} is worse than round 0**: " + "; ".join(problems) + "."]
    from toxiforge.harden.ship import ship_markdown

    return lines + ship_markdown(report)
