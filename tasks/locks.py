"""Build locks: two builds of the same stage serialise on its cache key (Prefect's SERIALIZABLE isolation)."""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path

from prefect.locking.filesystem import FileSystemLockManager

log = logging.getLogger("ads.tasks")
LOCK_DIR_ENV = "ADS_LOCK_DIR"



def lock_dir() -> Path:
    """Where build locks live: ADS_LOCK_DIR (a shared filesystem for multi-node builds) or $PREFECT_HOME/ads-locks."""
    explicit = os.environ.get(LOCK_DIR_ENV)
    if explicit:
        return Path(explicit).expanduser().resolve()
    from prefect.settings import get_current_settings

    return Path(get_current_settings().home).expanduser().resolve() / "ads-locks"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class BuildLockManager(FileSystemLockManager):
    """Prefect's file lock manager, with the directory resolved when used and stale locks broken.

    Prefect's holder string is `host:pid:thread...`; a lock whose holder process on this host is gone
    (killed build, OOM) would otherwise block every later build forever, so it is removed.
    """

    def __init__(self) -> None:
        super().__init__(Path("."))

    @property  # type: ignore[override]
    def lock_files_directory(self) -> Path:
        return lock_dir()

    @lock_files_directory.setter
    def lock_files_directory(self, value: Path) -> None:  # set by the base __init__; resolved lazily instead
        pass

    def is_locked(self, key: str, use_cache: bool = False) -> bool:
        info = self._get_lock_info(key, use_cache=use_cache)
        if info is not None and _stale(info.get("holder", "")):
            log.warning("removing a stale build lock %s held by a dead process (%s)", key, info.get("holder"))
            Path(info["path"]).unlink(missing_ok=True)
            self._locks.pop(key, None)
            return False
        return super().is_locked(key, use_cache=use_cache)


def _stale(holder: str) -> bool:
    parts = holder.split(":")
    if len(parts) < 2 or parts[0] != socket.gethostname():
        return False
    try:
        return not _pid_alive(int(parts[1]))
    except ValueError:
        return False
