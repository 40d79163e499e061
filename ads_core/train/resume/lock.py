"""One training run per run folder: a run holds a lease lock on RUN_DIR (the build's lock machinery,
`ads_core.locks`) for as long as it trains, and a second run on the same folder is refused at once, in one line
naming the holder (host:pid). While it holds the lock every write into RUN_DIR is fenced
(`ads_core.storage.fencing`): ``steps.jsonl``, ``eval.jsonl``, a checkpoint's manifest and the atomic writes
check, right before they land, that this run's token is still the newest, so a run that lost its lock (paused
past its lease while another took the folder over) writes nothing more.

Where the lock lives depends on the run folder alone, never on the environment: ``RUN_DIR/.lock`` beside what it
guards, or for an object-store run folder its own bucket (``s3://bucket/.ads-locks``). ``ADS_LOCK_DIR``, when set,
adds a second lock there (for tools that look for every lock in one place); it never replaces the first, so two
runs of which only one sees ``ADS_LOCK_DIR`` still meet at the run folder's lock (before, the one with the setting
locked only there, and both trained). Under several processes (torchrun) rank 0 holds it: only rank 0 writes the
run's logs.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
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
HOLDER = "ads train"
RUN_FOLDER, LOCK_DIR = "run folder", "lock dir"
_MANAGERS: dict[str, BuildLockManager] = {}  # "run folder" / "lock dir" -> its manager (a key is held once per manager)
_DEPTH: dict[str, int] = {}  # run lock key -> how many holding_run blocks of this process hold it


def _manager(role: str) -> BuildLockManager:
    if role not in _MANAGERS:
        _MANAGERS[role] = BuildLockManager()
    return _MANAGERS[role]


def run_lock_key(run_dir: str) -> str:
    """Every spelling of one run folder is one lock."""
    return "run-" + hashlib.sha256(fencing.canonical_location(run_dir).encode()).hexdigest()[:32]


def run_lock_store(run_dir: str) -> LockStore:
    """The run folder's own lock, whatever the environment: RUN_DIR/.lock, or an object-store folder's bucket."""
    if _is_object_store(run_dir):
        scheme, _, rest = run_dir.partition("://")
        return store_at(f"{scheme.lower()}://{rest.split('/', 1)[0]}/{OBJECT_LOCKS}")
    return DirLockStore(Path(run_dir) / LOCK_FOLDER)


def extra_lock_store(run_dir: str) -> LockStore | None:
    """The second lock ADS_LOCK_DIR asks for (None when unset, or when it is the run folder's own store)."""
    if not os.environ.get(LOCK_DIR_ENV):
        return None
    extra = store_at()
    return None if extra.location == run_lock_store(run_dir).location else extra


def run_lock_stores(run_dir: str) -> list[LockStore]:
    """Every store that holds this run folder's lock, the run folder's own first (its token fences the writes)."""
    extra = extra_lock_store(run_dir)
    return [run_lock_store(run_dir)] + ([extra] if extra is not None else [])


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
    key = run_lock_key(run_dir)
    for store in run_lock_stores(run_dir):
        newest = store.newest(key)
        if newest is not None and free_because(newest) is None:
            raise _busy(run_dir, describe(newest.record))


def _take(role: str, key: str, run_dir: str, store: LockStore) -> Fence:
    manager = _manager(role)
    try:
        manager.acquire_lock(key, HOLDER, acquire_timeout=0, label=run_dir, store=store, what=WHAT)
    except LockWaitTimeout as exc:
        raise _busy(run_dir, exc.holder) from None
    fence = manager.fence(key)
    assert fence is not None
    return fence


def _give_back(role: str, key: str, run_dir: str) -> None:
    try:
        _manager(role).release_lock(key, HOLDER)
    except ValueError:  # taken over meanwhile (our lease lapsed): nothing of ours to release
        log.warning("the lock on %s was no longer this run's at its end", run_dir)


@contextmanager
def holding_run(run_dir: str) -> Iterator[Fence | None]:
    """Hold RUN_DIR while the block trains; RunStateError at once when another live run holds it. Yields the
    fence of the run folder's own lock."""
    if os.environ.get("RANK", "0") != "0":  # another rank of a torchrun: rank 0 holds the folder
        yield None
        return
    key = run_lock_key(run_dir)
    if _DEPTH.get(key):  # this process holds it already (ads train holds it before its first line): nested
        _DEPTH[key] += 1
        try:
            yield _manager(RUN_FOLDER).fence(key)
        finally:
            _DEPTH[key] -= 1
        return
    with ExitStack() as held:
        fence = _take(RUN_FOLDER, key, run_dir, run_lock_store(run_dir))
        held.callback(_give_back, RUN_FOLDER, key, run_dir)
        checks = [fence.check]
        extra = extra_lock_store(run_dir)
        if extra is not None:
            checks.append(_take(LOCK_DIR, key, run_dir, extra).check)
            held.callback(_give_back, LOCK_DIR, key, run_dir)
        _DEPTH[key] = 1
        held.callback(_DEPTH.pop, key, None)

        def check_every_lock() -> None:
            for check in checks:
                check()

        with fencing.guarded(run_dir, check_every_lock):
            yield fence
