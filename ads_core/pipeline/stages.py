"""The build's stages, in order: format -> model -> score (one run per shard) -> merge -> cluster -> sort -> report.

Each stage is declared once, in its own module (`ads_core.stages.*.STAGE`); this list is the only place that
orders them. The in-process `build()` (`ads_core.pipeline.build`) and the Prefect flow `ads-build`
(`ads_prefect.flows.ads_build`, through the one generic task in `ads_prefect.tasks.stage_task`) both iterate
it, so a stage added here runs in both with no other edit, and both write the same OUT tree.
"""

from __future__ import annotations

from collections.abc import Iterator

from ads_core.config.build import STAGE_NAMES, BuildConfig
from ads_core.pipeline.resolve import Target
from ads_core.stages import model, sort
from ads_core.stages.base import Stage, StageContext
from ads_core.stages.cluster import stage as cluster
from ads_core.stages.format import stage as format_stage
from ads_core.stages.report import stage as report
from ads_core.stages.score import stage as score

BUILT_IN: tuple[Stage, ...] = (
    format_stage.STAGE,
    model.STAGE,
    score.SCORE,
    score.MERGE,
    cluster.STAGE,
    sort.STAGE,
    report.STAGE,
)
STAGES: tuple[Stage, ...] = BUILT_IN


def stages_by_name() -> dict[str, Stage]:
    return {s.name: s for s in STAGES}


def layout() -> dict[str, str]:
    """Artifact name -> path under OUT, from every declared stage's outputs (a name is declared once)."""
    found: dict[str, str] = {}
    for stage in STAGES:
        for name, path in stage.outputs.items():
            if name in found:
                raise ValueError(f"artifact {name!r} is declared by two stages")
            found[name] = path
    return found


def stages_from(name: str | None) -> set[str]:
    """`force_from=name`: that stage and every later one (`none`: no stage)."""
    if not name or name == "none":
        return set()
    names = [s.name for s in STAGES]
    return set(names[names.index(name) :])


def iter_runs(ctx: StageContext) -> Iterator[tuple[Stage, int | None]]:
    for stage in STAGES:
        for shard in stage.shards(ctx):
            yield stage, shard


def context(target: Target, cfg: BuildConfig) -> StageContext:
    """The context every stage of one build runs in."""
    cfg = cfg.model_copy(update={"format": cfg.format.replaced(name=target.dataset)})
    return StageContext(source=target.source, out=target.out, dataset=target.dataset, config=cfg, layout=layout())


assert tuple(s.name for s in BUILT_IN) == STAGE_NAMES, "config.STAGE_NAMES must list the built-in stages in order"
