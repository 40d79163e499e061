"""Backends by name: a small registry per kind, plus user plug-ins loaded by class path (as verl does).

    SCORERS = Registry("scoring backend")
    @SCORERS.register("transformers")
    class TransformersScorer: ...
    SCORERS.get("transformers")            # the class
    SCORERS.get("my_pkg.scorers:MyScorer") # a user's own class, imported on demand

Registered entries may be given as "module:attr" strings, so optional GPU backends (vLLM, cuML)
are imported only when chosen. A plug-in that fails to import is refused in one line naming it and the exception,
whatever it raised; an installed entry point that fails, or that reuses a taken name, is skipped with one warning
(`register_entry_points`), so one broken package never takes down the commands that do not use it.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")
log = logging.getLogger("ads.plugins")


class UnknownBackendError(ValueError):
    """A backend name that is neither registered nor an importable class path."""


class PluginError(ValueError):
    """A plug-in that does not fit its registry (a trainer without the protocol's methods, options whose defaults
    fail their own validation), refused when it is registered or first loaded."""


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
        self._broken: dict[str, str] = {}  # entry point name -> why it was skipped (said again when it is named)

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

    def broken(self, name: str) -> str | None:
        """Why the installed entry point NAME was skipped, or None (see `register_entry_points`)."""
        return self._broken.get(name)

    def get(self, name: str) -> Any:
        """The backend registered as `name`, or the class a dotted/colon path names."""
        entry = self._entries.get(name)
        if entry is None and name in self._broken:
            raise UnknownBackendError(f"{self.kind} {name!r}: {self._broken[name]}")
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
            except PluginError as exc:  # it imported, and its registration refused it
                raise UnknownBackendError(f"{self.kind} {name!r} is refused: {exc}") from exc
            except (Exception, SystemExit) as exc:  # a plug-in may raise anything at import (argparse: SystemExit)
                raise UnknownBackendError(f"{self.kind} {name!r} cannot be imported: {exception_line(exc)}") from exc
        return entry

    def describe(self, name: str) -> str:
        """What is registered as NAME, as a class path (a lazy entry: its "module:attr")."""
        entry = self._entries[name]
        if isinstance(entry, str):
            return entry
        return f"{getattr(entry, '__module__', '?')}:{getattr(entry, '__qualname__', type(entry).__name__)}"

    def register_entry_points(self, eps: Iterable[Any], group: str, add: Callable[[str, Any], Any]) -> None:
        """Register the installed entry points EPS of GROUP with ADD(name, loaded object). One whose import or ADD
        raises is skipped with one warning and remembered (naming it later says why); one named like an entry
        already registered (a built-in) is skipped with a warning naming both. Called once per process, when the
        registry is first needed."""
        for ep in eps:
            declared = f"entry point '{ep.name} = {ep.value}' (group {group})"
            if ep.name in self._entries:
                taken = f"{ep.name!r} is already the {self.kind} {self.describe(ep.name)}"
                log.warning("the %s %s is not used: %s; declare it under another name", self.kind, declared, taken)
                continue
            try:
                add(ep.name, ep.load())
            except (Exception, SystemExit) as exc:  # PluginError too: skipped like an import that fails
                self._broken[ep.name] = f"its {declared} cannot be loaded: {exception_line(exc)}"
                log.warning("skipped the %s %s, which cannot be loaded: %s", self.kind, declared, exception_line(exc))


def exception_line(exc: BaseException) -> str:
    """An exception as one line with its type: `RuntimeError: no GPU`."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())
