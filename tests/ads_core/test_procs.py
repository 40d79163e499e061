"""No orphans: a process we start (die_with_parent) or a library starts for us (reap_with_me) dies with its parent,
kill -9 included. The `ads build` end-to-end case is in tests/flows/test_fencing.py."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

OWNER = """
import subprocess, sys, time
from ads_core.common.procs import die_with_parent, reap_with_me
ours = subprocess.Popen(["sleep", "600"], preexec_fn=die_with_parent())
theirs = subprocess.Popen(["sleep", "600"])  # as a library would start it: nothing set up
aside = subprocess.Popen(["sleep", "600"], start_new_session=True)  # as `ads build` starts Prefect's server
watchdogs = [reap_with_me(theirs.pid), reap_with_me(aside.pid)]
print(ours.pid, theirs.pid, aside.pid, *watchdogs, flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    """Running, not a zombie waiting for a reaper."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux")
@pytest.mark.parametrize("whole_group", [False, True], ids=["the-parent", "its-process-group"])
def test_children_die_with_a_parent_killed_by_sigkill(whole_group: bool):
    """Killing the whole process group (a scheduler, `kill -9 -PGID`) also killed the watchdogs, which shared it,
    and left a child in a session of its own (Prefect's temporary server) running (issue 51): a watchdog now has
    a session of its own too."""
    owner = subprocess.Popen([sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, start_new_session=True)
    pids: list[int] = []
    try:
        pids = [int(p) for p in owner.stdout.readline().split()]
        assert len(pids) == 5 and all(alive(p) for p in pids), pids
        os.killpg(owner.pid, signal.SIGKILL) if whole_group else os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 15  # a bound, not a timing claim: they go within a second here
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in pids if alive(p)], "outlived their parent"
    finally:
        for pid in [owner.pid, *pids[1:3]]:  # the owner's group, and what a failed run leaves in other sessions
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)


FAKE_WORKER = """
import os, socket, sys, time
sock = socket.socket(fileno=int(sys.argv[1]))
sock.recv(1 << 16)  # the request
if sys.argv[2] == "sleep":
    time.sleep(60)  # uses no CPU: as a worker the machine gives no time to
while True:
    pass  # uses CPU
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc")
@pytest.mark.parametrize(("kind", "why"), [("sleep", "deadline"), ("spin", "cpu")])
def test_a_worker_is_stopped_by_its_cpu_budget_not_by_the_machines_load(kind: str, why: str):
    """A worker that gets no CPU (sleeping here, starved on a loaded machine) is not charged for the wall time:
    it is cut at the deadline, not at its budget; one that computes is cut once it used its CPU budget, however
    long the wall clock took to give it that time (the deadline here is far)."""
    import socket

    from ads_core.common.procs import Worker, cpu_seconds

    ours, theirs = socket.socketpair()
    proc = subprocess.Popen([sys.executable, "-c", FAKE_WORKER, str(theirs.fileno()), kind], pass_fds=[theirs.fileno()])
    theirs.close()
    worker = Worker(ours, proc.pid)
    try:
        deadline = time.monotonic() + (1.0 if kind == "sleep" else 60.0)  # a bound, not a timing claim
        reply, used, reason = worker.ask({"pairs": []}, 0.3, deadline)
        assert (reply, reason) == (None, why)
        assert (used < 0.3) if kind == "sleep" else (used >= 0.3)
    finally:
        worker.kill()
        proc.wait(10)
    assert cpu_seconds(proc.pid) is None  # gone
    assert cpu_seconds(os.getpid()) > 0
