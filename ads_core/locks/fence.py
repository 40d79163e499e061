"""Fencing tokens: whether a build still holds its lock on OUT, checkable from any process.

A `Fence` is a held lock's token and where its store is, as plain JSON: the flow passes it to every stage run,
which installs it as the guard of OUT (`ads_core.storage.fencing.guarded`) for its writes, on a Dask worker too.
The check reads the lock's newest generation; only the build whose token it is may publish.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

from ads_core.common.progress import ProgressFactory, after_each_tick
from ads_core.locks.place import store_at
from ads_core.locks.store import LEASE_ENV, Generation, LockStore, describe
from ads_core.storage import fencing
from ads_core.storage.fencing import LockLost


@dataclass(frozen=True)
class Fence:
    """A held lock's token and where to check it, JSON-able: any process (a Dask worker) can check it."""

    store: str
    key: str
    token: int
    nonce: str
    label: str  # what is locked, for messages (OUT)
    lease_s: float
    heartbeat_s: float
    what: str = "build"  # who holds it, for messages: a build, a training run

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fence:
        return cls(**data)

    def owns(self, newest: Generation | None) -> bool:
        return (
            newest is not None
            and newest.number == self.token
            and newest.record.get("nonce") == self.nonce
            and not newest.record.get("released")
        )

    def check(self) -> None:
        """Raise LockLost unless this token is still the lock's newest generation and ours.

        A lease near its end (this process was paused, or its heartbeat starved) is renewed first and the
        token checked again, so no other build can take over for about a lease after a check passes."""
        store = store_at(self.store)
        newest = store.newest(self.key)
        if not self.owns(newest):
            raise LockLost(self.lost_message(newest))
        assert newest is not None
        if float(newest.record.get("lease_until", 0)) - time.time() < self.heartbeat_s:
            self.renew(store, newest)
            newest = store.newest(self.key)
            if not self.owns(newest):
                raise LockLost(self.lost_message(newest))

    def renew(self, store: LockStore, newest: Generation) -> None:
        """Extend the lease in our own generation's record (never anyone else's)."""
        store.rewrite(self.key, self.token, {**newest.record, "lease_until": time.time() + self.lease_s})

    def lost_message(self, newest: Generation | None) -> str:
        if newest is None or newest.number < self.token:
            why = "its lock record is gone (was the lock dir cleaned while it ran?)"
        elif newest.number == self.token:
            why = "its lock was released or rewritten by another process"
        else:
            why = (
                f"{self.what} {describe(newest.record)} took it over (token {newest.number} > {self.token}) after this "
                f"{self.what}'s lease ({LEASE_ENV}={self.lease_s:g} s) lapsed"
            )
        return f"lost the {self.what} lock on {self.label}: {why}; this {self.what} published nothing more"


@contextmanager
def fenced(fence: dict[str, Any] | None) -> Iterator[None]:
    """Guard the fence's OUT in this process (a stage run, perhaps on a Dask worker) and check it once now, so a
    build that already lost its lock does not even start the work."""
    if fence is None:
        yield
        return
    checked = Fence.from_dict(fence)
    checked.check()
    with fencing.guarded(checked.label, checked.check):
        yield


def stopping_when_lost(factory: ProgressFactory, fence: dict[str, Any] | None) -> ProgressFactory:
    """A stage's progress, which also checks the fence (at most once a heartbeat): a build that lost its lock
    stops computing at its next progress tick instead of at its next publish."""
    if fence is None:
        return factory
    checked = Fence.from_dict(fence)

    def every_heartbeat() -> Callable[[], None]:  # one per progress bar: its clock starts with the bar
        last = time.monotonic()

        def check() -> None:
            nonlocal last
            if time.monotonic() - last >= checked.heartbeat_s:
                last = time.monotonic()
                checked.check()

        return check

    return after_each_tick(factory, every_heartbeat)
