"""One idiom for lazy names: package exports and name registries.

* :func:`lazy_exports` -- a package's public names, each imported from its submodule on first use, so importing
  the package stays cheap (no torch, transformers or scikit-learn until a name that needs them is touched)::

      __getattr__, __dir__, __all__ = lazy_exports(__name__, {
          "TrainConfig": "trainer:TrainConfig",
          "evaluate": "evaluate:evaluate",
      })

  A target is ``"module:attr"``; a module without a leading dot is relative to the package.

  The rule: a package's ``__init__.py`` holds its docstring and this one line, nothing else -- no code, no eager
  ``from .x import y``, even when the submodules are light, so every package reads the same way and importing a
  package never imports its submodules. Code that used to live in an ``__init__`` (a protocol, a registry, a
  loader) lives in a submodule the table points at. A package without public names (``analysis``,
  ``annotation``) has only a docstring; import its submodules directly.
* :class:`Registry` -- a name -> lazy target mapping (``"package.module:attr"`` strings or callables) that says
  "did you mean" on a typo. Classifiers, LM backends, decoders and bias-only models all register this way.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

from toxiforge.errors import InputError

T = TypeVar("T")


def _resolve(target: str, package: str | None = None) -> Any:
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"lazy target {target!r} must look like 'module:attr'")
    if package is not None and not module_name.startswith("toxiforge"):
        module_name = f"{package}.{module_name.lstrip('.')}"
    return getattr(importlib.import_module(module_name), attr)


def lazy_exports(package: str, exports: Mapping[str, str]
                 ) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """Module ``__getattr__``, ``__dir__`` and ``__all__`` for ``package`` exporting ``exports`` lazily.

    Each resolved name is cached in the package's namespace, so later lookups are plain attribute reads.
    """
    import sys

    table = dict(exports)

    def __getattr__(name: str) -> Any:
        target = table.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = _resolve(target, package)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__, sorted(table)


def did_you_mean(name: str, known: list[str] | tuple[str, ...], aliases: Mapping[str, str] | None = None) -> str:
    """A hint naming the closest known names, or listing them all. ``aliases`` (alias -> known name) are matched
    too, a close alias named by the name it stands for (``asain`` -> ``asian``, ``hispanc`` -> ``latino``)."""
    targets = {**{k: k for k in known}, **(aliases or {})}
    close = list(dict.fromkeys(targets[c] for c in difflib.get_close_matches(name, list(targets), n=3, cutoff=0.6)))
    if close:
        return "did you mean " + " or ".join(repr(c) for c in close) + "?"
    return "known names: " + ", ".join(known)


class Registry(Generic[T]):
    """Names -> lazily imported targets, case-insensitive, with "did you mean" on a typo.

    ``kind`` names what is registered (for messages: "unknown classifier 'x'"). Targets are
    ``"package.module:attr"`` strings (imported on first :meth:`get`) or objects used as they are.
    """

    def __init__(self, kind: str, entries: Mapping[str, str | T] | None = None):
        self.kind = kind
        self._entries: dict[str, str | T] = {}
        for name, target in (entries or {}).items():
            self.register(name, target)

    @staticmethod
    def key(name: str) -> str:
        return name.strip().lower().replace("_", "-")

    def register(self, name: str, target: str | T) -> None:
        key = self.key(name)
        if key in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[key] = target

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.key(name) in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        return list(self._entries)

    def get(self, name: str) -> T:
        """The target registered as ``name`` (imported now if it is a ``"module:attr"`` string)."""
        key = self.key(name)
        if key not in self._entries:
            raise InputError(f"unknown {self.kind} {name!r}", hint=did_you_mean(key, self.names()))
        target = self._entries[key]
        if isinstance(target, str):
            target = _resolve(target)
            self._entries[key] = target
        return target

    def config(self, name: str, settings: Mapping[str, Any], *, option: str,
               flags: Mapping[str, str] | None = None) -> Any:
        """The config of entry ``name`` from ``settings`` (its ``config_type``'s field names; None = the default),
        for registries of classes with a ``config_type`` dataclass (decoding methods, attack families).

        Raises :class:`~toxiforge.errors.InputError` for an unknown name (with "did you mean"), a setting the
        entry's config does not have (naming the entries that have it, chosen with ``option``, e.g. ``--method``),
        or a value the config refuses. A setting is named by its command-line flag: ``flags[field]`` where the
        flag is not the field's name (``{"num_beams": "--beams"}``), else ``--field-name``.
        """
        from dataclasses import fields

        config_type = self.get(name).config_type  # type: ignore[attr-defined]
        given = {k: v for k, v in settings.items() if v is not None}
        foreign = sorted(set(given) - {f.name for f in fields(config_type)})
        if foreign:
            named = ", ".join((flags or {}).get(s, "--" + s.replace("_", "-")) for s in foreign)
            owners = [n for n in self.names()
                      if set(foreign) <= {f.name for f in fields(self.get(n).config_type)}]  # type: ignore[attr-defined]
            raise InputError(f"{named} {'does' if len(foreign) == 1 else 'do'} not apply to the {self.key(name)} "
                             f"{self.kind.split()[-1]}",
                             hint=(f"use {option} {' or '.join(owners)}, or " if owners else "") + f"drop {named}")
        return config_type(**given)


__all__ = ["Registry", "did_you_mean", "lazy_exports"]
