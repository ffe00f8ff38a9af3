"""An asynchronous client for OpenAI-compatible inference servers (vLLM, TGI, llama.cpp, Ollama, hosted APIs).

httpx (already a dependency) on a private asyncio event loop in a daemon thread, so that synchronous callers (the
decoders) can keep many requests in flight: :meth:`ApiClient.gather` runs a list of requests concurrently, at
most ``concurrency`` at a time.

Retries (:class:`RetryPolicy`): transient failures (:func:`is_transient`: 408, 425, 429, 5xx, timeouts, refused
or dropped connections, a server that closed the connection mid-answer) are retried with exponential backoff and
full jitter (a random wait in ``[0, min(max_delay, base_delay * 2**attempt)]``); a ``Retry-After`` header
(seconds or an HTTP date) is honoured as a lower bound. A request keeps retrying until ``max_attempts`` or
``deadline`` seconds, whichever comes first, so a run survives an inference server that is restarted (the
defaults allow five minutes). The deadline counts from when the request is sent: the time it waits for one of
the client's own ``concurrency`` slots (behind the batch's other requests) does not count. The time it waits in
the server's queue does, and counts towards ``timeout`` too (the client cannot tell it from a slow answer), so a
server that runs fewer requests at once than ``concurrency`` (llama-cpp-python's runs one) can time out the last
of them; the error then says to lower ``--concurrency``. Nothing else is retried: any other 4xx is a mistake in
the request (wrong model name, wrong key) and becomes a :class:`~toxiforge.errors.InputError` that quotes the
server, and a request httpx cannot send (a local protocol error, an unsupported URL scheme) fails at once.

:meth:`ApiClient.gather` runs a batch's requests concurrently; when one fails for good, the others are cancelled
(none keeps loading the server or retrying after the batch has failed). The load on one server is the number of
clients (Ray workers, processes) × ``concurrency`` requests in flight.

Credentials never reach provenance: :func:`public_url` drops user:password@ and the query string.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from toxiforge.errors import InputError, ToxiforgeError

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})  # timeout, too early, too many, server side


class ServerError(ToxiforgeError):
    """The server could not be reached or kept failing after every retry."""


def is_transient(exc: BaseException) -> bool:
    """Whether an httpx exception may pass on a retry: timeouts and transport failures (refused, reset, closed by a
    restarting server) yes; a request httpx cannot send (LocalProtocolError, UnsupportedProtocol) no."""
    import httpx

    if isinstance(exc, (httpx.LocalProtocolError, httpx.UnsupportedProtocol)):
        return False
    return isinstance(exc, (httpx.TimeoutException, httpx.TransportError))


def public_url(url: str) -> str:
    """``url`` without credentials (user:password@) or query string: safe to write into rows and manifests."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


@dataclass(frozen=True)
class RetryPolicy:
    """When and how long to retry a request (defaults survive a server restart of up to ~5 minutes)."""

    max_attempts: int = 30
    base_delay: float = 0.25
    max_delay: float = 20.0
    deadline: float = 300.0
    timeout: float = 120.0  # seconds for one request (connect, read, write)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise InputError(f"max_attempts={self.max_attempts} must be at least 1", hint="use 30")
        if not (self.base_delay >= 0 and self.max_delay >= self.base_delay and self.deadline > 0
                and self.timeout > 0):
            raise InputError("retry delays must satisfy 0 <= base_delay <= max_delay and deadline, timeout > 0",
                             hint="use the defaults")

    def delay(self, attempt: int, retry_after: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry number ``attempt`` (0-based): full jitter, at least ``retry_after``."""
        wait = rng.uniform(0.0, min(self.max_delay, self.base_delay * 2 ** attempt))
        if retry_after is not None:
            wait = max(wait, min(retry_after, self.deadline))
        return wait


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """``Retry-After`` as seconds from now: delta-seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _server_message(response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300].strip()
    if isinstance(body, dict):
        err = body.get("error", body.get("detail", body))
        if isinstance(err, dict):
            err = err.get("message", err)
        return str(err)[:500]
    return str(body)[:500]


class ApiClient:
    """JSON over HTTP to one OpenAI-compatible base URL, with retries, bounded concurrency and a sync bridge."""

    def __init__(self, base_url: str, *, api_key: str | None = None, concurrency: int = 8,
                 retry: RetryPolicy = RetryPolicy(), clock: Callable[[], float] = time.monotonic):
        if concurrency < 1:
            raise InputError(f"concurrency={concurrency} must be at least 1", hint="use --concurrency 8")
        self.base_url = base_url.rstrip("/")
        self.url = public_url(self.base_url)
        self.concurrency = concurrency
        self.retry = retry
        self.retries = 0  # requests retried so far (for tests and logs)
        self._clock = clock  # seconds, for deadlines (tests pass a fake one)
        self._sending = 0  # requests sent and not yet answered
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._rng = random.Random()
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="toxiforge-api", daemon=True)
        self._thread.start()
        self._client = self.run(self._make_client())

    async def _make_client(self):
        import httpx

        self._semaphore = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
        return httpx.AsyncClient(base_url=self.base_url, headers=self._headers, limits=limits,
                                 timeout=httpx.Timeout(self.retry.timeout))

    # --- sync bridge ---------------------------------------------------------------------------------------
    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the client's loop and wait for its result (callable from any other thread)."""
        if self._loop.is_closed():
            raise ToxiforgeError("the API client was closed; open the model again")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def gather(self, calls: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        """Run every ``call()`` concurrently (at most ``concurrency`` requests in flight); results in order. The
        first failure cancels the calls still running and is raised."""
        async def all_of():
            tasks = [asyncio.ensure_future(call()) for call in calls]
            try:
                return await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()  # a no-op for finished ones
                await asyncio.gather(*tasks, return_exceptions=True)

        return self.run(all_of())

    def close(self) -> None:
        if self._loop.is_closed():
            return
        self.run(self._client.aclose())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    # --- requests ------------------------------------------------------------------------------------------
    async def request(self, method: str, path: str, payload: dict | None = None, *,
                      retry: RetryPolicy | None = None) -> dict:
        """One JSON request with the retry policy; returns the decoded JSON body."""
        import httpx

        policy = retry or self.retry
        clock = self._clock
        started = clock()
        queued = 0.0  # waiting for one of the client's own concurrency slots: not part of the deadline
        last = "no attempt was made"
        timed_out, beside = False, 0
        for attempt in range(policy.max_attempts):
            retry_after = None
            try:
                asked = clock()
                async with self._semaphore:
                    queued += clock() - asked
                    beside = self._sending  # this client's requests the server has before this one
                    self._sending += 1
                    try:
                        response = await self._client.request(method, path, json=payload)
                    finally:
                        self._sending -= 1
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                if not is_transient(exc):
                    raise ServerError(f"{method} {self.url}{path} cannot be sent ({type(exc).__name__}: {exc}). "
                                      "Fix: check the --model openai:URL") from None
                last = f"{type(exc).__name__}: {str(exc) or 'no response'}"
                timed_out = isinstance(exc, httpx.TimeoutException)
            else:
                if response.status_code < 300:
                    try:
                        return response.json()
                    except ValueError:
                        raise ServerError(f"{self.url}{path} answered {response.status_code} with a body that is not "
                                          f"JSON ({response.text[:120]!r}). Fix: point --model openai:URL at the "
                                          "server's OpenAI-compatible base URL (usually ending in /v1)") from None
                if response.status_code not in RETRY_STATUS:
                    raise _client_error(self.url, path, response)
                last = f"HTTP {response.status_code}: {_server_message(response)}"
                timed_out = False
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            elapsed = clock() - started - queued
            if attempt + 1 == policy.max_attempts or elapsed >= policy.deadline:
                break
            wait = min(policy.delay(attempt, retry_after, self._rng), max(0.0, policy.deadline - elapsed))
            self.retries += 1
            await asyncio.sleep(wait)
        head = (f"{method} {self.url}{path} failed after {attempt + 1} attempts in {clock() - started - queued:.1f} s"
                + (f" (not counting {queued:.1f} s waiting for a free --concurrency slot)" if queued >= 0.05 else "")
                + f"; last error: {last}.")
        raise ServerError(f"{head} {_timeout_fix(policy.timeout, beside) if timed_out else _unreachable_fix(self.url)}")

    async def post(self, path: str, payload: dict, *, retry: RetryPolicy | None = None) -> dict:
        return await self.request("POST", path, payload, retry=retry)

    async def get(self, path: str, *, retry: RetryPolicy | None = None) -> dict:
        return await self.request("GET", path, retry=retry)


def _unreachable_fix(url: str) -> str:
    return f"Fix: check that the server is running and reachable: curl {url}/models"


def _timeout_fix(timeout: float, beside: int) -> str:
    """Why a request timed out and what to change: the server's queue when the client had other requests in flight
    (lower --concurrency), else the server's speed (a longer timeout)."""
    longer = f"give RetryPolicy(timeout=...) more than {timeout:g} s (Python API)"
    if beside == 0:
        return f"The server did not answer within {timeout:g} s. Fix: use a faster server or {longer}"
    return (f"The server did not answer within {timeout:g} s, which counts the time the request waited in the "
            f"server's queue behind the {beside} other requests this client had in flight (a server that runs "
            "fewer requests at once than --concurrency, like llama-cpp-python's with one slot, queues the rest). "
            "Fix: lower --concurrency (--judge-concurrency for a -c judge:openai: classifier) to the number of "
            f"requests the server runs at once (1 for llama-cpp-python's server), or {longer}")


def _client_error(url: str, path: str, response) -> InputError:
    status, message = response.status_code, _server_message(response)
    hints = {
        401: "set the key in OPENAI_API_KEY, or name the variable that holds it with --api-key-env",
        403: "check that the API key may use this model",
        404: "check the base URL (an OpenAI-compatible server serves /v1/completions) and the model name after #",
    }
    return InputError(f"{url}{path} refused the request: HTTP {status}: {message}",
                      hint=hints.get(status, "check the model name and options against what the server supports"))


__all__ = ["ApiClient", "RetryPolicy", "ServerError", "is_transient", "parse_retry_after", "public_url"]
