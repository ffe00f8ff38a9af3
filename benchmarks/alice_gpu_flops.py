"""ALICE at paper settings on a GPU: statements/s and the fraction of the bf16 FLOP bound reached.

Models are random-initialized from realistic configs (real weights cannot travel to the GPU machine): a 1B Llama
(Llama-3.2-1B shape: 16 layers, hidden 2048, 32 heads / 8 KV heads, MLP 8192, vocab 128,256) and a
roberta-large sequence classifier (24 layers, hidden 1024). Tokenizer: ``--tokenizer DIR`` (a saved tokenizer, e.g. the
embedded SmolLM2's byte-level BPE from toxiforge's GGUF cache, 49,152 ids): the LM's vocabulary is then the
tokenizer's, so every sampled id decodes to text and the classifier scores real-length statements. Without it, a
small byte-level BPE trained in-process (320 ids) with Llama-3.2's 128,256-id head: nearly every sampled id decodes
to "", so the classifier sees almost nothing (a measurement of the LM loop alone). FLOPs use the real token counts.

Paper settings: 10 beams, top-100 candidates per beam, all candidates scored by the classifier, 30 new tokens,
λL = λC = 0.5, temperature 0.9. FLOPs counted as 2 × parameters × tokens processed, for the LM (prompt prefill +
one token per row per step; the tied LM head counts, as it is a matmul) and for the classifier (every candidate
text's unpadded tokens; its word embeddings are excluded, being a lookup).

    python benchmarks/alice_gpu_flops.py --device cuda --prompts 32 --peak-tflops 989 --tokenizer TOKENIZER_DIR
    python benchmarks/alice_gpu_flops.py --device cuda --prompts 64 256 --tokenizer TOKENIZER_DIR   # issue 47
    python benchmarks/alice_gpu_flops.py --device cpu --small --prompts 2        # smoke run of the code path
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

import _common

if TYPE_CHECKING:
    import torch

    from toxiforge.classifiers.hf import HFClassifier


class CountingClassifier:
    """Wraps a classifier and counts the tokens it processes (without padding: useful work only)."""

    def __init__(self, inner: HFClassifier):
        self.inner, self.name = inner, inner.name
        self.num_classes, self.toxic_index, self.benign_index = inner.num_classes, inner.toxic_index, inner.benign_index
        self.tokens = self.texts = self.calls = 0
        self.seconds = 0.0

    def class_log_probs(self, texts):
        import torch

        started = time.perf_counter()
        enc = self.inner.tokenizer(list(texts), truncation=True, max_length=self.inner.max_length)
        self.tokens += sum(max(1, len(ids)) for ids in enc["input_ids"])  # useful (unpadded) tokens
        self.texts += len(texts)
        self.calls += 1
        out = self.inner.class_log_probs(texts)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.seconds += time.perf_counter() - started
        return out

    def predict_proba(self, texts):
        return self.inner.predict_proba(texts)

    def describe(self):
        return self.inner.describe()


def build(device: torch.device, small: bool, tokenizer: str | None):
    import torch
    from transformers import (
        AutoTokenizer,
        LlamaConfig,
        LlamaForCausalLM,
        RobertaConfig,
        RobertaForSequenceClassification,
    )

    if tokenizer:
        tok = AutoTokenizer.from_pretrained(tokenizer)
        if tok.pad_token is None:
            tok.pad_token = tok.eos_token
    else:
        sys.path.insert(0, str(_common.REPO / "tests"))
        from conftest import build_tokenizer

        tok = build_tokenizer()
    from toxiforge.classifiers.hf import HFClassifier
    from toxiforge.models.transformers_lm import TransformersLM

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    torch.manual_seed(0)
    llama = LlamaConfig(vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
                        num_attention_heads=32, num_key_value_heads=8, max_position_embeddings=4096,
                        tie_word_embeddings=True, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    roberta = RobertaConfig(vocab_size=50265, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                            intermediate_size=4096, max_position_embeddings=514, num_labels=2,
                            pad_token_id=tok.pad_token_id)
    if tokenizer:  # the LM samples only ids the tokenizer can decode; the classifier reads them all
        llama.vocab_size = len(tok)
        roberta.vocab_size = max(roberta.vocab_size, len(tok))
    if small:  # same code path, toy sizes
        llama.update(dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                          num_key_value_heads=2, vocab_size=llama.vocab_size if tokenizer else 4096))
        roberta.update(dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128))
    lm_model = LlamaForCausalLM(llama).to(device, dtype).eval()
    clf_model = RobertaForSequenceClassification(roberta).to(device, dtype).eval()
    lm = TransformersLM(lm_model, tok, name="random-llama-1b")
    clf = CountingClassifier(HFClassifier(clf_model, tok, name="random-roberta-large", batch_size=1024,
                                          max_length=64))
    return lm, clf


def main() -> None:
    parser = _common.parser(__doc__)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--prompts", type=int, nargs="+", default=[32],
                        help="prompts in a timed batch; several counts: one batch of each, same models")
    parser.add_argument("--peak-tflops", type=float, default=989.0, help="dense bf16 peak (H100/H200 SXM: 989)")
    parser.add_argument("--small", action="store_true", help="toy model sizes, to check the code path")
    parser.add_argument("--tokenizer",
                        help="a saved tokenizer's folder (LM vocabulary = its size); default: a tiny BPE")
    args = parser.parse_args()
    import torch

    from toxiforge._hf import resolve_device
    from toxiforge.decoding.alice import alice_search
    from toxiforge.decoding.alice_config import AliceConfig

    device = resolve_device(args.device)
    lm, clf = build(device, args.small, args.tokenizer)
    lm_params = sum(p.numel() for p in lm.model.parameters())
    embeddings = clf.inner.model.get_input_embeddings().weight.numel()  # a lookup, not a matmul
    clf_params = sum(p.numel() for p in clf.inner.model.parameters()) - embeddings
    config = AliceConfig(num_beams=10, candidates=100, classifier_top_n=None)
    warm = ["- placeholder statement about group alpha\n-", "- another neutral line\n-"]
    alice_search(lm, warm, [1, 1], config, classifier=clf)  # warm-up
    lm_tokens = {"n": 0}
    original_forward = lm.model.forward

    def counting_forward(*a, **kw):
        ids = kw.get("input_ids")
        lm_tokens["n"] += ids.numel()
        return original_forward(*a, **kw)

    lm.model.forward = counting_forward
    print(f"device {device}; LM {lm_params / 1e9:.2f}B params, classifier {clf_params / 1e6:.0f}M params")
    for count in args.prompts:
        prompts = [f"- placeholder statement {i} about group alpha\n- another neutral line {i}\n-"
                   for i in range(count)]
        clf.tokens = clf.texts = clf.calls = lm_tokens["n"] = 0
        clf.seconds = 0.0
        if device.type == "cuda":
            torch.cuda.synchronize()
        started = time.perf_counter()
        alice_search(lm, prompts, [1] * len(prompts), config, classifier=clf)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
        flops = 2 * lm_params * lm_tokens["n"] + 2 * clf_params * clf.tokens
        achieved = flops / seconds / 1e12
        print(f"{len(prompts)} prompts in {seconds:.2f} s = {len(prompts) / seconds:.2f} statements/s")
        print(f"  LM tokens {lm_tokens['n']:,}; classifier: {clf.calls:,} calls, {clf.texts:,} texts, "
              f"{clf.tokens:,} tokens, {clf.seconds:.2f} s of the total; {flops / 1e12:.1f} TFLOP")
        print(f"  achieved {achieved:.1f} TFLOP/s = {achieved / args.peak_tflops:.1%} of {args.peak_tflops:.0f} "
              "TFLOP/s", flush=True)

if __name__ == "__main__":
    main()
