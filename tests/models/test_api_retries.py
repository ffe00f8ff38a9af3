"""The API client's failure handling without a model server: what is retried, what fails at once, and a failed
batch cancels its other requests. A stand-in HTTP server on 127.0.0.1 answers with fixed statuses."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from toxiforge.errors import InputError
from toxiforge.models.api_client import ApiClient, RetryPolicy, ServerError, is_transient

QUICK = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0, deadline=30.0, timeout=10.0)


class StatusServer:
    """Answers every POST with ``status`` (or the n-th POST with ``status[n]``, the last one from then on) and
    counts the requests; ``on_request`` runs before each answer."""

    def __init__(self, status: int | list[int], on_request=lambda: None):
        self.requests = 0
        owner = self
        statuses = status if isinstance(status, list) else [status]

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.requests += 1
                on_request()
                body = json.dumps({"error": {"message": "placeholder refusal"}}).encode()
                self.send_response(statuses[min(owner.requests, len(statuses)) - 1])
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_what_is_transient():
    request = httpx.Request("POST", "http://127.0.0.1/v1/completions")
    assert is_transient(httpx.ConnectError("refused", request=request))
    assert is_transient(httpx.ReadTimeout("slow", request=request))
    assert is_transient(httpx.RemoteProtocolError("closed mid-answer by a restarting server", request=request))
    assert not is_transient(httpx.LocalProtocolError("cannot send this request"))
    assert not is_transient(httpx.UnsupportedProtocol("no such scheme", request=request))


@pytest.mark.parametrize("status", [400, 409, 422])
def test_a_client_error_is_not_retried(status):
    server = StatusServer(status)
    client = ApiClient(server.url, retry=QUICK)
    try:
        with pytest.raises(InputError, match=f"HTTP {status}: placeholder refusal"):
            client.run(client.post("/completions", {"prompt": "x"}))
        assert server.requests == 1 and client.retries == 0
    finally:
        client.close()
        server.close()


def test_a_transient_status_is_retried_until_the_policy_ends():
    server = StatusServer(503)
    client = ApiClient(server.url, retry=QUICK)
    try:
        with pytest.raises(ServerError, match="after 3 attempts"):
            client.run(client.post("/completions", {"prompt": "x"}))
        assert server.requests == 3 and client.retries == 2
    finally:
        client.close()
        server.close()


class FakeClock:
    """Seconds that pass only when the stand-in server says so: a request "takes" ``per_request`` seconds."""

    def __init__(self, per_request: float):
        self.now, self.per_request = 0.0, per_request

    def __call__(self) -> float:
        return self.now

    def answer(self) -> None:
        self.now += self.per_request


def test_the_deadline_counts_from_when_a_request_is_sent_not_while_it_waits_for_a_concurrency_slot():
    # one slot, two requests, each answer 200 s: the second is sent at 200 s, gets a 503 at 400 s (200 s after it
    # was sent, within its 300-s deadline) and is retried; counted from when it was queued it would give up
    clock = FakeClock(per_request=200.0)
    server = StatusServer([200, 503, 200], on_request=clock.answer)
    policy = RetryPolicy(max_attempts=3, base_delay=0.0, max_delay=0.0, deadline=300.0, timeout=10.0)
    client = ApiClient(server.url, concurrency=1, retry=policy, clock=clock)
    try:
        client.gather([lambda: client.post("/completions", {"prompt": "placeholder 1"}),
                       lambda: client.post("/completions", {"prompt": "placeholder 2"})])
        assert server.requests == 3 and client.retries == 1 and clock.now == 600.0
    finally:
        client.close()
        server.close()


def test_a_request_out_of_its_deadline_says_how_long_it_waited_for_a_slot_and_was_sent():
    clock = FakeClock(per_request=200.0)
    server = StatusServer([200, 503], on_request=clock.answer)
    policy = RetryPolicy(max_attempts=5, base_delay=0.0, max_delay=0.0, deadline=300.0, timeout=10.0)
    client = ApiClient(server.url, concurrency=1, retry=policy, clock=clock)
    try:
        with pytest.raises(ServerError, match=r"failed after 2 attempts in 400\.0 s \(not counting 200\.0 s "
                                              r"waiting for a free --concurrency slot\); last error: HTTP 503"):
            client.gather([lambda: client.post("/completions", {"prompt": "placeholder 1"}),
                           lambda: client.post("/completions", {"prompt": "placeholder 2"})])
    finally:
        client.close()
        server.close()


def test_a_timeout_behind_the_clients_other_requests_says_to_lower_the_concurrency(monkeypatch):
    client = ApiClient("http://127.0.0.1:9/v1", concurrency=16, retry=QUICK)

    async def server_never_answers_in_time(method, path, **kwargs):
        if path == "/first":
            await asyncio.Event().wait()  # still computing when the second fails (then cancelled)
        raise httpx.ReadTimeout("")

    monkeypatch.setattr(client._client, "request", server_never_answers_in_time)
    try:
        with pytest.raises(ServerError, match=r"ReadTimeout: no response\. The server did not answer within 10 s, "
                                              r"which counts .* queue behind the 1 other requests .*"
                                              r"Fix: lower --concurrency"):
            client.gather([lambda: client.post("/first", {}), lambda: client.post("/second", {})])
        with pytest.raises(ServerError, match=r"did not answer within 10 s\. Fix: use a faster server or give "
                                              r"RetryPolicy\(timeout=\.\.\.\)"):
            client.run(client.post("/alone", {}))  # alone, the queue is not the cause
    finally:
        client.close()


def test_a_request_that_cannot_be_sent_fails_at_once():
    client = ApiClient("ftp://127.0.0.1:9/v1", retry=QUICK)
    try:
        with pytest.raises(ServerError, match="cannot be sent"):
            client.run(client.post("/completions", {"prompt": "x"}))
        assert client.retries == 0
    finally:
        client.close()


def test_a_failed_batch_cancels_its_other_requests():
    client = ApiClient("http://127.0.0.1:9/v1", retry=QUICK)
    cancelled = []

    async def fails():
        raise InputError("placeholder failure", hint="none")

    async def waits_for_ever():
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    try:
        with pytest.raises(InputError, match="placeholder failure"):
            client.gather([waits_for_ever, fails, waits_for_ever])
        assert cancelled == [True, True]  # nothing keeps running (or retrying) after the batch failed
    finally:
        client.close()


def test_end_of_text_comes_from_the_servers_stop_reason_and_partial_characters_are_never_candidates():
    from toxiforge.models.openai_lm import OpenAILM

    lm = OpenAILM(ApiClient("http://127.0.0.1:9/v1", retry=QUICK), "stub")
    try:
        # the server stopped on its top token: that string is this model's end of text (id 0) from now on
        ids = lm.candidate_ids({"<|placeholder_end|>": -0.1, " word": -2.0, "\ufffd": -3.0, "bytes:\\xe2": -4.0},
                               ended=True)
        assert set(ids) == {0, lm.table.intern(" word")} and ids[0] == -0.1
        assert lm.table.intern("<|placeholder_end|>") == 0
        # "" on top without a stop is llama.cpp's partial character, not an end: dropped
        ids = lm.candidate_ids({"": -0.2, " next": -1.0}, ended=False)
        assert set(ids) == {lm.table.intern(" next")}
        # ranked below the top, the usual spellings still read as end of text
        assert 0 in lm.candidate_ids({" more": -0.1, "</s>": -2.0}, ended=False)
        assert all("\ufffd" not in t for t in lm.token_texts())
    finally:
        lm.close()
