"""The OpenAI-compatible backend against a real server: llama-cpp-python's server on 127.0.0.1 serving the
embedded SmolLM2 GGUF (``pip install 'llama-cpp-python[server]'``, which ``make test`` does). Each server runs on
a free port and is stopped by its fixture. Failures are real too: the server is killed and restarted mid-run, and
a small proxy in front of it answers 429/503 or strips the log-probabilities.
"""

from __future__ import annotations

import json
import random
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from llama_server import ALIAS, LlamaServer, SharedServer, needs_server

from toxiforge._net import free_port
from toxiforge.errors import InputError
from toxiforge.models.api_client import RetryPolicy, parse_retry_after, public_url
from toxiforge.models.openai_lm import OpenAILM, TokenTable, parse_spec

# llama-cpp-python's server decodes one request at a time; on a busy shared machine a queued request can wait
# minutes, so the tests give each request a long timeout (the retry tests set their own short delays). A refused
# connection is retried only briefly: the shared server never restarts, so one that refuses has died, and the test
# fails at once with the server's exit signal (llama_server.fail_with_server_death) instead of retrying for minutes.
PATIENT = RetryPolicy(timeout=900.0, deadline=1800.0, max_attempts=3, max_delay=1.0)
# The test that kills and restarts its own server waits for the restart (the default policy's ~5 minutes).
THROUGH_RESTART = RetryPolicy(timeout=900.0, deadline=1800.0)


@pytest.fixture(scope="module")
def gguf():
    from toxiforge.models.embedded import smollm2_gguf

    return smollm2_gguf()


@pytest.fixture(scope="module")
def shared(gguf, tmp_path_factory):
    srv = SharedServer(LlamaServer(gguf, tmp_path_factory.mktemp("llama") / "server.log"))
    try:
        yield srv
    finally:
        srv.server.stop()


@pytest.fixture
def server(shared):
    """The module's server, checked before each test (a dead one fails the first test, skips the rest)."""
    return shared.get()


@pytest.fixture(scope="module")
def _clients():
    clients: dict = {}
    yield clients
    for client in clients.values():
        client.close()


@pytest.fixture
def lm(server, _clients):
    if "lm" not in _clients:
        _clients["lm"] = OpenAILM.open(f"openai:{server.url}#{ALIAS}", concurrency=2, top_logprobs=8, retry=PATIENT)
    return _clients["lm"]


class Proxy:
    """A small HTTP proxy to ``upstream`` that answers the first requests to /v1/completions with ``errors`` (a list
    of (status, headers)) and can strip ``logprobs`` from completions (a server without them)."""

    def __init__(self, upstream: str, errors=(), strip_logprobs: bool = False):
        import httpx

        self.errors, self.strip, self.injected, self.forwarded = list(errors), strip_logprobs, 0, 0
        self.lock = threading.Lock()
        self.client = httpx.Client(base_url=upstream.rsplit("/v1", 1)[0], timeout=60)
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, status, body: bytes, headers=None):
                self.send_response(status)
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _handle(self, method):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with proxy.lock:
                    error = proxy.errors.pop(0) if proxy.errors and self.path.endswith("/completions") else None
                    proxy.injected += error is not None
                if error is not None:
                    status, headers = error
                    return self._send(status, json.dumps({"error": {"message": "injected"}}).encode(), headers)
                response = proxy.client.request(method, self.path, content=body or None,
                                                headers={"Content-Type": "application/json"})
                data = response.content
                if proxy.strip and self.path.endswith("/completions"):
                    payload = response.json()
                    for choice in payload.get("choices", []):
                        choice["logprobs"] = None
                    data = json.dumps(payload).encode()
                with proxy.lock:
                    proxy.forwarded += 1
                self._send(response.status_code, data)

            def do_GET(self):
                self._handle("GET")

            def do_POST(self):
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> Proxy:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.client.close()


def small_plan(n=2):
    from toxiforge.pipeline import GenerationPlan

    return GenerationPlan.grid(["asian", "women"], ["benign"], n, k=2, seed=11)  # short prompts: a slow server


FAST_TOPK = dict(max_new_tokens=8)


# --- pieces that need no server --------------------------------------------------------------------------------
def test_spec_url_and_retry_parsing():
    assert parse_spec("openai:http://h:8000/v1#m") == ("http://h:8000/v1", "m")
    assert parse_spec("openai:http://h:8000") == ("http://h:8000/v1", None)  # the /v1 convention
    with pytest.raises(InputError, match="no http"):
        parse_spec("openai:h:8000")
    assert public_url("https://user:secret@api.example.org:8443/v1/?key=abc") == "https://api.example.org:8443/v1"
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None
    policy, rng = RetryPolicy(base_delay=1.0, max_delay=8.0), random.Random(0)
    waits = [policy.delay(a, None, rng) for a in range(6) for _ in range(50)]
    assert all(0 <= w <= min(8.0, 2 ** (i // 50)) for i, w in enumerate(waits))  # full jitter, capped
    assert policy.delay(0, 3.0, rng) >= 3.0  # Retry-After is a lower bound


def test_token_table_ranges_keep_precomputed_masks_right():
    from toxiforge.decoding.scorers import exempt_from_prompt_ban

    table = TokenTable(capacity=64, newline_slots=8, exempt_slots=8)
    exempt_before = exempt_from_prompt_ban(table.texts())
    newline = table.newline_mask()
    ids = {t: table.intern(t) for t in [" zorblax", " the", ".\n", ",", "</s>", "", " quux"]}
    assert ids["</s>"] == ids[""] == 0 and table.text(0) == ""
    assert newline[ids[".\n"]] and not newline[ids[" zorblax"]] and not newline[ids[" the"]]
    assert exempt_before[ids[" the"]] and exempt_before[ids[","]] and not exempt_before[ids[" zorblax"]]
    assert (exempt_from_prompt_ban(table.texts()) == exempt_before).all()  # the masks did not change
    assert table.intern(" zorblax") == ids[" zorblax"] and table.text(ids[" quux"]) == " quux"


# --- against the real server -----------------------------------------------------------------------------------
@needs_server
def test_open_reports_the_server_and_model(lm, server):
    info = lm.describe()
    assert lm.name == f"openai:{server.url}#{ALIAS}" and info["model"] == ALIAS and info["url"] == server.url
    assert info["backend"] == "openai-compatible" and lm.honours_top_k  # llama-cpp-python reports owned_by "me"


@needs_server
def test_wrong_url_or_model_name_is_a_clear_error(server):
    with pytest.raises(InputError, match=r"cannot reach an OpenAI-compatible server .*Fix: start the server"):
        OpenAILM.open(f"openai:http://127.0.0.1:{free_port()}/v1")
    with pytest.raises(InputError, match=r"does not serve model 'smolm2'.*did you mean 'smollm2'"):
        OpenAILM.open(f"openai:{server.url}#smolm2")
    with pytest.raises(InputError, match=r"HTTP 404.*Fix: check the base URL"):
        OpenAILM.open(f"openai:http://127.0.0.1:{server.port}/nothing-here")
    with pytest.raises(InputError, match="--api-key-env TOXIFORGE_NO_SUCH_KEY"):
        OpenAILM.open(f"openai:{server.url}", api_key_env="TOXIFORGE_NO_SUCH_KEY")


@needs_server
def test_top_k_rows_through_the_server(lm, server, tmp_path):
    from toxiforge.decoding import TopKConfig, TopKDecoder
    from toxiforge.pipeline import JobConfig, run_generation
    from toxiforge.records import read_rows

    decoder = TopKDecoder(TopKConfig(**FAST_TOPK))
    result = run_generation(small_plan(), lm, tmp_path / "run", decoder=decoder,
                            config=JobConfig(batch_size=4, shard_size=4), progress=False)
    rows = read_rows(tmp_path / "run")
    assert len(rows) == 4 == result.manifest["counts"]["rows"]
    for r in rows:
        assert r.model == f"openai:{server.url}#{ALIAS}" and r.generation_method == "top-k"
        assert json.loads(r.decoding)["top_k"] == 40 and r.finish_reason in ("stop", "length")
        assert "\n" not in r.raw_output  # the server stopped at the newline
    assert sum(bool(r.generation) for r in rows) >= 2
    assert result.manifest["model"]["url"] == server.url and result.manifest["model"]["owned_by"] == "me"
    # the row seeds reach the server: the same seeds give the same rows
    prompts, seeds = [r.prompt for r in rows], [r.seed for r in rows]
    again = lm.sample_top_k(prompts, seeds, decoder.config)
    assert [s.raw_output for s in again] == [r.raw_output for r in rows]


def first_word(text: str) -> str:
    words = text.split()
    return words[0] if words else ""


@needs_server
def test_top_k_is_applied_by_the_server(lm):
    from toxiforge.decoding import TopKConfig

    # llama-cpp-python reuses the previous request's cached prefix and evaluates the rest in a batch of another
    # shape, so near-tied logits can flip a later token between identical requests; the first token is robust.
    prompt = small_plan().expand()[0].prompt
    greedy = lm.sample_top_k([prompt] * 3, [1, 2, 3], TopKConfig(top_k=1, temperature=1.5, **FAST_TOPK))
    assert len({first_word(s.raw_output) for s in greedy}) == 1  # top_k=1: every seed takes the argmax
    wide = lm.sample_top_k([prompt] * 6, range(1, 7), TopKConfig(top_k=1000, temperature=1.5, **FAST_TOPK))
    assert len({first_word(s.raw_output) for s in wide}) > 1


@needs_server
def test_session_is_the_servers_sparse_top_n(lm):
    session = lm.start(["- a placeholder line\n-", "- another line\n-"])
    logprobs = session.logprobs()
    assert logprobs.shape == (2, lm.vocab_size)
    direct = lm.next_token_logprobs(["- another line\n-"])[0]
    row = logprobs[1]
    finite = row.isfinite().nonzero().view(-1).tolist()
    assert len(finite) == len(direct) == 8  # top_logprobs=8
    assert {lm.decode([i]): float(row[i]) for i in finite} == pytest.approx(direct)
    best = int(row.argmax())
    session.select(torch_index([1, 1, 0]))
    session.advance(torch_index([best, 0, best]))
    assert session.batch_size == 3 and session.logprobs().shape == (3, lm.vocab_size)


def torch_index(values):
    import torch

    return torch.tensor(values, dtype=torch.long)


@needs_server
def test_alice_one_beam_without_classifier_is_the_servers_greedy_completion(lm):
    from toxiforge.decoding import AliceConfig, TopKConfig
    from toxiforge.decoding.alice import alice_search

    prompts = [item.prompt for item in small_plan(1).expand()]
    config = AliceConfig(num_beams=1, lambda_clf=0.0, candidates=8, max_new_tokens=6, ban_prompt_tokens=False,
                         no_repeat_ngram_size=0)
    hyps = alice_search(lm, prompts, [0] * len(prompts), config)
    greedy = lm.sample_top_k(prompts, [0] * len(prompts), TopKConfig(top_k=1, max_new_tokens=6))
    # Only the first token is compared: later steps send the joined string, which the server re-tokenizes and
    # evaluates from its prefix cache (see test_top_k_is_applied_by_the_server), so near-ties may go either way.
    for h, g in zip(hyps, greedy):
        assert first_word(lm.decode(h[0].token_ids)) == first_word(g.raw_output) != ""


@needs_server
def test_alice_rows_through_the_server(lm, server, tmp_path):
    from toxiforge.classifiers import load_classifier
    from toxiforge.decoding import AliceConfig, AliceDecoder
    from toxiforge.pipeline import JobConfig, run_generation
    from toxiforge.records import read_rows

    clf = load_classifier("profanity-check")
    decoder = AliceDecoder(clf, AliceConfig(num_beams=2, candidates=8, max_new_tokens=4))
    result = run_generation(small_plan(1), lm, tmp_path / "alice", decoder=decoder, classifier=clf,
                            config=JobConfig(batch_size=4), progress=False)
    rows = read_rows(tmp_path / "alice")
    assert len(rows) == 2 == result.manifest["counts"]["rows"]
    for r in rows:
        assert r.generation_method == "ALICE" and r.model == f"openai:{server.url}#{ALIAS}"
        assert r.classifier == "profanity-check" and r.hypothesis_score is not None
        assert json.loads(r.decoding)["candidates"] == 8 and r.finish_reason in ("newline", "eos", "length")


@needs_server
def test_alice_prompt_ban_works_on_token_strings(lm):
    from toxiforge.decoding import AliceConfig
    from toxiforge.decoding.alice import alice_search
    from toxiforge.decoding.scorers import exempt_from_prompt_ban

    prompts = [item.prompt for item in small_plan(1).expand()]
    config = AliceConfig(num_beams=2, lambda_clf=0.0, candidates=8, max_new_tokens=4, no_repeat_ngram_size=0)
    exempt = exempt_from_prompt_ban(lm.token_texts())
    for prompt, hyps in zip(prompts, alice_search(lm, prompts, [0] * len(prompts), config)):
        banned = {i for i in lm.encode(prompt) if not exempt[i]}
        assert banned and hyps and not banned & set(hyps[0].token_ids)


@needs_server
def test_server_killed_and_restarted_mid_run_loses_and_duplicates_nothing(gguf, lm, tmp_path):
    from toxiforge.decoding import TopKConfig, TopKDecoder
    from toxiforge.pipeline import JobConfig, run_generation
    from toxiforge.records import read_rows

    decoder, job = TopKDecoder(TopKConfig(**FAST_TOPK)), JobConfig(batch_size=2, shard_size=2)
    own = LlamaServer(gguf, tmp_path / "own.log").start()
    model = OpenAILM.open(f"openai:{own.url}#{ALIAS}", concurrency=2, retry=THROUGH_RESTART)
    restart = threading.Thread(target=own.start)
    try:
        def kill_after_first_shard(index, path):
            if index == 0:
                own.stop()           # the server dies; the next requests are refused ...
                restart.start()      # ... until it is back (loading takes a few seconds)

        run_generation(small_plan(), model, tmp_path / "run", decoder=decoder, config=job, progress=False,
                       on_shard=kill_after_first_shard)
        restart.join()
        assert model.client.retries > 0  # requests were refused and retried
    finally:
        if restart.is_alive():
            restart.join()
        model.close()
        own.stop()
    rows = read_rows(tmp_path / "run")
    assert len(rows) == len({r.row_id for r in rows}) == 4
    run_generation(small_plan(), lm, tmp_path / "reference", decoder=decoder, config=job, progress=False)
    assert [r.raw_output for r in rows] == [r.raw_output for r in read_rows(tmp_path / "reference")]


# llama.cpp reuses the KV cache of the longest prefix a request shares with the one before it, and logits computed
# over another split can differ in the last bits: a seeded sample then depends on the request order. A request that
# shares no leading text with the prompts, then one prompt at a time, gives the server the same sequence twice.
WARM_UP = "Warm-up request, unlike every prompt."


@needs_server
def test_429_and_503_from_a_proxy_are_retried(server, tmp_path):
    from toxiforge.decoding import TopKConfig

    prompts = [item.prompt for item in small_plan().expand()]
    seeds = list(range(len(prompts)))
    config = TopKConfig(**FAST_TOPK)

    def in_order(model):  # the warm-up's own row (the request retried below) and the prompts'
        return model.sample_top_k([WARM_UP], [0], config) + model.sample_top_k(prompts, seeds, config)

    direct = OpenAILM.open(f"openai:{server.url}#{ALIAS}", concurrency=1, retry=PATIENT)
    try:
        reference = in_order(direct)
    finally:
        direct.close()
    errors = [(429, {"Retry-After": "1"}), (503, {}), (503, {}), (500, {})]
    with Proxy(server.url, errors=errors) as proxy:
        model = OpenAILM.open(f"openai:{proxy.url}#{ALIAS}", concurrency=1,
                              retry=RetryPolicy(base_delay=0.05, max_delay=0.5, timeout=900.0, deadline=1800.0))
        try:
            started = time.monotonic()
            samples = in_order(model)
            elapsed = time.monotonic() - started
            assert model.client.retries == 4
        finally:
            model.close()
    assert proxy.injected == 4 and [s.raw_output for s in samples] == [s.raw_output for s in reference]
    assert elapsed >= 1.0  # the 429's Retry-After was honoured


@needs_server
def test_persistent_errors_give_up_with_a_clear_error(server):
    from toxiforge.decoding import TopKConfig
    from toxiforge.models.api_client import ServerError

    with Proxy(server.url, errors=[(503, {})] * 10) as proxy:
        model = OpenAILM.open(f"openai:{proxy.url}#{ALIAS}", retry=RetryPolicy(max_attempts=3, base_delay=0.01))
        try:
            with pytest.raises(ServerError, match=r"failed after 3 attempts.*HTTP 503.*curl http"):
                model.sample_top_k(["- a\n-"], [0], TopKConfig(max_new_tokens=2))
        finally:
            model.close()


@needs_server
def test_alice_on_a_server_without_logprobs_says_so(server):
    from toxiforge.classifiers import load_classifier
    from toxiforge.decoding import AliceConfig, AliceDecoder, TopKConfig

    with Proxy(server.url, strip_logprobs=True) as proxy:
        model = OpenAILM.open(f"openai:{proxy.url}#{ALIAS}")
        try:
            assert model.sample_top_k(["- a\n-"], [0], TopKConfig(max_new_tokens=2))  # top-k needs none
            decoder = AliceDecoder(load_classifier("profanity-check"), AliceConfig(num_beams=2, candidates=4))
            with pytest.raises(InputError, match="returned no log-probabilities.*ALICE needs them"):
                decoder.decode(model, ["- a\n-"], [0], [0])
        finally:
            model.close()


@needs_server
def test_cli_generate_through_the_server(server, tmp_path):
    from typer.testing import CliRunner

    from toxiforge.cli import app
    from toxiforge.records import read_rows

    out = tmp_path / "cli"
    result = CliRunner().invoke(app, ["generate", "-o", str(out), "--groups", "asian", "-n", "2", "-k", "2",
                                      "--model", f"openai:{server.url}#{ALIAS}", "--concurrency", "2",
                                      "--max-new-tokens", "6", "--no-summary", "--no-progress"])
    assert result.exit_code == 0, result.output
    assert len(read_rows(out)) == 2
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model"]["concurrency"] == 2 and manifest["config"]["batch_size"] == 16
