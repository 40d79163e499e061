"""Shared fixtures, kept small and generic.

Nothing reaches the network at run time: the hub and datasets libraries are told so before any test module
imports them (a library that reads these variables at import would otherwise try the hub, and time out).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# One compute thread per process, here and in every process a test starts (they inherit the environment). The
# suite runs one xdist worker more than the cores, beside servers and build subprocesses: a second OpenMP/BLAS
# thread has no idle core to run on, and its partner spins at each barrier while it waits. Measured on 2 cores:
# the same in-process torch tests took 1.8-2.7x the CPU time under the full suite with the default 2 threads; a
# tiny-model forward pass gives bit-identical logits with 1 or 2 threads. Set these variables to override.
for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real data sets in ../shared/data (GSM8K, MATH-500, AIME24, AMC23); skip when this checkout has none."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data sets not found at {SHARED_DATA}")
    return SHARED_DATA


def copy_prefect_home(source: Path, home: Path) -> Path:
    """A new PREFECT_HOME holding a consistent copy (SQLite's backup, safe while a server writes) of SOURCE's
    database, migrations done: a process that starts its own temporary server there skips the ~13 CPU-s a fresh
    database costs."""
    import sqlite3

    home.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(source / "prefect.db") as src, sqlite3.connect(home / "prefect.db") as dst:
        src.backup(dst)
    return home


@pytest.fixture(scope="session")
def prefect_home_copy() -> Any:
    """`copy_prefect_home` above, for test modules (with --import-mode=importlib they cannot import conftest)."""
    return copy_prefect_home


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules with browser tests (or that use `ads server`) first, then those with other slow tests (marker
    `slow`), then the rest; each module's tests stay together and in order, so its fixtures are set up once.
    pytest-xdist's worksteal scheduler hands each worker a contiguous part of this list and balances by taking
    the not-yet-started tail of another's part: a minute-long test that starts last would keep one worker busy
    while the other idles, and the browser tests, started first by one worker, share one `ads server` and its
    first build instead of one per worker."""
    browser = {
        item.path
        for item in items
        if item.get_closest_marker("browser") or "ads_server" in getattr(item, "fixturenames", ())
    }
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    items.sort(key=lambda item: 0 if item.path in browser else 1 if item.path in slow else 2)  # stable


@pytest.hookimpl(tryfirst=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject's addopts): one worker more than the cores this process may use. Many tests wait on a
    server, a subprocess or a lease while their worker's core idles; measured on 2 cores, whole suite: 2 workers
    729 s, 3 workers 604 s, 4 workers 612 s. PYTEST_XDIST_AUTO_NUM_WORKERS still decides when set."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None  # xdist's own hook reads it
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)  # not on macOS
    return cores + 1
