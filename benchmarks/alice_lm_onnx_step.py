"""ALICE's LM step through ONNX Runtime on the CPU (issue 57, item 2): the embedded SmolLM2-135M exported to ONNX
with its KV cache as inputs and outputs (past / present), in float32 and int8, against toxiforge's torch session
(docs/benchmarks.md, "The LM side on CPU: ONNX Runtime").

The same work as alice_lm_step.py: ``--prompts`` prompts (alice_step_profile.py's toxigen-dev prompts, left-padded
as :class:`~toxiforge.models.transformers_lm.TransformersSession` pads them), each repeated ``--beams`` times, then
``--steps`` beam steps (a reorder within each prompt's rows, then one token per row). Every runtime takes the same
steps from the same prompts, taking turns ``--repeats`` times; prints each one's median step (wall and process
CPU) and, against torch's log-probs at the same steps, the max |difference| over the whole vocabulary, how much of
torch's top 100 (ALICE's candidates per beam) it shares and how often its top token is torch's.

The export: ``torch.onnx.export`` (TorchScript exporter, opset 17) of the causal LM with eager attention, fed a
transformers ``DynamicCache`` rebuilt from the past tensors, returning the last position's log-probs and every
layer's keys and values; prefill and steps are calls of that one graph (an empty past for the prefill). int8 is
ONNX Runtime's ``quantize_dynamic`` as ``--classifier-runtime onnx-int8`` makes it (int8 weights per output
channel, 7 bits), once with every MatMul and once leaving the output head (``lm_head``) in float32. The exports
are cached in ``--work``. One thread for torch and ONNX Runtime unless ``--threads``.

    PYTHONPATH=src python benchmarks/alice_lm_onnx_step.py --work /tmp/lm-onnx
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import _common

RUNTIMES = ("torch", "onnx", "onnx-int8", "onnx-int8-head-fp32")
HEAD = "/m/lm_head/MatMul"  # the output projection's node in the export (what -head-fp32 leaves unquantized)


def export(model: Any, path: Path) -> None:
    """``model`` (a causal LM with eager attention) as one ONNX graph of a step with past keys and values."""
    import torch
    from transformers import DynamicCache

    layers = model.config.num_hidden_layers

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.m = model

        def forward(self, input_ids, attention_mask, position_ids, *past):  # type: ignore[no-untyped-def]
            cache = DynamicCache()
            for i in range(layers):
                cache.update(past[2 * i], past[2 * i + 1], i)
            out = self.m(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True, logits_to_keep=1)
            present = [t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)]
            return (torch.log_softmax(out.logits[:, -1, :].float(), -1), *present)

    heads, dim = model.config.num_key_value_heads, model.config.hidden_size // model.config.num_attention_heads
    past_names, present_names = names(layers, "past"), names(layers, "present")
    axes = {"input_ids": {0: "b", 1: "s"}, "attention_mask": {0: "b", 1: "t"}, "position_ids": {0: "b", 1: "s"},
            "logprobs": {0: "b"}, **{n: {0: "b", 2: "p"} for n in past_names},
            **{n: {0: "b", 2: "t"} for n in present_names}}
    example = (torch.ones(2, 1, dtype=torch.long), torch.ones(2, 4, dtype=torch.long),
               torch.full((2, 1), 3, dtype=torch.long), *[torch.zeros(2, heads, 3, dim) for _ in past_names])
    with torch.no_grad():
        torch.onnx.export(Step().eval(), example, str(path), dynamo=False, opset_version=17, dynamic_axes=axes,
                          input_names=["input_ids", "attention_mask", "position_ids", *past_names],
                          output_names=["logprobs", *present_names])


def names(layers: int, kind: str) -> list[str]:
    return [f"{kind}_{i}_{t}" for i in range(layers) for t in ("k", "v")]


class OrtRows:
    """The session's work through an ONNX Runtime graph: left-padded prompts, past keys and values as arrays."""

    def __init__(self, session: Any, encoded: list[list[int]], pad: int, layers: int, heads: int, dim: int):
        import numpy as np

        self.session, self.np = session, np
        self.past_names = names(layers, "past")
        width = max(len(ids) for ids in encoded)
        ids = np.full((len(encoded), width), pad, dtype=np.int64)
        self.attention = np.zeros((len(encoded), width), dtype=np.int64)
        for row, seq in enumerate(encoded):
            ids[row, width - len(seq):] = seq
            self.attention[row, width - len(seq):] = 1
        positions = np.clip(self.attention.cumsum(-1) - 1, 0, None)
        self.next_position = positions[:, -1] + 1
        empty = np.zeros((len(encoded), heads, 0, dim), dtype=np.float32)
        self.past = [empty] * len(self.past_names)
        self.logprobs = self._run(ids, positions)

    def _run(self, ids: Any, positions: Any) -> Any:
        out = self.session.run(None, {"input_ids": ids, "attention_mask": self.attention, "position_ids": positions,
                                      **dict(zip(self.past_names, self.past))})
        self.past = out[1:]
        return out[0]

    def select(self, index: Any) -> None:
        self.attention, self.next_position = self.attention[index], self.next_position[index]
        self.past = [p[index] for p in self.past]
        self.logprobs = self.logprobs[index]

    def advance(self, tokens: Any) -> None:
        rows = self.attention.shape[0]
        self.attention = self.np.concatenate([self.attention, self.np.ones((rows, 1), self.np.int64)], 1)
        positions = self.next_position.reshape(-1, 1)
        self.next_position = self.next_position + 1
        self.logprobs = self._run(tokens.reshape(-1, 1).astype(self.np.int64), positions)


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--beams", type=int, default=10)
    parser.add_argument("--steps", type=int, default=10)
    _common.add_repeats(parser, 3)
    _common.add_work(parser, "/tmp/toxiforge-lm-onnx")
    _common.add_threads(parser, 1)
    args = parser.parse_args()
    import copy
    import os

    import numpy as np
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from toxiforge.models import load_language_model

    _common.set_torch_threads(args.threads)
    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    lm = load_language_model(dtype="float32")
    config = lm.model.config
    files = {"onnx": work / "step.onnx", "onnx-int8": work / "step.int8.onnx",
             "onnx-int8-head-fp32": work / "step.int8-head-fp32.onnx"}
    if not files["onnx"].is_file():
        eager = copy.deepcopy(lm.model)
        eager.set_attn_implementation("eager")  # the sdpa path does not trace; the scores agree (printed below)
        started = time.perf_counter()
        export(eager, files["onnx"])
        print(f"exported in {time.perf_counter() - started:.0f} s")
    for runtime, exclude in (("onnx-int8", []), ("onnx-int8-head-fp32", [HEAD])):
        if not files[runtime].is_file():
            quantize_dynamic(str(files["onnx"]), str(files[runtime]), weight_type=QuantType.QInt8, per_channel=True,
                             reduce_range=True, nodes_to_exclude=exclude)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = args.threads, 1
    sessions = {name: ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
                for name, path in files.items()}

    prompts = _common.demonstration_prompts(args.prompts)[0]
    encoded = [lm.encode_default(p) for p in prompts]
    rows = args.prompts * args.beams
    first = torch.arange(args.prompts).repeat_interleave(args.beams)
    beam_step = torch.arange(rows).view(args.prompts, args.beams).flip(-1).reshape(-1)  # rows stay with their prompt
    dims = (config.num_hidden_layers, config.num_key_value_heads, config.hidden_size // config.num_attention_heads)

    def run(runtime: str) -> tuple[list[float], list[float], list[torch.Tensor]]:
        if runtime == "torch":
            rows_ = lm.start(prompts)
            read = rows_.logprobs
            to_index, to_tokens = (lambda t: t), (lambda t: t)
        else:
            rows_ = OrtRows(sessions[runtime], encoded, lm.tokenizer.pad_token_id, *dims)
            read = lambda: torch.from_numpy(rows_.logprobs)  # noqa: E731
            to_index, to_tokens = (lambda t: t.numpy()), (lambda t: t.numpy())
        rows_.select(to_index(first))
        walls, cpus, seen = [], [], [read()]
        for step in range(args.steps):
            wall, cpu = time.perf_counter(), time.process_time()
            rows_.select(to_index(beam_step))
            rows_.advance(to_tokens(torch.full((rows,), 1000 + step)))
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
            seen.append(read())
        return walls, cpus, seen

    walls: dict[str, list[float]] = {r: [] for r in RUNTIMES}
    cpus: dict[str, list[float]] = {r: [] for r in RUNTIMES}
    logprobs: dict[str, list[torch.Tensor]] = {}
    for _ in range(args.repeats):
        for runtime in RUNTIMES:
            w, c, logprobs[runtime] = run(runtime)
            walls[runtime] += w
            cpus[runtime] += c
    print(f"{rows} rows ({args.prompts} prompts x {args.beams} beams, prompts {min(map(len, encoded))}-"
          f"{max(map(len, encoded))} tokens), {args.steps} steps x {args.repeats} turns, {args.threads} thread(s), "
          f"load average at the end {', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(_common.table_head(["runtime", "median step s (wall)", "median step s (CPU)", "vs torch (CPU)",
                              "max abs Δ log-prob", "top-100 shared", "top token = torch's"], "lrrrrrr"))
    reference = logprobs["torch"]
    base = statistics.median(cpus["torch"])
    for runtime in RUNTIMES:
        pairs = list(zip(logprobs[runtime], reference))
        gap = max((a - b).abs().max().item() for a, b in pairs)
        shared = np.mean([len(set(a.topk(100).indices[r].tolist()) & set(b.topk(100).indices[r].tolist())) / 100
                          for a, b in pairs for r in range(0, rows, args.beams)])
        same = np.mean([(a.argmax(-1) == b.argmax(-1)).float().mean().item() for a, b in pairs])
        cpu = statistics.median(cpus[runtime])
        print(_common.table_row(runtime, f"{statistics.median(walls[runtime]):.3f}", f"{cpu:.3f}",
                                f"{base / cpu:.2f}x", f"{gap:.2g}", f"{shared:.1%}", f"{same:.1%}"))


if __name__ == "__main__":
    main()
