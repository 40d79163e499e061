"""Backends by name: a small registry per kind, plus user plug-ins loaded by class path (as verl does).

    SCORERS = Registry("scoring backend")
    @SCORERS.register("transformers")
    class TransformersScorer: ...
    SCORERS.get("transformers")            # the class
    SCORERS.get("my_pkg.scorers:MyScorer") # a user's own class, imported on demand

Registered entries may be given as "module:attr" strings, so optional GPU backends (vLLM, cuML)
are imported only when chosen.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class UnknownBackendError(ValueError):
    """A backend name that is neither registered nor an importable class path."""


class DuplicateBackendError(ValueError):
    """A second registration under a name already taken (it would silently replace the first)."""


def load_by_path(path: str) -> Any:
    """Import `pkg.module:Attr` or `pkg.module.Attr`."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    if not module_name or not attr:
        raise ImportError(f"{path!r} is not a class path (pkg.module:Class)")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


class Registry:
    """Name -> backend class (or a lazy "module:attr" reference)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Any] = {}

    def register(self, name: str, target: str | None = None) -> Callable[[T], T]:
        """Decorator (or, with `target="module:attr"`, a lazy registration) under `name`; a name is taken once."""
        if target is not None:
            self._add(name, target)

        def deco(obj: T) -> T:
            self._add(name, obj)
            return obj

        return deco

    def _add(self, name: str, entry: Any) -> None:
        if name in self._entries:
            raise DuplicateBackendError(f"{self.kind} {name!r} is already registered ({self._entries[name]!r})")
        self._entries[name] = entry

    def names(self) -> list[str]:
        return list(self._entries)

    def get(self, name: str) -> Any:
        """The backend registered as `name`, or the class a dotted/colon path names."""
        entry = self._entries.get(name)
        if entry is None and ("." in name or ":" in name):
            entry = name
        if entry is None:
            raise UnknownBackendError(
                f"unknown {self.kind} {name!r}; choose one of {', '.join(['auto', *self._entries])} "
                "or give a class path such as my_pkg.module:MyBackend"
            )
        if isinstance(entry, str):
            try:
                entry = load_by_path(entry)
            except (ImportError, AttributeError) as exc:
                raise UnknownBackendError(f"{self.kind} {name!r} cannot be imported: {exc}") from exc
        return entry
