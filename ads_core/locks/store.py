"""Where build locks live, what their records say, and their settings (with bounds).

A lock is a sequence of generations. Taking the lock creates generation N+1, exclusively: of two builds that
try at once, exactly one succeeds. N is the lock's fencing token: it only goes up, so a build that took over
always holds a larger token than the one it took over from, and "is N still the newest generation, and mine?"
tells a writer whether it may still publish. The holder rewrites only its own generation (lease renewals, the
release), so a late renewal by a paused holder can never overwrite its successor's record.

`LockStore` is the interface (`newest`, `create`, `rewrite`, `prune`); `DirLockStore` keeps one folder per
lock with a JSON file per generation (`<lock dir>/<key>/<N>.json`), created with `link()`, which is atomic and
exclusive on local and NFS file systems alike. `objectstore.ObjectLockStore` implements the same four calls in
an object store with conditional writes (`If-None-Match: *` on `<key>/<N>.json`); `place` says which
store holds the lock of an OUT.

A record names its holder (host, pid, process start time, a nonce) and its lease; `free_because` says whether a
lock may be taken: released, its holder dead on this host, or its lease expired.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ads_core.common.envvars import seconds_from_env

LOCK_DIR_ENV = "ADS_LOCK_DIR"
LEASE_ENV = "ADS_LOCK_LEASE_S"
HEARTBEAT_ENV = "ADS_LOCK_HEARTBEAT_S"
WAIT_ENV = "ADS_LOCK_WAIT_S"
DEFAULT_LEASE_S = 60.0
DEFAULT_WAIT_S = 6 * 3600.0
LEASE_BOUNDS = (1.0, 86400.0)
WAIT_BOUNDS = (1.0, 30 * 86400.0)
HEARTBEAT_MIN_S = 0.1
LEASE_PER_HEARTBEAT = 3  # the lease must outlast this many heartbeats: one late renewal never loses it


class LockSettingsError(ValueError):
    """An ADS_LOCK_* variable that is not a number in its bounds (one line, naming the variable)."""


@dataclass(frozen=True)
class LockSettings:
    lease_s: float
    heartbeat_s: float
    wait_s: float


def lock_settings() -> LockSettings:
    """ADS_LOCK_LEASE_S (60 s), ADS_LOCK_HEARTBEAT_S (a quarter of the lease) and ADS_LOCK_WAIT_S (6 h),
    validated: a lease of 0 would let two builds take each other's live locks."""
    lease = seconds_from_env(LEASE_ENV, DEFAULT_LEASE_S, *LEASE_BOUNDS, error=LockSettingsError)
    why = f" (the lease, {LEASE_ENV}={lease:g}, must last {LEASE_PER_HEARTBEAT} heartbeats)"
    low, high = HEARTBEAT_MIN_S, lease / LEASE_PER_HEARTBEAT
    heartbeat = seconds_from_env(HEARTBEAT_ENV, lease / 4, low, high, why, error=LockSettingsError)
    wait = seconds_from_env(WAIT_ENV, DEFAULT_WAIT_S, *WAIT_BOUNDS, error=LockSettingsError)
    return LockSettings(lease_s=lease, heartbeat_s=heartbeat, wait_s=wait)


def lock_dir() -> Path:
    """ADS_LOCK_DIR (a folder; `place.store_at` also takes an s3:// prefix), else `<ADS cache dir>/locks`: the
    store of a lock taken without naming one (an OUT's lock lives with the OUT: `place.own_store`).

    Read from the environment at every call and never set by any module: which layers a process imported does
    not move its locks (before, importing `ads_prefect` moved them to $PREFECT_HOME/ads-locks)."""
    explicit = os.environ.get(LOCK_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser().resolve()
    return default_lock_dir()


def default_lock_dir() -> Path:
    """`<ADS cache dir>/locks`: `lock_dir()` without ADS_LOCK_DIR."""
    from ads_core.common.defaults import cache_dir

    return cache_dir().expanduser().resolve() / "locks"


# ---------------------------------------------------------------------------------------------
# records: who holds a lock, and whether it still may

_TORN_GRACE_S = 10.0  # an unreadable record younger than this may be one being written: it still holds


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
    if "lease_until" not in info and "pid" not in info:  # a record of another format, or a torn write
        return "it records no holder process or lease"
    return None


def describe(info: dict[str, Any]) -> str:
    return f"{info.get('host', '?')}:{info.get('pid', '?')} (holder {info.get('holder', '?')})"


def free_because(newest: Generation) -> str | None:
    """Why the newest generation of a lock may be taken ("released", or why it is stale), None while it holds."""
    if newest.record.get("released"):
        return "released"
    if not newest.record and newest.age_s < _TORN_GRACE_S:
        return None
    return stale_reason(newest.record)


@dataclass(frozen=True)
class Generation:
    number: int  # the fencing token
    record: dict[str, Any]  # {} when unreadable (a torn write of a store without link())
    age_s: float  # since it was last written


class LockStore(Protocol):
    location: str  # enough to reach the same store from another process (a Dask worker)

    def newest(self, key: str) -> Generation | None: ...

    def create(self, key: str, number: int, record: dict[str, Any]) -> bool:
        """Write generation `number` only if it does not exist yet; False when another writer has it."""
        ...

    def rewrite(self, key: str, number: int, record: dict[str, Any]) -> None:
        """Replace the record of a generation (its holder's lease renewal or release), atomically."""
        ...

    def prune(self, key: str, below: int) -> None: ...


_GENERATION = re.compile(r"^(\d{12})\.json$")


class DirLockStore:
    """One folder per lock, one `<N>.json` per generation (see the module docstring)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root)
        self.location = str(self.root)

    def _folder(self, key: str) -> Path:
        return self.root / key

    def _file(self, key: str, number: int) -> Path:
        return self._folder(key) / f"{number:012d}.json"

    def _numbers(self, key: str) -> list[int]:
        try:
            names = os.listdir(self._folder(key))
        except (FileNotFoundError, NotADirectoryError):
            return []
        return sorted(int(m[1]) for m in map(_GENERATION.match, names) if m)

    def newest(self, key: str) -> Generation | None:
        for number in reversed(self._numbers(key)):  # one pruned meanwhile: the next newest
            path = self._file(key, number)
            try:
                text, mtime = path.read_text(), path.stat().st_mtime
            except FileNotFoundError:
                continue
            try:
                record = json.loads(text)
            except ValueError:
                record = {}
            return Generation(number, record if isinstance(record, dict) else {}, max(time.time() - mtime, 0.0))
        return None

    def _temp(self, key: str, record: dict[str, Any]) -> Path:
        folder = self._folder(key)
        folder.mkdir(parents=True, exist_ok=True)
        tmp = folder / f".{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(record))
        return tmp

    def create(self, key: str, number: int, record: dict[str, Any]) -> bool:
        tmp = self._temp(key, record)
        try:
            os.link(tmp, self._file(key, number))  # atomic and exclusive, complete when it appears
            return True
        except FileExistsError:
            return False
        except OSError:  # a file system without hard links: exclusive create, then write (readers allow for it)
            try:
                fd = os.open(self._file(key, number), os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                return False
            with os.fdopen(fd, "w") as fh:
                fh.write(json.dumps(record))
            return True
        finally:
            tmp.unlink(missing_ok=True)

    def rewrite(self, key: str, number: int, record: dict[str, Any]) -> None:
        os.replace(self._temp(key, record), self._file(key, number))

    def prune(self, key: str, below: int) -> None:
        """Generations below `below`, and temp files a writer that died left behind (older than an hour)."""
        for number in self._numbers(key):
            if number < below:
                with contextlib.suppress(FileNotFoundError):
                    self._file(key, number).unlink()
        for tmp in self._folder(key).glob(".*.tmp"):
            with contextlib.suppress(FileNotFoundError):
                if time.time() - tmp.stat().st_mtime > 3600:
                    tmp.unlink()

    def keys(self) -> list[str]:
        """Every lock ever taken here (for tests and diagnostics)."""
        try:
            return sorted(p.name for p in self.root.iterdir() if p.is_dir())
        except FileNotFoundError:
            return []
