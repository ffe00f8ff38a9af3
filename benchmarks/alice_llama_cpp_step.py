"""ALICE's LM step through llama.cpp in-process (llama-cpp-python's low-level API) on the embedded Q4_1 GGUF, and
how far its next-token log-probs are from the torch fp32 model's (docs/benchmarks.md, "The CPU path", issue 47).

The same work as alice_lm_step.py: ``--prompts`` prompts (alice_step_profile.py's toxigen-dev prompts, tokenized by
toxiforge's tokenizer so both models read the same ids), each decoded once as its own sequence and copied to
``--beams`` sequences (``llama_memory_seq_cp``: the copies share the prompt's KV cells), then ``--steps`` beam steps:
a beam reorder within each prompt's rows, then one ``llama_batch`` of one token per row with logits requested for
every row, the full-vocabulary logits read as one array and log-softmaxed in torch. The reorder goes through spare
sequence ids (copy each new row from its source into a free id, then free the prompt's old ids; llama.cpp allows 256
sequences, so the rows plus one prompt's beams must fit). Prints the median wall and process-CPU time of a step and
of its reorder. One thread (``n_threads`` = ``n_threads_batch`` = 1, one torch thread) unless ``--threads``.

Then (unless ``--no-compare``) the log-probs on the same contexts as the torch fp32 model (toxiforge's
``load_language_model``, the GGUF dequantized): each prompt and a greedy continuation of ``--compare-steps`` tokens
chosen by the torch model, both models fed the same tokens, one distribution per prompt and position. Prints the
max / median |difference| of the log-probs over the whole vocabulary and over torch's top 100 tokens (ALICE's 100
candidates per beam), the overlap of the two top-100 sets and how often the top token agrees.

    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/alice_llama_cpp_step.py
    PYTHONPATH=src OMP_NUM_THREADS=1 python benchmarks/alice_llama_cpp_step.py --kv f32 --flash off --no-compare
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import time
from typing import TYPE_CHECKING, Any

import numpy as np

import _common

if TYPE_CHECKING:
    import torch

# llama_cpp is imported below parse_args() (--help loads no native library): ``ll`` is the module once main() ran
ll: Any = None
KV_TYPES = {"f16": "GGML_TYPE_F16", "f32": "GGML_TYPE_F32"}   # --kv -> llama_cpp's constant
FLASH = {"on": "LLAMA_FLASH_ATTN_TYPE_ENABLED", "off": "LLAMA_FLASH_ATTN_TYPE_DISABLED"}
_QUIET: Any = None  # the log callback; kept referenced while llama.cpp may call it


def _quiet(level: int, text: bytes, data: Any) -> None:  # llama.cpp's load log would bury the results
    pass


class LlamaRows:
    """Rows of a batch as llama.cpp sequences in one unified KV cache: row i lives in sequence ``self.ids[i]``."""

    def __init__(self, args: argparse.Namespace, n_ctx: int, rows: int):
        from toxiforge.models.embedded import smollm2_gguf

        ll.llama_log_set(_QUIET, ctypes.c_void_p(0))
        ll.llama_backend_init()
        self.model = ll.llama_model_load_from_file(str(args.gguf or smollm2_gguf()).encode(),
                                                   ll.llama_model_default_params())
        params = ll.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = params.n_ubatch = max(rows, 512)
        params.n_seq_max = ll.llama_max_parallel_sequences()
        params.n_threads = params.n_threads_batch = args.threads
        params.kv_unified = True  # one cell store: a sequence copy shares cells instead of copying them
        params.type_k = params.type_v = getattr(ll, KV_TYPES[args.kv])
        params.flash_attn_type = getattr(ll, FLASH[args.flash])
        self.ctx = ll.llama_init_from_model(self.model, params)
        self.memory = ll.llama_get_memory(self.ctx)
        self.vocab = ll.llama_vocab_n_tokens(ll.llama_model_get_vocab(self.model))
        self.batch = ll.llama_batch_init(max(rows, 512), 0, 1)
        self.free = list(range(params.n_seq_max))
        self.ids: list[int] = []
        self.positions: list[int] = []

    def _decode(self, tokens: list[int], positions: list[int], seqs: list[int], outputs: list[bool]) -> None:
        batch = self.batch
        batch.n_tokens = len(tokens)
        for i, (token, pos, seq, out) in enumerate(zip(tokens, positions, seqs, outputs)):
            batch.token[i], batch.pos[i], batch.n_seq_id[i], batch.logits[i] = token, pos, 1, out
            batch.seq_id[i][0] = seq
        if ll.llama_decode(self.ctx, batch) != 0:
            raise RuntimeError("llama_decode failed (KV cache full? raise n_ctx)")

    def _logprobs(self, rows: int) -> torch.Tensor:
        import torch

        logits = np.ctypeslib.as_array(ll.llama_get_logits(self.ctx), shape=(rows, self.vocab))
        return torch.log_softmax(torch.from_numpy(logits), dim=-1)

    def start(self, encoded: list[list[int]], beams: int) -> torch.Tensor:
        """Decode each prompt as its own sequence, copy it to ``beams`` sequences; the rows' log-probs."""
        import torch

        out = []
        for ids in encoded:
            first = self.free.pop(0)
            self._decode(ids, list(range(len(ids))), [first] * len(ids), [False] * (len(ids) - 1) + [True])
            out.append(self._logprobs(1).expand(beams, -1))
            self.ids.append(first)
            for _ in range(beams - 1):
                self.ids.append(self.free.pop(0))
                ll.llama_memory_seq_cp(self.memory, first, self.ids[-1], -1, -1)
            self.positions += [len(ids)] * beams
        return torch.cat(out)

    def select(self, index: list[int], group: int) -> None:
        """Row i takes row ``index[i]``'s sequence; rows move only within their group of ``group`` rows (a prompt's
        beams), so one group's new copies need ``group`` free ids at a time."""
        new_ids = []
        for start in range(0, len(index), group):
            for src in index[start:start + group]:
                new_ids.append(self.free.pop())
                ll.llama_memory_seq_cp(self.memory, self.ids[src], new_ids[-1], -1, -1)
            for old in self.ids[start:start + group]:
                ll.llama_memory_seq_rm(self.memory, old, -1, -1)
                self.free.append(old)
        self.ids = new_ids
        self.positions = [self.positions[src] for src in index]

    def advance(self, tokens: list[int]) -> torch.Tensor:
        self._decode(tokens, self.positions, self.ids, [True] * len(tokens))
        self.positions = [p + 1 for p in self.positions]
        return self._logprobs(len(tokens))

    def close(self) -> None:
        ll.llama_batch_free(self.batch)
        ll.llama_free(self.ctx)
        ll.llama_model_free(self.model)


def time_steps(args: argparse.Namespace, encoded: list[list[int]]) -> None:
    import torch

    rows = args.prompts * args.beams
    n_ctx = sum(len(ids) for ids in encoded) + rows * (args.steps + 1) + 256
    lm = LlamaRows(args, n_ctx, rows)
    logprobs = lm.start(encoded, args.beams)
    beam_step = torch.arange(rows).view(args.prompts, args.beams).flip(-1).reshape(-1)  # rows stay with their prompt
    walls, cpus, reorder_walls, reorder_cpus = [], [], [], []
    for step in range(args.steps):
        wall, cpu = time.perf_counter(), time.process_time()
        lm.select(beam_step.tolist(), args.beams)
        logprobs = logprobs.index_select(0, beam_step)
        reorder_walls.append(time.perf_counter() - wall)
        reorder_cpus.append(time.process_time() - cpu)
        logprobs = lm.advance([1000 + step] * rows)
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    lm.close()
    print(f"llama.cpp {args.gguf or 'embedded Q4_1'}, KV {args.kv}, flash attention {args.flash}, {rows} rows, "
          f"{args.steps} steps, {args.threads} thread(s): median step {statistics.median(walls):.3f} s wall, "
          f"{statistics.median(cpus):.3f} s CPU; all steps {sum(cpus):.1f} s CPU; reorder median "
          f"{1000 * statistics.median(reorder_walls):.1f} ms wall, {1000 * statistics.median(reorder_cpus):.1f} ms CPU")
    assert logprobs.shape == (rows, lm.vocab) and torch.isfinite(logprobs).all()


def compare(args: argparse.Namespace, torch_lm: Any, texts: list[str]) -> None:
    import torch

    encoded = [torch_lm.encode_default(text) for text in texts]
    session = torch_lm.start(texts)
    lm = LlamaRows(args, sum(len(ids) for ids in encoded) + len(texts) * (args.compare_steps + 1) + 256, len(texts))
    ours, theirs = [lm.start(encoded, 1)], [session.logprobs()]
    for _ in range(args.compare_steps):
        tokens = theirs[-1].argmax(-1)
        session.advance(tokens)
        theirs.append(session.logprobs())
        ours.append(lm.advance(tokens.tolist()))
    lm.close()
    a, b = torch.cat(ours), torch.cat(theirs)
    diff = (a - b).abs()
    top_a, top_b = a.topk(100, dim=-1).indices, b.topk(100, dim=-1).indices
    candidates = diff.gather(1, top_b)
    overlap = torch.tensor([len(set(x.tolist()) & set(y.tolist())) for x, y in zip(top_a, top_b)], dtype=torch.float)
    print(f"vs torch fp32 on {a.shape[0]} contexts ({len(texts)} prompts x {args.compare_steps + 1} positions): "
          f"|d log p| whole vocab max {diff.max():.3g} median {diff.median():.3g}; torch's top 100 max "
          f"{candidates.max():.3g} median {candidates.median():.3g}; top-100 overlap median {overlap.median():.0f} "
          f"min {overlap.min():.0f} mean {overlap.mean():.1f}; top token equal {(top_a[:, 0] == top_b[:, 0]).sum()}"
          f"/{a.shape[0]}")


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--beams", type=int, default=10)
    parser.add_argument("--steps", type=int, default=30)
    _common.add_threads(parser, 1, help="llama.cpp threads (n_threads, n_threads_batch) and torch threads")
    parser.add_argument("--kv", choices=sorted(KV_TYPES), default="f16", help="KV cache type (llama.cpp's default f16)")
    parser.add_argument("--flash", choices=sorted(FLASH), default="on", help="flash attention (skips masked cells)")
    parser.add_argument("--gguf", help="another GGUF of the same model (default: the embedded Q4_1 one)")
    parser.add_argument("--compare-steps", type=int, default=30)
    parser.add_argument("--no-compare", action="store_true", help="time the steps only")
    args = parser.parse_args()
    global ll, _QUIET
    import llama_cpp

    from toxiforge.models import load_language_model

    ll, _QUIET = llama_cpp, llama_cpp.llama_log_callback(_quiet)
    _common.set_torch_threads(args.threads)
    texts = _common.demonstration_prompts(args.prompts)[0]
    torch_lm = load_language_model(dtype="float32")
    time_steps(args, [torch_lm.encode_default(text) for text in texts])
    if not args.no_compare:
        compare(args, torch_lm, texts)


if __name__ == "__main__":
    main()
