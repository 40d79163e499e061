"""The declared `Stage` objects of the build, in the order of the one stage list (`ads_core.config.stage_order`).

Each stage is declared once, in its own module (`ads_core.stages.*`); the list says which and in what order. Both
executors (`ads_core.pipeline.executor`: the in-process `build()` and the Prefect flow `ads-build`) read `STAGES`
at call time, so a stage added to the list runs in both with no other edit, and both write the same OUT tree.
"""

from __future__ import annotations

from importlib import import_module

from ads_core.config.build import BuildConfig
from ads_core.config.stage_order import BUILD_STAGES
from ads_core.pipeline.resolve import Target
from ads_core.stages.base import Stage, StageContext


def load(name: str, where: str) -> Stage:
    """The `Stage` declared at WHERE (`module:attribute`), which must carry the NAME the list gives it."""
    module, _, attribute = where.partition(":")
    stage = getattr(import_module(module), attribute)
    if not isinstance(stage, Stage) or stage.name != name:
        raise TypeError(
            f"ads_core.config.stage_order lists {name!r} at {where}, which declares no Stage named {name!r}"
        )
    return stage


BUILT_IN: tuple[Stage, ...] = tuple(load(name, where) for name, where in BUILD_STAGES)
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


def shard_counts(cfg: BuildConfig) -> dict[str, int]:
    """Sharded artifact -> how many shards this config gives the stage that writes it (that stage says)."""
    return {name: stage.shard_count(cfg) for stage in STAGES if stage.shard_count is not None for name in stage.outputs}


def stages_from(name: str | None) -> set[str]:
    """`force_from=name`: that stage and every later one (`none`: no stage)."""
    if not name or name == "none":
        return set()
    names = [s.name for s in STAGES]
    return set(names[names.index(name) :])


def stage_context(source: str, out: str, dataset: str, cfg: BuildConfig) -> StageContext:
    """The context a stage runs in (the layout and shard counts from the declared stages)."""
    return StageContext(
        source=source, out=out, dataset=dataset, config=cfg, layout=layout(), shard_counts=shard_counts(cfg)
    )


def context(target: Target, cfg: BuildConfig) -> StageContext:
    """The context every stage of one build runs in."""
    cfg = cfg.model_copy(update={"format": cfg.format.replaced(name=target.dataset)})
    return stage_context(target.source, target.out, target.dataset, cfg)
