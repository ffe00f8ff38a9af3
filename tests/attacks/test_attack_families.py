"""The importance ranking, the obfuscate and substitute families (budgets, similarity, queries) and the registry,
against a keyword classifier whose every score is known by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
from attack_fakes import BagOfWordsEncoder, KeywordClassifier

from toxiforge.attacks.base import Oracle, Source
from toxiforge.attacks.importance import rank_words
from toxiforge.attacks.obfuscate import ObfuscateAttack, ObfuscateConfig
from toxiforge.attacks.registry import FAMILIES, Resources, family_config, make_family
from toxiforge.attacks.substitute import Neighbours, SubstituteAttack, SubstituteConfig
from toxiforge.errors import InputError

TOXIC_TEXT = "the alpha and beta plan"        # placeholder words; the classifier below makes it "toxic"
WEIGHTS = {"alpha": 0.25, "beta": 0.25, "calm": -0.3}


def source(text: str = TOXIC_TEXT, label: int = 1, seed: int = 11) -> Source:
    return Source(row_id="test/000000", text=text, label=label, group=None, seed=seed)


def one(family, src: Source):
    """The attempt of ``family`` on ``src`` attacked alone."""
    [attempt] = family.attack([src])
    return attempt


def test_importance_is_the_drop_in_p_true_label_without_each_word():
    clf = KeywordClassifier(WEIGHTS)
    oracle = Oracle(clf)
    ranking = rank_words(oracle, TOXIC_TEXT, 1, clf.score(TOXIC_TEXT))
    # by hand: P(toxic) = 0.3 + 0.25 + 0.25 = 0.8; without "alpha" or "beta" 0.55, without the others 0.8
    assert np.allclose(ranking.importance, [0.0, 0.25, 0.0, 0.25, 0.0])
    assert ranking.order == [1, 3, 0, 2, 4]  # most important first, ties in reading order
    assert oracle.queries == 5 == clf.texts_scored  # one per word


def test_importance_of_a_benign_statement_is_the_drop_in_p_benign():
    clf = KeywordClassifier(WEIGHTS)
    text = "a calm plan"  # P(toxic) = 0.3 - 0.3 = 0.01 (clipped); without "calm" 0.3
    ranking = rank_words(Oracle(clf), text, 0, clf.score(text))
    assert np.allclose(ranking.importance, [0.0, (1 - 0.01) - (1 - 0.3), 0.0]) and ranking.order[0] == 1


@pytest.mark.parametrize(("max_edits", "flipped"), [(1, False), (2, True), (5, True)])
def test_obfuscate_edits_the_most_important_words_within_the_budget(max_edits, flipped):
    clf = KeywordClassifier(WEIGHTS)
    attempt = one(ObfuscateAttack(clf, ObfuscateConfig(max_edits=max_edits)), source())
    assert len(attempt.edits) == min(max_edits, 2)  # it stops once the label flips
    assert [e["before"] for e in attempt.edits] == ["alpha", "beta"][:max_edits]
    assert attempt.score_before == pytest.approx(0.8)
    assert attempt.score_after == pytest.approx(0.3 if flipped else 0.55) == clf.score(attempt.text)
    # queries by hand: the statement, 5 without one word each, then 7 edits of "alpha" (6 word edits and joining it
    # to "and") and, with a second edit allowed, 7 of "beta"
    assert attempt.queries == 1 + 5 + 7 + (7 if max_edits > 1 else 0) == clf.texts_scored


def test_obfuscate_keeps_the_words_a_reader_reads():
    attempt = one(ObfuscateAttack(KeywordClassifier(WEIGHTS), ObfuscateConfig(max_edits=2)), source())
    for edit in attempt.edits:
        assert edit["before"] != edit["after"] and edit["after"] in attempt.text
    assert attempt.text.split()[0] == "the" and attempt.text.endswith("plan")


def test_obfuscate_pushes_a_benign_statement_toward_toxic():
    clf = KeywordClassifier(WEIGHTS)
    attempt = one(ObfuscateAttack(clf, ObfuscateConfig(max_edits=1)), source("a calm plan", label=0))
    assert attempt.edits[0]["before"] == "calm" and attempt.score_after == pytest.approx(0.3)
    assert attempt.score_after > attempt.score_before


def test_a_statement_the_classifier_already_gets_wrong_is_left_as_it_is():
    clf = KeywordClassifier(WEIGHTS)
    attempt = one(ObfuscateAttack(clf, ObfuscateConfig()), source("a quiet plan", label=1))  # P(toxic) 0.3
    assert attempt.text == "a quiet plan" and attempt.edits == () and attempt.queries == 1


def test_obfuscate_only_uses_the_operations_asked_for_and_is_deterministic():
    family = ObfuscateAttack(KeywordClassifier(WEIGHTS), ObfuscateConfig(max_edits=2, operations=("leet",)))
    first, again = one(family, source()), one(family, source())
    assert first == again and {e["op"] for e in first.edits} == {"leet"}
    assert first.queries == 1 + 5 + 1 + 1  # one candidate per word


def test_an_edit_that_does_not_lower_p_true_label_is_not_spent():
    clf = KeywordClassifier({"plan": 0.0}, base=0.8)  # no word matters
    attempt = one(ObfuscateAttack(clf, ObfuscateConfig(max_edits=3)), source())
    assert attempt.edits == () and attempt.text == TOXIC_TEXT


def test_statements_attacked_together_get_what_each_gets_alone():
    family = ObfuscateAttack(KeywordClassifier(WEIGHTS), ObfuscateConfig(max_edits=2))
    sources = [source(), source("a calm plan", label=0), source("a quiet plan"), source("beta and alpha", seed=3),
               source("")]
    alone = [one(family, s) for s in sources]
    clf = KeywordClassifier(WEIGHTS)
    together = ObfuscateAttack(clf, ObfuscateConfig(max_edits=2)).attack(sources)
    assert together == alone
    assert sum(a.queries for a in together) == clf.texts_scored  # each statement's queries, exactly


# --- substitute ------------------------------------------------------------------------------------------------

VOCABULARY = ["alpha", "alfa", "beta", "omega", "plan", "and", "the", "sigma", "kappa"]


def substitute(config: SubstituteConfig, weights=WEIGHTS) -> tuple[SubstituteAttack, KeywordClassifier]:
    clf = KeywordClassifier(weights)
    embed = BagOfWordsEncoder(VOCABULARY, close={"alfa": "alpha"})
    return SubstituteAttack(clf, embed, Neighbours(embed, VOCABULARY), config), clf


def test_neighbours_are_the_nearest_words_by_the_encoder():
    embed = BagOfWordsEncoder(VOCABULARY, close={"alfa": "alpha"})
    near = Neighbours(embed, VOCABULARY)
    assert near("alpha", 3)[0] == "alfa" and "alpha" not in near("alpha", 3) and len(near("alpha", 3)) == 3
    assert near("Alpha", 1) == ["Alfa"]


def test_substitute_keeps_the_similarity_floor_and_flips_with_a_near_word():
    family, clf = substitute(SubstituteConfig(min_similarity=0.9, max_changed=0.5, candidates=3))
    attempt = one(family, source())
    assert attempt.edits[0] == {"op": "substitute", "word": 1, "before": "alpha", "after": "alfa"}
    assert attempt.similarity >= 0.9 and attempt.queries == clf.texts_scored
    # only near words pass the floor: the far ones (cosine < 0.9) are never sent to the classifier
    assert attempt.queries < 1 + 5 + 2 * 3


def test_substitute_changes_nothing_below_the_similarity_floor():
    family, clf = substitute(SubstituteConfig(min_similarity=1.0, max_changed=1.0))
    attempt = one(family, source())
    assert attempt.text == TOXIC_TEXT and attempt.similarity == 1.0 and attempt.edits == ()
    assert attempt.queries == 1 + 5  # the statement and the ranking: no candidate passed, none was scored


def test_substitute_changes_at_most_max_changed_of_the_words():
    weights = {"alpha": 0.25, "beta": 0.25}
    family, _ = substitute(SubstituteConfig(min_similarity=0.1, max_changed=0.2, candidates=8), weights)
    attempt = one(family, source())  # 5 words: at most 1 may change
    assert len(attempt.edits) == math.floor(0.2 * 5) == 1 and attempt.score_after == pytest.approx(0.55)


# --- registry and settings ---------------------------------------------------------------------------------------

def test_families_are_registered_by_name():
    assert FAMILIES.names() == ["obfuscate", "substitute", "alice"]
    config = family_config("Obfuscate", {"max_edits": 2, "min_similarity": None})
    assert isinstance(config, ObfuscateConfig) and config.max_edits == 2
    assert isinstance(make_family(config, KeywordClassifier(WEIGHTS)), ObfuscateAttack)
    embed = BagOfWordsEncoder(VOCABULARY)
    made = make_family(family_config("substitute", {}), KeywordClassifier(WEIGHTS),
                       Resources(embedder=embed, vocabulary=VOCABULARY))
    assert isinstance(made, SubstituteAttack) and made.settings()["encoder"] == "bag-of-words"


@pytest.mark.parametrize(("family", "settings", "message"), [
    ("obfucsate", {}, "unknown attack family 'obfucsate'.*did you mean 'obfuscate'"),
    ("obfuscate", {"max_edits": 0}, "max_edits=0 allows no edit.*--max-edits 1 or more"),
    ("obfuscate", {"operations": ("swap", "shout")}, "unknown edit operation shout.*choose among swap"),
    ("substitute", {"min_similarity": 0}, r"min_similarity=0 is outside \(0, 1\]"),
    ("substitute", {"min_similarity": 1.5}, r"min_similarity=1.5 is outside \(0, 1\]"),
    ("substitute", {"max_changed": 0.0}, r"max_changed=0.0 is outside \(0, 1\]"),
    ("obfuscate", {"max_changed": 0.3}, "--max-changed does not apply to the obfuscate family.*--family substitute"),
])
def test_bad_settings_are_refused_with_the_fix(family, settings, message):
    with pytest.raises(InputError, match=message):
        family_config(family, settings)


# --- alice -------------------------------------------------------------------------------------------------------

def test_alice_is_a_family_with_its_queries_counted(tiny_lm):
    from toxiforge.attacks.alice import AliceAttack, source_prompt

    clf = KeywordClassifier({"placeholder": 0.4})
    config = family_config("alice", {"num_beams": 2, "candidates": 4, "max_new_tokens": 4})
    family = make_family(config, clf, Resources(lm=tiny_lm))
    assert isinstance(family, AliceAttack) and family.method == "ALICE" and family.settings()["num_beams"] == 2
    src = source("a placeholder plan", label=1)  # P(toxic) 0.7: attacked toward benign
    attempt = one(family, src)
    assert attempt.prompt == source_prompt(src) == "- a placeholder plan\n-" and attempt.edits == ()
    assert attempt.queries == clf.texts_scored > 2  # the source, every candidate ALICE scored, the statement
    assert attempt.score_before == pytest.approx(0.7)
    assert attempt.error is not None or attempt.score_after == pytest.approx(clf.score(attempt.text))
    assert one(family, src) == attempt  # beam search: the same statement again
    with pytest.raises(InputError, match="one statement per source"):
        make_family(family_config("alice", {"num_return": 2, "num_beams": 2}), clf, Resources(lm=tiny_lm))


def test_a_run_of_the_alice_family_writes_generate_s_columns(tiny_lm, tmp_path):
    from toxiforge.attacks.job import run_attack
    from toxiforge.records import read_rows

    clf = KeywordClassifier({"placeholder": 0.4})
    family = make_family(family_config("alice", {"num_beams": 2, "candidates": 4, "max_new_tokens": 4}), clf,
                         Resources(lm=tiny_lm))
    sources = [Source(f"t/{i:06d}", f"a placeholder plan number {i}", 1, "asian", i) for i in range(3)]
    result = run_attack(sources, family, tmp_path / "run", classifier_name=clf.name, fingerprint={"test": 1})
    rows = read_rows(tmp_path / "run")  # generate's reader
    assert [r.row_id for r in rows] == [s.row_id for s in sources] and {r.generation_method for r in rows} == {"ALICE"}
    assert all(r.prompt.startswith("- a placeholder plan") and r.model == tiny_lm.name for r in rows)
    assert result.manifest["counts"]["attacked"] == 3
