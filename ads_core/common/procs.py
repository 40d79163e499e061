"""Child processes that die with the process that started them, kill -9 included (no orphans).

- `die_with_parent`: a `preexec_fn` for children we start ourselves: Linux sends the child SIGTERM when the
  thread that started it ends, however it ends (PR_SET_PDEATHSIG). Start such children from a thread that lives
  as long as they should (the main thread, or the one that waits for them).
- `reap_with_me(pid)`: for a child started by a library (Prefect's temporary server): a small watchdog process
  reads a pipe from us; when we exit, however we exit, the pipe closes and the watchdog stops that process
  (SIGTERM, then SIGKILL after a grace), if it is still the same process (its start time is unchanged).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

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
    try:
        watchdog = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(pid), started, str(grace_s)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
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
