"""Build locks that cannot outlive their holder, with fencing tokens: a build that lost its lock publishes nothing.

A build (and `ads format`) holds one lock on its OUT for the whole build (`owning`), keyed on OUT's canonical
location (`ads_core.storage.fencing.canonical_location`), so every spelling of one folder or bucket prefix is one
lock, and kept with OUT (`place.py`: `OUT/.lock`, or OUT's bucket), so builds meet there whatever their cache
folder. Its record (in a `LockStore`, see `store.py`) names the holder: host, pid, the process's start time, a nonce
and a lease expiry that a heartbeat thread renews while the build runs. A lock is taken over, with a warning
naming the old holder, when
- its holder is on this host and dead (pid gone, or reused by a process that started later), or
- its lease expired (a holder that stopped renewing: dead on another host, or paused longer than its lease).
Each acquisition creates the next generation of the lock, and its number is the build's fencing token. The
build guards OUT with it (`fencing.guarded`): every publish checks, right before its rename or PUT, that the
token is still the newest and the build's own (`Fence.check`), so a paused build that was taken over refuses
to publish and fails with one line (`LockLost`). The check needs only the store and the token, so it works in
Dask workers that do not hold the lock (`fenced`). A build that must wait says so every few seconds, naming the
holder, and gives up after `ADS_LOCK_WAIT_S` (default 6 h) with one clear line.
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ads_core.locks.fence import Fence, fenced
from ads_core.locks.place import also_for, store_at, store_for
from ads_core.locks.store import (
    WAIT_ENV,
    LockSettings,
    LockStore,
    describe,
    free_because,
    lock_settings,
    process_start,
)
from ads_core.storage import fencing
from ads_core.storage.errors import translating
from ads_core.storage.fencing import LockLost

log = logging.getLogger("ads.locks")

_WAIT_LOG_EVERY = 5.0
_POLL = 0.2
__all__ = ["BuildLockManager", "Fence", "LockLost", "LockWaitTimeout", "fenced", "out_lock_key", "owning"]


class LockWaitTimeout(RuntimeError):
    """Waited longer than ADS_LOCK_WAIT_S for another build's lock (`holder`: who has it)."""

    def __init__(self, message: str, holder: str = "?") -> None:
        super().__init__(message)
        self.holder = holder


@dataclass
class _Held:
    holder: str
    fence: Fence


_MANAGERS: list[BuildLockManager] = []


def release_everything() -> None:
    """Every lock this process holds, for an exit that skips atexit (after SIGTERM / Ctrl-C)."""
    for manager in list(_MANAGERS):
        manager.release_all()


class BuildLockManager:
    """Holder-aware, fenced locks with a lease renewed by a heartbeat (the names follow Prefect's LockManager)."""

    def __init__(self, store: LockStore | None = None) -> None:
        self._store = store
        self._held: dict[str, _Held] = {}
        self.taken_over: dict[str, dict[str, Any]] = {}  # key -> the stale holder's record
        self.lost: dict[str, str] = {}  # key -> why it is no longer ours
        self._guard = threading.Lock()
        self._beat: threading.Thread | None = None
        _MANAGERS.append(self)
        atexit.register(self.release_all)

    def __reduce__(self) -> tuple[type[BuildLockManager], tuple[()]]:
        """Sent to Dask workers: a fresh manager there (locks and threads stay here)."""
        return (BuildLockManager, ())

    @property
    def store(self) -> LockStore:
        return self._store if self._store is not None else store_at()  # ADS_LOCK_DIR read at call time

    def _record(self, holder: str, nonce: str, settings: LockSettings) -> dict[str, Any]:
        pid = os.getpid()
        return {
            "holder": holder,
            "nonce": nonce,
            "host": socket.gethostname(),
            "pid": pid,
            "started": process_start(pid),
            "acquired_at": time.time(),
            "lease_until": time.time() + settings.lease_s,
        }

    # -- heartbeat ----------------------------------------------------------------------------

    def _start_heartbeat(self, every: float) -> None:
        with self._guard:
            if self._beat is None:
                self._beat = threading.Thread(
                    target=self._renew_forever, args=(every,), name="ads-lock-heartbeat", daemon=True
                )
                self._beat.start()

    def _renew_forever(self, every: float) -> None:
        while True:
            time.sleep(every)
            with self._guard:
                held = dict(self._held)
                if not held:
                    self._beat = None
                    return
            for key, entry in held.items():
                self._renew(key, entry)

    def _renew(self, key: str, entry: _Held) -> None:
        store = store_at(entry.fence.store)
        try:
            newest = store.newest(key)
            if entry.fence.owns(newest):
                assert newest is not None
                entry.fence.renew(store, newest)
                return
        except Exception as exc:  # noqa: BLE001 - storage or network: retried at the next beat
            log.warning("could not renew the build lock %s: %s", key, exc)
            return
        message = entry.fence.lost_message(newest)
        with self._guard:
            if self._held.get(key) is entry:
                del self._held[key]
                self.lost[key] = message
        log.warning("%s", message)

    # -- acquire / release ----------------------------------------------------------------------

    def acquire_lock(
        self,
        key: str,
        holder: str,
        acquire_timeout: float | None = None,
        hold_timeout: float | None = None,
        label: str | None = None,
        store: LockStore | None = None,
        what: str = "build",
    ) -> bool:
        """Take the lock (the next generation) in `store` (default: this manager's), waiting while a live holder
        has it; LockWaitTimeout after the wait."""
        settings = lock_settings()
        store = store if store is not None else self.store
        if self.is_lock_holder(key, holder):
            return True
        deadline = time.monotonic() + (acquire_timeout if acquire_timeout is not None else settings.wait_s)
        next_log = time.monotonic() + _WAIT_LOG_EVERY
        while True:
            newest = store.newest(key)
            why = None if newest is None else free_because(newest)
            if newest is None or why is not None:
                nonce = uuid.uuid4().hex
                number = (newest.number if newest else 0) + 1
                if store.create(key, number, self._record(holder, nonce, settings)):
                    if newest is not None and why != "released":
                        log.warning("taking over the %s lock %s from %s: %s", what, key, describe(newest.record), why)
                        self.taken_over[key] = {**newest.record, "stale_reason": why}
                    store.prune(key, below=number - 1)  # keep the previous generation, for diagnostics
                    fence = Fence(
                        store.location, key, number, nonce, label or key, settings.lease_s, settings.heartbeat_s, what
                    )
                    with self._guard:
                        self._held[key] = _Held(holder, fence)
                        self.lost.pop(key, None)
                    self._start_heartbeat(settings.heartbeat_s)
                    return True
                continue  # another build created that generation first: look again
            now = time.monotonic()
            if now >= deadline:
                raise LockWaitTimeout(
                    f"gave up waiting for the {what} lock {label or key} held by {describe(newest.record)} "
                    f"(set {WAIT_ENV} to wait longer, or stop that {what})",
                    holder=describe(newest.record),
                )
            if now >= next_log:
                log.warning("waiting for the %s lock %s held by %s", what, label or key, describe(newest.record))
                next_log = now + _WAIT_LOG_EVERY
            time.sleep(_POLL)

    def fence(self, key: str) -> Fence | None:
        with self._guard:
            entry = self._held.get(key)
        return entry.fence if entry else None

    def _release(self, key: str, entry: _Held) -> bool:
        """Mark our generation released if it is still the newest and ours; False when it was not."""
        store = store_at(entry.fence.store)
        newest = store.newest(key)
        if not entry.fence.owns(newest):
            return False
        assert newest is not None
        store.rewrite(key, entry.fence.token, {**newest.record, "released": True, "lease_until": time.time()})
        return True

    def release_lock(self, key: str, holder: str) -> None:
        with self._guard:
            entry = self._held.get(key)
            if entry is not None and entry.holder == holder:
                del self._held[key]
        if entry is None or entry.holder != holder or not self._release(key, entry):
            raise ValueError(f"No lock held by {holder} for transaction with key {key}")

    def release_all(self) -> None:
        """Locks this process still holds (at exit, or after Ctrl-C / SIGTERM)."""
        with self._guard:
            held, self._held = dict(self._held), {}
        for key, entry in held.items():
            try:
                self._release(key, entry)
            except Exception as exc:  # noqa: BLE001 - storage or network: the lease lapses on its own
                log.warning("could not release the build lock %s: %s", key, exc)

    def is_locked(self, key: str) -> bool:
        newest = self.store.newest(key)
        return newest is not None and free_because(newest) is None

    def is_lock_holder(self, key: str, holder: str) -> bool:
        with self._guard:
            entry = self._held.get(key)
        return (
            entry is not None and entry.holder == holder and entry.fence.owns(store_at(entry.fence.store).newest(key))
        )

    def wait_for_lock(self, key: str, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        next_log = time.monotonic() + _WAIT_LOG_EVERY
        while self.is_locked(key):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if time.monotonic() >= next_log:
                newest = self.store.newest(key)
                log.warning("waiting for the build lock %s held by %s", key, describe(newest.record if newest else {}))
                next_log = time.monotonic() + _WAIT_LOG_EVERY
            time.sleep(_POLL)
        return True


OUT_LOCKS = BuildLockManager()
SECOND_OUT_LOCKS = BuildLockManager()  # a local OUT's second lock, in ADS_LOCK_DIR when set (`place.also_for`)


def held_locks(store: Any = None) -> dict[str, dict[str, Any]]:
    """The locks of a store (a `DirLockStore` or `ObjectLockStore`, default the configured one) that someone holds
    now (newest generation neither released nor stale), by key."""
    store = store or store_at()
    newest = {key: store.newest(key) for key in store.keys()}
    return {key: gen.record for key, gen in newest.items() if gen is not None and free_because(gen) is None}


def out_lock_key(out: str) -> str:
    """The lock of an OUT: its canonical location, hashed (every spelling of one place is one lock)."""
    return "out-" + hashlib.sha256(fencing.canonical_location(out).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Ownership:
    fence: Fence
    taken_over: dict[str, Any] | None  # the stale holder's record, when this build took the lock over


@contextmanager
def owning(out: str, holder: str) -> Iterator[Ownership]:
    """Hold OUT for one whole build: a second build into the same OUT waits, then runs after it. Every publish
    into OUT from this process is fenced while the block runs; pass `fence.to_dict()` to work done elsewhere."""
    key = out_lock_key(out)
    OUT_LOCKS.taken_over.pop(key, None)
    with translating(out):  # OUT/.lock in a read-only OUT: the storage layer's one line, not a traceback
        OUT_LOCKS.acquire_lock(key, holder, label=out, store=store_for(out))  # OUT/.lock, or OUT's bucket
    fence = OUT_LOCKS.fence(key)
    assert fence is not None
    checks, held, second = [fence.check], [OUT_LOCKS], also_for(out)
    try:
        if second is not None:  # ADS_LOCK_DIR adds a lock there, never moves OUT's own
            SECOND_OUT_LOCKS.acquire_lock(key, holder, label=out, store=second)
            held.append(SECOND_OUT_LOCKS)
            second_fence = SECOND_OUT_LOCKS.fence(key)
            assert second_fence is not None
            checks.append(second_fence.check)

        def check_every_lock() -> None:
            for check in checks:
                check()

        with fencing.guarded(out, check_every_lock):
            yield Ownership(fence, OUT_LOCKS.taken_over.pop(key, None))
    finally:
        for manager in reversed(held):
            try:
                manager.release_lock(key, holder)
            except ValueError:  # taken over meanwhile (our lease lapsed): nothing of ours to release
                log.warning("the lock on %s was no longer ours at the end of the build", out)
            except Exception as exc:  # noqa: BLE001 - a full or read-only OUT: the build's own error must show
                log.warning("could not release the lock on %s (free once this process ends): %s", out, exc)
