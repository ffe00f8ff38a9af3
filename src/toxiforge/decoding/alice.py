"""ALICE: classifier-in-the-loop constrained beam search (ToxiGen, Hartvigsen et al. 2022, §3.2–3.3, eq. 1).

Each step, every beam's candidates are its ``candidates`` (100) most likely next tokens under the LM at
temperature 0.9, after the token constraints. A candidate's step score is

    λL · log p_LM(token | prefix) + λC · log p_CLF(target class | generated text + token)       (eq. 1)

with λL = λC = 0.5; a beam's score is the sum of its step scores. 10 beams, at most 30 new tokens, a hypothesis
ends at a token containing a newline (or EOS), finished hypotheses are ranked by score / length ** 1 (length
penalty 1), and the best finished hypothesis is the statement (with ``num_return`` > 1 the best ``num_return``
finished hypotheses, each a statement of its own). The classifier sees only the continuation, never the prompt.
A toxic prompt steers toward the classifier's benign class (false negatives); a benign prompt toward the toxic
class (false positives).

*The keeper* (issue 50; not in the paper). ALICE alone pushes the classifier toward the wrong class, and most of what
it finds has simply changed its meaning (a toxic prompt's statement that is benign in anyone's view is no failure).
With a keeper classifier K (``keep_label_with``, ``--keep-label-with``) the step score gains a third term,

    λL · log p_LM(token | prefix) + λC · log p_CLF(target class | text) + λK · log p_K(prompt's class | text)

(``lambda_keep``, default 1; docs/generation.md measures 0.5, 1 and 2: with a K more accurate than C, 0.5 confirmed
no more failures than plain ALICE and 1 most of what 2 did at about 60% of its CPU; with a K no better than C none
helped). K scores the texts C scored that can still be chosen, in the same pruning rounds (one more call per
round), and both terms are ≤ 0, so exact pruning stays exact. The keeper needs the prompt's label, so only
``mode="auto"`` takes one. What K kept is no evidence by K: a validator must be another classifier (or people).

The loop is plain batched beam search — the same candidate selection, finished-hypothesis bookkeeping and early
stop as transformers' ``_beam_search`` (length_penalty=1, early_stopping=False; pieces in :mod:`.beam`), so with
λC = 0 and no constraints it returns what ``model.generate(num_beams=...)`` returns — plus scorers
(:mod:`.scorers`, one protocol): the prompt ban, the no-repeat rule, the stop-token rule and the classifier term.
All prompts and beams of a batch go through the LM in one forward pass per step; the KV cache is reordered on
the device (on a beam step only its generated part moves); prompts whose search has ended leave the batch. The
constraints are tensor operations, and the host reads the device once per step for the beam bookkeeping
(:class:`~toxiforge.decoding.beam.StepOnHost`) plus once per classifier round (:mod:`.pruning`). The classifier
scores only the candidates that can still become a beam or a finished hypothesis, best LM bound first, every
prompt's candidates of a round in one classifier call (exact pruning, :mod:`.pruning`: the results are those of
scoring every candidate, as the paper does — bit for bit with a classifier whose scores depend only on the text,
up to padding noise in the last bits of a score with a padded one — at a fraction of the cost). Prompts batched
otherwise (each alone, or with others) give identical statements, their scores equal up to float noise: the LM's
matmuls have other shapes, which a CPU's kernels may sum in another order.

Where the parts live: this module is the search driver (:func:`alice_search`); the settings and the label-to-class
rules are :mod:`.alice_config`, the pipeline decoder :mod:`.alice_decoder`, the score terms and constraints (the
classifier and keeper term included) :mod:`.scorers`, beam bookkeeping :mod:`.beam`, exact pruning :mod:`.pruning`.

Departures from the paper:
* Full-vocabulary log-probabilities: the paper (GPT-3 API) saw only the top 100 tokens and re-sampled the
  allowed ones with top-k; here the top ``candidates`` tokens are ranked exactly, no re-sampling.
* The target group's name may be copied from the prompt (``exempt_group_terms``, default on): the paper bans
  prompt tokens "to prevent direct copying", but its statements must "include mentions of minority groups by
  name" (§3.1), and every demonstration names the group, so the ban removed the group's own name tokens
  (on ``make demo`` 15.6% of ALICE statements named their group, top-k 59.4%; Table 6 has ALICE slightly above
  top-k). The tokens of the prompt that spell one of the group's identity terms (:mod:`toxiforge.groups`) are
  exempt; all other prompt tokens stay banned.
* ``no_repeat_ngram_size`` (default 3, 0 disables), over the generated tokens only: small open LMs under plain
  beam search repeat themselves ("asian asian asian" on SmolLM2); the paper's GPT-3 needed no such rule. Applied
  to prompt + continuation it banned every demonstration's "\\n" "-" X trigram, so a statement could never open
  with a demonstration's first word (" the", " my", " many") nor end a sentence the way a demonstration did.
* ``require_text`` (default on): stop tokens (newline, EOS) are masked until the continuation has text, so an
  empty hypothesis (a newline at step 1) cannot finish and win; the paper has no minimum length. The decoder
  also skips hypotheses whose statement is empty when a non-empty one finished.
* ``classifier_top_n``: optionally score the classifier only on each beam's best N candidates by LM score
  (others are dropped), for speed; default None = all candidates, as the paper.
* The classifier scores the text without a trailing incomplete character (U+FFFD from the partial bytes of an
  emoji or accented letter that the next token would finish).
* A search in which nothing can finish (every candidate banned or -inf) returns an empty statement with finish
  reason "blocked" and a warning.

Departures from upstream code (microsoft/TOXIGEN ``toxigen/alice.py`` at 01517e8):
* Upstream saw only 5 candidate tokens per beam (API top-logprobs); here 100 from the full distribution.
* Upstream's first step took the LM's top 10 tokens with no classifier term and no ban; here step 1 is an
  ordinary step (classifier and constraints apply).
* Upstream scored the classifier only on the 2W best extensions by beam + LM score (W beams) and dropped the
  rest; here every candidate is scored, as the paper describes. Upstream's set is available as
  ``classifier_top_extensions=2 * num_beams`` (it changes results: a candidate the classifier favours but the
  LM ranks low is never seen).
* Upstream applied the classifier block twice per step (effective weights 0.25 LM / 0.75 classifier) and
  multiplied the running score by 0.25 every step (older steps fade); here each term counts once, with the
  weights as given, and a beam's score is the plain sum of its step scores (eq. 1).
* Upstream normalised a finished hypothesis' score by the character length of prompt + text; here by the
  number of generated tokens (``length_penalty`` 1), as transformers.
* Upstream padded classifier inputs with id 0 and no attention mask (id 0 is ``<s>`` for RoBERTa); classifier
  backends here pad with the tokenizer's pad token and pass attention masks.
* Upstream recomputed the whole prefix every step, one prompt at a time, on CPU only; here one batched forward
  step per token with a KV cache, on CPU or CUDA.
* Prompt ban: upstream banned (score -100) every candidate whose text is a case-sensitive substring of the
  prompt string, except NLTK's English stopwords and the characters ``\\ . , ! n \\n``; here -inf for the
  prompt's own tokens (exact ids: " Asian" and "Asian" are different tokens), except whitespace, punctuation and
  scikit-learn's English stopwords (no NLTK dependency), and the target group's identity terms (above).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch

from toxiforge.decoding.alice_config import AliceConfig
from toxiforge.decoding.beam import (
    BeamState,
    FinishedPool,
    Hypothesis,
    StepOnHost,
    beams_to_keep,
    next_beams,
    record_finished,
    search_done,
    top_continuations,
)
from toxiforge.decoding.pruning import PruningStats, pruned_classifier_scores
from toxiforge.decoding.scorers import (
    ClassifierTerm,
    Scorer,
    keep_best_extensions,
    lm_scores,
    token_constraints,
    vocab_masks,
    weighted,
)
from toxiforge.errors import InputError
from toxiforge.groups import Group, resolve_group
from toxiforge.models.base import LanguageModel


def alice_search(lm: LanguageModel, prompts: Sequence[str], targets: Sequence[int], config: AliceConfig,
                 classifier=None, groups: Sequence[str | Group | None] | None = None,
                 scorers: Sequence[Scorer] = (), prune: bool = True,
                 pruning_stats: PruningStats | None = None, keeper=None,
                 keep_targets: Sequence[int] | None = None) -> list[list[Hypothesis]]:
    """Run ALICE on a batch; ``targets[i]`` is the classifier class prompt ``i`` steers toward, ``groups[i]`` its
    target group (its identity terms may be copied from the prompt; None: no exemption).

    Returns, per prompt, up to ``num_return`` finished hypotheses, best first; a prompt for which nothing could
    finish gets one empty hypothesis with finish reason "blocked" (and a warning). ``classifier`` implements
    ``class_log_probs``; it may be None only when ``lambda_clf == 0``. ``scorers`` are extra constraints
    (full-vocabulary :class:`~toxiforge.decoding.scorers.Scorer`s with one row per prompt), applied after the
    built-in ones. ``prune=False`` scores every candidate with the classifier, in the same batches (the reference that
    exact pruning, :mod:`.pruning`, is tested against; for the same prompts the results are the same bit for bit);
    ``pruning_stats`` collects pruning counts. ``keeper`` (``class_log_probs``, weight ``config.lambda_keep``) adds
    the keeper term for class ``keep_targets[i]`` of prompt ``i`` (:func:`keeper_classes`; module docstring).
    """
    groups = list(groups) if groups is not None else [None] * len(prompts)
    if not len(prompts) == len(targets) == len(groups):
        raise InputError(f"{len(prompts)} prompts, {len(targets)} targets and {len(groups)} groups",
                         hint="pass one target and one group per prompt")
    if config.lambda_clf > 0 and classifier is None:
        raise InputError("lambda_clf > 0 but no classifier was given", hint="pass a classifier or lambda_clf=0")
    if keeper is not None and (keep_targets is None or len(keep_targets) != len(prompts) or config.lambda_clf == 0):
        raise InputError("a keeper needs one keeper class per prompt and a classifier term (lambda_clf > 0)",
                         hint="pass keep_targets=keeper_classes(labels, keeper)")
    if not prompts:
        return []
    vocab, device, width = vocab_masks(lm), lm.device, config.num_beams
    stop = (vocab.newline | vocab.eos) if config.stop_at_newline else vocab.eos.clone()
    candidates = min(config.candidates, lm.vocab_size)
    keep = beams_to_keep(width, int(stop.sum()), candidates)
    stop, eos = stop.to(device), vocab.eos.to(device)

    prompt_ids = [lm.encode(p) for p in prompts]
    group_objects = [resolve_group(g) if isinstance(g, str) else g for g in groups]
    expand = torch.arange(len(prompts), device=device).repeat_interleave(width)  # each prompt -> its beams' rows
    constraints = [s.keep_rows(expand) for s in
                   token_constraints(lm, prompt_ids, group_objects, config, stop) + list(scorers)]
    if config.lambda_keep == 0:
        keeper = None  # a term of weight 0 changes no score: λK 0 is plain ALICE, with no keeper calls
    classifier_term = (ClassifierTerm(classifier.class_log_probs, lm.batch_decode, config.lambda_clf,
                                      None if keeper is None else keeper.class_log_probs, config.lambda_keep)
                       if config.lambda_clf > 0 else None)
    state = BeamState.start(targets, width, lm.vocab_size, device, None if keeper is None else keep_targets)
    pools = [FinishedPool(width) for _ in prompts]
    session = lm.start(prompts)
    session.select(expand)

    for step in range(config.max_new_tokens):
        last_step = step + 1 == config.max_new_tokens
        length_norm = (step + 1) ** config.length_penalty
        token_scores = lm_scores(session.logprobs(), config.temperature)
        for constraint in constraints:
            token_scores = constraint(state, token_scores)
        lm_top, token_ids = torch.topk(token_scores, candidates, dim=-1)           # [rows, C], best first
        if classifier_term is not None and config.classifier_top_n is not None:
            lm_top, token_ids = lm_top[:, :config.classifier_top_n], token_ids[:, :config.classifier_top_n]
        step_scores = weighted(config.lambda_lm, lm_top)                            # guarded: 0 · -inf stays -inf
        if classifier_term is not None:
            if config.classifier_top_extensions is not None:
                step_scores = keep_best_extensions(state, step_scores, config.classifier_top_extensions)
            # pruned: the same beams and hypotheses as prune=False (same classifier batches), far fewer texts scored
            finishes = stop[token_ids] | last_step
            step_scores = pruned_classifier_scores(classifier_term, state, step_scores, token_ids, finishes,
                                                   exhaustive=not prune, stats=pruning_stats)

        cont = top_continuations(state, step_scores, token_ids, keep)
        finishing = stop[cont.tokens] | last_step
        rows, tokens, running = next_beams(state, cont, finishing)
        host = StepOnHost.fetch(state, cont, finishing, stop, eos, running)  # the loop's one device-to-host copy
        record_finished(pools, state, host, length_norm)
        if last_step:
            break
        done = search_done(pools, state, host, length_norm)
        if all(done):
            break
        slots = [slot for slot, d in enumerate(done) if not d]
        if len(slots) < len(done):  # drop prompts whose result can no longer change
            kept = state.slot_rows(slots)
            rows, tokens, running = rows[kept], tokens[kept], running[kept]
        state = state.keep_rows(rows, slots).extend(tokens, running)
        constraints = [c.keep_rows(rows) for c in constraints]
        session.select(rows)
        session.advance(tokens)

    blocked = [i for i, pool in enumerate(pools) if not pool.hypotheses]
    if blocked:
        warnings.warn(f"ALICE finished no hypothesis for {len(blocked)} of {len(prompts)} prompts (every candidate "
                      "was banned or scored -inf); their statements are empty, with finish reason 'blocked'. Check "
                      "the prompt ban, extra scorers and the λ weights.", RuntimeWarning, stacklevel=2)
    return [pool.best(config.num_return) or [Hypothesis((), float("-inf"), "blocked")] for pool in pools]


