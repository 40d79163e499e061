"""The run's shared servers are stopped at its end by their records (tests/conftest.py, `stop_recorded`): the
whole process group goes, and a record whose pid now names another program kills nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

SLEEPER = (  # a fake server: it starts a child, then both sleep
    "import subprocess, sys, time; "
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); time.sleep(300)"
)


def _record(path: Path, pid: int, marker: str) -> Path:
    path.write_text(json.dumps({"pid": pid, "cmdline_has": marker}))
    return path


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"


def test_a_recorded_server_and_its_children_are_stopped(
    tmp_path: Path, stop_recorded_server: Callable[[Path], int | None]
):
    proc = subprocess.Popen([sys.executable, "-c", SLEEPER, "ads-fake-server"], start_new_session=True)
    try:
        children = _children_soon(proc.pid)
        assert children, "the fake server did not start its child"
        assert stop_recorded_server(_record(tmp_path / "a.server.json", proc.pid, "ads-fake-server")) is None
        assert proc.poll() is not None  # reaped: this process started it
        assert not any(_alive(c) for c in children)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait()


def test_a_record_whose_pid_runs_another_program_kills_nothing(
    tmp_path: Path, stop_recorded_server: Callable[[Path], int | None]
):
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    try:
        assert stop_recorded_server(_record(tmp_path / "b.server.json", proc.pid, "prefect server start")) is None
        assert proc.poll() is None  # still running: not the recorded server
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def _children_soon(pid: int) -> list[int]:
    """The child pids of PID once it has one (polled: it starts it right away)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if children:
            return [int(c) for c in children]
        time.sleep(0.05)
    return []
