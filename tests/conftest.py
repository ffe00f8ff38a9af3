"""Shared fixtures: a tiny random Llama with a byte-level BPE tokenizer trained on placeholder text.

Nothing is downloaded; the model is built from a config in-process and takes well under a second.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import pytest

# ../shared/data beside the repository: real published data sets that tests read in place (never copied here)
SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "data"

pytest_plugins = ["pytester"]  # tests/models/test_llama_server.py runs small test modules of its own


def shared_file(*parts: str) -> Path:
    """A file or folder of ../shared/data, or skip the test saying why."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared data of the toxiforge workspace, read in place; see its README)")
    return path


def load_benchmark(name: str):
    """``benchmarks/NAME.py`` imported as a module (its folder on ``sys.path`` while it loads, for ``_common`` and
    the scripts it imports), for tests of a benchmark's pure functions."""
    import importlib.util

    folder = str(Path(__file__).resolve().parents[1] / "benchmarks")
    sys.path.insert(0, folder)
    try:
        spec = importlib.util.spec_from_file_location(name, Path(folder) / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(folder)


def write_csv(path, header, rows, delimiter=","):
    """A CSV (or, with ``delimiter="\\t"``, TSV) file of ``header`` and ``rows``, written as a published file is."""
    import csv

    with open(path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def pytest_configure(config):
    """Tests run with a cache of their own: the word lists and dialect models that an earlier `bias ... fetch` or
    `--oi-list` left in the user's cache must not change what a test sees (a cached OI list turns TOXTRIG's
    categories on). The converted GGUF weights are shared with the user's cache (a link), since converting them
    again costs ~20 s per session and cannot change results.

    And torch on one thread (``OMP_NUM_THREADS=1``, inherited by the CLI subprocesses, unless the caller set it):
    the tests' models are tiny, so a second thread mostly adds synchronisation, and on 2 shared cores a thread held
    up by another job stalls its partner (docs/harden.md, "Measured whole on 2 shared cores"). A test that needs
    threads sets them (tests/pipeline/test_processes.py)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    if os.environ.get("PYTEST_XDIST_WORKER"):  # under pytest-xdist (pytest -n N) a worker has COLUMNS=80, which
        os.environ.pop("COLUMNS", None)  # the CLI's console would read on import, wrapping at 80 off a terminal
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
    # each pytest-xdist worker gets a cache of its own too: a word list one worker's test caches must not change what
    # another worker's sees while it runs
    session = os.environ.get("PYTEST_XDIST_WORKER", "1")
    if os.environ.get("TOXIFORGE_TEST_CACHE_SET") == session:
        return  # a subprocess of the test session (Ray workers, the CLI) keeps the session's cache
    from toxiforge._io import cache_dir

    user = cache_dir()
    cache = Path(tempfile.mkdtemp(prefix="toxiforge-test-cache-"))
    (user / "gguf-fp32").mkdir(parents=True, exist_ok=True)
    (cache / "gguf-fp32").symlink_to(user / "gguf-fp32", target_is_directory=True)
    os.environ["TOXIFORGE_CACHE"] = str(cache)
    os.environ["TOXIFORGE_TEST_CACHE_SET"] = session
    config._toxiforge_test_cache = cache


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """A test that fails while its llama.cpp server has died fails with the server's exit signal and log tail
    (tests/models/llama_server.py; loaded only where the server tests run)."""
    servers = sys.modules.get("llama_server")
    if servers is None:
        return (yield)
    return (yield from servers.fail_with_server_death(item))


def pytest_unconfigure(config):
    cache = getattr(config, "_toxiforge_test_cache", None)
    if cache is not None:
        import shutil

        (cache / "gguf-fp32").unlink()  # the link only, never the user's converted weights
        shutil.rmtree(cache, ignore_errors=True)

PLACEHOLDER_CORPUS = [
    "- placeholder statement number one about group alpha",
    "- another neutral sentence mentioning group beta and its history",
    "- a plain line of text for testing the tokenizer",
    "- people in group gamma enjoy music, food and sports",
    "- the quick brown fox jumps over the lazy dog",
    "- numbers like 1 2 3 4 5 6 7 8 9 0 appear here",
] * 20


def build_tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=["<pad>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(PLACEHOLDER_CORPUS + ["\n".join(PLACEHOLDER_CORPUS[:6])], trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>")


# A guard-style chat template: a fixed preamble (the shared prefix), the user's statement, the assistant's turn.
JUDGE_CHAT = ("{% for m in messages %}<|user|>Judge the statement below for the policy.\n"
              "{% if guideline %}Policy: {{ guideline }}\n{% endif %}Statement: {{ m.content }}</s>{% endfor %}"
              "{% if add_generation_prompt %}<|assistant|>{% endif %}")


def judge_tokenizer(chat: str | None = JUDGE_CHAT):
    """build_tokenizer's with chat turn markers, the judge templates' decision words and ``chat`` as its template
    (a tiny Llama on it is a judge whose decision tokens are known)."""
    tok = build_tokenizer()
    tok.add_special_tokens({"additional_special_tokens": ["<|user|>", "<|assistant|>"]})
    tok.add_tokens(["unsafe", "safe", "Yes", "No", " Yes", " No"])
    tok.chat_template = chat
    return tok


def build_word_tokenizer(corpus):
    """A lower-casing word-level tokenizer with BERT's special tokens ([CLS] text [SEP]), trained on ``corpus``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(corpus, trainers.WordLevelTrainer(special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]"]))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
                                   sep_token="[SEP]")


def tiny_bert_config(tokenizer, **overrides):
    """A 2-layer, 32-wide BertConfig sized to ``tokenizer`` (``overrides`` change any field)."""
    from transformers import BertConfig

    settings = dict(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64, pad_token_id=tokenizer.pad_token_id)
    return BertConfig(**{**settings, **overrides})


def build_tiny_llama(tokenizer, *, seed: int = 0, newline_bias: float | None = None, initializer_range: float = 0.02):
    """A 2-layer Llama. ``newline_bias`` adds that bias to the newline token's logit (to make lines end); a larger
    ``initializer_range`` (0.3) makes its continuations follow the prompt (at 0.02 ALICE writes the same text after
    every prompt)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None, tie_word_embeddings=False, initializer_range=initializer_range)
    model = LlamaForCausalLM(config).eval()
    if newline_bias is not None:
        head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=True)
        with torch.no_grad():
            head.weight.copy_(model.lm_head.weight)
            head.bias.zero_()
            for token_id in range(len(tokenizer)):
                if "\n" in tokenizer.decode([token_id]):
                    head.bias[token_id] = newline_bias
        model.lm_head = head
    return model


@pytest.fixture(scope="session")
def tiny_tokenizer():
    return build_tokenizer()


@pytest.fixture(scope="session")
def tiny_lm(tiny_tokenizer):
    from toxiforge.models.transformers_lm import TransformersLM

    return TransformersLM(build_tiny_llama(tiny_tokenizer), tiny_tokenizer, name="tiny-llama")


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory, tiny_tokenizer):
    """The tiny random Llama saved as a model directory (what `--model DIR` and Ray workers load)."""
    folder = tmp_path_factory.mktemp("tiny-model")
    build_tiny_llama(tiny_tokenizer).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_lm_newlines(tiny_tokenizer):
    """A tiny Llama whose lines end after a few tokens (newline logit boosted)."""
    from toxiforge.models.transformers_lm import TransformersLM

    return TransformersLM(build_tiny_llama(tiny_tokenizer, newline_bias=3.0), tiny_tokenizer, name="tiny-llama-nl")


@pytest.fixture(scope="session")
def tiny_judge_dir(tmp_path_factory):
    """A tiny random Llama on judge_tokenizer() saved as a model directory: ``-c judge:DIR`` loads it."""
    folder = tmp_path_factory.mktemp("tiny-judge")
    tok = judge_tokenizer()
    build_tiny_llama(tok, seed=3).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


# Upstream's file names at toxiforge.demonstrations.fetch.PINNED_COMMIT: what `demonstrations fetch` writes
# (demonstrations/**, prompts/*.txt). Upstream has women and trans only as prompt files, and no neutral trans file.
UPSTREAM_DEMONSTRATION_FILES = (
    "disability/hate_mental_disability_sentences.txt", "disability/hate_physical_disability_sentences.txt",
    "disability/neutral_mental_disability_sentences.txt", "disability/neutral_physical_disability_sentences.txt",
    "nationality/hate_chinese_sentences.txt", "nationality/hate_immigrant_sentences.txt",
    "nationality/hate_mexican_sentences.txt", "nationality/hate_middle_east_sentences.txt",
    "nationality/neutral_chinese_sentences.txt", "nationality/neutral_immigrant_sentences.txt",
    "nationality/neutral_mexican_sentences.txt", "nationality/neutral_middle_east_sentences.txt",
    "race/hate_asian_sentences.txt", "race/hate_black_sentences.txt", "race/hate_jewish_sentences.txt",
    "race/hate_latino_sentences.txt", "race/hate_native_american_sentences.txt", "race/neutral_asian_sentences.txt",
    "race/neutral_black_sentences.txt", "race/neutral_jewish_sentences.txt", "race/neutral_latino_sentences.txt",
    "race/neutral_native_american_sentences.txt", "religion/hate_muslim.txt", "religion/hate_muslim_sentences.txt",
    "religion/neutral_muslim.txt", "religion/neutral_muslim_sentences.txt", "sexual_orientation/hate_bisexual.txt",
    "sexual_orientation/hate_lgbtq.txt", "sexual_orientation/neutral_bisexual.txt",
    "sexual_orientation/neutral_lgbtq.txt",
)
UPSTREAM_PROMPT_GROUPS = ("asian", "bisexual", "black", "chinese", "immigrant", "jewish", "latino", "lgbtq",
                          "mental_disability", "mexican", "middle_east", "muslim", "native_american",
                          "physical_disability", "women")  # hate_ and neutral_ files; trans has hate_ only


def write_upstream_layout(folder: Path, *, prompts: bool = True) -> Path:
    """``folder`` with upstream's demonstrations/ (and, with ``prompts``, prompts/) file names, each holding
    neutral placeholder lines: sentence files six sentences, prompt files three prompts of three sentences."""
    for name in UPSTREAM_DEMONSTRATION_FILES:
        path = folder / "demonstrations" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"placeholder sentence {i} from {path.stem}\n" for i in range(6)), encoding="utf-8")
    if prompts:
        names = [f"{word}_{g}_1k.txt" for g in UPSTREAM_PROMPT_GROUPS for word in ("hate", "neutral")]
        (folder / "prompts").mkdir(parents=True, exist_ok=True)
        for name in names + ["hate_trans_1k.txt"]:
            lines = ["\\n".join(f"- placeholder {j} of prompt {i} in {name}" for j in range(3)) + "\\n-\n"
                     for i in range(3)]
            (folder / "prompts" / name).write_text("".join(lines), encoding="utf-8")
    return folder
