"""One interface for running the declared stages: an executor runs every run of one stage; `execute` drives it.

`execute` owns what every way of running a build shares: the stage list (`ads_core.pipeline.stages.STAGES`,
read at call time), its order, `run.force_from`, and tearing down each stage's set-up state once its runs are
done. An executor owns only how one stage's runs happen and what it keeps of them. The two implementations are
the in-process one (`ads_core.pipeline.build.InProcess`, behind `build()`) and the Prefect one
(`ads_prefect.flows.stage_runs.PrefectExecutor`, behind the `ads-build` flow), so a stage added to the list runs in
both with no other edit.
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from ads_core.pipeline import lifecycle
from ads_core.pipeline import stages as declared
from ads_core.stages.base import Stage, StageContext

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)


class StageExecutor(Protocol[T_co]):
    """Runs the runs of one stage (one per shard of a sharded stage) and says what came of them."""

    def run(self, stage: Stage, ctx: StageContext, force: bool) -> T_co:
        """Every run of STAGE; FORCE: recompute even what could be reused (`run.force_from`)."""
        ...

    def finished(self, stage: Stage, ctx: StageContext) -> None:
        """After STAGE's runs and the teardown of its set-up state (UI items, timings)."""
        ...


def execute(executor: StageExecutor[T], ctx: StageContext) -> dict[str, T]:
    """Every declared stage in order through EXECUTOR; returns what it gave for each, by stage name."""
    force = declared.stages_from(ctx.config.run.force_from)
    results: dict[str, T] = {}
    for stage in declared.STAGES:  # read at call time: a stage added to the list runs with no other edit
        try:
            results[stage.name] = executor.run(stage, ctx, stage.name in force)
        finally:
            lifecycle.teardown(stage)  # the set-up state of runs in this process (the model) is not needed again
        executor.finished(stage, ctx)
    return results
