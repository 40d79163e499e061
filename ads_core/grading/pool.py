"""A small pool of verifier processes, each request stopped at a CPU budget or a deadline, usable from any thread.

Why processes: sympy can run for minutes on one answer, Python cannot interrupt a thread, and math-verify's
signal-based timeouts work only in the main thread (verl grades from a thread pool). A worker that used its CPU
budget, or is still busy at the caller's deadline, is killed (SIGKILL); the next request forks a fresh one.

- One zygote process loads and warms math-verify once (seconds) and forks the workers (milliseconds each): up to
  `size` of them (one per CPU core), reused, and extra ones in a burst when every worker is busy for long.
- The zygote dies with the process that started it, and its workers with it (PR_SET_PDEATHSIG).
- A child process shares its parent's zygote: a forked child finds it in the pool it inherited (and gets a pool
  of its own workers), a spawned one in $ADS_GRADER_ZYGOTE (set by `api.start_verifier`). Its first grade then
  costs a fork, not a start. With no zygote to join, the first one starts its own.
- Budget and deadline: a check gets `cpu_s` of the worker's CPU time (the machine's load does not eat into it)
  and must end by the caller's deadline (the wall-clock promise, queueing and starting included).
"""

from __future__ import annotations

import collections
import os
import threading
import time
from pathlib import Path
from typing import Any

from ads_core.common.procs import Late, Worker, WorkerUnavailable, Zygote

__all__ = ["ZYGOTE_ENV", "Late", "VerifierPool", "WorkerUnavailable", "cpu_cores", "get_pool", "shutdown"]

# Run as a script, not `-m`: it needs only the standard library and math-verify, not this package (pydantic, ...).
WORKER = str(Path(__file__).resolve().with_name("worker.py"))
ZYGOTE_ENV = "ADS_GRADER_ZYGOTE"  # the address of a zygote a spawned child may share (its parent's)

BURST = 32  # workers at most while every regular one is busy with a long answer


class _Turn:
    """A caller waiting for a worker: handed one directly (first come, first served), or the right to fork one."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.worker: Worker | None = None


class VerifierPool:
    """`size` verifier processes, more in a burst; `ask` sends one request with a CPU budget and a deadline.

    Waiting callers are served in arrival order (a freed worker goes to the longest waiter, never to a
    newcomer). When every worker has used `patience_s` of CPU time on its current answer (ordinary answers take
    milliseconds: these are likely junk that will use their whole budget), a waiting caller forks an extra worker,
    up to `burst` in all, so that it does not queue behind several other completions' time limits; an extra
    worker is stopped as soon as no one waits for it. Otherwise callers queue: keeping to `size` (one per CPU
    core) keeps the workers from competing for the CPU, which would push ordinary answers into the limit.
    """

    def __init__(self, size: int, burst: int = 32, patience_s: float = 0.2, join: str | None = None) -> None:
        self.size = max(1, size)
        self.burst = max(self.size, burst)
        self.patience_s = patience_s
        self._lock = threading.Lock()
        self._idle: list[Worker] = []
        self._waiting: collections.deque[_Turn] = collections.deque()
        self._busy: dict[Worker, float] = {}  # worker -> when it took its current request
        self._live = 0  # workers in use, idle or being forked (a waiter's right to fork counts too)
        self._zygote = Zygote(WORKER, join)
        self.killed = 0  # workers stopped at their budget or deadline, for benches and tests
        self.extra = 0  # extra workers forked in bursts, for benches and tests

    def ask(self, request: dict[str, Any], cpu_s: float, deadline: float) -> tuple[dict[str, Any] | None, str]:
        """(reply, "") or (None, why): why "cpu" when the check used its CPU budget `cpu_s`, "deadline" when the
        deadline (a `time.monotonic()` value) came first. Raises Late (no worker by the deadline) or
        WorkerUnavailable.

        A worker found dead (its zygote was killed, the kernel's OOM killer took it) is replaced and the request
        sent once more, within what is left; a second failure is the reply's `error`."""
        for attempt in range(2):
            worker = self._acquire(self.patience_s, deadline)
            with self._lock:
                self._busy[worker] = time.monotonic()
            try:
                reply, _, why = worker.ask({**request, "cpu_s": cpu_s}, cpu_s, deadline)
            except (OSError, EOFError, ValueError) as exc:  # it died, or garbled its answer
                self._discard(worker)
                if attempt or time.monotonic() >= deadline:
                    return {"match": False, "error": f"verifier process failed: {exc}"}, ""
                continue
            if reply is None:
                self._discard(worker)
                with self._lock:
                    self.killed += 1
            else:
                self._release(worker)
            return reply, why
        raise AssertionError("unreachable")

    def _acquire(self, patience_s: float, deadline: float) -> Worker:
        turn = None
        with self._lock:
            if self._idle:
                return self._idle.pop()
            if self._live < self.size:
                self._live += 1
            else:
                turn = _Turn()
                self._waiting.append(turn)
        while turn is not None:
            if turn.ready.wait(max(0.0, min(patience_s, deadline - time.monotonic()))):
                break
            with self._lock:
                if turn.ready.is_set():
                    break
                now = time.monotonic()
                if now >= deadline:
                    self._waiting.remove(turn)
                    raise Late("every verifier process was busy")
                stuck = bool(self._busy) and all(self._working(w, now - since) for w, since in self._busy.items())
                if stuck and self._live < self.burst:
                    self._waiting.remove(turn)
                    self._live += 1
                    self.extra += 1
                    turn = None  # fork an extra worker
        if turn is not None and turn.worker is not None:
            return turn.worker
        try:  # our own slot, or one handed over by a worker that was discarded
            return self._zygote.fork(deadline)
        except BaseException:
            self._pass_slot()
            raise

    def _working(self, worker: Worker, busy_s: float) -> bool:
        """Busy with a long answer: it used `patience_s` of CPU on it. One that was busy that long by the clock
        but got little CPU is starved by a loaded machine: another worker would only compete with it."""
        used = worker.cpu_used()
        return (used if used is not None else busy_s) >= self.patience_s

    def start(self) -> None:
        """Start (or join) the zygote now, so that no completion waits for it. Raises WorkerUnavailable."""
        self._zygote.start()

    @property
    def started(self) -> bool:
        return self._zygote.running

    @property
    def address(self) -> str | None:
        """The zygote's address, which children may join (None before it runs)."""
        return self._zygote.address

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
        """Stop every worker and our zygote (they would also stop when this process ends)."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._live -= len(idle)
        for worker in idle:
            worker.kill()
        self._zygote.stop()

    def forget(self) -> None:
        """In a forked child: drop the parent's processes without touching them (close our copies of sockets)."""
        for worker in [*self._idle, *self._busy]:
            worker.close()
        self._zygote.forget()
        self._idle, self._busy, self._live = [], {}, 0


def cpu_cores() -> int:
    """CPU cores this process may run on (its affinity, which containers and taskset narrow)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_POOL: VerifierPool | None = None
_POOL_PID = 0
_LOCKS: dict[int, threading.Lock] = {}  # one per process id: a lock held by another thread at fork is not ours


def get_pool(size: int) -> VerifierPool:
    """This process's pool (created on first use; resized when `size` changes); bursts up to `BURST`.

    A forked child finds its parent's pool: it keeps none of its workers but joins its zygote. A fresh process
    joins the zygote named by $ADS_GRADER_ZYGOTE when there is one (a spawned child of a process that shares)."""
    global _POOL, _POOL_PID
    pid = os.getpid()
    with _LOCKS.setdefault(pid, threading.Lock()):
        if _POOL is None or _POOL_PID != pid:
            inherited, join = _POOL, os.environ.get(ZYGOTE_ENV) or None
            if inherited is not None:
                join = inherited.address or join
                inherited.forget()
            _POOL, _POOL_PID = VerifierPool(size, burst=BURST, join=join), pid
        else:
            _POOL.size = max(1, size)
            _POOL.burst = max(_POOL.size, BURST)
        return _POOL


def shutdown() -> None:
    """Stop this process's verifier processes (registered with atexit by `api.start_verifier`)."""
    global _POOL
    pool = None
    with _LOCKS.setdefault(os.getpid(), threading.Lock()):
        if _POOL_PID == os.getpid():
            pool, _POOL = _POOL, None
    if pool is not None:
        pool.close()
