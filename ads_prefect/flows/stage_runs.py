"""The Prefect executor of the declared stages (`ads_core.pipeline.executor`): each run through the one generic
task (`ads_prefect.tasks.stage_task`, which reuses a stage whose manifest records its key), a sharded stage in this
thread or mapped on Dask, each stage followed by the UI items it declares. No stage is named here.
"""

from __future__ import annotations

import time
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import create_progress_artifact, update_progress_artifact
from prefect.futures import as_completed

from ads_core.pipeline.stage_keys import stage_key
from ads_core.stages.base import Stage, StageContext
from ads_prefect.runtime.dask import api_pinned, check_scheduler, dask_annotations, prepare_workers, shard_runner
from ads_prefect.tasks.artifact_keys import artifact_key
from ads_prefect.tasks.publish import publish_stage
from ads_prefect.tasks.stage_task import configured, params_of


def progress_artifact(stage: Stage, ctx: StageContext) -> str | None:
    """A progress artifact for a stage that declares progress (its runs update it as rows go by)."""
    if not stage.progress:
        return None
    n = len(stage.shards(ctx))
    return str(
        create_progress_artifact(
            progress=0.0,
            key=artifact_key(ctx.dataset, f"{stage.name}-progress"),
            description=f"{stage.name}: {n} run(s) into {ctx.stage_dir(stage.main, 0 if stage.sharded else None)}",
        )
    )


class PrefectExecutor:
    """Runs each stage's runs as Prefect task runs; keeps each run's state name (Completed, Cached, ...), each
    stage's seconds and the URI of its main output. Each run publishes only while `fence` (the build's hold on OUT)
    is still the newest."""

    def __init__(self, fence: dict[str, Any] | None = None) -> None:
        self.fence = fence
        self.states: dict[str, str] = {}
        self.seconds: dict[str, float] = {}
        self.outputs: dict[str, str] = {}
        self._started = 0.0

    def run(self, stage: Stage, ctx: StageContext, force: bool) -> str:
        """Every run of STAGE: in this thread one after another (the set-up state is made once, and Ctrl-C /
        SIGTERM reach the computing stage), or mapped on Dask. Returns the URI of the stage's main output (the last
        shard's for a sharded stage)."""
        self._started = time.perf_counter()
        logger = get_run_logger()
        shards = stage.shards(ctx)
        artifact = progress_artifact(stage, ctx)
        keys = {shard: stage_key(stage, ctx, shard) for shard in shards}  # once: it hashes the inputs
        failures: list[tuple[int | None, Any]] = []
        cached = 0

        def params(shard: int | None) -> dict[str, Any]:
            return params_of(
                stage, ctx, shard, keys[shard], reuse=not force, progress_artifact=artifact, fence=self.fence
            )

        def record(done: int, shard: int | None, state: Any) -> None:
            nonlocal cached
            if state.is_completed():
                cached += state.name == "Cached"
            else:
                failures.append((shard, state))
            self.states[stage.label(shard)] = str(state.name)
            if artifact and len(shards) > 1:
                description = f"{done}/{len(shards)} runs finished ({cached} cached, {len(failures)} failed)"
                update_progress_artifact(
                    artifact_id=artifact, progress=100.0 * done / len(shards), description=description
                )
            elif artifact and state.is_completed():  # a computed run keeps its own last line (rows, rate)
                description = f"{stage.name}: reused (Cached)" if state.name == "Cached" else None
                update_progress_artifact(artifact_id=artifact, progress=100.0, description=description)

        if not (stage.sharded and ctx.config.run.dask):
            for done, shard in enumerate(shards, start=1):
                record(done, shard, configured(stage, shard)(**params(shard), return_state=True))
        else:
            dask = ctx.config.run.dask
            check_scheduler(dask)  # an unreachable scheduler: one line naming run.dask, not a 30 s hang
            with api_pinned(), shard_runner(dask, ctx.config.run.dask_workers, len(shards)) as runner:
                prepare_workers(runner, dask)
                with dask_annotations(stage, runner):
                    futures = {runner.submit(configured(stage, s), parameters=params(s)): s for s in shards}
                for done, future in enumerate(as_completed(list(futures)), start=1):
                    future.wait()  # sets the future's final state
                    record(done, futures[future], future.state)
        if failures:
            n, failed = len(shards), [s for s, _ in failures]
            logger.error("%d of %d runs of %s failed: %s", len(failures), n, stage.name, failed)
            failures[0][1].result()  # raises that run's exception
        self.outputs[stage.name] = stage.main_uri(ctx, shards[-1])
        return self.outputs[stage.name]

    def finished(self, stage: Stage, ctx: StageContext) -> None:
        """The stage's seconds (teardown included), then the UI items it declares."""
        self.seconds[stage.name] = time.perf_counter() - self._started
        if stage.ui is not None:
            config = ctx.config.model_dump()
            publish_stage(stage.name, self.outputs[stage.name], ctx.source, ctx.out, ctx.dataset, config)
