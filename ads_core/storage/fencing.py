"""Fenced publishing: a write into a guarded location is checked right before it becomes visible.

A build that holds the lock on its OUT installs a guard for OUT (`guarded`); every atomic write of the storage
layer calls `check_publish(uri)` immediately before its rename (local) or its PUT (object stores). The guard
checks that the build still holds the lock with its token, and raises `LockLost` when it does not, so a build
that lost its lock (a pause longer than its lease, and another build took over) publishes nothing more. The
guard is a plain callable: this layer knows nothing of how locks are stored, and never imports Prefect.

`canonical_location` is the one identity of a location, whatever its spelling: the lock key and the guard's
scope both use it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_LOCAL_SCHEMES = ("file", "local")
_GUARDS: dict[str, list[Callable[[], None]]] = {}  # canonical location -> checks, innermost last
_GUARDS_LOCK = threading.Lock()


class LockLost(RuntimeError):
    """This build no longer holds the lock on its output folder: it must publish nothing more."""


def canonical_location(uri: str) -> str:
    """One spelling per location: a local folder's resolved real path (symlinks, `file://`, `..`, `~`, trailing
    slashes), or `scheme://bucket/key` with the scheme and bucket lowercased and empty path segments dropped.

    Two spellings of one place always give the same string; two places may share one only when they are
    spelled alike but differ in ways object stores rarely mean (`a//b` and `a/b`), which only serialises them."""
    scheme, sep, rest = uri.partition("://")
    if not sep or scheme.lower() in _LOCAL_SCHEMES:
        path = rest if sep else uri
        if sep and not path.startswith("/"):  # file://localhost/x, file://host/x
            path = "/" + path.partition("/")[2]
        return os.path.realpath(os.path.expanduser(path))
    bucket, _, key = rest.partition("/")
    parts = [p for p in key.split("/") if p]
    return f"{scheme.lower()}://{bucket.lower()}" + "".join(f"/{p}" for p in parts)


def _within(location: str, scope: str) -> bool:
    return location == scope or location.startswith(scope.rstrip("/") + "/")


@contextmanager
def guarded(scope: str, check: Callable[[], None]) -> Iterator[None]:
    """While the block runs, every publish under `scope` (any spelling) in this process first calls `check`,
    which raises (LockLost) to refuse it."""
    key = canonical_location(scope)
    with _GUARDS_LOCK:
        _GUARDS.setdefault(key, []).append(check)
    try:
        yield
    finally:
        with _GUARDS_LOCK:
            checks = _GUARDS.get(key, [])
            if check in checks:
                checks.remove(check)
            if not checks:
                _GUARDS.pop(key, None)


def check_publish(uri: str) -> None:
    """Called by the storage layer right before a write becomes visible: raises LockLost if a guard refuses."""
    if not _GUARDS:
        return
    location = canonical_location(uri)
    with _GUARDS_LOCK:
        checks = [checks[-1] for scope, checks in _GUARDS.items() if checks and _within(location, scope)]
    for check in checks:
        check()
