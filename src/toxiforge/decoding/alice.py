"""ALICE: classifier-in-the-loop constrained beam search (ToxiGen, Hartvigsen et al. 2022, §3.2–3.3, eq. 1).

Each step, every beam's candidates are its ``candidates`` (100) most likely next tokens under the LM at
temperature 0.9, after the token bans. A candidate's step score is

    λL · log p_LM(token | prefix) + λC · log p_CLF(target class | generated text + token)       (eq. 1)

with λL = λC = 0.5; a beam's score is the sum of its step scores. 10 beams, at most 30 new tokens, a hypothesis
ends at a token containing a newline (or EOS), finished hypotheses are ranked by score / length ** 1 (length
penalty 1), and the best finished hypothesis is the statement (with ``num_return`` > 1 the best ``num_return``
finished hypotheses, each a statement of its own). The classifier sees only the continuation,
never the prompt. A toxic prompt steers toward the classifier's benign class (false negatives); a benign prompt
toward the toxic class (false positives).

The loop is plain batched beam search — the same candidate selection, finished-hypothesis bookkeeping and early
stop as transformers' ``_beam_search`` (length_penalty=1, early_stopping=False), so with λC = 0 and no bans it
returns what ``model.generate(num_beams=...)`` returns — plus pluggable scorers (:mod:`.scorers`). All prompts
and beams of a batch go through the LM in one forward pass per step; the KV cache is reordered on the device;
the classifier gets one batched call per step; prompts whose search has ended leave the batch.

Departures from the paper:
* Full-vocabulary log-probabilities: the paper (GPT-3 API) saw only the top 100 tokens and re-sampled the
  allowed ones with top-k; here the top ``candidates`` tokens are ranked exactly, no re-sampling.
* ``no_repeat_ngram_size`` (default 3, 0 disables): small open LMs under plain beam search repeat themselves
  ("asian asian asian" on SmolLM2); the paper's GPT-3 needed no such rule.
* ``classifier_top_n``: optionally score the classifier only on each beam's best N candidates by LM score
  (others are dropped), for speed; default None = all candidates, as the paper.

Departures from upstream code (microsoft/TOXIGEN ``toxigen/alice.py``), all deliberate fixes:
* Upstream saw only 5 candidate tokens per beam (API top-logprobs); here 100 from the full distribution.
* Upstream applied the classifier block twice per step (effective weights 0.25 LM / 0.75 classifier); here
  each term once, with the weights as given.
* Upstream padded classifier inputs with id 0 and no attention mask (id 0 is ``<s>`` for RoBERTa); classifier
  backends here pad with the tokenizer's pad token and pass attention masks.
* Upstream recomputed the whole prefix every step, one prompt at a time, on CPU only; here one batched forward
  step per token with a KV cache, on CPU or CUDA.
* Prompt tokens: as upstream, tokens of the prompt are banned except punctuation and stopwords (scikit-learn's
  English list); upstream gave them score -100, here -inf. Note this also bans the prompt's group-name tokens
  in the exact casing/spacing they appear in the prompt.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import torch

from toxiforge.decoding.scorers import (
    ClassifierScorer,
    NoRepeatNGram,
    PromptTokenBan,
    exempt_from_prompt_ban,
    lm_scores,
)
from toxiforge.decoding.topk import Sample, postprocess
from toxiforge.errors import InputError
from toxiforge.models.base import LanguageModel

Mode = Literal["auto", "false-negatives", "false-positives"]
MASKED = -1.0e9  # as transformers: a finite "impossible" score, so sums never become NaN


@dataclass(frozen=True)
class AliceConfig:
    """ALICE settings; defaults are the paper's (§3.3) except ``no_repeat_ngram_size`` (see module doc)."""

    lambda_lm: float = 0.5
    lambda_clf: float = 0.5
    num_beams: int = 10
    candidates: int = 100
    temperature: float = 0.9
    max_new_tokens: int = 30
    length_penalty: float = 1.0
    classifier_top_n: int | None = None
    no_repeat_ngram_size: int = 3
    ban_prompt_tokens: bool = True
    mode: Mode = "auto"
    num_return: int = 1
    stop_at_newline: bool = True

    def __post_init__(self) -> None:
        checks = [
            (self.num_beams >= 1, f"num_beams={self.num_beams} must be at least 1", "use --beams 10"),
            (self.candidates >= 1, f"candidates={self.candidates} must be at least 1", "use --candidates 100"),
            (self.classifier_top_n is None or self.classifier_top_n >= 1,
             f"classifier_top_n={self.classifier_top_n} must be at least 1", "omit it to score all candidates"),
            (self.temperature > 0, f"temperature={self.temperature} must be > 0", "use 0.9"),
            (self.max_new_tokens >= 1, f"max_new_tokens={self.max_new_tokens} must be at least 1", "use 30"),
            (self.lambda_lm >= 0 and self.lambda_clf >= 0, "λ weights must be non-negative", "use 0.5 and 0.5"),
            (self.no_repeat_ngram_size >= 0, "no_repeat_ngram_size must be >= 0", "use 3, or 0 to disable"),
            (self.mode in ("auto", "false-negatives", "false-positives"), f"unknown mode {self.mode!r}",
             "use auto, false-negatives or false-positives"),
            (1 <= self.num_return <= self.num_beams, f"num_return={self.num_return} must be in 1..num_beams",
             "return at most as many hypotheses as beams"),
        ]
        for ok, message, hint in checks:
            if not ok:
                raise InputError(message, hint=hint)

    def to_dict(self) -> dict[str, Any]:
        return {"method": "ALICE", **asdict(self)}


@dataclass(frozen=True)
class Hypothesis:
    token_ids: tuple[int, ...]
    score: float          # length-normalized beam score
    finish_reason: str    # "newline", "eos" or "length"


def check_lm(lm: LanguageModel, config: AliceConfig) -> None:
    """Refuse an LM ALICE cannot drive: candidates beyond its vocabulary, or no full-vocabulary log-probs."""
    if config.candidates > lm.vocab_size:
        raise InputError(f"candidates={config.candidates} is larger than the LM's vocabulary ({lm.vocab_size})",
                         hint=f"use --candidates {min(100, lm.vocab_size)} or fewer")
    probe = lm.start(["-"]).logprobs()
    if probe.dim() != 2 or probe.shape[-1] != lm.vocab_size:
        raise InputError(f"LM {lm.name} returned next-token scores of shape {tuple(probe.shape)}, not the full "
                         f"vocabulary ({lm.vocab_size})",
                         hint="ALICE needs full-vocabulary log-probabilities; use a transformers or llama.cpp LM")


def target_classes(labels: Sequence[int], mode: Mode, toxic_index: int, benign_index: int) -> list[int]:
    """Classifier class to maximize per prompt: benign for toxic prompts (false negatives), toxic for benign ones."""
    if mode == "false-negatives":
        return [benign_index] * len(labels)
    if mode == "false-positives":
        return [toxic_index] * len(labels)
    return [benign_index if label == 1 else toxic_index for label in labels]


def alice_search(lm: LanguageModel, prompts: Sequence[str], targets: Sequence[int], config: AliceConfig,
                 classifier=None) -> list[list[Hypothesis]]:
    """Run ALICE on a batch; ``targets[i]`` is the classifier class prompt ``i`` steers toward.

    Returns, per prompt, up to ``num_return`` finished hypotheses, best first. ``classifier`` implements
    ``class_log_probs``; it may be None only when ``lambda_clf == 0``.
    """
    if len(prompts) != len(targets):
        raise InputError(f"{len(prompts)} prompts but {len(targets)} targets", hint="pass one target per prompt")
    if config.lambda_clf > 0 and classifier is None:
        raise InputError("lambda_clf > 0 but no classifier was given", hint="pass a classifier or lambda_clf=0")
    if not prompts:
        return []
    W, B, device = config.num_beams, len(prompts), lm.device
    stop = (lm.newline_mask().to(device).clone() if config.stop_at_newline
            else torch.zeros(lm.vocab_size, dtype=torch.bool, device=device))
    stop[sorted(lm.eos_token_ids)] = True
    eos = torch.zeros_like(stop)
    eos[sorted(lm.eos_token_ids)] = True
    candidates = min(config.candidates, lm.vocab_size)
    keep = min((1 + int(stop.sum())) * W, W * candidates) if W > 1 else min(2, candidates)

    prompt_ids = [lm.encode(p) for p in prompts]
    token_scorers: list = []
    ban = None
    if config.ban_prompt_tokens:
        ban = PromptTokenBan.from_prompts(prompt_ids, _exempt_tokens(lm))
        ban = PromptTokenBan(ban.banned.to(device)).select(torch.arange(B, device=device).repeat_interleave(W))
    if config.no_repeat_ngram_size:
        token_scorers.append(NoRepeatNGram(config.no_repeat_ngram_size))
    clf = ClassifierScorer(classifier.class_log_probs, lm.batch_decode) if config.lambda_clf > 0 else None

    width = max(len(ids) for ids in prompt_ids)
    history = torch.full((B * W, width), -1, dtype=torch.long)   # prompt ids, left-padded with -1 (never a token)
    for b, ids in enumerate(prompt_ids):
        if ids:
            history[b * W:(b + 1) * W, width - len(ids):] = torch.tensor(ids)
    history = history.to(device)
    row_targets = torch.tensor(list(targets), dtype=torch.long).repeat_interleave(W)

    session = lm.start(prompts)
    session.select(torch.arange(B, device=device).repeat_interleave(W))
    running = torch.full((B, W), MASKED, device=device)
    running[:, 0] = 0.0                                    # step 1 expands beam 0 only (its copies are identical)
    generated = torch.zeros((B * W, 0), dtype=torch.long, device=device)
    finished: list[list[Hypothesis]] = [[] for _ in range(B)]
    active = list(range(B))                                # original prompt index of each batch slot

    for step in range(config.max_new_tokens):
        n_active = len(active)
        scores = lm_scores(session.logprobs(), config.temperature)
        if ban is not None:
            scores = ban(history, scores)
        for scorer in token_scorers:
            scores = scorer(torch.cat([history, generated], dim=1), scores)
        cand_lm, cand_ids = torch.topk(scores, candidates, dim=-1)                    # [rows, C], best first
        step_scores = config.lambda_lm * cand_lm
        if clf is not None:
            n = candidates if config.classifier_top_n is None else min(config.classifier_top_n, candidates)
            step_scores, cand_ids = step_scores[:, :n], cand_ids[:, :n]
            live = (running.view(-1) > MASKED / 2).nonzero().view(-1)                  # skip masked step-1 copies
            clf_scores = torch.zeros_like(step_scores)
            clf_scores[live] = clf(generated[live], cand_ids[live], row_targets[live.cpu()]).to(clf_scores)
            step_scores = step_scores + config.lambda_clf * clf_scores
        n_cand = step_scores.shape[1]

        total = (running.view(-1, 1) + step_scores).view(n_active, W * n_cand)
        k = min(keep, W * n_cand)
        top_scores, top_flat = torch.topk(total, k, dim=-1)                           # [B, K]
        top_beam = top_flat // n_cand
        top_token = cand_ids.reshape(n_active, W * n_cand).gather(1, top_flat)
        last_step = step + 1 == config.max_new_tokens
        hits = stop[top_token] | last_step

        _record_finished(finished, active, generated, top_scores, top_beam, top_token, hits, eos, stop, W,
                         (step + 1) ** config.length_penalty)

        run_scores, run_pick = torch.topk(top_scores.masked_fill(hits, MASKED), W, dim=-1)
        if last_step:
            break
        src_rows = (torch.arange(n_active, device=device).view(-1, 1) * W + top_beam.gather(1, run_pick)).view(-1)
        next_tokens = top_token.gather(1, run_pick).view(-1)
        running = run_scores
        generated = torch.cat([generated.index_select(0, src_rows), next_tokens.view(-1, 1)], dim=1)
        session.select(src_rows)

        done = _search_done(finished, active, running, W, (step + 1) ** config.length_penalty)
        if all(done):
            break
        if any(done):  # drop prompts whose result can no longer change
            slots = [i for i, d in enumerate(done) if not d]
            rows = (torch.tensor(slots, device=device).view(-1, 1) * W + torch.arange(W, device=device)).view(-1)
            active = [active[i] for i in slots]
            running = running[slots]
            generated = generated.index_select(0, rows)
            next_tokens = next_tokens.index_select(0, rows)
            session.select(rows)
            history = history.index_select(0, rows)
            row_targets = row_targets.index_select(0, rows.cpu())
            if ban is not None:
                ban = ban.select(rows)
        session.advance(next_tokens)

    return [sorted(h, key=lambda x: -x.score)[:config.num_return] for h in finished]


_EXEMPT_CACHE: weakref.WeakKeyDictionary[Any, torch.Tensor] = weakref.WeakKeyDictionary()


def _exempt_tokens(lm: LanguageModel) -> torch.Tensor:
    """Tokens exempt from the prompt ban, computed once per LM object (it looks at the whole vocabulary)."""
    if lm not in _EXEMPT_CACHE:
        _EXEMPT_CACHE[lm] = exempt_from_prompt_ban(lm.token_texts())
    return _EXEMPT_CACHE[lm]


def _record_finished(finished, active, generated, top_scores, top_beam, top_token, hits, eos, stop, W,
                     length_norm) -> None:
    """Add the hypotheses among each prompt's first W candidates that end here (as transformers does).

    Device tensors are copied to the host once per call (``tolist``), not element by element: on CUDA every
    ``int(t[i])`` is a synchronizing copy."""
    hit_slots = hits[:, :W].nonzero().tolist()
    if not hit_slots:
        return
    first = top_token[:, :W]
    scores = (top_scores[:, :W] / length_norm).tolist()
    tokens, beams = first.tolist(), top_beam[:, :W].tolist()
    is_eos, is_stop = eos[first].tolist(), stop[first].tolist()
    sequences = generated.tolist()
    for slot, j in hit_slots:
        if scores[slot][j] * length_norm <= MASKED / 2:  # a masked candidate (banned, or a step-1 copy)
            continue
        prompt = active[slot]
        token = tokens[slot][j]
        ids = sequences[slot * W + beams[slot][j]]
        reason = "eos" if is_eos[slot][j] else "newline" if is_stop[slot][j] else "length"
        hyp = Hypothesis(tuple(ids if reason == "eos" else ids + [token]), scores[slot][j], reason)
        pool = finished[prompt]
        if len(pool) < W:
            pool.append(hyp)
        else:
            worst = min(range(W), key=lambda i: pool[i].score)
            if hyp.score > pool[worst].score:
                pool[worst] = hyp


def _search_done(finished, active, running, W, length_norm) -> list[bool]:
    """transformers' early-stop heuristic: W finished and the best running beam cannot beat the worst."""
    best_running = (running[:, 0] / length_norm).tolist()
    done = []
    for slot, prompt in enumerate(active):
        pool = finished[prompt]
        done.append(len(pool) == W and best_running[slot] <= min(h.score for h in pool))
    return done


class AliceDecoder:
    """ALICE as a pipeline decoder (see :class:`toxiforge.decoding.Decoder`), steering toward the class chosen by
    ``config.mode`` and the prompt label.

    ``decode`` returns, per prompt, the best finished hypothesis as one :class:`Sample` when
    ``config.num_return == 1``, else a list of up to ``num_return`` hypotheses, best first, that post-process to
    distinct statements: of the (up to ``num_beams``) finished hypotheses, one whose statement equals a better
    one's is skipped (different token sequences can decode to the same text, e.g. ``"a"+"b"`` and ``"ab"``, or a
    statement with and without its newline). Fewer than ``num_return`` come back only when the search did not
    finish that many distinct ones. The best hypothesis is always first, so rank 0 does not depend on
    ``num_return``. Each sample's ``score`` is the hypothesis' length-normalized beam score. Beam search is
    deterministic, so the per-row sampling seeds the pipeline passes are not used."""

    method = "ALICE"

    def __init__(self, classifier, config: AliceConfig = AliceConfig()):
        if classifier is None and config.lambda_clf > 0:
            raise InputError("ALICE needs a classifier", hint="pass --classifier NAME (e.g. profanity-check)")
        if classifier is not None:
            for what, index in (("toxic", classifier.toxic_index), ("benign", classifier.benign_index)):
                if not 0 <= index < classifier.num_classes:
                    raise InputError(f"classifier {classifier.name} has {classifier.num_classes} classes; its {what} "
                                     f"class index {index} is out of range",
                                     hint="set the classifier's toxic_index/benign_index to existing classes")
        self.classifier = classifier
        self.config = config
        self._checked: set[int] = set()

    @property
    def num_return(self) -> int:
        """At most this many outputs per prompt come back from :meth:`decode`."""
        return self.config.num_return

    def settings(self) -> dict[str, Any]:
        return {**self.config.to_dict(), "classifier": getattr(self.classifier, "name", None)}

    def decode(self, lm: LanguageModel, prompts: Sequence[str], seeds: Sequence[int],
               labels: Sequence[int]) -> list[Sample] | list[list[Sample]]:
        if id(lm) not in self._checked:
            check_lm(lm, self.config)
            self._checked.add(id(lm))
        clf = self.classifier
        targets = target_classes(labels, self.config.mode, clf.toxic_index if clf else 1,
                                 clf.benign_index if clf else 0)
        n = self.config.num_return
        # the search does not depend on num_return; ask for every finished hypothesis, keep n distinct statements
        pool = self.config if n == 1 else replace(self.config, num_return=self.config.num_beams)
        results = alice_search(lm, prompts, targets, pool, classifier=clf)
        outputs: list = []
        for hyps in results:
            hyps = hyps or [Hypothesis((), float("-inf"), "length")]
            samples, seen = [], set()
            for h in hyps:
                sample = Sample(lm.decode(h.token_ids), h.token_ids, h.finish_reason, h.score)
                statement = postprocess(sample.raw_output).text
                if statement not in seen:
                    seen.add(statement)
                    samples.append(sample)
                if len(samples) == n:
                    break
            outputs.append(samples[0] if n == 1 else samples)
        return outputs
