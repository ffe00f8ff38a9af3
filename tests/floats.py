"""One rule for comparing float scores that a change of batching may move by float noise.

Batching prompts together (or texts in another composition) changes the shapes of a model's matmuls, and a CPU's
kernels may then sum in another order: a float32 result moves in its last bits while every token, text and label stays
the same. How far it may move grows with the depth of the computation: each float32 rounding is at most one epsilon
(2**-23, 1.19e-7) relative, and a score is a chain of them (a forward pass per generated token, each through the
model's layers, summed over the tokens). So a test that compares a batched computation with an unbatched one (or one
batch composition with another) compares ids, texts and labels exactly and floats within :func:`noise_tolerance`;
exact equality stays only where the same shapes run the same kernels (pruned and unpruned searches of the same prompts,
a resumed run whose batches are the same as the uninterrupted run's).

``SLACK`` roundings per level leave room for a reduction that rounds several times per level (a dot product of the
tiny models' 32-64 terms, accumulated in a different blocking): the noise seen in practice is below one epsilon
relative (1.9e-7 on a score of -2.73 on an AMD EPYC), the tolerance a few hundred times that, and a score off by
1e-3 (a wrong term) is far outside it (``tests/test_floats.py``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

FLOAT32_EPS = float(np.finfo(np.float32).eps)
SLACK = 8


def noise_tolerance(depth: int) -> float:
    """Relative (and absolute, for values near 0) tolerance for float32 results ``depth`` roundings deep."""
    if depth < 1:
        raise ValueError(f"depth must be at least 1, got {depth}")
    return SLACK * depth * FLOAT32_EPS


def alice_depth(max_new_tokens: int, num_layers: int = 2) -> int:
    """The depth of an ALICE hypothesis score: one forward pass per generated token (embedding, ``num_layers``
    layers, the head and log-softmax), summed over up to ``max_new_tokens`` tokens (the tiny test Llama has 2
    layers)."""
    return max_new_tokens * (num_layers + 3)


def close(a: float, b: float, depth: int) -> bool:
    tol = noise_tolerance(depth)
    return math.isclose(a, b, rel_tol=tol, abs_tol=tol)


def assert_close(a: Iterable[float], b: Iterable[float], depth: int, what: str = "scores") -> None:
    """``a`` and ``b`` (flat sequences) equal within the float noise of ``depth`` roundings, with the first pair
    outside it in the message."""
    a, b = list(a), list(b)
    assert len(a) == len(b), f"{what}: {len(a)} values != {len(b)}"
    tol = noise_tolerance(depth)
    for i, (x, y) in enumerate(zip(a, b)):
        # inf == inf (a blocked hypothesis' -inf) is equal; isclose says so too
        assert close(x, y, depth), f"{what}[{i}]: {x!r} != {y!r} ({abs(x - y):.3g} apart; float noise <= {tol:.3g})"


def assert_same_hypotheses(a: Sequence[Sequence], b: Sequence[Sequence], depth: int | None = None) -> None:
    """Per prompt, the same hypotheses (token ids and finish reasons, exactly) with the same scores: bit for bit when
    ``depth`` is None (the same shapes ran the same kernels), else within :func:`noise_tolerance` (``depth``)."""
    assert [[(h.token_ids, h.finish_reason) for h in hyps] for hyps in a] == \
        [[(h.token_ids, h.finish_reason) for h in hyps] for hyps in b]
    scores_a = [h.score for hyps in a for h in hyps]
    scores_b = [h.score for hyps in b for h in hyps]
    if depth is None:
        assert scores_a == scores_b
    else:
        assert_close(scores_a, scores_b, depth, "hypothesis scores")
