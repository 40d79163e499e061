"""The whole offline build in one process: the declared stages (`ads_core.pipeline.stages.STAGES`), in order.

The Prefect flow `ads-build` iterates the same list through a cached task wrapper, so for the same input both
write the same OUT tree. This path is what tests, benchmarks and library users call:

    result = build("data.jsonl", "ads-out/mine", BuildConfig())     # resumes from stages that need not run
    result.final_uri                                                 # OUT/final/train.parquet

`on_stage(event)` is called after every stage run (one per shard of a sharded stage), with the stage, shard,
whether it was reused and its wall and CPU seconds: what a benchmark times, without copying this loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from ads_core.config.build import BuildConfig
from ads_core.pipeline import lifecycle
from ads_core.pipeline import stages as declared
from ads_core.pipeline.keys import reusable, run_stage, stage_key
from ads_core.pipeline.resolve import resolve
from ads_core.pipeline.stages import context, stages_from
from ads_core.stages.base import ProgressFactory, Stage
from ads_core.storage import manifest as mf


@dataclass(frozen=True)
class StageEvent:
    """One finished stage run of `build()`."""

    stage: Stage
    shard: int | None
    manifest: mf.Manifest
    reused: bool
    seconds: float
    cpu_seconds: float  # this process's CPU time during the run (all threads)


@dataclass
class BuildResult:
    out: str
    dataset: str
    manifests: dict[str, mf.Manifest]  # by stage label (format, score-shard-0, ..., report)

    @property
    def formatted(self) -> mf.Manifest:
        return self.manifests["format"]

    @property
    def scores(self) -> mf.Manifest:
        return self.manifests["merge"]

    @property
    def clusters(self) -> mf.Manifest:
        return self.manifests["cluster"]

    @property
    def final(self) -> mf.Manifest:
        return self.manifests["sort"]

    @property
    def report(self) -> mf.Manifest:
        return self.manifests["report"]

    @property
    def final_uri(self) -> str:
        return self.final.output_uri("train")


def build(
    source: str | None,
    out: str | None = None,
    cfg: BuildConfig | None = None,
    progress: ProgressFactory | None = None,
    reuse: bool = True,
    dataset: str | None = None,
    on_stage: Callable[[StageEvent], None] | None = None,
) -> BuildResult:
    """Run every stage in order; with `reuse`, a stage whose manifest in OUT records the same stage key
    (same version, config and input content) and whose outputs are intact is not run again.

    SOURCE, OUT and the dataset name are resolved as the CLI and the flow resolve them
    (`ads_core.pipeline.resolve`): a relative source is made absolute, OUT defaults to ads-out/<dataset>.
    """
    cfg = cfg or BuildConfig()
    target = resolve(source, out, dataset, cfg.format.name)
    ctx = context(target, cfg)
    if progress is not None:
        ctx.progress = progress
    force = stages_from(ctx.config.run.force_from)
    manifests: dict[str, mf.Manifest] = {}
    for stage in declared.STAGES:  # read at call time: a stage added to the list runs with no other edit
        try:
            for shard in stage.shards(ctx):
                t0, c0 = time.perf_counter(), time.process_time()
                key = stage_key(stage, ctx, shard)
                found = reusable(stage, ctx, shard, key) if reuse and stage.name not in force else None
                if found is None:
                    ctx.state = lifecycle.state_for(stage, ctx)
                    with lifecycle.resources(stage):
                        found_or_new = run_stage(stage, ctx, shard, key)
                    ctx.state = None
                else:
                    found_or_new = found
                manifests[stage.label(shard)] = found_or_new
                if on_stage is not None:
                    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
                    on_stage(StageEvent(stage, shard, found_or_new, found is not None, seconds, cpu))
        finally:
            lifecycle.teardown(stage)
    return BuildResult(target.out, target.dataset, manifests)
