"""The one lazy-name idiom: lazy_exports and Registry."""

from __future__ import annotations

import sys
import types

import pytest

from toxiforge._lazy import Registry, did_you_mean, lazy_exports
from toxiforge.errors import InputError


def test_lazy_exports_resolves_on_first_use_and_caches(monkeypatch):
    package = types.ModuleType("fakepkg")
    monkeypatch.setitem(sys.modules, "fakepkg", package)
    sub = types.ModuleType("fakepkg.sub")
    sub.VALUE = 42
    monkeypatch.setitem(sys.modules, "fakepkg.sub", sub)
    package.__getattr__, package.__dir__, package.__all__ = lazy_exports("fakepkg", {"VALUE": "sub:VALUE"})
    assert package.__all__ == ["VALUE"]
    assert "VALUE" not in vars(package)
    assert package.VALUE == 42
    assert vars(package)["VALUE"] == 42  # cached
    assert "VALUE" in dir(package)
    with pytest.raises(AttributeError, match="no attribute 'missing'"):
        package.missing  # noqa: B018


PACKAGES = ("attacks", "classifiers", "data", "decoding", "demonstrations", "models", "pipeline", "training")


def test_real_packages_export_lazily():
    import toxiforge.training as training

    assert callable(training.train_classifier)


@pytest.mark.parametrize("package", PACKAGES)
def test_every_exported_name_resolves_and_packages_import_no_heavy_library(package):
    import importlib
    import inspect
    import subprocess

    code = (f"import sys, toxiforge.{package}; "
            "print([m for m in ('torch', 'transformers', 'sklearn', 'pyarrow') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    module = importlib.import_module(f"toxiforge.{package}")
    assert module.__all__ and module.__all__ == sorted(module.__all__)
    for name in module.__all__:
        value = getattr(module, name)  # a wrong target raises here
        if inspect.isclass(value) or inspect.isfunction(value):
            assert value.__name__ == name


def test_registry_imports_targets_lazily_and_suggests_on_typo():
    registry: Registry[object] = Registry("widget", {"json-dumps": "json:dumps", "plain": len})
    assert "JSON_dumps" in registry
    assert registry.get("json_dumps").__name__ == "dumps"
    assert registry.get("plain") is len
    with pytest.raises(InputError, match="unknown widget 'json-dump'.*did you mean 'json-dumps'"):
        registry.get("json-dump")
    with pytest.raises(ValueError, match="already registered"):
        registry.register("Plain", len)
    assert registry.names() == ["json-dumps", "plain"]


def test_did_you_mean_lists_all_when_nothing_is_close():
    assert did_you_mean("zzz", ["alpha", "beta"]) == "known names: alpha, beta"
