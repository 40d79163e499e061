"""Importing the project changes nothing in the process (issue 41): where locks live, Prefect's classes, the
log filters and the garbage collector's thresholds are the same before and after every layer is imported; what a
run needs is applied by its entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PROBE = """
import gc
import logging
import ads_core.locks as locks
from prefect._internal.concurrency.services import _QueueServiceBase

def state():
    names = ("prefect.task_runs", "prefect.flow_runs", "prefect.engine")
    ours = lambda n: [type(f).__name__ for f in logging.getLogger(n).filters if type(f).__module__.startswith("ads")]
    filters = {n: ours(n) for n in names}
    return locks.lock_dir(), _QueueServiceBase.__dict__["instance"], filters, gc.get_threshold()

before = state()
import ads_prefect, ads_prefect.flows.ads_build, ads_prefect.flows.ads_train, ads_lab.flows.ads_demo
import ads_prefect.flows.ads_compare, ads_prefect.tasks.stage_task, ads_prefect.tasks.train, ads_cli.main
after = state()
assert after == before, (before, after)
from ads_prefect.flows.setup import prepare_process
prepare_process()
prepare_process()  # once: applying it again adds nothing
done = state()
assert done[0] == before[0] and done[1] is not before[1] and done[3] == before[3], done
assert done[2]["prefect.task_runs"] == ["_OneLineForExpectedErrors", "_NoTracebackForExpectedErrors"], done[2]
print("ok", before[0])
"""


def test_importing_every_layer_moves_no_lock_patches_nothing_and_installs_no_filter(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != "ADS_LOCK_DIR"}
    env.update(ADS_CACHE_DIR=str(tmp_path / "cache"), PREFECT_HOME=str(tmp_path / "prefect-home"))
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["ok", str((tmp_path / "cache" / "locks").resolve())]
