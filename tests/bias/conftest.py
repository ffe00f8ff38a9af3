"""Shared fixtures of the bias tests."""

from __future__ import annotations

from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _bias_cache(tmp_path, monkeypatch):
    """Fetched and remembered word lists and dialect models go to a per-test folder, never the user's cache."""
    from toxiforge.bias.fetch import Resource

    monkeypatch.setattr(Resource, "default_dir", lambda self: tmp_path / "bias-cache" / self.name)


def shared_file(*parts: str) -> Path:
    """A file or folder of ../shared/data, or skip the test saying why."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (the shared data of the toxiforge workspace; see docs/bias.md)")
    return path
