"""Sort task: `ads_core.sort.sort_stage` (cluster, difficulty, sample_id) as a cached Prefect task."""

from __future__ import annotations

from prefect import get_run_logger

from ads_core import models
from ads_core import sort as sort_module
from ads_core.sort import sort_stage
from tasks.base import StageOutput, fault_point, progress, stage_output, stage_task


@stage_task("sort", wraps=(sort_module,), task_run_name="sort")
def sort_task(formatted_uri: str, scores_uri: str, assignments_uri: str, out: str, model: str | None,
              dataset: str | None) -> StageOutput:
    """Join rows, scores and clusters; check the invariants; write OUT/final/train.parquet."""
    fault_point("sort")
    with progress("sort", None):
        manifest = sort_stage(formatted_uri, scores_uri, assignments_uri, out,
                              extra={"policy_model": models.resolve_model(model), "dataset": dataset})
    get_run_logger().info("final artifact: %s (%d rows, %d clusters)", manifest.output_uri("train"),
                          manifest.counts["rows"], manifest.counts["clusters"])
    return stage_output(manifest, "train")
