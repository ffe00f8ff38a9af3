"""How a transformers classifier's forward pass runs (``--classifier-runtime``): the scores of
:class:`~toxiforge.classifiers.hf.HFClassifier` come from one of these, the tokenization and batching stay the same.

- ``torch`` (the default): the model as loaded, float32 unless ``--dtype`` says otherwise; any device.
- ``torch-int8``: PyTorch's dynamic int8 quantization of every ``nn.Linear`` (weights int8, activations quantized
  per batch on the fly); CPU only. Scores move (about 5e-3 in a log-probability for the MiniLM), so a run with it
  says so in its manifest and a resumed run must use the same runtime.
- ``onnx``: the model exported once to ONNX (``torch.onnx.export``'s TorchScript exporter: the dynamo one needs
  onnxscript) and run by ONNX Runtime on the CPU; scores equal torch's up to float noise.
- ``onnx-int8``: that export quantized by ONNX Runtime's ``quantize_dynamic``: int8 weights per output channel in
  7 bits (``per_channel``, ``reduce_range``), ONNX Runtime's advice for x86 CPUs without VNNI, where its u8s8 kernels
  can saturate on full 8-bit weights. Measured on a C_0 MiniLM and HateCheck's cases on an AVX2-only EPYC: per-tensor
  8-bit weights changed 7.1% of the decisions (max |ΔP| 0.093), these 3.2% (0.044), at the same speed; one file for
  every CPU, so a shared cache scores alike everywhere.

Hugging Face's way to this is optimum-onnx's ``ORTModelForSequenceClassification``; optimum-onnx 0.1.0 (the newest)
requires transformers < 4.58 and toxiforge runs on transformers 5, so the export here calls torch and ONNX Runtime
directly. An export is cached in ``<cache_dir>/onnx/<key>/`` where the key is a SHA-256 of what decides the scores:
the model's class, its config and every weight's bytes (a retrained classifier gets a new export, whatever its folder
is called), the input names, the opset and the torch version. Measured on the CPU: ``docs/benchmarks.md``
("The classifier side on CPU").
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from toxiforge.errors import InputError

RUNTIMES: tuple[str, ...] = ("torch", "torch-int8", "onnx", "onnx-int8")
DEFAULT_RUNTIME = "torch"
OPSET = 17
ONNX_INSTALL = "pip install 'toxiforge[onnx]' (onnx and onnxruntime)"

Forward = Callable[[Mapping[str, torch.Tensor]], torch.Tensor]  # the tokenizer's batch -> float32 logits


def check_runtime(runtime: str, device: torch.device | str | None = None, *, installed: bool = False) -> str:
    """``runtime`` if it is one of :data:`RUNTIMES` and runs on ``device`` (and, with ``installed``, its packages are
    installed); else an InputError saying what would."""
    if runtime not in RUNTIMES:
        from toxiforge._lazy import did_you_mean

        raise InputError(f"unknown classifier runtime {runtime!r}",
                         hint=f"{did_you_mean(runtime, RUNTIMES)} (runtimes: {', '.join(RUNTIMES)})")
    if runtime != "torch" and device is not None and torch.device(device).type != "cpu":
        raise InputError(f"classifier runtime {runtime!r} runs on the CPU only, not on {device}",
                         hint="drop --classifier-runtime on a GPU (torch is the default), or pass --device cpu")
    if installed and runtime.startswith("onnx"):
        _import_ort()
    return runtime


def make_forward(model: Any, runtime: str, input_names: Sequence[str], *, cache: Path | None = None) -> Forward:
    """The forward pass of ``model`` (a transformers sequence classifier in eval mode) under ``runtime``.
    ``input_names``: what the tokenizer returns (``input_ids``, ``attention_mask``, maybe ``token_type_ids``)."""
    check_runtime(runtime, next(model.parameters()).device)
    if runtime == "torch":
        return lambda enc: model(**enc).logits.float()
    if runtime == "torch-int8":
        import warnings

        with warnings.catch_warnings():  # torch.ao.quantization's notice that torchao will replace it
            warnings.simplefilter("ignore")
            quantized = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        return lambda enc: quantized(**enc).logits.float()
    session = _onnx_session(model, list(input_names), int8=runtime == "onnx-int8", cache=cache)
    wanted = [i.name for i in session.get_inputs()]

    def forward(enc: Mapping[str, torch.Tensor]) -> torch.Tensor:
        ids = enc["input_ids"]  # a batch of only empty texts comes without token_type_ids: all segment 0
        feed = {name: (enc[name] if name in enc else torch.zeros_like(ids)).cpu().numpy().astype(np.int64)
                for name in wanted}
        return torch.from_numpy(np.ascontiguousarray(session.run(["logits"], feed)[0], dtype=np.float32))

    return forward


def _import_ort() -> Any:
    try:
        import onnx  # noqa: F401  (the exporter and the quantizer need it)
        import onnxruntime
    except ImportError as exc:
        raise InputError(f"the ONNX runtimes need onnx and onnxruntime, which are not installed ({exc.name})",
                         hint=f"{ONNX_INSTALL}, or use --classifier-runtime torch or torch-int8") from exc
    return onnxruntime


def export_key(model: Any, input_names: Sequence[str]) -> str:
    """SHA-256 of what decides an export's scores (module docstring)."""
    digest = hashlib.sha256()
    head = {"class": type(model).__name__, "config": model.config.to_dict(), "inputs": list(input_names),
            "opset": OPSET, "torch": torch.__version__}
    digest.update(json.dumps(head, sort_keys=True, default=str).encode())
    for name, tensor in sorted(model.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def _onnx_session(model: Any, input_names: list[str], *, int8: bool, cache: Path | None) -> Any:
    ort = _import_ort()
    from toxiforge._io import cache_dir

    folder = (cache or cache_dir() / "onnx") / export_key(model, input_names)
    exported = folder / "model.onnx"
    if not exported.is_file():
        _export(model, input_names, exported)
    path = exported
    if int8:
        path = folder / "model.int8-per-channel-7bit.onnx"  # another name than the per-tensor 8-bit file of before
        if not path.is_file():
            from onnxruntime.quantization import QuantType, quantize_dynamic

            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            logging.disable(logging.WARNING)  # its advice to pre-process, logged on the root logger at every call
            try:
                quantize_dynamic(str(exported), str(tmp), weight_type=QuantType.QInt8, per_channel=True,
                                 reduce_range=True)
            finally:
                logging.disable(logging.NOTSET)
            os.replace(tmp, path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = torch.get_num_threads()  # as many threads as torch would use (--threads)
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def _export(model: Any, input_names: list[str], path: Path) -> None:
    """Export with dynamic batch and sequence axes, written to a temporary file first (two processes exporting the
    same classifier at once each write their own, and the rename is atomic)."""
    import warnings

    path.parent.mkdir(parents=True, exist_ok=True)
    example = tuple(torch.ones((2, 4), dtype=torch.long) for _ in input_names)
    axes = {name: {0: "batch", 1: "sequence"} for name in input_names} | {"logits": {0: "batch"}}
    tmp = path.with_suffix(f".{os.getpid()}.tmp")

    class Logits(torch.nn.Module):  # the model's output object -> its logits tensor, inputs by name
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
            return self.model(**dict(zip(input_names, inputs))).logits

    with warnings.catch_warnings(), torch.inference_mode(False), torch.no_grad():
        warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation and tracer warnings
        torch.onnx.export(Logits().eval(), example, str(tmp), input_names=input_names, output_names=["logits"],
                          dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    os.replace(tmp, path)
