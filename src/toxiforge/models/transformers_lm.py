"""transformers backend of the :class:`~toxiforge.models.base.LanguageModel` protocol.

Loads a causal LM from a hub id, a local directory, or a ``.gguf`` file (dequantized by transformers; needs the
``gguf`` package). GGUF dequantization takes ~15 s for SmolLM2-135M, so the converted weights are saved once as
safetensors under the user cache dir (``toxiforge.models.cache_dir()``) and later loads read those (< 1 s).

Sessions batch prompts with left padding, explicit position ids and an attention mask, and keep a transformers
``DynamicCache``, passed under the name the model's ``forward`` declares (``cache`` from transformers 5 on; the old
``past_key_values`` warns on every step) whose layers grow in place (``models/_kv_cache.py``: a step writes its
position instead of copying the cache); ``select`` re-indexes the cache on the device (``index_select`` per layer).

``loglikelihood`` tokenizes as lm-evaluation-harness's ``HFLM`` does and runs one forward pass per batch of
distinct inputs: requests whose input tokens are equal (the same prompt with one-token continuations such as
" No" / " Yes") share one row, as the harness's ``logits_cache`` does. Unlike the harness (right padding, logits and
log-softmax at every position) it left-pads and asks the model for the logits of the last positions only
(``logits_to_keep``), the ones that score continuation tokens: the same numbers, less work.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from toxiforge._hf import quiet_transformers, resolve_device, resolve_dtype
from toxiforge._io import atomic_write_text, cache_dir, hash_file
from toxiforge.errors import InputError, ToxiforgeError
from toxiforge.models.base import Loglikelihood


def _gguf_cache_path(gguf: Path) -> Path:
    """The converted copy's folder, keyed by the file's content, so every virtual environment or clone holding the
    same file shares one conversion (keyed by path, each had its own 0.5 GB copy). The SHA-256 (about 0.6 s for the
    embedded 98 MB GGUF) is remembered in ``index.json`` under the file's path, size and modification time, so a
    later lookup reads no weights."""
    root = cache_dir() / "gguf-fp32"
    stat = gguf.stat()
    ident = f"{gguf.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    index_file = root / "index.json"
    try:
        index = json.loads(index_file.read_text())
    except (OSError, ValueError):  # none yet, or unreadable: rebuilt as files are hashed
        index = {}
    if not isinstance(index, dict):
        index = {}
    key = index.get(ident)
    if not isinstance(key, str):
        key = index[ident] = hash_file(hashlib.sha256(), gguf).hexdigest()[:16]
        atomic_write_text(index_file, json.dumps(index, indent=1))
    return root / f"{gguf.stem}-{key}"


def convert_gguf(gguf: Path, *, refresh: bool = False) -> Path:
    """Dequantize ``gguf`` once into fp32 safetensors + tokenizer under the cache dir; return that directory."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target = _gguf_cache_path(gguf)
    if (target / "config.json").exists() and not refresh:
        return target
    quiet_transformers()
    previous = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"  # transformers' GGUF loader uses a plain tqdm bar
    try:
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    finally:
        if previous is None:
            del os.environ["TQDM_DISABLE"]
        else:
            os.environ["TQDM_DISABLE"] = previous
    # save_pretrained refuses a GGUF-quantized model; the weights are already dequantized fp32 tensors.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    tmp = target.with_name(target.name + f".tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    (tmp / "toxiforge-source.json").write_text(json.dumps({"gguf": str(gguf.resolve())}))
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.replace(tmp, target)
    except OSError:  # another process converted it first
        shutil.rmtree(tmp, ignore_errors=True)
    return target


def cache_argument(model: Any) -> str:
    """The name under which ``model.forward`` takes its KV cache: ``cache`` from transformers 5 on, where
    ``past_key_values`` still works but warns (a FutureWarning on every forward step), else ``past_key_values``."""
    import inspect

    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


class TransformersLM:
    """A transformers causal LM behind the toxiforge protocol.

    ``TransformersLM.load("HuggingFaceTB/SmolLM2-135M-Instruct")``, ``.load("/models/llama")`` or
    ``.load("model.Q4_1.gguf")``; or wrap objects you already have: ``TransformersLM(model, tokenizer)``.
    """

    def __init__(self, model, tokenizer, *, name: str | None = None, source: str | None = None):
        if not hasattr(model, "get_output_embeddings") or model.get_output_embeddings() is None:
            raise InputError(f"model {type(model).__name__} has no LM head, so it cannot return next-token logits",
                             hint="load a causal LM (AutoModelForCausalLM)")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name or getattr(model.config, "_name_or_path", "") or type(model).__name__
        self.source = source or self.name
        self.load_seconds: float | None = None  # set by from_pretrained
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        if tokenizer.pad_token_id is None:
            raise InputError(f"tokenizer of {self.name} has neither a pad nor an eos token",
                             hint="set tokenizer.pad_token before wrapping the model")
        self._vocab_size = int(model.get_output_embeddings().weight.shape[0])
        self._newline_mask: torch.Tensor | None = None
        self._token_texts: list[str] | None = None
        eos = model.generation_config.eos_token_id if model.generation_config is not None else None
        eos_ids = set(eos if isinstance(eos, (list, tuple)) else [eos] if eos is not None else [])
        if tokenizer.eos_token_id is not None:
            eos_ids.add(tokenizer.eos_token_id)
        self._eos = frozenset(int(i) for i in eos_ids)
        self.cache_argument = cache_argument(model)

    @classmethod
    def load(cls, source: str | Path, *, dtype: str | torch.dtype | None = "auto",
             device: str | torch.device | None = "auto", gguf_file: str | None = None,
             name: str | None = None) -> TransformersLM:
        """Load from a hub id, a local model directory, or a ``.gguf`` file (``gguf_file`` for a GGUF in a dir)."""
        from transformers import AutoModelForCausalLM, AutoTokenizer

        quiet_transformers()
        dev = resolve_device(device)
        torch_dtype = resolve_dtype(dtype, dev)
        path = Path(str(source)).expanduser()
        if gguf_file is not None:
            path = path / gguf_file
        started = time.perf_counter()
        try:
            if path.suffix == ".gguf":
                if not path.is_file():
                    raise InputError("GGUF file not found", path=path, hint="check the path")
                load_from: str | Path = convert_gguf(path)
            elif path.exists():
                if not (path / "config.json").exists():
                    raise InputError("directory has no config.json, so it is not a transformers model", path=path,
                                     hint="point at a directory written by save_pretrained, or a .gguf file")
                load_from = path
            else:
                load_from = str(source)  # a hub id
            tokenizer = AutoTokenizer.from_pretrained(load_from)
            model = AutoModelForCausalLM.from_pretrained(load_from, dtype=torch_dtype)
        except ToxiforgeError:
            raise
        except OSError as exc:
            raise ToxiforgeError(
                f"could not load language model {source!r}: {exc}. Fix: check the name; without internet use the "
                "embedded 'smollm2-135m', a local model directory, or a .gguf file") from exc
        model.to(dev)
        lm = cls(model, tokenizer, name=name or str(source), source=str(source))
        lm.load_seconds = time.perf_counter() - started
        return lm

    # --- protocol ------------------------------------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        return self._vocab_size

    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def eos_token_ids(self) -> frozenset[int]:
        return self._eos

    def token_texts(self) -> list[str]:
        if self._token_texts is None:
            known = min(len(self.tokenizer), self._vocab_size)
            texts = self.tokenizer.batch_decode([[i] for i in range(known)])
            self._token_texts = texts + [""] * (self._vocab_size - known)  # padded embedding rows
        return self._token_texts

    def newline_mask(self) -> torch.Tensor:
        if self._newline_mask is None:
            mask = torch.tensor(["\n" in t for t in self.token_texts()], dtype=torch.bool)
            self._newline_mask = mask.to(self.device)
        elif self._newline_mask.device != self.device:  # the model was moved after the first call
            self._newline_mask = self._newline_mask.to(self.device)
        return self._newline_mask

    def batch_decode(self, sequences: list[list[int]]) -> list[str]:
        return self.tokenizer.batch_decode(sequences, skip_special_tokens=True)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def decode(self, token_ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=True)

    def start(self, prompts: Sequence[str]) -> TransformersSession:
        if len(prompts) == 0:
            raise InputError("no prompts to start a session with", hint="pass at least one prompt")
        # as the tokenizer encodes text by default: with BOS where its config adds one (Llama, Mistral, Gemma), as
        # transformers' and vLLM's generation do, so in-process and server runs of a model see the same tokens
        encoded = [self.encode_default(p) for p in prompts]
        return TransformersSession(self, encoded)

    def loglikelihood(self, requests: Sequence[tuple[str, str]], *,
                      batch_size: int | None = None) -> list[Loglikelihood]:
        """See :meth:`toxiforge.models.base.LanguageModel.loglikelihood` (default ``batch_size`` 16 rows)."""
        from toxiforge.models._scoring import score_requests

        batch_size = 16 if batch_size is None else batch_size
        if batch_size < 1:
            raise InputError(f"batch size {batch_size} must be >= 1", hint="use a batch size of 1 or more")
        window = getattr(self.model.config, "max_position_embeddings", None)
        encoded = [self._encode_pair(context, continuation) for context, continuation in requests]
        return score_requests(self.model, encoded, pad_id=self.tokenizer.pad_token_id, batch_size=batch_size,
                              window=window)

    def _encode_pair(self, context: str, continuation: str) -> tuple[list[int], list[int]]:
        """(context tokens, continuation tokens) as lm-evaluation-harness's HFLM makes them (see base.py)."""
        if not continuation and not context.endswith((" ", "\t", "\n")):
            return [], []
        if context == "":
            cont, start = self.encode(continuation), self._start_token()
            # the harness: a continuation that already starts with the start token uses that token as context
            return ([start], cont) if cont and cont[0] != start else (cont[:1], cont[1:])
        spaces = len(context) - len(context.rstrip())
        if spaces:
            context, continuation = context[:-spaces], context[-spaces:] + continuation
        whole = self.encode_default(context + continuation)
        context_ids = self.encode_default(context)
        return context_ids, whole[len(context_ids):]

    def _start_token(self) -> int:
        """The context token of an empty context: BOS, else EOS (the harness's ``prefix_token_id``)."""
        bos = self.tokenizer.bos_token_id
        return int(bos if bos is not None else self.tokenizer.eos_token_id)

    def encode_default(self, text: str) -> list[int]:
        """Token ids with the tokenizer's default special tokens (BOS where it adds one), unless ``text`` already
        starts with the BOS text: how lm-evaluation-harness encodes a context (also the judge's plain-text prompts)."""
        special = not text.startswith(self.tokenizer.decode(self._start_token()))
        return self.tokenizer(text, add_special_tokens=special)["input_ids"]

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "backend": "transformers",
            "architecture": type(self.model).__name__,
            "dtype": str(self.model.dtype).replace("torch.", ""),
            "device": str(self.device),
            "parameters": int(sum(p.numel() for p in self.model.parameters())),
            "vocab_size": self.vocab_size,
        }


class TransformersSession:
    """Left-padded batch with a KV cache. See :class:`~toxiforge.models.base.LMSession`."""

    def __init__(self, lm: TransformersLM, encoded: list[list[int]]):
        from toxiforge.models._kv_cache import growing_cache

        self._lm = lm
        device = lm.device
        width = max(len(ids) for ids in encoded)
        if width == 0:
            raise InputError("every prompt is empty after tokenization", hint="pass non-empty prompts")
        pad = lm.tokenizer.pad_token_id
        input_ids = torch.full((len(encoded), width), pad, dtype=torch.long)
        attention = torch.zeros((len(encoded), width), dtype=torch.long)
        for row, ids in enumerate(encoded):
            if ids:
                input_ids[row, width - len(ids):] = torch.tensor(ids)
                attention[row, width - len(ids):] = 1
        self._attention = attention.to(device)
        self._prompt_width = width
        self._origin = torch.arange(len(encoded), device=device)  # the prompt each row continues
        positions = (self._attention.cumsum(-1) - 1).clamp(min=0)
        self._next_position = positions[:, -1] + 1
        self._cache = growing_cache(lm.model.config)
        self._logprobs = self._forward(input_ids.to(device), positions)

    @torch.inference_mode()
    def _forward(self, input_ids: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        # The DynamicCache is updated in place by the forward pass, so it need not be read back from the output.
        out = self._lm.model(input_ids=input_ids, attention_mask=self._attention, position_ids=positions,
                             use_cache=True, logits_to_keep=1, **{self._lm.cache_argument: self._cache})
        return torch.log_softmax(out.logits[:, -1, :].float(), dim=-1)

    @property
    def batch_size(self) -> int:
        return int(self._attention.shape[0])

    def logprobs(self) -> torch.Tensor:
        return self._logprobs

    def advance(self, tokens: torch.Tensor) -> None:
        tokens = tokens.to(self._attention.device, dtype=torch.long).view(-1, 1)
        if tokens.shape[0] != self.batch_size:
            raise InputError(f"advance() got {tokens.shape[0]} tokens for {self.batch_size} rows",
                             hint="pass exactly one token per row")
        ones = torch.ones((self.batch_size, 1), dtype=self._attention.dtype, device=self._attention.device)
        self._attention = torch.cat([self._attention, ones], dim=1)
        positions = self._next_position.view(-1, 1)
        self._next_position = self._next_position + 1
        self._logprobs = self._forward(tokens, positions)

    def select(self, index: torch.Tensor) -> None:
        """Re-index the rows. When every row takes a row of its own prompt (a beam step), the prompt's part of the
        KV cache, the attention mask and the positions are already right and only the generated part of the cache
        moves (a prompt of 100 tokens and 10 generated: a tenth of the copy)."""
        index = index.to(self._attention.device, dtype=torch.long)
        origin = self._origin.index_select(0, index)
        self._logprobs = self._logprobs.index_select(0, index)
        if index.shape[0] == self.batch_size and torch.equal(origin, self._origin) and self._reorder_generated(index):
            return
        self._origin = origin
        self._attention = self._attention.index_select(0, index)
        self._next_position = self._next_position.index_select(0, index)
        self._cache.reorder_cache(index)

    @torch.inference_mode()  # the cache's tensors are inference tensors: in-place writes need inference mode
    def _reorder_generated(self, index: torch.Tensor) -> bool:
        """Reorder the cache after the prompt columns only, in place; False (nothing done) for a cache whose layers
        are not plain ``DynamicLayer``s (sliding windows, quantized caches), which the caller reorders whole."""
        from transformers.cache_utils import DynamicLayer

        from toxiforge.models._kv_cache import GrowingLayer

        layers = getattr(self._cache, "layers", None)
        if not layers or any(type(layer) not in (DynamicLayer, GrowingLayer) for layer in layers):
            return False
        width = self._prompt_width
        for layer in layers:
            for tensors in (layer.keys, layer.values):
                if tensors is not None and tensors.dim() == 4 and tensors.shape[-2] > width:
                    tensors[:, :, width:] = tensors[:, :, width:].index_select(0, index)
        return True
