"""A small pool of verifier processes with a hard time limit per request, usable from any thread.

Why processes: sympy can run for minutes on one answer, Python cannot interrupt a thread, and math-verify's
signal-based timeouts work only in the main thread (verl grades from a thread pool). A worker that is still busy
at the limit is killed (SIGKILL); the request counts as a timeout, and the next request forks a fresh one.

- One zygote process loads and warms math-verify once (~1-2 s, the first request waits for it) and forks the
  workers (milliseconds each): up to `size` of them, one more whenever every forked one is busy, reused.
- The zygote dies with this process, and its workers with it (PR_SET_PDEATHSIG, see `_Zygote`).
- A process that forks (multiprocessing) gets a fresh, empty pool in the child; the parent's workers stay its own.
- The zygote's start and the wait for a free worker are not counted against the limit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import select
import signal
import socket
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
    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock, self.pid = sock, pid
        self.buffer = b""

    def read_line(self, deadline: float) -> bytes | None:
        """One line from the worker, or None at the deadline; EOFError when it is gone."""
        poller = select.poll()
        poller.register(self.sock.fileno(), select.POLLIN | select.POLLHUP | select.POLLERR)
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            if not poller.poll(int(left * 1000) + 1):
                continue
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise EOFError("the verifier process exited")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def ask(self, request: dict[str, Any], timeout_s: float) -> dict[str, Any] | None:
        """The worker's reply, or None when it did not answer within `timeout_s`."""
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        line = self.read_line(time.monotonic() + timeout_s)
        return None if line is None else json.loads(line)

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGKILL)  # still running (it missed the limit): its pid is not reused
        with contextlib.suppress(OSError):
            self.sock.close()


class _Zygote:
    """The process that forks warm workers (see `ads_core.grading.worker.zygote`).

    It is started from one long-lived thread with `die_with_parent`, so it dies with this process (the kernel
    signals a child when the *thread* that started it ends; a pool thread that exits would take it along);
    its workers die with it.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None
        self.jobs: queue.SimpleQueue[Future[None]] = queue.SimpleQueue()
        threading.Thread(target=self._starter, name="ads-grader-starter", daemon=True).start()

    def _starter(self) -> None:
        while True:
            future = self.jobs.get()
            try:
                self._start()
                future.set_result(None)
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting caller
                future.set_exception(exc)

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, (ROOT, env.get("PYTHONPATH"))))
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(name, "1")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ads_core.grading.worker", str(theirs.fileno())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                pass_fds=(theirs.fileno(),),
                preexec_fn=die_with_parent(),  # noqa: PLW1509 - only prctl runs between fork and exec
            )
        finally:
            theirs.close()
        self.control = ours
        ready = _Worker(ours, self.proc.pid).read_line(time.monotonic() + BOOT_TIMEOUT_S)
        if ready is None:
            self.stop()
            raise WorkerUnavailable(f"the verifier process did not start within {BOOT_TIMEOUT_S:.0f} s")

    def fork(self) -> _Worker:
        """A new worker (starting the zygote first when needed). Raises WorkerUnavailable."""
        with self.lock:
            for attempt in range(2):
                if self.proc is None or self.proc.poll() is not None:
                    future: Future[None] = Future()
                    self.jobs.put(future)
                    try:
                        future.result()
                    except (OSError, EOFError, ValueError) as exc:
                        self.stop()
                        raise WorkerUnavailable(f"cannot start the verifier process: {exc}") from None
                try:
                    assert self.control is not None
                    self.control.sendall(b"f")
                    msg, fds, _, _ = socket.recv_fds(self.control, 64, 1)
                    if not msg or not fds:
                        raise EOFError("the verifier zygote exited")
                    return _Worker(socket.socket(fileno=fds[0]), int(msg))
                except (OSError, EOFError, ValueError) as exc:
                    self.stop()
                    if attempt:
                        raise WorkerUnavailable(f"cannot start a verifier process: {exc}") from None
            raise AssertionError("unreachable")

    def stop(self) -> None:
        if self.control is not None:
            with contextlib.suppress(OSError):
                self.control.close()
            self.control = None
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
            self.proc = None


class VerifierPool:
    """Up to `size` verifier processes; `ask` sends one request with a hard time limit."""

    def __init__(self, size: int) -> None:
        self.size = max(1, size)
        self._cond = threading.Condition()
        self._idle: list[_Worker] = []
        self._live = 0  # workers in use, idle or being forked
        self._zygote: _Zygote | None = None
        self.killed = 0  # workers stopped at the limit, for benches and tests

    def ask(self, request: dict[str, Any], timeout_s: float) -> tuple[dict[str, Any] | None, float]:
        """(reply or None at the limit, seconds the worker took). Raises WorkerUnavailable."""
        worker = self._acquire()
        start = time.monotonic()
        try:
            reply = worker.ask(request, timeout_s)
        except (OSError, EOFError, ValueError) as exc:  # it died (memory?), or garbled its answer
            self._discard(worker)
            return {"match": False, "error": f"verifier process failed: {exc}"}, time.monotonic() - start
        elapsed = time.monotonic() - start
        if reply is None:
            self._discard(worker)
            with self._cond:
                self.killed += 1
        else:
            self._release(worker)
        return reply, elapsed

    def _acquire(self) -> _Worker:
        with self._cond:
            while not self._idle and self._live >= self.size:
                self._cond.wait()
            if self._idle:
                return self._idle.pop()
            self._live += 1
            if self._zygote is None:
                self._zygote = _Zygote()
            zygote = self._zygote
        try:
            return zygote.fork()
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise

    def _release(self, worker: _Worker) -> None:
        with self._cond:
            self._idle.append(worker)
            self._cond.notify()

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._cond:
            self._live -= 1
            self._cond.notify()

    def close(self) -> None:
        """Stop every worker and the zygote (they would also stop when this process ends)."""
        with self._cond:
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            zygote, self._zygote = self._zygote, None
        for worker in idle:
            worker.kill()
        if zygote is not None:
            zygote.stop()

    def forget(self) -> None:
        """In a forked child: drop the parent's processes without touching them (close our copies of sockets)."""
        sockets = [w.sock for w in self._idle]
        if self._zygote is not None and self._zygote.control is not None:
            sockets.append(self._zygote.control)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.close()
        self._idle, self._zygote, self._live = [], None, 0


_POOL: VerifierPool | None = None
_POOL_LOCK = threading.Lock()


def get_pool(size: int) -> VerifierPool:
    """The process-wide pool (created on first use; resized when `size` changes)."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = VerifierPool(size)
        else:
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
