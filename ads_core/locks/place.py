"""Where the lock of an OUT lives, as a store any process can reach again from its `location` (a Dask worker).

An OUT's own lock lives with the OUT, whatever the environment (`own_store`), as a training run's lives in its run
folder and an evaluation's in its output folder:
- a local OUT: `OUT/.lock`, beside what it guards, so every build into OUT meets there whichever ADS cache folder
  it uses (before, it lived in `<ADS cache dir>/locks`, and two builds with different `ADS_CACHE_DIR` both ran);
- an object-store OUT: its own bucket, `s3://<bucket>/.ads-locks`, which every machine that builds into OUT, and
  every Dask worker that writes there, already reaches with no shared folder.

`ADS_LOCK_DIR` (a folder, `DirLockStore`, or an s3:// prefix, `ObjectLockStore`) adds a second lock there for a
local OUT (`also_for`), never moves it, so two builds of which only one sees the setting still take turns. For
an object-store OUT it is where the lock lives instead (`store_for`): the one way to build into a store that
ignores conditional writes, which cannot hold a lock.
"""

from __future__ import annotations

import os
from pathlib import Path

from ads_core.locks.objectstore import ObjectLockStore
from ads_core.locks.store import LOCK_DIR_ENV, DirLockStore, LockStore, lock_dir
from ads_core.storage.fencing import canonical_location

OBJECT_LOCKS = ".ads-locks"  # the prefix of an object-store OUT's locks, in its bucket
LOCK_FOLDER = ".lock"  # a local OUT's lock folder, inside OUT (hidden: no source reader takes it for data)


def _is_object_store(location: str) -> bool:
    scheme, sep, _ = location.partition("://")
    return bool(sep) and scheme.lower() not in ("file", "local")


def store_at(location: str | None = None) -> LockStore:
    """The lock store at `location` (a folder or an s3:// prefix), or the configured one (ADS_LOCK_DIR)."""
    where = location if location is not None else os.environ.get(LOCK_DIR_ENV, "")
    if _is_object_store(where):
        return ObjectLockStore(where)
    return DirLockStore(location if location is not None else lock_dir())


def own_store(out: str) -> LockStore:
    """OUT's own lock, whatever the environment: `OUT/.lock` (every spelling of OUT one folder), or for an
    object-store OUT its bucket's `.ads-locks`."""
    if _is_object_store(out):
        scheme, _, rest = out.partition("://")
        return store_at(f"{scheme.lower()}://{rest.split('/', 1)[0]}/{OBJECT_LOCKS}")
    return DirLockStore(Path(canonical_location(out)) / LOCK_FOLDER)


def store_for(out: str) -> LockStore:
    """The lock whose token fences OUT's writes: OUT's own (`own_store`), except that ADS_LOCK_DIR, when set,
    holds an object-store OUT's lock instead of its bucket (for a store that ignores conditional writes)."""
    if os.environ.get(LOCK_DIR_ENV) and _is_object_store(out):
        return store_at()
    return own_store(out)


def also_for(out: str) -> LockStore | None:
    """The second lock of a local OUT that ADS_LOCK_DIR adds (for tools that look for every lock in one place);
    None without the setting, for an object-store OUT, and when the two are one folder."""
    if not os.environ.get(LOCK_DIR_ENV) or _is_object_store(out):
        return None
    extra = store_at()
    return None if extra.location == own_store(out).location else extra
