"""The one worker pool of a lab flow: `ads-demo` and `ads-study` train their runs in local one-thread worker
processes (``ads_lab.demo.runs.workers``), which the flow starts for its training and its tasks send runs to.

The pool sits in this module, not in the tasks' parameters: Prefect records a task's parameters, and a pool is
not a value (a study run on a Dask worker has none and trains where it is)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from typing import Any

from ads_lab.demo import runs
from ads_prefect.runtime.interrupts import run_interruptible

_pool: ProcessPoolExecutor | None = None  # the running flow's worker processes, while it trains


@contextmanager
def worker_pool(jobs: int) -> Iterator[None]:
    """JOBS worker processes (none for 0) for the tasks that `in_worker` runs, for the duration of the block. Inside
    an open pool's block the open pool serves (Experiment 2's flows, one after another, share one: each start costs
    seconds of imports per worker)."""
    global _pool
    if _pool is not None:
        yield
        return
    with runs.workers(jobs) as pool:
        _pool = pool
        try:
            yield
        finally:
            _pool = None


def in_worker(function: Callable[..., Any], *args: Any, interruptible: bool = False) -> Any:
    """FUNCTION(*ARGS) in a worker process of the flow's pool, or here when there is none. INTERRUPTIBLE: a SIGINT in
    the worker surfaces here as a KeyboardInterrupt, whatever the interrupted code made of it
    (``ads_prefect.runtime.interrupts``)."""
    if _pool is None:
        return function(*args)
    if interruptible:
        return _pool.submit(run_interruptible, function, *args).result()
    return _pool.submit(function, *args).result()
