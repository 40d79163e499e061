"""The whole offline build in one process: the in-process executor of the declared stages (`execute`).

The Prefect flow `ads-build` is the other executor of the same list, so for the same input both write the same
OUT tree. This path is what tests, benchmarks and library users call:

    result = build("data.jsonl", "ads-out/mine", BuildConfig())     # resumes from stages that need not run
    result.final_uri                                                 # OUT/final/train.parquet
    result.manifest("scores").counts                                 # the manifest that wrote an artifact

`on_stage(event)` is called after every stage run (one per shard of a sharded stage), with the stage, shard,
whether it was reused and its wall and CPU seconds: what a benchmark times, without copying this loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ads_core.common.progress import ProgressFactory
from ads_core.config.build import BuildConfig
from ads_core.locks.manager import owning
from ads_core.pipeline import lifecycle
from ads_core.pipeline.executor import execute
from ads_core.pipeline.resolve import resolve
from ads_core.pipeline.stage_keys import reusable, run_stage, stage_key
from ads_core.pipeline.stages import context
from ads_core.stages.base import SHARD_SLOT, Stage, StageContext
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
    manifests: dict[str, mf.Manifest]  # by stage run label (format, score-shard-0, ..., report)
    by_artifact: dict[str, mf.Manifest] = field(default_factory=dict)  # artifact name -> the manifest that wrote it
    uris: dict[str, str] = field(default_factory=dict)  # artifact name -> its URI under OUT (unsharded ones)

    def manifest(self, artifact: str) -> mf.Manifest:
        """The manifest of the stage run that wrote ARTIFACT (`formatted`, `scores`, `final`, ...)."""
        return self.by_artifact[artifact]

    @property
    def final_uri(self) -> str:
        """The build's product: OUT/final/train.parquet."""
        return self.uris["final"]


class InProcess:
    """The in-process executor: each run in this thread, reusing a run whose manifest in OUT records its stage key
    (with `reuse`)."""

    def __init__(self, reuse: bool, on_stage: Callable[[StageEvent], None] | None) -> None:
        self.reuse, self.on_stage = reuse, on_stage
        self.manifests: dict[str, mf.Manifest] = {}
        self.by_artifact: dict[str, mf.Manifest] = {}

    def run(self, stage: Stage, ctx: StageContext, force: bool) -> mf.Manifest:
        found_or_new = None
        for shard in stage.shards(ctx):
            t0, c0 = time.perf_counter(), time.process_time()
            key = stage_key(stage, ctx, shard)
            found = reusable(stage, ctx, shard, key) if self.reuse and not force else None
            if found is None:
                ctx.state = lifecycle.state_for(stage, ctx)
                with lifecycle.resources(stage):
                    found_or_new = run_stage(stage, ctx, shard, key)
                ctx.state = None
            else:
                found_or_new = found
            self.manifests[stage.label(shard)] = found_or_new
            if self.on_stage is not None:
                seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
                self.on_stage(StageEvent(stage, shard, found_or_new, found is not None, seconds, cpu))
        assert found_or_new is not None  # every stage has at least one run
        self.by_artifact.update(dict.fromkeys(stage.outputs, found_or_new))
        return found_or_new

    def finished(self, stage: Stage, ctx: StageContext) -> None:
        return None


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
    Like the flow, it holds OUT's lock for the whole build (`ads_core.locks.manager.owning`): a second build into
    OUT, by either executor, waits for it, and a build that lost the lock publishes nothing more.
    """
    cfg = cfg or BuildConfig()
    target = resolve(source, out, dataset, cfg.format.name)
    ctx = context(target, cfg)
    if progress is not None:
        ctx.progress = progress
    executor = InProcess(reuse, on_stage)
    with owning(target.out, f"build:{os.getpid()}"):  # as the flow does: one build per OUT, every publish fenced
        execute(executor, ctx)
    uris = {name: ctx.uri(name) for name, path in ctx.layout.items() if SHARD_SLOT not in path}
    return BuildResult(target.out, target.dataset, executor.manifests, executor.by_artifact, uris)
