"""A small pool of verifier processes with a hard time limit per request, usable from any thread.

Why processes: sympy can run for minutes on one answer, Python cannot interrupt a thread, and math-verify's
signal-based timeouts work only in the main thread (verl grades from a thread pool). A worker that is still busy
at the limit is killed (SIGKILL); the request counts as a timeout, and the next request forks a fresh one.

- One zygote process loads and warms math-verify once (~1-2 s, the first request waits for it) and forks the
  workers (milliseconds each): up to `size` of them (one per CPU core), reused, and extra ones in a burst when
  every worker is busy for long (see `VerifierPool`).
- The zygote dies with this process, and its workers with it (PR_SET_PDEATHSIG, see `procs.Zygote`).
- A process that forks (multiprocessing) gets a fresh, empty pool in the child; the parent's workers stay its own.
- The zygote's start and the wait for a free worker are not counted against the limit.
"""

from __future__ import annotations

import atexit
import collections
import contextlib
import os
import threading
import time
from typing import Any

from ads_core.grading.procs import Worker, WorkerUnavailable, Zygote

__all__ = ["VerifierPool", "WorkerUnavailable", "cpu_cores", "get_pool", "shutdown"]

BURST = 32  # workers at most while every regular one is busy with a long answer


class _Turn:
    """A caller waiting for a worker: handed one directly (first come, first served), or the right to fork one."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.worker: Worker | None = None


class VerifierPool:
    """`size` verifier processes, more in a burst; `ask` sends one request with a hard time limit.

    Waiting callers are served in arrival order (a freed worker goes to the longest waiter, never to a
    newcomer). When every worker has been busy with its current answer for `patience_s` (ordinary answers take
    milliseconds: these are likely junk that will run into the limit), a waiting caller forks an extra worker,
    up to `burst` in all, so that it does not queue behind several other completions' time limits; an extra
    worker is stopped as soon as no one waits for it. Otherwise callers queue: keeping to `size` (one per CPU
    core) keeps the workers from competing for the CPU, which would push ordinary answers into the limit.
    """

    def __init__(self, size: int, burst: int = 32, patience_s: float = 0.2) -> None:
        self.size = max(1, size)
        self.burst = max(self.size, burst)
        self.patience_s = patience_s
        self._lock = threading.Lock()
        self._idle: list[Worker] = []
        self._waiting: collections.deque[_Turn] = collections.deque()
        self._busy: dict[Worker, float] = {}  # worker -> when it took its current request
        self._live = 0  # workers in use, idle or being forked (a waiter's right to fork counts too)
        self._zygote: Zygote | None = None
        self.killed = 0  # workers stopped at the limit, for benches and tests
        self.extra = 0  # extra workers forked in bursts, for benches and tests

    def ask(self, request: dict[str, Any], timeout_s: float) -> tuple[dict[str, Any] | None, float]:
        """(reply or None at the limit, seconds the workers took). Raises WorkerUnavailable.

        A worker found dead (its zygote was killed, the kernel's OOM killer took it) is replaced and the request
        sent once more, within what is left of the limit; a second failure is the reply's `error`."""
        spent = 0.0
        for attempt in range(2):
            worker = self._acquire(min(self.patience_s, timeout_s / 4))
            start = time.monotonic()
            with self._lock:
                self._busy[worker] = start
            try:
                reply = worker.ask(request, timeout_s - spent)
            except (OSError, EOFError, ValueError) as exc:  # it died, or garbled its answer
                self._discard(worker)
                spent += time.monotonic() - start
                if attempt or spent >= timeout_s:
                    return {"match": False, "error": f"verifier process failed: {exc}"}, spent
                continue
            spent += time.monotonic() - start
            if reply is None:
                self._discard(worker)
                with self._lock:
                    self.killed += 1
            else:
                self._release(worker)
            return reply, spent
        raise AssertionError("unreachable")

    def _acquire(self, patience_s: float) -> Worker:
        turn = None
        with self._lock:
            if self._idle:
                return self._idle.pop()
            if self._live < self.size:
                self._live += 1
            else:
                turn = _Turn()
                self._waiting.append(turn)
            if self._zygote is None:
                self._zygote = Zygote()
            zygote = self._zygote
        while turn is not None and not turn.ready.wait(patience_s):
            with self._lock:
                now = time.monotonic()
                stuck = bool(self._busy) and all(now - since >= patience_s for since in self._busy.values())
                if not turn.ready.is_set() and stuck and self._live < self.burst:
                    self._waiting.remove(turn)
                    self._live += 1
                    self.extra += 1
                    turn = None  # fork an extra worker
        if turn is not None and turn.worker is not None:
            return turn.worker
        try:  # our own slot, or one handed over by a worker that was discarded
            return zygote.fork()
        except BaseException:
            self._pass_slot()
            raise

    def start(self) -> None:
        """Start the zygote now, so that the first completion does not wait for it. Raises WorkerUnavailable."""
        with self._lock:
            if self._zygote is None:
                self._zygote = Zygote()
            zygote = self._zygote
        with zygote.lock:
            zygote.ensure()

    def _release(self, worker: Worker) -> None:
        with self._lock:
            self._busy.pop(worker, None)
            if self._waiting:
                turn = self._waiting.popleft()
                turn.worker = worker
                turn.ready.set()
                return
            if self._live <= self.size:
                self._idle.append(worker)
                return
            self._live -= 1  # an extra worker (or the pool was made smaller): no one needs it now
        worker.kill()

    def _discard(self, worker: Worker) -> None:
        worker.kill()
        with self._lock:
            self._busy.pop(worker, None)
        self._pass_slot()

    def _pass_slot(self) -> None:
        """A worker slot fell free: the longest waiter may fork into it, or the pool has one fewer."""
        with self._lock:
            if self._waiting:
                self._waiting.popleft().ready.set()
            else:
                self._live -= 1

    def close(self) -> None:
        """Stop every worker and the zygote (they would also stop when this process ends)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            zygote, self._zygote = self._zygote, None
        for worker in idle:
            worker.kill()
        if zygote is not None:
            zygote.stop()

    def forget(self) -> None:
        """In a forked child: drop the parent's processes without touching them (close our copies of sockets)."""
        for worker in [*self._idle, *self._busy]:
            worker.close()
        if self._zygote is not None and self._zygote.control is not None:
            with contextlib.suppress(OSError):
                self._zygote.control.close()
        self._idle, self._busy, self._zygote, self._live = [], {}, None, 0


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_POOL: VerifierPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool(size: int) -> VerifierPool:
    """The process-wide pool (created on first use; resized when `size` changes); bursts up to `BURST`."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = VerifierPool(size, burst=BURST)
        else:
            _POOL.size = max(1, size)
            _POOL.burst = max(_POOL.size, BURST)
        return _POOL


def shutdown() -> None:
    global _POOL
    with _POOL_LOCK:
        pool, _POOL = _POOL, None
    if pool is not None:
        pool.close()


def _after_fork_in_child() -> None:
    global _POOL, _POOL_LOCK
    _POOL_LOCK = threading.Lock()
    if _POOL is not None:
        _POOL.forget()
    _POOL = None


atexit.register(shutdown)
os.register_at_fork(after_in_child=_after_fork_in_child)
