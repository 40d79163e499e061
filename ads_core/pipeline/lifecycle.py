"""Each stage's heavy state (`setup()`), made once per process and config and torn down when no longer needed.

The score stage's model is the example: every shard a process runs reuses it, a build in one process tears it
down when the stage is done, and a long-lived Dask worker keeps it while the next build uses the same model
and options (any change there makes a new one, and the old one is torn down first, so at most one per stage
lives in a process). Resources: a stage's `cpus` caps the threads of the numeric libraries while it runs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ads_core.stages.base import Stage, StageContext

_lock = threading.Lock()
_held: dict[str, tuple[str, Any]] = {}  # stage name -> (setup key, state)


def setup_key(stage: Stage, ctx: StageContext) -> str:
    """What the state depends on: the stage's config and its extra key content (the model's weights)."""
    payload = [stage.name, stage.config_of(ctx.config), stage.key_extra(ctx) if stage.key_extra else None]
    return json.dumps(payload, sort_keys=True, default=str)


def state_for(stage: Stage, ctx: StageContext) -> Any:
    """The stage's set-up state for this config, made on first use in this process."""
    if stage.setup is None:
        return None
    key = setup_key(stage, ctx)
    with _lock:
        held = _held.get(stage.name)
        if held is not None and held[0] == key:
            return held[1]
        if held is not None:
            _held.pop(stage.name)
            if stage.teardown is not None:
                stage.teardown(held[1])  # the old state goes before a new one is made
        state = stage.setup(ctx)
        _held[stage.name] = (key, state)
        return state


def teardown(stage: Stage) -> None:
    """Drop the stage's state in this process (after its last run of a build)."""
    with _lock:
        held = _held.pop(stage.name, None)
    if held is not None and stage.teardown is not None:
        stage.teardown(held[1])


@contextmanager
def resources(stage: Stage) -> Iterator[None]:
    """Run under the stage's declared resources: its `cpus` caps BLAS/OpenMP and torch threads."""
    cpus = stage.resources.cpus
    if cpus is None:
        yield
        return
    from threadpoolctl import threadpool_limits

    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a core dependency
        torch = None
    before = torch.get_num_threads() if torch is not None else None
    with threadpool_limits(limits=cpus):
        if torch is not None:
            torch.set_num_threads(cpus)
        try:
            yield
        finally:
            if torch is not None and before is not None:
                torch.set_num_threads(before)
