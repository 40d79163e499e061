"""A stage's set-up state is made once per process and config, torn down when done or replaced; its declared
cpus cap the numeric libraries' threads while it runs."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from ads_core.config.build import BuildConfig
from ads_core.pipeline import lifecycle
from ads_core.stages.base import Resources, Stage, StageContext


def make_stage(log: list[str], cpus: int | None = None) -> Stage:
    def setup(ctx: StageContext) -> dict[str, Any]:
        log.append(f"setup {ctx.config.score.max_length}")
        return {"max_length": ctx.config.score.max_length}

    return Stage(
        "probe",
        "score",
        (),
        {"probe": "probe/x.json"},
        "1",
        run=lambda ctx, shard: None,  # type: ignore[arg-type, return-value]
        resources=Resources(cpus=cpus),
        setup=setup,
        teardown=lambda state: log.append(f"teardown {state['max_length']}"),
    )


def context(max_length: int) -> StageContext:
    cfg = BuildConfig().with_overrides({"score.max_length": max_length})
    return StageContext(source="", out="/tmp/x", dataset="d", config=cfg, layout={})


def test_state_is_made_once_per_config_and_the_old_one_goes_first():
    log: list[str] = []
    stage = make_stage(log)
    first = lifecycle.state_for(stage, context(64))
    assert lifecycle.state_for(stage, context(64)) is first  # every shard of the stage reuses it
    other = lifecycle.state_for(stage, context(128))  # another config: a new state, the old one torn down first
    assert other == {"max_length": 128}
    lifecycle.teardown(stage)
    lifecycle.teardown(stage)  # nothing left: a second teardown does nothing
    assert log == ["setup 64", "teardown 64", "setup 128", "teardown 128"]


def test_a_stage_without_setup_has_no_state():
    stage = replace(make_stage([]), setup=None)
    assert lifecycle.state_for(stage, context(64)) is None


def test_declared_cpus_cap_threads_while_the_stage_runs():
    before = torch.get_num_threads()
    torch.set_num_threads(2)  # the suite runs one thread per process (tests/conftest.py): start above the cap
    try:
        with lifecycle.resources(make_stage([], cpus=1)):
            assert torch.get_num_threads() == 1
        assert torch.get_num_threads() == 2
        with lifecycle.resources(make_stage([], cpus=None)):
            assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
