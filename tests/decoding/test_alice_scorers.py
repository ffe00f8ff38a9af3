"""ALICE's scorers on hand-built tensors and the tiny byte-level tokenizer (no model)."""

from __future__ import annotations

import pytest
import torch

from toxiforge.decoding.beam import BeamState, beams_to_keep
from toxiforge.decoding.scorers import (
    MASKED,
    ClassifierTerm,
    NoRepeatNGram,
    PromptTokenBan,
    RequireText,
    complete_text,
    exempt_from_prompt_ban,
    group_term_tokens,
    lm_scores,
    repeated_ngram_mask,
    text_tokens,
    weighted,
)
from toxiforge.groups import Group


def state(generated, vocab=10, running=None, targets=None, beams=1):
    generated = torch.tensor(generated, dtype=torch.long).view(len(generated), -1)
    rows = generated.shape[0]
    return BeamState(beams, vocab, torch.zeros(rows) if running is None else torch.tensor(running),
                     generated, torch.tensor(targets if targets is not None else [0] * rows), list(range(rows)))


def test_lm_scores_apply_temperature_without_mutating():
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    lp = torch.log_softmax(logits, -1)
    before = lp.clone()
    out = lm_scores(lp, 0.9)
    assert torch.allclose(out, torch.log_softmax(logits / 0.9, -1), atol=1e-6)
    assert torch.equal(lp, before)


def test_weighted_keeps_minus_inf_for_weight_zero():
    scores = torch.tensor([[-1.0, float("-inf"), -3.0]])
    assert torch.isnan(0.0 * scores).any()  # what the guard prevents
    assert weighted(0.0, scores).tolist() == [[0.0, float("-inf"), 0.0]]
    assert weighted(0.5, scores).tolist() == [[-0.5, float("-inf"), -1.5]]


def test_prompt_ban_exempts_punctuation_stopwords_whitespace_and_listed_tokens():
    texts = ["the", " The", ",", " ", "alpha", "\n", " beta", "...", " gamma"]
    assert exempt_from_prompt_ban(texts).tolist() == [True, True, True, True, False, True, False, True, False]
    ban = PromptTokenBan.from_prompts([[0, 2, 4, 8], [6, 8]], exempt_from_prompt_ban(texts), [set(), {8}])
    scores = torch.zeros(2, len(texts))
    out = ban(state([[], []], vocab=len(texts)), scores)
    assert torch.isinf(out[0, 4]) and torch.isinf(out[0, 8]) and torch.isinf(out[1, 6])
    assert torch.isfinite(out[1, 8])  # exempt for row 1 only
    assert torch.isfinite(out[0, [0, 2, 6]]).all() and torch.isfinite(out[1, [0, 4]]).all()
    assert torch.equal(scores, torch.zeros(2, len(texts)))
    assert ban.keep_rows(torch.tensor([1, 1, 0])).banned[:, 6].tolist() == [True, True, False]
    # on candidates: column j is token_ids[r, j]
    on_candidates = ban(state([[], []], vocab=len(texts)), torch.zeros(2, 2), torch.tensor([[4, 0], [8, 6]]))
    assert torch.isinf(on_candidates).tolist() == [[True, False], [False, True]]


def test_group_term_tokens_spell_the_identity_terms(tiny_tokenizer):
    decode = lambda seqs: tiny_tokenizer.batch_decode(seqs)  # noqa: E731
    group = Group("gamma_people", "Gamma people", "user", patterns=("group gamma",), kind="user")
    ids = tiny_tokenizer.encode("- people in group gamma enjoy music\n- a plain line\n-", add_special_tokens=False)
    found = group_term_tokens(ids, group, decode)
    assert {tiny_tokenizer.decode([t]) for t in found} == {" group", " g", "am", "m", "a"}
    assert group_term_tokens(tiny_tokenizer.encode("- a plain line\n-", add_special_tokens=False), group,
                             decode) == set()


def test_group_term_tokens_with_an_accented_name(tiny_tokenizer):
    decode = lambda seqs: tiny_tokenizer.batch_decode(seqs)  # noqa: E731
    group = Group("zorblax", "Zorbláx people", "user", patterns=("zorbláx",), kind="user")
    ids = tiny_tokenizer.encode("- the zorbláx line\n-", add_special_tokens=False)
    found = group_term_tokens(ids, group, decode)
    name = tiny_tokenizer.encode(" zorbláx", add_special_tokens=False)
    assert set(name) - {tiny_tokenizer.encode(" ", add_special_tokens=False)[0]} <= found  # both bytes of "á"
    assert tiny_tokenizer.encode(" line", add_special_tokens=False)[0] not in found


@pytest.mark.parametrize("ids, n, banned", [
    ([1, 2, 3, 1], 2, {2}),          # "1 2" occurred and the row ends in 1
    ([5, 5], 2, {5}),
    ([1, 2, 3, 1, 2], 3, {3}),
    ([1, 2, 3, 4], 2, set()),
    ([-1, -1, 7, 7], 2, {7}),        # negative ids are padding and never banned
])
def test_repeated_ngram_mask(ids, n, banned):
    mask = repeated_ngram_mask(torch.tensor([ids]), n, 10)
    assert set(mask[0].nonzero().view(-1).tolist()) == banned


def test_no_repeat_ngram_sees_only_generated_tokens():
    scorer = NoRepeatNGram(2)
    scores = torch.zeros(2, 10)
    out = scorer(state([[1, 2, 3, 1], [4, 5, 6, 7]]), scores)
    assert torch.isinf(out).nonzero().tolist() == [[0, 2]]
    assert torch.equal(scores, torch.zeros(2, 10))
    assert torch.equal(scorer(state([[], []]), scores), scores)  # nothing generated: nothing banned
    assert scorer.keep_rows(torch.tensor([1, 0])) is scorer


def test_text_tokens_and_require_text():
    texts = ["\n", " ", "-", " word", ".\n", "</s>", " -\n"]
    has_text = text_tokens(texts)
    assert has_text.tolist() == [False, False, False, True, True, True, False]
    has_text[5] = False  # an EOS token has no text
    stop = torch.tensor([True, False, False, False, True, True, True])
    rule = RequireText(stop, has_text)
    out = rule(state([[1, 2], [2, 3]], vocab=7), torch.zeros(2, 7))
    # row 0 (" ", "-") has no text: the bare newline, EOS and " -\n" are forbidden, ".\n" carries text
    assert torch.isinf(out[0]).tolist() == [True, False, False, False, False, True, True]
    assert torch.isfinite(out[1]).all()  # row 1 has " word"
    first = rule(state([[], []], vocab=7), torch.zeros(2, 7))
    assert torch.isinf(first).sum() == 6


def test_complete_text_drops_an_unfinished_character(tiny_tokenizer):
    ids = tiny_tokenizer.encode("ok 😀", add_special_tokens=False)
    partial = tiny_tokenizer.decode(ids[:-1])
    assert partial.endswith("\ufffd") and complete_text(partial) == "ok "
    assert complete_text(tiny_tokenizer.decode(ids)) == "ok 😀"


def test_classifier_term_sees_completed_continuations_of_live_candidates(tiny_tokenizer):
    seen = []

    def class_log_probs(texts):
        seen.extend(texts)
        return torch.log(torch.tensor([[0.25, 0.75]] * len(texts)))

    emoji = tiny_tokenizer.encode("ok 😀", add_special_tokens=False)
    ok = tiny_tokenizer.encode("ok", add_special_tokens=False)
    term = ClassifierTerm(class_log_probs, tiny_tokenizer.batch_decode, weight=0.5)
    s = state([emoji[:4], ok + ok[:2], ok + ok[:2]], running=[0.0, 0.0, MASKED], targets=[1, 0, 1])
    scores = torch.tensor([[-1.0, -2.0], [-1.0, float("-inf")], [-1.0, -1.0]])
    out = term(s, scores, torch.tensor([[emoji[4], ok[0]], [ok[0], ok[1]], [ok[0], ok[1]]]))
    # row 0: "ok " + a partial emoji byte is scored as "ok "; the -inf candidate and masked row 2 are skipped
    assert len(seen) == 3 and seen[0] == "ok " and seen[1].endswith("o") and seen[2] == "okoko"
    assert out[0].tolist() == pytest.approx([-1.0 + 0.5 * torch.log(torch.tensor(0.75)).item(),
                                             -2.0 + 0.5 * torch.log(torch.tensor(0.75)).item()])
    assert out[1, 0].item() == pytest.approx(-1.0 + 0.5 * torch.log(torch.tensor(0.25)).item())
    assert out[1, 1].item() == float("-inf") and out[2].tolist() == [-1.0, -1.0]
    with pytest.raises(ValueError, match="token_ids"):
        term(s, scores)


def test_beams_to_keep_counts_every_stop_token():
    assert beams_to_keep(10, 0, 100) == 20        # transformers' floor: 2 × beams
    assert beams_to_keep(10, 5, 100) == 60        # (1 + stop tokens) × beams
    assert beams_to_keep(10, 1600, 100) == 1000   # never more than the extensions there are


def test_beam_state_keep_rows_follows_a_selection():
    s = BeamState(2, 10, torch.tensor([0.0, -1.0, -2.0, -3.0]), torch.tensor([[1], [2], [3], [4]]),
                  torch.tensor([1, 1, 0, 0]), [7, 9])
    kept = s.keep_rows(torch.tensor([3, 2]))
    assert kept.prompts == [9] and kept.running.tolist() == [-3.0, -2.0]
    assert kept.generated.view(-1).tolist() == [4, 3] and kept.targets.tolist() == [0, 0]
    grown = kept.extend(torch.tensor([5, 6]), torch.tensor([-4.0, -5.0]))
    assert grown.generated.tolist() == [[4, 5], [3, 6]] and grown.running.tolist() == [-4.0, -5.0]
    assert s.slot_rows([1]).tolist() == [2, 3]
