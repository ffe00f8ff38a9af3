"""A test that fails while its module's llama.cpp server has died fails with the server's exit signal and log tail
(llama_server.SharedServer), not with the client's connection error; the module's later tests then skip at once."""

from __future__ import annotations

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    try:
        return (yield)
    except BaseException as exc:
        if isinstance(exc, (pytest.skip.Exception, KeyboardInterrupt)):
            raise
        from llama_server import LlamaServer

        for value in getattr(item, "funcargs", {}).values():
            shared = getattr(value, "shared", None) if isinstance(value, LlamaServer) else None
            death = shared.died_during_test() if shared is not None else None
            if death is not None:
                raise pytest.fail.Exception(f"{death}\n(the test failed with {type(exc).__name__}: {exc})",
                                            pytrace=False) from None
        raise
