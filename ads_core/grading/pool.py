"""A small pool of verifier processes with a hard time limit per request, usable from any thread.

Why processes: sympy can run for minutes on one answer, Python cannot interrupt a thread, and math-verify's
signal-based timeouts work only in the main thread (verl grades from a thread pool). A worker that is still busy
at the limit is killed (SIGKILL) and replaced in the background; the request counts as a timeout.

- Workers are started lazily, one more whenever every started one is busy, up to `size`, and reused.
- They are started from one long-lived thread with `die_with_parent`, so they die with this process (the
  kernel signals a child when the *thread* that started it ends; a pool thread that exits would take them along).
- A process that forks (multiprocessing) gets a fresh, empty pool in the child; the parent's workers stay its own.
- Boot time (loading sympy, ~1 s) and the wait for a free worker are not counted against the limit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import select
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ads_core.common.procs import die_with_parent

BOOT_TIMEOUT_S = 120.0  # a loaded machine can take long to import sympy; a broken install fails fast (EOF)
ROOT = str(Path(__file__).resolve().parents[2])


class WorkerUnavailable(RuntimeError):
    """No verifier process could be started (the reason is the message)."""


class _Worker:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.fd = proc.stdout.fileno()  # type: ignore[union-attr]
        self.buffer = b""

    def read_line(self, deadline: float) -> bytes | None:
        """One line from the worker, or None at the deadline; EOFError when it died."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN | select.POLLHUP | select.POLLERR)
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not poller.poll(max(1, int(left * 1000) + 1)):
                if time.monotonic() >= deadline:
                    return None
                continue
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                raise EOFError(f"verifier process exited (status {self.proc.poll()})")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """The worker's reply, or None when it did not answer within `timeout_s`."""
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")  # type: ignore[union-attr]
        self.proc.stdin.flush()  # type: ignore[union-attr]
        line = self.read_line(time.monotonic() + timeout_s)
        return None if line is None else json.loads(line)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()  # type: ignore[union-attr]


class _Spawner:
    """The one thread that starts every worker (see the module docstring for why one long-lived thread)."""

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Future[subprocess.Popen[bytes]]] = queue.SimpleQueue()
        threading.Thread(target=self._run, name="ads-grader-spawner", daemon=True).start()

    def _run(self) -> None:
        while True:
            future = self.jobs.get()
            try:
                future.set_result(_popen())
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                future.set_exception(exc)

    def spawn(self) -> subprocess.Popen[bytes]:
        future: Future[subprocess.Popen[bytes]] = Future()
        self.jobs.put(future)
        return future.result()


def _popen() -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (ROOT, env.get("PYTHONPATH"))))
    for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        env.setdefault(name, "1")
    return subprocess.Popen(
        [sys.executable, "-m", "ads_core.grading.worker"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        close_fds=True,
        preexec_fn=die_with_parent(),  # noqa: PLW1509 - only prctl runs between fork and exec
    )


class VerifierPool:
    """Up to `size` verifier processes; `ask` sends one request with a hard time limit."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._starting = 0
        self._boot_error: str | None = None
        self._spawner: _Spawner | None = None
        self.killed = 0  # workers stopped at the limit, for benches and tests

    def ask(self, request: dict[str, Any], timeout_s: float) -> tuple[dict[str, Any] | None, float]:
        """(reply or None at the limit, seconds the worker took). Raises WorkerUnavailable."""
        worker = self._acquire()
        start = time.monotonic()
        try:
            reply = worker.ask(request, timeout_s)
        except (OSError, EOFError, ValueError) as exc:  # died (memory?), or garbled
            self._discard(worker)
            return {"match": False, "error": f"verifier process failed: {exc}"}, time.monotonic() - start
        elapsed = time.monotonic() - start
        if reply is None:
            self._discard(worker)
            self.killed += 1
            self._grow()  # a replacement boots now, not when the next request needs it
        else:
            self._release(worker)
        return reply, elapsed

    def _acquire(self) -> _Worker:
        with self._cond:
            while not self._idle:
                if self._boot_error is not None and not self._all and not self._starting:
                    raise WorkerUnavailable(self._boot_error)
                if len(self._all) + self._starting < self.size:
                    self._grow_locked()
                self._cond.wait(1.0)
            return self._idle.pop()

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            self._idle.append(worker)
            self._cond.notify()

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._cond:
            self._all.discard(worker)
            self._cond.notify_all()

    def _grow(self) -> None:
        with self._cond:
            if len(self._all) + self._starting < self.size:
                self._grow_locked()

    def _grow_locked(self) -> None:
        self._starting += 1
        if self._spawner is None:
            self._spawner = _Spawner()
        threading.Thread(target=self._boot, name="ads-grader-boot", daemon=True).start()

    def _boot(self) -> None:
        worker: _Worker | None = None
        error = None
        try:
            assert self._spawner is not None
            worker = _Worker(self._spawner.spawn())
            line = worker.read_line(time.monotonic() + BOOT_TIMEOUT_S)
            if line is None or json.loads(line) != {"ready": True}:
                error = f"the verifier process did not start within {BOOT_TIMEOUT_S:.0f} s"
        except (OSError, EOFError, ValueError) as exc:
            error = f"cannot start the verifier process: {exc}"
        if error is not None and worker is not None:
            worker.kill()
        with self._cond:
            self._starting -= 1
            if error is None and worker is not None:
                self._all.add(worker)
                self._idle.append(worker)
                self._boot_error = None
            else:
                self._boot_error = error
            self._cond.notify_all()

    def close(self) -> None:
        """Stop every worker (they would also stop when this process ends)."""
        with self._cond:
            workers, self._all, self._idle = list(self._all), set(), []
        for worker in workers:
            worker.kill()

    def forget(self) -> None:
        """In a forked child: drop the parent's workers without touching them (close our copies of the pipes)."""
        for worker in self._all:
            for stream in (worker.proc.stdin, worker.proc.stdout):
                with contextlib.suppress(OSError):
                    stream.close()  # type: ignore[union-attr]
        self._all, self._idle = set(), []


_POOL: VerifierPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool(size: int) -> VerifierPool:
    """The process-wide pool (created on first use; resized when `size` changes)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = VerifierPool(size)
        elif _POOL.size != max(1, size):
            _POOL.size = max(1, size)
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
