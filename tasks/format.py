"""Format task: `ads_core.format.format_dataset` as a cached, retried Prefect task."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger

from ads_core import format as fmt
from ads_core import readers
from ads_core.format import FormatConfig, format_dataset
from ads_core.readers import InputError
from tasks.base import StageOutput, fault_point, progress, stage_output, stage_task


@stage_task("format", wraps=(fmt, readers), task_run_name="format")
def format_stage(source: str, out: str, config: dict[str, Any]) -> StageOutput:
    """Format SOURCE into OUT/formatted/ (verl schema + rejects + manifest)."""
    fault_point("format")
    logger = get_run_logger()
    with progress("format", None) as advance:
        manifest = format_dataset(source, out, FormatConfig(**config), progress=advance)
    counts = manifest.counts
    logger.info("formatted %s: %d rows read, %d kept, %d rejected %s", source, counts["rows_in"],
                counts["rows_out"], counts["rows_rejected"], counts["rejects_by_reason"])
    if counts["rows_out"] < 2:
        raise InputError(f"only {counts['rows_out']} usable rows after formatting; need at least 2 to cluster")
    return stage_output(manifest, "train")
