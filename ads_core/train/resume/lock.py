"""One training run per run folder: a run holds a lease lock on RUN_DIR (the build's lock machinery,
`ads_core.locks`) for as long as it trains, and a second run on the same folder is refused at once, in one line
naming the holder (host:pid). While it holds the lock every write into RUN_DIR is fenced
(`ads_core.storage.fencing`): ``steps.jsonl``, ``eval.jsonl``, a checkpoint's manifest and the atomic writes
check, right before they land, that this run's token is still the newest, so a run that lost its lock (paused
past its lease while another took the folder over) writes nothing more.

Where the lock lives: ``ADS_LOCK_DIR`` when set (a shared folder or an s3:// prefix), an object-store run folder's
own bucket (``s3://bucket/.ads-locks``), otherwise ``RUN_DIR/.lock`` beside what it guards.
Under several processes (torchrun) rank 0 holds it: only rank 0 writes the run's logs.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from ads_core.locks.fence import Fence
from ads_core.locks.manager import BuildLockManager, LockWaitTimeout
from ads_core.locks.place import OBJECT_LOCKS, _is_object_store, store_at
from ads_core.locks.store import LOCK_DIR_ENV, DirLockStore, LockStore, describe, free_because
from ads_core.storage import fencing
from ads_core.train.errors import RunStateError

log = logging.getLogger("ads.train")
LOCK_FOLDER = ".lock"
WHAT = "training run"
_MANAGER: list[BuildLockManager] = []
_DEPTH: dict[str, int] = {}  # run lock key -> how many holding_run blocks of this process hold it


def _manager() -> BuildLockManager:
    if not _MANAGER:
        _MANAGER.append(BuildLockManager())
    return _MANAGER[0]


def run_lock_key(run_dir: str) -> str:
    """Every spelling of one run folder is one lock."""
    return "run-" + hashlib.sha256(fencing.canonical_location(run_dir).encode()).hexdigest()[:32]


def run_lock_store(run_dir: str) -> LockStore:
    """ADS_LOCK_DIR, an object-store run folder's bucket, or RUN_DIR/.lock (see the module)."""
    if os.environ.get(LOCK_DIR_ENV):
        return store_at()
    if _is_object_store(run_dir):
        scheme, _, rest = run_dir.partition("://")
        return store_at(f"{scheme.lower()}://{rest.split('/', 1)[0]}/{OBJECT_LOCKS}")
    return DirLockStore(Path(run_dir) / LOCK_FOLDER)


def _busy(run_dir: str, holder: str) -> RunStateError:
    return RunStateError(
        f"run folder {run_dir} is in use by another training run ({holder}); wait for it to finish (or stop it), "
        "or train under another name",
        options=("name",),
    )


def refuse_if_held(run_dir: str) -> None:
    """Refuse at once, before any work, a run folder another live run holds (`holding_run` still takes the lock:
    two runs that pass this check together are told apart there)."""
    if os.environ.get("RANK", "0") != "0":
        return
    newest = run_lock_store(run_dir).newest(run_lock_key(run_dir))
    if newest is not None and free_because(newest) is None:
        raise _busy(run_dir, describe(newest.record))


@contextmanager
def holding_run(run_dir: str) -> Iterator[Fence | None]:
    """Hold RUN_DIR while the block trains; RunStateError at once when another live run holds it."""
    if os.environ.get("RANK", "0") != "0":  # another rank of a torchrun: rank 0 holds the folder
        yield None
        return
    manager, key = _manager(), run_lock_key(run_dir)
    if _DEPTH.get(key):  # this process holds it already (ads train holds it before its first line): nested
        _DEPTH[key] += 1
        try:
            yield manager.fence(key)
        finally:
            _DEPTH[key] -= 1
        return
    holder = "ads train"
    try:
        manager.acquire_lock(key, holder, acquire_timeout=0, label=run_dir, store=run_lock_store(run_dir), what=WHAT)
    except LockWaitTimeout as exc:
        raise _busy(run_dir, exc.holder) from None
    fence = manager.fence(key)
    assert fence is not None
    _DEPTH[key] = 1
    try:
        with fencing.guarded(run_dir, fence.check):
            yield fence
    finally:
        _DEPTH.pop(key, None)
        try:
            manager.release_lock(key, holder)
        except ValueError:  # taken over meanwhile (our lease lapsed): nothing of ours to release
            log.warning("the lock on %s was no longer this run's at its end", run_dir)
