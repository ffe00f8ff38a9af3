"""Shared fixtures of the bias tests."""

from __future__ import annotations

import pytest

from conftest import shared_file  # noqa: F401  (the suite's one helper, in tests/conftest.py, for the bias tests)


@pytest.fixture(autouse=True)
def _bias_cache(tmp_path, monkeypatch):
    """Fetched and remembered word lists and dialect models go to a per-test folder, never the user's cache."""
    from toxiforge.bias.fetch import Resource

    monkeypatch.setattr(Resource, "default_dir", lambda self: tmp_path / "bias-cache" / self.name)

