"""Where the lock of an OUT lives, as a store any process can reach again from its `location` (a Dask worker).

- `ADS_LOCK_DIR`, when set: a folder (`DirLockStore`; a shared filesystem for several machines) or an s3:// prefix
  (`ObjectLockStore`), for every OUT;
- otherwise, an object-store OUT keeps its lock in its own bucket, `s3://<bucket>/.ads-locks`, which every machine
  that builds into OUT, and every Dask worker that writes there, already reaches with no shared folder;
- otherwise (a local OUT) `<ADS cache dir>/locks` (`store.lock_dir`).

A setting adds a lock, never moves one: a build of a local OUT under `ADS_LOCK_DIR` also takes the lock a build
without it would take (`also_for`), so two builds of which only one sees the setting still take turns.
"""

from __future__ import annotations

import os

from ads_core.locks.objectstore import ObjectLockStore
from ads_core.locks.store import LOCK_DIR_ENV, DirLockStore, LockStore, default_lock_dir, lock_dir

OBJECT_LOCKS = ".ads-locks"  # the prefix of an object-store OUT's locks, in its bucket


def _is_object_store(location: str) -> bool:
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() not in ("file", "local")


def store_at(location: str | None = None) -> LockStore:
    """The lock store at `location` (a folder or an s3:// prefix), or the configured one (ADS_LOCK_DIR)."""
    where = location if location is not None else os.environ.get(LOCK_DIR_ENV, "")
    if _is_object_store(where):
        return ObjectLockStore(where)
    return DirLockStore(location if location is not None else lock_dir())


def store_for(out: str) -> LockStore:
    """Where the lock of OUT lives: ADS_LOCK_DIR when set; for an object-store OUT its own bucket, which every
    machine that builds into OUT (and every Dask worker that writes there) reaches with no shared folder;
    otherwise `<ADS cache dir>/locks`."""
    if not os.environ.get(LOCK_DIR_ENV) and _is_object_store(out):
        scheme, _, rest = out.partition("://")
        return store_at(f"{scheme.lower()}://{rest.split('/', 1)[0]}/{OBJECT_LOCKS}")
    return store_at()


def also_for(out: str) -> LockStore | None:
    """The second lock of a local OUT when ADS_LOCK_DIR is set: the one a build without the setting takes
    (`<ADS cache dir>/locks`). None without the setting, for an object-store OUT (one reason to set ADS_LOCK_DIR is
    a store that ignores conditional writes) and when the two are one folder."""
    if not os.environ.get(LOCK_DIR_ENV) or _is_object_store(out):
        return None
    default = DirLockStore(default_lock_dir())
    return None if default.location == store_at().location else default
