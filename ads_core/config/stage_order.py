"""The build's stages, in order: the one list (format -> model -> score per shard -> merge -> cluster -> sort ->
report).

Each entry is a stage's name and where it is declared (`module:attribute`, a `Stage`). This module imports
nothing and lives in the config tree, which derives the `force_from` choices from it (`ads_core.config.build`)
without importing the stages (they import the config). `ads_core.pipeline.stages` loads the declared `Stage`
objects from it, and both executors, the in-process `build()` and the Prefect flow `ads-build`, run that list:
a stage added here runs in both, and `force_from` offers it, with no other edit.
"""

from __future__ import annotations

BUILD_STAGES: tuple[tuple[str, str], ...] = (
    ("format", "ads_core.stages.format:STAGE"),
    ("model", "ads_core.stages.model:STAGE"),
    ("score", "ads_core.stages.score.stage:SCORE"),
    ("merge", "ads_core.stages.score.stage:MERGE"),
    ("cluster", "ads_core.stages.cluster.stage:STAGE"),
    ("sort", "ads_core.stages.sort:STAGE"),
    ("report", "ads_core.stages.report.stage:STAGE"),
)
STAGE_NAMES: tuple[str, ...] = tuple(name for name, _ in BUILD_STAGES)
