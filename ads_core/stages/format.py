"""The build's format stage: SOURCE → `formatted` (OUT/formatted/train.parquet) and `rejects`
(OUT/formatted/rejects.parquet), with the manifest beside them. The conversion itself is `ads_core.ingest.convert`
(shared with `ads format` and the eval sets); this module is what the build adds: the row minimum, the UI table,
the fields a reused manifest must record, and the declaration (`STAGE`).
"""

from __future__ import annotations

from typing import Any

from ads_core import storage
from ads_core.common.errors import InputError
from ads_core.ingest.convert import OUTPUTS, VERSION, format_config_record, write_formatted
from ads_core.stages.base import Stage, StageContext, UIItem
from ads_core.storage import manifest as mf

MIN_ROWS = 2  # K-Means needs at least two rows


def run(ctx: StageContext, _: int | None) -> mf.Manifest:
    fmt = ctx.config.format.replaced(name=ctx.dataset)
    with ctx.progress("format", None) as advance:
        manifest = write_formatted(ctx.source, ctx.uri("formatted"), ctx.uri("rejects"), fmt, progress=advance)
    if manifest.counts["rows_out"] < MIN_ROWS:
        raise InputError(
            f"only {manifest.counts['rows_out']} usable rows after formatting; need at least {MIN_ROWS} to cluster"
        )
    return manifest


def ui(ctx: StageContext, manifest: mf.Manifest) -> list[UIItem]:
    """Rows read and kept, and rejects by reason with one example message each."""
    counts = manifest.counts
    examples: dict[str, str] = {}
    rejects_uri = manifest.output_uri("rejects")
    if counts.get("rows_rejected"):
        import polars as pl

        rejects = pl.from_arrow(storage.read_parquet(rejects_uri, columns=["reason", "message"]))
        for row in rejects.group_by("reason", maintain_order=True).first().iter_rows(named=True):
            examples[row["reason"]] = str(row["message"] or "")[:200]
    rows: list[dict[str, Any]] = [
        {"what": "read", "rows": counts["rows_in"], "example": ""},
        {"what": "kept", "rows": counts["rows_out"], "example": ""},
    ]
    rows += [
        {"what": f"rejected: {reason}", "rows": n, "example": examples.get(reason, "")}
        for reason, n in counts["rejects_by_reason"].items()
    ]
    description = f"format: rows read, kept and rejected by reason ({rejects_uri})"
    return [UIItem("table", "format-counts", rows, description)]


def recorded(ctx: StageContext, _: int | None) -> dict[str, Any]:
    """The source and the config a format manifest must name for this build (the dataset name and template
    reach every row; the CLI and the refresh summary read the source)."""
    fmt = ctx.config.format.replaced(name=ctx.dataset)
    return {
        "inputs.source.uri": ctx.source,
        "config": format_config_record(fmt, ctx.dataset),
        "extra.name": ctx.dataset,
    }


STAGE = Stage(
    name="format",
    section="format",
    inputs=("source",),
    outputs=OUTPUTS,
    version=VERSION,
    run=run,
    progress=True,
    ui=ui,
    recorded=recorded,
)
