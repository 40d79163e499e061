"""Processes we start and must be able to stop: the project's one process-helper module.

Child processes that die with the process that started them, kill -9 included (no orphans):

- `die_with_parent`: a `preexec_fn` for children we start ourselves: Linux sends the child SIGTERM when the
  thread that started it ends, however it ends (PR_SET_PDEATHSIG). Start such children from a thread that lives
  as long as they should (the main thread, or the one that waits for them).
- `reap_with_me(pid)`: for a child started by a library (Prefect's temporary server): a watchdog process (in a
  session of its own: a kill -9 of our process group spares it) reads a pipe from us; when we exit, however we
  exit, the pipe closes and it stops that process (SIGTERM, then SIGKILL) if its start time is unchanged.

Warm workers forked on request, each stoppable at a CPU-time budget or a deadline (the grader's verifiers):
- `Zygote`: a process that loads a library once and forks ready workers on request over a Unix socket; other
  processes of the same user (our forked or spawned children) may join it by its address, so that their first
  request costs a fork (milliseconds), not a start (seconds).
- `Worker`: one such worker, asked one request at a time with a CPU budget and a wall-clock deadline.
- `cpu_seconds(pid)`: a process's CPU time so far, so that a budget counts the work done, not the machine's load.
"""

from __future__ import annotations

import contextlib
import ctypes
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
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

_PR_SET_PDEATHSIG = 1
_PIPES: list[int] = []  # write ends kept open for the life of this process
_WATCHDOGS: list[subprocess.Popen[bytes]] = []

_WATCHDOG = r"""
import os, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # a terminal's Ctrl-C reaches us too: stay to clean up
pid, started, grace = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
def same():
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return False
    return fields[0] not in "ZX" and fields[19] == started
while os.read(0, 1 << 12):
    pass
for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
    if not same():
        break
    try:
        os.kill(pid, sig)
    except OSError:
        break
    deadline = time.monotonic() + wait
    while same() and time.monotonic() < deadline:
        time.sleep(0.05)
"""


def start_time(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), which tells a reused pid from the original."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A `preexec_fn` that makes the child receive `sig` when its parent (thread) ends; None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here: the child only calls it
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:  # the parent died before prctl: the signal would never come
            os.kill(os.getpid(), sig)

    return preexec


def reap_with_me(pid: int, grace_s: float = 3.0) -> int | None:
    """Stop process `pid` when this process exits (kill -9 included); returns the watchdog's pid, or None when
    `pid` is already gone."""
    started = start_time(pid)
    if started is None:
        return None
    read_end, write_end = os.pipe()  # not inheritable: later children do not keep it open
    try:  # its own session: `kill -9 -PGID` of ours took it along and left a server in its own session running
        watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(pid), started, str(grace_s)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
        )
    except BaseException:
        os.close(write_end)
        raise
    finally:
        os.close(read_end)
    _PIPES.append(write_end)  # closed by the kernel when we exit, which wakes the watchdog
    _WATCHDOGS.append(watchdog)
    return watchdog.pid


def stop_reaping() -> None:
    """Close our ends now (for tests): the watchdogs stop their processes and exit."""
    while _PIPES:
        with contextlib.suppress(OSError):
            os.close(_PIPES.pop())
    while _WATCHDOGS:
        with contextlib.suppress(subprocess.TimeoutExpired):
            _WATCHDOGS.pop().wait(10)


BOOT_TIMEOUT_S = 120.0  # a loaded machine can take long to import sympy; a broken install fails fast (EOF)
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


class WorkerUnavailable(RuntimeError):
    """No worker process could be started (the reason is the message)."""


class Late(Exception):
    """The caller's deadline passed before a worker was ready (the machine is busy, or the zygote still starts)."""


def cpu_seconds(pid: int) -> float | None:
    """CPU time process PID has used so far (user + system), or None when it cannot be read (gone, not Linux)."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[0]) / 1e9  # nanoseconds
    except (OSError, IndexError, ValueError):
        pass
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _TICKS
    except (OSError, IndexError, ValueError):
        return None


class Worker:
    """One worker process, talked to over its socket (JSON lines); `kill` never hits a reused pid."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self.sock, self.pid = sock, pid
        self.buffer = b""
        self.cpu_at_request: float | None = None  # its CPU time when it took its current request
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
                raise EOFError("the worker process exited")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line

    def ask(self, request: dict[str, Any], cpu_s: float, deadline: float) -> tuple[dict[str, Any] | None, float, str]:
        """(reply, CPU seconds used, "") or (None, CPU seconds used, why) when the worker used its CPU budget
        (why "cpu") or the deadline came first (why "deadline"). The CPU time is read only past `cpu_s` of wall
        time: a single-threaded worker cannot use more CPU than wall time."""
        before = self.cpu_at_request = cpu_seconds(self.pid)
        start = time.monotonic()
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        check = min(deadline, start + cpu_s)
        while True:
            line = self.read_line(check)
            now = time.monotonic()
            if line is not None:
                return json.loads(line), now - start, ""
            after = cpu_seconds(self.pid)
            used = after - before if after is not None and before is not None else now - start
            if used >= cpu_s:
                return None, used, "cpu"
            if now >= deadline:
                return None, used, "deadline"
            check = min(deadline, now + max(cpu_s - used, 0.005))

    def cpu_used(self) -> float | None:
        """CPU seconds spent on the current request so far (None when unknown)."""
        now = cpu_seconds(self.pid)
        return None if now is None or self.cpu_at_request is None else now - self.cpu_at_request

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            if self.pidfd is not None:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            else:
                os.kill(self.pid, signal.SIGKILL)  # it was still running: its pid is still its own
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
    """A process that forks warm workers on request: our own (`script`, started on first need), or one another
    process of ours started, joined by its `address` (a forked or spawned child joins its parent's).

    Protocol (see `ads_core.grading.worker.zygote`): it is started with one end of a socket pair as its lifeline
    and says ``{"ready": true, "address": ...}`` there once warm; any process of the same user connects to the
    abstract Unix socket `address` and gets, for each byte it sends, a worker's pid and one end of a new socket
    pair (SCM_RIGHTS). Our own zygote asks the kernel for SIGKILL when the thread that started it ends, and its
    workers die with it, so it is started from one long-lived thread (a pool thread that exits would take it).
    """

    def __init__(self, script: str, join: str | None = None) -> None:
        self.script, self.join = script, join
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.lifeline: socket.socket | None = None
        self.conn: socket.socket | None = None  # where forks are asked for
        self.address: str | None = None
        self._starting: Future[None] | None = None
        self._jobs: queue.SimpleQueue[Future[None]] = queue.SimpleQueue()
        self._starter: threading.Thread | None = None

    def _start_in_starter(self) -> None:
        while True:
            future = self._jobs.get()
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
        try:  # -P: the script's folder stays off sys.path (its module names could shadow others)
            self.proc = subprocess.Popen(
                [sys.executable, "-P", self.script, str(theirs.fileno()), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                pass_fds=(theirs.fileno(),),
            )
        finally:
            theirs.close()
        self.lifeline = ours
        ready = Worker(ours, self.proc.pid).read_line(time.monotonic() + BOOT_TIMEOUT_S)
        if ready is None:
            raise WorkerUnavailable(f"the zygote process did not start within {BOOT_TIMEOUT_S:.0f} s")
        self.address = json.loads(ready)["address"]

    def _ensure(self, deadline: float) -> None:
        """Connected to a running zygote: the one we joined, else our own (started now if needed). Raises Late
        at the deadline (a start goes on in the background for the next caller) or WorkerUnavailable."""
        if self.conn is not None and (self.proc is None or self.proc.poll() is None):
            return
        self._drop_connection()
        if self.join is not None and self.proc is None:
            try:
                self.conn = _connect(self.join)
                self.address = self.join
                return
            except OSError:
                self.join = None  # the zygote we were to share is gone: start our own
        if self._starting is None and (self.proc is None or self.proc.poll() is not None):
            self.stop()
            if self._starter is None:
                self._starter = threading.Thread(target=self._start_in_starter, name="ads-zygote", daemon=True)
                self._starter.start()
            self._starting = Future()
            self._jobs.put(self._starting)
        if self._starting is not None:  # a start under way (a caller before us gave up at its deadline): wait
            try:
                self._starting.result(timeout=max(0.0, deadline - time.monotonic()))
            except FutureTimeout:
                raise Late("the zygote is still starting") from None
            except (OSError, EOFError, ValueError, KeyError, WorkerUnavailable) as exc:
                self.stop()
                raise WorkerUnavailable(f"cannot start the zygote process: {exc}") from None
            finally:
                if self._starting is not None and self._starting.done():
                    self._starting = None
        try:
            assert self.address is not None
            self.conn = _connect(self.address)
        except OSError as exc:
            self.stop()
            raise WorkerUnavailable(f"cannot reach the zygote process: {exc}") from None

    @property
    def running(self) -> bool:
        """Joined, or our own one started (it may have died since: `fork` then starts another)."""
        return self.address is not None and (self.proc is None or self.proc.poll() is None)

    def start(self) -> None:
        """Start (or join) now and wait for it. Raises WorkerUnavailable."""
        with self.lock:
            try:
                self._ensure(time.monotonic() + BOOT_TIMEOUT_S)
            except Late as exc:
                raise WorkerUnavailable(str(exc)) from None

    def fork(self, deadline: float) -> Worker:
        """A new worker. Raises Late at the deadline, WorkerUnavailable when none can be had."""
        if not self.lock.acquire(timeout=max(0.0, deadline - time.monotonic())):
            raise Late("waiting for the zygote")
        try:
            for attempt in range(2):
                self._ensure(deadline)
                assert self.conn is not None
                try:
                    self.conn.settimeout(max(0.01, deadline - time.monotonic()))
                    self.conn.sendall(b"f")
                    msg, fds, _, _ = socket.recv_fds(self.conn, 64, 1)
                    if not msg or not fds:
                        raise EOFError("the zygote exited")
                    self.conn.settimeout(None)
                    return Worker(socket.socket(fileno=fds[0]), int(msg))
                except TimeoutError:
                    self._drop_connection()  # its late answer goes to a closed socket: that worker exits
                    raise Late("the zygote did not fork in time") from None
                except (OSError, EOFError, ValueError) as exc:
                    self._drop_connection()
                    if self.proc is not None and self.proc.poll() is None and not attempt:
                        continue
                    if self.proc is None:
                        self.join = None  # a joined zygote that went away: our own next time
                    if attempt:
                        raise WorkerUnavailable(f"cannot start a worker process: {exc}") from None
            raise AssertionError("unreachable")
        finally:
            self.lock.release()

    def _drop_connection(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(OSError):
                self.conn.close()
            self.conn = None

    def stop(self) -> None:
        """Stop our own zygote (its workers follow it); a joined one is only disconnected."""
        self._drop_connection()
        if self.lifeline is not None:
            with contextlib.suppress(OSError):
                self.lifeline.close()
            self.lifeline = None
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
            self.proc = None

    def forget(self) -> None:
        """In a forked child: close our copies of the parent's sockets, touching no process."""
        for sock in (self.conn, self.lifeline):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.close()
        self.conn = self.lifeline = self.proc = None


def _connect(address: str) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect("\0" + address)
    except OSError:
        sock.close()
        raise
    return sock
