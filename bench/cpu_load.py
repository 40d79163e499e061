"""CPU accounting shared by the benchmarks: this machine is shared, so each phase reports neighbours' load."""

from __future__ import annotations

import os


def own_cpu() -> float:
    """CPU seconds used by this process so far."""
    t = os.times()
    return t.user + t.system


def busy_cpu() -> float:
    """CPU seconds the whole machine has been busy (from /proc/stat)."""
    with open("/proc/stat") as fh:
        fields = [int(v) for v in fh.readline().split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")
