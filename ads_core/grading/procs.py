"""The verifier processes seen from the pool: a zygote that forks warm workers, and one worker's requests.

See `ads_core.grading.worker` for their side, and `ads_core.grading.pool` for how they are shared.
"""

from __future__ import annotations

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

BOOT_TIMEOUT_S = 120.0  # a loaded machine can take long to import sympy; a broken install fails fast (EOF)
# Run as a script, not `-m`: it needs only the standard library and math-verify, not this package (pydantic, ...);
# -P keeps its folder (text.py, procs.py, ...) off sys.path, where it could shadow other modules.
WORKER = str(Path(__file__).resolve().with_name("worker.py"))


class WorkerUnavailable(RuntimeError):
    """No verifier process could be started (the reason is the message)."""


class Worker:
    """One verifier process, talked to over its socket; `kill` is safe even once its pid could be reused."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock, self.pid = sock, pid
        self.buffer = b""
        self.pidfd: int | None = None
        with contextlib.suppress(AttributeError, OSError):  # Linux 5.3+: a handle that never names another process
            self.pidfd = os.pidfd_open(pid)

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
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)  # it was still running at the limit: its pid is still its own
        self.close()

    def close(self) -> None:
        """Let go of the process without signalling it (our socket and pid handle)."""
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.pidfd is not None:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = None


class Zygote:
    """The process that forks warm workers (see `ads_core.grading.worker.zygote`).

    It asks the kernel for SIGKILL when its parent goes (PR_SET_PDEATHSIG, as `ads_core.common.procs`'s
    `die_with_parent` does, but set by the zygote itself: no `preexec_fn` in a parent full of threads). The kernel
    signals a child when the *thread* that started it ends, so it is started from one long-lived thread (a pool
    thread that exits would take it along); its workers die with it the same way.
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
        for name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            env.setdefault(name, "1")
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-P", WORKER, str(theirs.fileno()), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        self.control = ours
        ready = Worker(ours, self.proc.pid).read_line(time.monotonic() + BOOT_TIMEOUT_S)
        if ready is None:
            self.stop()
            raise WorkerUnavailable(f"the verifier process did not start within {BOOT_TIMEOUT_S:.0f} s")

    def ensure(self) -> None:
        """Start the zygote unless it runs (call with `lock` held). Raises WorkerUnavailable."""
        if self.proc is None or self.proc.poll() is not None:
            future: Future[None] = Future()
            self.jobs.put(future)
            try:
                future.result()
            except (OSError, EOFError, ValueError) as exc:
                self.stop()
                raise WorkerUnavailable(f"cannot start the verifier process: {exc}") from None

    def fork(self) -> Worker:
        """A new worker (starting the zygote first when needed). Raises WorkerUnavailable."""
        with self.lock:
            for attempt in range(2):
                self.ensure()
                try:
                    assert self.control is not None
                    self.control.sendall(b"f")
                    msg, fds, _, _ = socket.recv_fds(self.control, 64, 1)
                    if not msg or not fds:
                        raise EOFError("the verifier zygote exited")
                    return Worker(socket.socket(fileno=fds[0]), int(msg))
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
