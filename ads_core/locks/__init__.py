"""Locks with fencing tokens: one writer at a time per folder (a build's OUT, a training run's RUN_DIR), and a
writer that lost its lock publishes nothing.

`manager` holds a lock for a whole build (`owning`) or run and renews its lease; `store` is the lock store
interface and its folder implementation (and the lock settings); `objectstore` the same in an object store with
conditional writes; `place` picks the store of a location; `fence` checks, right before every publish, that the
holder's token is still the newest. Prefect-free: the build's flows (`ads_prefect`), the in-process `build()`
and training (`ads_core.train.resume.lock`) all use it. No module sets where locks live: `place` decides from the
location locked and ADS_LOCK_DIR, read at call time.
"""

from ads_core.locks.store import lock_dir

__all__ = ["lock_dir"]
