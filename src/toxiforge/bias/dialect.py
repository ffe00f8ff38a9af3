"""AAE dialect estimation with Blodgett et al.'s (2016) demographic dialect model, as Zhou et al. (2021, §2.2, §5).

The model (``slanglab/twitteraae``, fetched by ``toxiforge bias dialect fetch``, :data:`TWITTERAAE`) is a count
table: for each of its 191,874 vocabulary words (pinned commit), its expected count in each of four
demographically aligned "topics" (``model_count_table.txt``, tab-separated, one row per word in the order of
``model_vocab.txt``, whose lines are ``count<TAB>word``). Columns, in the order upstream's README gives:
African-American, Hispanic, Asian, White. The Asian topic is not a validated dialect (upstream: only AA and White
are); Zhou et al. call it "other", and so does toxiforge: :data:`DIALECTS` = ``("aae", "hispanic", "other", "white")``.

Prediction is toxiforge's code, the same inference as upstream's ``code/predict.py``: word probabilities
``(N_wk + 1) / N_k``; each in-vocabulary token's likelihood row normalised; collapsed variational Bayes (CVB0)
with ``alpha = 1`` over ``numpasses = 5`` (one initialisation + 4 sequential sweeps over the tokens, each token's
responsibility recomputed from the document's others); the result is the document's normalised topic mass. A text
gets no prediction (NaN row) when it has fewer than 1 in-vocabulary token or fewer than 20% of its tokens are in
the vocabulary (upstream returns None). Vectorised: all documents advance through token position i together
(numpy, padded, documents bucketed by length), which performs exactly the per-document sequential updates; tested
and benchmarked against :func:`predict_dialects_loop`, the plain per-document loop kept as the slow reference.

Departures: upstream tokenises with ``twokenize.py`` (Python 2, ARK TweetNLP's rules); toxiforge's
:func:`tokenize` is a small regex with the same main rules (URLs, @mentions, #hashtags, words with inner
apostrophes, runs of punctuation/emoji such as ``...``, ``!!`` and ``:)`` as single tokens), not a port, so rare
tokens may split differently. Emoji detection (upstream's ``emoji.py``) is not reproduced.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from toxiforge.bias.fetch import TWITTERAAE, find_resource_file
from toxiforge.errors import InputError

DIALECTS: tuple[str, ...] = ("aae", "hispanic", "other", "white")
VOCAB_FILE = "model_vocab.txt"
COUNTS_FILE = "model_count_table.txt"

_TOKEN = re.compile(r"(?:https?://|www\.)\S+|[@#]\w+|\w+(?:'\w+)*|[^\w\s]+", re.IGNORECASE)


def tokenize(text: str) -> list[str]:
    """Tweet-style tokens (module docstring), lowercased; curly apostrophes become straight ones."""
    return _TOKEN.findall(text.replace("\u2019", "'").lower())


@dataclass(frozen=True)
class DialectModel:
    """A loaded dialect model: vocabulary -> row, and each row's normalised likelihood over the 4 dialects."""

    vocab: dict[str, int] = field(repr=False)
    likelihood: np.ndarray = field(repr=False)  # [V, 4], rows sum to 1
    source: str = ""

    def __post_init__(self) -> None:
        if self.likelihood.ndim != 2 or self.likelihood.shape[1] != len(DIALECTS):
            raise InputError(f"dialect count table has shape {self.likelihood.shape}, expected (V, 4)",
                             path=self.source, hint="use model_count_table.txt from slanglab/twitteraae")
        if self.vocab and max(self.vocab.values()) >= self.likelihood.shape[0]:
            raise InputError(f"vocabulary rows beyond the {self.likelihood.shape[0]} count rows",
                             path=self.source, hint="use model_vocab.txt and model_count_table.txt of one commit")


def load_dialect_model(folder: str | Path | None = None) -> DialectModel:
    """Read ``model_vocab.txt`` and ``model_count_table.txt`` from ``folder`` (default: the cache that
    ``toxiforge bias dialect fetch`` fills). InputError with the fix when they are missing or malformed."""
    vocab_path = find_resource_file(TWITTERAAE, VOCAB_FILE, folder)
    counts_path = find_resource_file(TWITTERAAE, COUNTS_FILE, folder)
    where = folder if folder is not None else TWITTERAAE.default_dir()
    if vocab_path is None or counts_path is None:
        raise InputError(f"no dialect model ({VOCAB_FILE}, {COUNTS_FILE}) there", path=where,
                         hint="run `toxiforge bias dialect fetch` (needs internet), or pass --dialect-model DIR "
                              "with the two files of slanglab/twitteraae")
    try:
        words = [line.split("\t")[-1].strip() for line in
                 vocab_path.read_text(encoding="utf-8").splitlines() if line.strip()]
        counts = np.loadtxt(counts_path, dtype=np.float64, ndmin=2)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"cannot read the dialect model ({exc})", path=where,
                         hint="fetch it again with `toxiforge bias dialect fetch`") from exc
    if counts.ndim != 2 or counts.shape[1] != len(DIALECTS) or (counts < 0).any():
        raise InputError(f"dialect count table has shape {counts.shape} (or negative counts), expected (V, 4)",
                         path=counts_path, hint="use model_count_table.txt from slanglab/twitteraae")
    if len(words) != counts.shape[0]:
        raise InputError(f"{len(words)} vocabulary words but {counts.shape[0]} count rows", path=where,
                         hint="use model_vocab.txt and model_count_table.txt of one commit")
    wordprobs = (counts + 1.0) / counts.sum(axis=0)  # upstream: (N_wk + 1) / N_k
    likelihood = wordprobs / wordprobs.sum(axis=1, keepdims=True)
    vocab = {w: i for i, w in enumerate(words)}  # as upstream: a repeated word keeps its last row
    return DialectModel(vocab=vocab, likelihood=likelihood, source=str(where))


def _cvb0(lik: np.ndarray, mask: np.ndarray, alpha: float, numpasses: int) -> np.ndarray:
    """CVB0 for a batch of padded documents: ``lik`` [B, L, K] (zero rows where ``mask`` [B, L] is False).
    Position i of every document is updated together, which is each document's sequential sweep."""
    qs = lik.copy()
    q_k = qs.sum(axis=1)
    for _ in range(1, numpasses):
        for i in range(lik.shape[1]):
            active = mask[:, i]
            q_k -= qs[:, i]
            new = lik[:, i] * (q_k + alpha)
            total = new.sum(axis=1, keepdims=True)
            new = np.divide(new, total, out=np.zeros_like(new), where=active[:, None])
            qs[:, i] = new
            q_k += new
    return q_k / q_k.sum(axis=1, keepdims=True)


def predict_dialects(texts: Iterable[str] | Sequence[Sequence[str]], model: DialectModel, *, alpha: float = 1.0,
                     numpasses: int = 5, thresh1: int = 1, thresh2: float = 0.2,
                     batch_size: int = 4096) -> np.ndarray:
    """``[n, 4]`` float64: per text the proportions of :data:`DIALECTS` (AAE, Hispanic, other, White-aligned),
    a NaN row when the text has too few in-vocabulary tokens. Items may be strings (tokenised with
    :func:`tokenize`) or token lists. Settings as upstream's ``predict`` defaults."""
    vocab = model.vocab
    ids: list[list[int]] = []
    for item in texts:
        tokens = tokenize(item) if isinstance(item, str) else [t.lower() for t in item]
        known = [vocab[t] for t in tokens if t in vocab]
        ids.append(known if len(known) >= thresh1 and tokens and len(known) / len(tokens) >= thresh2 else [])
    out = np.full((len(ids), len(DIALECTS)), np.nan)
    lengths = np.array([len(x) for x in ids], dtype=np.int64)
    order = [i for i in np.argsort(lengths, kind="stable") if lengths[i] > 0]
    for start in range(0, len(order), batch_size):
        rows = order[start:start + batch_size]
        width = int(lengths[rows[-1]])
        index = np.zeros((len(rows), width), dtype=np.int64)
        mask = np.zeros((len(rows), width), dtype=bool)
        for r, row in enumerate(rows):
            index[r, :lengths[row]] = ids[row]
            mask[r, :lengths[row]] = True
        lik = model.likelihood[index] * mask[..., None]
        out[rows] = _cvb0(lik, mask, alpha, numpasses)
    return out


def predict_dialects_loop(token_lists: Iterable[Sequence[str]], model: DialectModel, *, alpha: float = 1.0,
                          numpasses: int = 5, thresh1: int = 1, thresh2: float = 0.2) -> np.ndarray:
    """:func:`predict_dialects` on token lists, one document and one token at a time: a plain transcription of
    upstream's per-document loop, the slow reference the vectorised code is tested and benchmarked against."""
    out = []
    for doc in token_lists:
        tokens = [t.lower() for t in doc]
        ids = [model.vocab[t] for t in tokens if t in model.vocab]
        if len(ids) < thresh1 or not tokens or len(ids) / len(tokens) < thresh2:
            out.append(np.full(len(DIALECTS), np.nan))
            continue
        lik = model.likelihood[ids]
        qs = lik.copy()
        q_k = qs.sum(axis=0)
        for _ in range(1, numpasses):
            for i in range(len(ids)):
                q_k -= qs[i]
                qs[i] = lik[i] * (q_k + alpha)
                qs[i] /= qs[i].sum()
                q_k += qs[i]
        out.append(q_k / q_k.sum())
    return np.array(out).reshape(-1, len(DIALECTS))


def aae_probability(texts: Iterable[str], model: DialectModel) -> np.ndarray:
    """p(AAE) per text (NaN where the model gives no prediction): column 0 of :func:`predict_dialects`."""
    return predict_dialects(texts, model)[:, 0]
