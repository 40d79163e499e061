"""The whole offline build in one process: the stages of `ads_core.stages`, in order, uncached.

The Prefect flow `ads-build` iterates the same stage list through a cached task wrapper, so for the
same input both write the same OUT tree. This path is what tests and library users call.
"""

from __future__ import annotations

from dataclasses import dataclass

from ads_core import defaults, storage
from ads_core import manifest as mf
from ads_core.config import BuildConfig
from ads_core.stages import (
    ARTIFACTS,
    BuildContext,
    ProgressFactory,
    iter_runs,
    reusable,
    run_stage,
    stage_key,
    stages_from,
)


@dataclass
class BuildResult:
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


def stage_uris(out: str) -> dict[str, str]:
    """Where each stage's main artifact lives under OUT."""
    return {name: storage.join(out, *rel.split("/")) for name, rel in ARTIFACTS.items() if "{" not in rel}


def build(
    source: str | None,
    out: str,
    cfg: BuildConfig | None = None,
    progress: ProgressFactory | None = None,
    reuse: bool = True,
) -> BuildResult:
    """Run every stage in order; with `reuse`, a stage whose manifest in OUT records the same stage key
    (same version, config and input content) and whose outputs are intact is not run again."""
    ctx = BuildContext(source=source or defaults.sample_path(), out=out, config=cfg or BuildConfig())
    if progress is not None:
        ctx.progress = progress
    force = stages_from(ctx.config.run.force_from)
    manifests: dict[str, mf.Manifest] = {}
    for stage, shard in iter_runs(ctx):
        key = stage_key(stage, ctx, shard)
        found = reusable(stage, ctx, shard, key) if reuse and stage.name not in force else None
        manifests[stage.label(shard)] = found or run_stage(stage, ctx, shard, key)
    return BuildResult(manifests)
