"""Build locks that cannot outlive their holder: two builds of the same stage serialise on its cache key.

Prefect's SERIALIZABLE isolation asks a lock manager for a lock per cache key. This one implements
Prefect's `LockManager` protocol (not its file manager's internals) with lock files that record who
holds them: host, pid, the process's start time and a lease expiry that a heartbeat thread renews
while the build runs. A lock is taken over, with a warning naming the old holder, when
- its holder is on this host and dead (pid gone, or reused by a process that started later), or
- its lease expired (a holder on another host, via a shared `ADS_LOCK_DIR`, that stopped renewing).
A build that must wait says so every few seconds, naming the holder, and gives up after
`ADS_LOCK_WAIT_S` (default 6 h) with one clear line.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

log = logging.getLogger("ads.locks")

LOCK_DIR_ENV = "ADS_LOCK_DIR"
LEASE_ENV = "ADS_LOCK_LEASE_S"
WAIT_ENV = "ADS_LOCK_WAIT_S"
_WAIT_LOG_EVERY = 5.0
_POLL = 0.2


class LockWaitTimeout(RuntimeError):
    """Waited longer than ADS_LOCK_WAIT_S for another build's lock."""


def lock_dir() -> Path:
    """ADS_LOCK_DIR (a shared filesystem for multi-node builds) or $PREFECT_HOME/ads-locks."""
    explicit = os.environ.get(LOCK_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser().resolve()
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser().resolve() / "ads-locks"


def lease_seconds() -> float:
    return float(os.environ.get(LEASE_ENV, "60"))


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid from its holder."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def stale_reason(info: dict[str, Any]) -> str | None:
    """Why a lock's holder can no longer hold it, or None while it may."""
    lease = info.get("lease_until")
    if isinstance(lease, int | float) and lease < time.time():
        return f"its lease expired {time.time() - lease:.0f} s ago"
    if info.get("host") == socket.gethostname() and isinstance(info.get("pid"), int):
        pid = info["pid"]
        if not _pid_alive(pid):
            return f"its process {pid} is gone"
        started = info.get("started")
        if started is not None and process_start(pid) not in (None, started):
            return f"pid {pid} now belongs to another process"
    if "lease_until" not in info and "pid" not in info:  # a lock file of another format or a torn write
        return "it records no holder process or lease"
    return None


def describe(info: dict[str, Any]) -> str:
    return f"{info.get('host', '?')}:{info.get('pid', '?')} (holder {info.get('holder', '?')})"


_MANAGERS: list[BuildLockManager] = []


def release_everything() -> None:
    """Every lock this process holds, for an exit that skips atexit (after SIGTERM / Ctrl-C)."""
    for manager in list(_MANAGERS):
        manager.release_all()


class BuildLockManager:
    """Prefect `LockManager` with holder-aware lock files and a lease renewed by a heartbeat."""

    def __init__(self) -> None:
        self._held: dict[str, tuple[Path, str]] = {}  # key -> (lock file, holder)
        self.taken_over: dict[str, dict[str, Any]] = {}  # key -> the dead holder's record
        _MANAGERS.append(self)
        self._guard = threading.Lock()
        self._beat: threading.Thread | None = None
        atexit.register(self.release_all)

    def __reduce__(self) -> tuple[type[BuildLockManager], tuple[()]]:
        """Sent to Dask workers with the cache policy: a fresh manager there (locks, threads stay here)."""
        return (BuildLockManager, ())

    # -- files ------------------------------------------------------------------------------

    def _path(self, key: str) -> Path:
        return lock_dir() / f"{key}.lock"

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _record(self, holder: str) -> dict[str, Any]:
        pid = os.getpid()
        return {
            "holder": holder,
            "host": socket.gethostname(),
            "pid": pid,
            "started": process_start(pid),
            "lease_until": time.time() + lease_seconds(),
        }

    def _write(self, path: Path, holder: str) -> None:
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
        tmp.write_text(json.dumps(self._record(holder)))
        os.replace(tmp, path)

    def _try_create(self, path: Path, holder: str) -> bool:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            return False
        with os.fdopen(fd, "w") as fh:
            fh.write(json.dumps(self._record(holder)))
        return True

    def _break_if_stale(self, key: str, path: Path) -> bool:
        info = self._read(path)
        if info is None:
            return True
        if not info:  # empty or torn: maybe a lock being written this instant, so only when it is old
            try:
                if time.time() - path.stat().st_mtime < 10:
                    return False
            except FileNotFoundError:
                return True
        reason = stale_reason(info)
        if reason is None:
            return False
        grave = path.with_name(f".{path.name}.{uuid.uuid4().hex}.stale")
        try:
            os.replace(path, grave)  # one taker wins; a concurrent breaker finds the file gone
        except FileNotFoundError:
            return True
        grave.unlink(missing_ok=True)
        log.warning("taking over the build lock %s from %s: %s", key, describe(info), reason)
        self.taken_over[key] = info
        return True

    # -- heartbeat ----------------------------------------------------------------------------

    def _start_heartbeat(self) -> None:
        if self._beat is not None and self._beat.is_alive():
            return
        self._beat = threading.Thread(target=self._renew_forever, name="ads-lock-heartbeat", daemon=True)
        self._beat.start()

    def _renew_forever(self) -> None:
        while True:
            time.sleep(max(lease_seconds() / 3, 0.05))
            with self._guard:
                held = dict(self._held)
            if not held:
                return
            for key, (path, holder) in held.items():
                info = self._read(path)
                if info and info.get("holder") == holder:
                    try:
                        self._write(path, holder)
                    except OSError as exc:
                        log.warning("could not renew the build lock %s: %s", key, exc)

    # -- LockManager protocol -----------------------------------------------------------------

    def acquire_lock(
        self, key: str, holder: str, acquire_timeout: float | None = None, hold_timeout: float | None = None
    ) -> bool:
        path = self._path(key)
        if self.is_lock_holder(key, holder):
            return True
        deadline = time.monotonic() + (
            acquire_timeout if acquire_timeout is not None else float(os.environ.get(WAIT_ENV, str(6 * 3600)))
        )
        next_log = time.monotonic() + _WAIT_LOG_EVERY
        while True:
            if self._try_create(path, holder):
                with self._guard:
                    self._held[key] = (path, holder)
                self._start_heartbeat()
                return True
            if self._break_if_stale(key, path):
                continue
            now = time.monotonic()
            if now >= deadline:
                info = self._read(path) or {}
                raise LockWaitTimeout(
                    f"gave up waiting for the build lock {key} held by {describe(info)} "
                    f"(set {WAIT_ENV} to wait longer, or stop that build)"
                )
            if now >= next_log:
                log.warning("waiting for the build lock %s held by %s", key, describe(self._read(path) or {}))
                next_log = now + _WAIT_LOG_EVERY
            time.sleep(_POLL)

    async def aacquire_lock(
        self, key: str, holder: str, acquire_timeout: float | None = None, hold_timeout: float | None = None
    ) -> bool:
        import anyio

        return await anyio.to_thread.run_sync(self.acquire_lock, key, holder, acquire_timeout, hold_timeout)

    def release_lock(self, key: str, holder: str) -> None:
        path = self._path(key)
        info = self._read(path)
        with self._guard:
            self._held.pop(key, None)
        if info is None:
            raise ValueError(f"No lock for transaction with key {key}")
        if info.get("holder") != holder:
            raise ValueError(f"No lock held by {holder} for transaction with key {key}")
        path.unlink(missing_ok=True)

    def release_all(self) -> None:
        """Locks this process still holds (at exit, or after Ctrl-C / SIGTERM)."""
        with self._guard:
            held, self._held = dict(self._held), {}
        for _, (path, holder) in held.items():
            info = self._read(path)
            if info and info.get("holder") == holder:
                path.unlink(missing_ok=True)

    def is_locked(self, key: str) -> bool:
        path = self._path(key)
        return self._read(path) is not None and not self._break_if_stale(key, path)

    def is_lock_holder(self, key: str, holder: str) -> bool:
        info = self._read(self._path(key))
        return bool(info) and info.get("holder") == holder and stale_reason(info) is None

    def wait_for_lock(self, key: str, timeout: float | None = None) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        next_log = time.monotonic() + _WAIT_LOG_EVERY
        while self.is_locked(key):
            if deadline is not None and time.monotonic() >= deadline:
                return False
            if time.monotonic() >= next_log:
                log.warning(
                    "waiting for the build lock %s held by %s", key, describe(self._read(self._path(key)) or {})
                )
                next_log = time.monotonic() + _WAIT_LOG_EVERY
            time.sleep(_POLL)
        return True

    async def await_for_lock(self, key: str, timeout: float | None = None) -> bool:
        import anyio

        return await anyio.to_thread.run_sync(self.wait_for_lock, key, timeout)


OUT_LOCKS = BuildLockManager()


def out_lock_key(out: str) -> str:
    import hashlib

    return "out-" + hashlib.sha256(out.rstrip("/").encode()).hexdigest()[:32]


@contextmanager
def owning(out: str, holder: str) -> Iterator[dict[str, Any] | None]:
    """Hold OUT for one whole build: a second build into the same OUT waits, then runs after it.

    Yields the record of a dead holder whose lock was taken over (so its flow run can be marked
    Crashed), or None.
    """
    key = out_lock_key(out)
    OUT_LOCKS.taken_over.pop(key, None)
    OUT_LOCKS.acquire_lock(key, holder)
    try:
        yield OUT_LOCKS.taken_over.pop(key, None)
    finally:
        try:
            OUT_LOCKS.release_lock(key, holder)
        except ValueError:  # taken over meanwhile (our lease lapsed): nothing of ours to release
            log.warning("the lock on %s was no longer ours at the end of the build", out)
