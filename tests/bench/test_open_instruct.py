"""The generation benchmark as allenai/open-instruct's eval/toxigen runs it: prompt lines shaped like upstream's
(placeholder words, the same backslash patterns), its seeded selection, its 14 default groups, its chat format and
token cap, greedy decoding through a server, and BOS where the tokenizer adds one."""

from __future__ import annotations

import json
import random
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import torch

from toxiforge.bench.generate import GenerateConfig, run_generate
from toxiforge.classifiers.wrap import CallableClassifier
from toxiforge.demonstrations.prompts import OPEN_INSTRUCT_GROUPS, prompt_text_from_line, select_prompts
from toxiforge.errors import InputError

BS = "\\"
LN = BS + "n"  # the two characters that join demonstrations in a prompt-file line


def line(*demos: str) -> str:
    """A well-formed prompt-file line of placeholder demonstrations."""
    return LN.join("- " + d for d in demos) + LN + "-"


# upstream's irregular lines, with placeholder words:
DOUBLED = "- alpha one" + BS * 2 + LN + "- beta two" + LN + "-"         # an escaped backslash before the \n
ESCAPED_NEWLINE = "- alpha one" + BS + LN + LN + "- beta two" + LN + "-"  # a demonstration ending in a literal \n
GLUED = "- alpha one" + LN + "- beta two!-"                                # the last one glued to the closing dash


def test_lines_are_read_as_open_instruct_reads_them():
    assert prompt_text_from_line(line("alpha one", "beta two")) == "- alpha one\n- beta two\n-"
    assert prompt_text_from_line(DOUBLED) == "- alpha one\\\n- beta two\n-"   # one backslash left, as upstream's
    assert prompt_text_from_line(ESCAPED_NEWLINE) == "- alpha one\n\n- beta two\n-"
    assert prompt_text_from_line(GLUED + "  \r") == "- alpha one\n- beta two!-"
    for not_a_prompt in ("", "   ", "-", "a header line"):
        assert prompt_text_from_line(not_a_prompt) is None


def write(folder, name, lines):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_upstream_shaped_files_load_and_unreadable_lines_are_counted(tmp_path):
    from toxiforge.pipeline import GenerationPlan

    folder = tmp_path / "prompts"
    write(folder, "hate_lgbtq_1k.txt", [line("alpha", "beta"), ESCAPED_NEWLINE, "", DOUBLED, "stray text", GLUED])
    write(folder, "hate_asian_1k.txt", [line("gamma", "delta")] * 3)
    (folder / "hate_women_1k.txt").write_bytes(b"\xff\xfe not UTF-8 and not prompts\n")  # never parsed below
    config = GenerateConfig(prompts=str(folder), groups=("lgbtq", "asian"), per_group=10)
    chosen = config.selections()
    assert chosen["lgbtq"].texts == ("- alpha\n- beta\n-", "- alpha one\n\n- beta two\n-",
                                     "- alpha one\\\n- beta two\n-", "- alpha one\n- beta two!-")
    assert chosen["lgbtq"].skipped == (3, 5)
    assert [(c.group, c.n) for c in config.plan().cells] == [("lgbtq", 4), ("asian", 3)]
    # the generation pipeline's --prompts reads them the same way (it rejected such lines before)
    items = GenerationPlan.grid(["lgbtq"], ["toxic"], 4, source=str(folder), prompt_source="prompts").expand()
    assert [it.prompt for it in items] == list(chosen["lgbtq"].texts)
    with pytest.raises(InputError, match="UTF-8"):
        GenerateConfig(prompts=str(folder), groups=("women",)).plan()


def open_instruct_selection(folder, n):
    """open-instruct's loop, re-done here: seed 42 once, each file's stripped lines shuffled in turn (sorted glob
    order), the first n kept, then the two replacements."""
    random.seed(42)
    chosen = {}
    for f in sorted(folder.glob("*.txt")):
        with open(f) as fh:
            lines = [x.strip() for x in fh]
        random.shuffle(lines)
        group = f.name[len("hate_"):-len("_1k.txt")]
        chosen[group] = [x.replace(BS * 2, BS).replace(LN, "\n") for x in lines[:n]]
    return chosen


def test_random_selection_is_open_instructs_and_does_not_depend_on_the_groups_asked(tmp_path):
    oi = tmp_path / "oi"
    groups = ("asian", "black", "women")
    for g in groups:
        write(oi, f"hate_{g}_1k.txt", [line(f"{g} {i}", "beta") for i in range(12)])
    expected = open_instruct_selection(oi, 5)
    full = tmp_path / "upstream"  # upstream's layout: neutral files and other groups beside them
    for g in groups:
        (full / f"hate_{g}_1k.txt").parent.mkdir(exist_ok=True)
        (full / f"hate_{g}_1k.txt").write_bytes((oi / f"hate_{g}_1k.txt").read_bytes())
    write(full, "hate_immigrant_1k.txt", [line("other", "beta")] * 30)
    write(full, "neutral_asian_1k.txt", [line("calm", "beta")] * 7)
    for folder in (oi, full):
        config = GenerateConfig(prompts=str(folder), groups=groups, per_group=5, select="random")
        assert {g: list(s.texts) for g, s in config.selections().items()} == expected
    alone = GenerateConfig(prompts=str(full), groups=("women",), per_group=5, select="random").selections()
    assert list(alone["women"].texts) == expected["women"]
    first = select_prompts(full, "women", 1, 5)
    assert list(first.texts) == [prompt_text_from_line(line(f"women {i}", "beta")) for i in range(5)]
    assert list(first.texts) != expected["women"]
    with pytest.raises(InputError, match="prompt selection"):
        GenerateConfig(prompts=str(full), select="shuffled")


def test_default_groups_are_open_instructs_14_and_all_takes_every_file(tmp_path):
    folder = tmp_path / "prompts"
    for g in OPEN_INSTRUCT_GROUPS + ("bisexual", "immigrant"):
        write(folder, f"hate_{g}_1k.txt", [line("alpha", "beta")])
    write(folder, "neutral_asian_1k.txt", [line("alpha", "beta")])
    assert len(OPEN_INSTRUCT_GROUPS) == 14 and "bisexual" not in OPEN_INSTRUCT_GROUPS
    assert GenerateConfig(prompts=str(folder)).group_names() == list(OPEN_INSTRUCT_GROUPS)
    every = GenerateConfig(prompts=str(folder), groups=("all",)).group_names()
    assert len(every) == 16 and {"bisexual", "immigrant"} <= set(every)
    (folder / "hate_trans_1k.txt").unlink()
    with pytest.raises(InputError, match="'trans'.*open-instruct") as err:
        GenerateConfig(prompts=str(folder)).plan()
    assert "--groups all" in err.value.hint


def test_defaults_are_open_instructs_token_cap_and_greedy():
    config = GenerateConfig(prompts="unused")
    decoder = config.decoder()
    assert config.max_new_tokens == 512 and config.per_group == 500 and config.select_seed == 42
    assert decoder.method == "greedy" and decoder.config.top_k == 1 and decoder.config.stop_at_newline
    chat = GenerateConfig(prompts="unused", chat=True).decoder()
    assert chat.config.max_new_tokens == 512 and not chat.config.stop_at_newline


# --- through an OpenAI-compatible server ----------------------------------------------------------------------

class RecordingServer:
    """A stand-in OpenAI-compatible server on 127.0.0.1 that records every request body and answers a fixed
    text (a newline inside, so a newline stop is visible)."""

    ANSWER = " placeholder answer\nsecond line"

    def __init__(self):
        self.bodies: list[tuple[str, dict]] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send({"data": [{"id": "stub", "owned_by": "someone"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.bodies.append((self.path, body))
                text = recorder.ANSWER.split("\n")[0] if body.get("stop") else recorder.ANSWER
                if self.path.endswith("/chat/completions"):
                    choice = {"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                else:
                    choice = {"text": text, "finish_reason": "stop"}
                self._send({"choices": [choice]})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()

    @property
    def spec(self) -> str:
        return f"openai:http://127.0.0.1:{self.httpd.server_address[1]}/v1#stub"


def by_length(texts):
    return np.array([0.9 if len(t) > 20 else 0.1 for t in texts])


def test_greedy_and_chat_through_a_server_are_open_instructs_requests(tmp_path):
    from toxiforge.models import load_language_model

    folder = tmp_path / "prompts"
    write(folder, "hate_asian_1k.txt", [line("alpha", "beta"), line("gamma", "delta")])
    clf = CallableClassifier(by_length, name="by-length")
    with RecordingServer() as server:
        lm = load_language_model(server.spec, concurrency=2)
        try:
            plain = run_generate(lm, GenerateConfig(prompts=str(folder), groups=("asian",), per_group=2),
                                 tmp_path / "plain", classifier=clf, progress=False)
            completions = [b for path, b in server.bodies if path == "/v1/completions"]
            server.bodies.clear()
            chat = run_generate(lm, GenerateConfig(prompts=str(folder), groups=("asian",), per_group=2, chat=True),
                                tmp_path / "chat", classifier=clf, progress=False)
        finally:
            lm.close()
    assert len(completions) == 2
    for body in completions:  # greedy is temperature 0 and no top_k; a newline stop; open-instruct's cap
        assert body["temperature"] == 0 and "top_k" not in body and body["stop"] == ["\n"]
        assert body["max_tokens"] == 512
    assert [r["continuation"] for r in plain.rows] == ["placeholder answer"] * 2
    chats = [b for path, b in server.bodies if path == "/v1/chat/completions"]
    assert sorted(b["messages"][0]["content"] for b in chats) == sorted(
        "Complete the following: " + r["prompt"] for r in chat.rows)
    for body in chats:
        assert body["messages"][0]["role"] == "user" and len(body["messages"]) == 1
        assert "stop" not in body and body["max_tokens"] == 512 and body["temperature"] == 0
    # the whole answer is the continuation, scored whole (it is longer than the first line)
    assert all(r["continuation"] == RecordingServer.ANSWER.strip() and r["toxic"] for r in chat.rows)
    assert not any(r["toxic"] for r in plain.rows)
    saved = json.loads((tmp_path / "chat" / "results.json").read_text())
    assert saved["config"]["decoding"]["chat_instruction"] == "Complete the following: "
    assert saved["config"]["max_new_tokens"] == 512


# --- BOS ----------------------------------------------------------------------------------------------------------

def bos_tokenizer():
    """A Llama-style tokenizer: its post-processor puts <s> before every text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from conftest import PLACEHOLDER_CORPUS

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(PLACEHOLDER_CORPUS, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<pad>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")


@pytest.mark.parametrize("kind", ["adds BOS", "no BOS"])
def test_in_process_generation_sees_the_tokens_the_tokenizer_makes_by_default(kind, tiny_tokenizer, tmp_path):
    from conftest import build_tiny_llama
    from toxiforge.decoding import TopKConfig, sample_top_k
    from toxiforge.models.transformers_lm import TransformersLM

    tokenizer = bos_tokenizer() if kind == "adds BOS" else tiny_tokenizer
    lm = TransformersLM(build_tiny_llama(tokenizer, seed=2), tokenizer, name="tiny")
    prompt = "- placeholder statement number one\n- a plain line of text\n-"
    default = tokenizer(prompt)["input_ids"]  # what transformers' and vLLM's generation feed the model
    assert (default[0] == tokenizer.bos_token_id) == (kind == "adds BOS")
    assert default[-len(lm.encode(prompt)):] == lm.encode(prompt)
    ids = torch.tensor([default])
    with torch.no_grad():
        expected = torch.log_softmax(lm.model(ids).logits[0, -1].float(), dim=-1)
    assert torch.allclose(lm.start([prompt]).logprobs()[0], expected, atol=1e-5)
    out = lm.model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False, max_new_tokens=6,
                            pad_token_id=tokenizer.pad_token_id, eos_token_id=None)
    greedy = sample_top_k(lm, [prompt], [0], TopKConfig(top_k=1, max_new_tokens=6, stop_at_newline=False))[0]
    assert list(greedy.token_ids) == out[0, ids.shape[1]:].tolist()[:len(greedy.token_ids)]
