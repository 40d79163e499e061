"""Test-only fault hooks of a stage run, driven by the environment: fail a stage, or pause it (so a test can kill -9
or SIGSTOP the build at a known point). Nothing happens unless the variables are set.
"""

from __future__ import annotations

import os
from pathlib import Path

from ads_core.common.progress import ProgressFactory, after_each_tick

FAULT_ENV = "ADS_TEST_FAIL_STAGE"  # test-only: comma-separated stage names that raise InjectedFault
PAUSE_ENV = "ADS_TEST_PAUSE_STAGE"  # test-only: "stage[@progress]:marker-file[:seconds]": touch the file, then wait


class InjectedFault(RuntimeError):
    """Raised by the test-only fault hook (ADS_TEST_FAIL_STAGE); never retried."""


def fault_point(stage: str) -> None:
    """Test-only hook: fail this stage when its name is listed in ADS_TEST_FAIL_STAGE."""
    wanted = {s.strip() for s in os.environ.get(FAULT_ENV, "").split(",") if s.strip()}
    if stage in wanted:
        raise InjectedFault(f"injected failure in stage {stage!r} ({FAULT_ENV})")


def pause_point(stage: str) -> None:
    """Test-only hook: with ADS_TEST_PAUSE_STAGE=stage:FILE[:SECONDS], create FILE and wait SECONDS (600), so a test
    can kill -9 or SIGSTOP the build here, or until the test deletes FILE (the build then goes on)."""
    wanted, _, marker = os.environ.get(PAUSE_ENV, "").partition(":")
    if wanted == stage and marker:
        import time

        seconds = 600.0
        path, _, tail = marker.rpartition(":")
        if path and tail.replace(".", "", 1).isdigit():
            marker, seconds = path, float(tail)
        staged = Path(f"{marker}.{os.getpid()}.tmp")  # the file appears with the pid in it: a test that sees it
        staged.write_text(str(os.getpid()))  # may kill us at once, and read the pid afterwards
        os.replace(staged, marker)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and os.path.exists(marker):
            time.sleep(0.05)


def pausing_at_progress(factory: ProgressFactory, stage: str) -> ProgressFactory:
    """Test-only hook: with ADS_TEST_PAUSE_STAGE=<stage>@progress:FILE[:SECONDS], pause (`pause_point`) at the stage's
    first progress tick: rows computed, nothing stored or published yet (a kill there is a kill mid-work)."""
    point = f"{stage}@progress"
    if os.environ.get(PAUSE_ENV, "").partition(":")[0] != point:
        return factory

    return after_each_tick(factory, lambda: lambda: pause_point(point))
