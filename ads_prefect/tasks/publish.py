"""Publishing: the UI items each stage declares, the build's summary and its refresh summary.

The publish tasks are uncached (they only read manifests and small files), so every run, including a fully
cached rerun, shows its tables and pictures. What they show is computed by the stages (`Stage.ui`); this
module only turns the items into Prefect artifacts.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from ads_core import storage
from ads_core.common.text import md_text
from ads_core.pipeline.stages import stages_by_name
from ads_core.stages.base import UIItem
from ads_core.storage import manifest as mf
from ads_prefect.tasks.artifact_keys import artifact_key
from ads_prefect.tasks.retries import report_task
from ads_prefect.tasks.stage_task import context_of

# ---------------------------------------------------------------------------------------------
# what the stages declare, and the build's own summary


def location(uri: str) -> str:
    """How an artifact is named in the UI: a local path as a path, an object-store URI as itself.

    A browser refuses file:// links from a web page, and they mean nothing on another machine.
    """
    if "://" in uri and not uri.startswith("file://"):
        return uri
    return str(Path(storage.local_path(uri)).resolve())


def image_markdown(png: bytes, alt: str) -> str:
    """An inline PNG: the Prefect UI renders data: images in markdown artifacts."""
    return f"![{md_text(alt)}](data:image/png;base64,{base64.b64encode(png).decode()})"


def render(item: UIItem, dataset: str) -> None:
    """Create the Prefect artifact for one item a stage declared (`ads_core.stages.base.UIItem`)."""
    key = artifact_key(dataset, item.key)
    if item.kind == "table":
        create_table_artifact(key=key, table=item.content, description=item.description)
    elif item.kind == "markdown":
        create_markdown_artifact(key=key, markdown=item.content, description=item.description)
    else:
        title, png, uri = item.content
        markdown = f"# {title}\n\n{image_markdown(png, title)}\n\nPNG in storage: `{location(uri)}`"
        create_markdown_artifact(key=key, markdown=markdown, description=item.description)


@report_task("publish-stage")
def publish_stage(stage_name: str, main_uri: str, source: str, out: str, dataset: str, config: dict) -> None:
    """The tables, markdown and pictures a stage declares for the UI, from its manifest in storage."""
    stage = stages_by_name()[stage_name]
    if stage.ui is None:
        return
    ctx = context_of({"source": source, "out": out, "dataset": dataset, "config": config})
    for item in stage.ui(ctx, mf.read(mf.stage_dir_of(main_uri))):
        render(item, dataset)


@report_task("publish-build", task_run_name="publish-build")
def publish_build(final_uri: str, dataset: str, stages: dict[str, str]) -> None:
    """The build summary (rows, clusters, stage states) and where the final artifact is."""
    manifest = mf.read(mf.stage_dir_of(final_uri))
    rows = manifest.counts.get("rows", 0)
    summary = [
        f"# ads-build {md_text(dataset)}",
        "",
        f"* rows: **{rows}** in **{manifest.counts.get('clusters', 0)}** clusters",
        f"* final artifact: `{location(final_uri)}`",
        "",
        "| stage | state |",
        "|---|---|",
    ]
    summary += [f"| {stage} | {state} |" for stage, state in stages.items()]
    create_markdown_artifact(
        key=artifact_key(dataset, "summary"), markdown="\n".join(summary), description="build summary"
    )
    create_markdown_artifact(
        key=artifact_key(dataset, "final"),
        markdown=f"Final training Parquet ({rows} rows): `{location(final_uri)}`",
        description=f"final artifact: {location(final_uri)}",
    )
    get_run_logger().info("published artifacts for %s", location(final_uri))


@report_task("publish-refresh", task_run_name="publish-refresh")
def publish_refresh(
    summary: dict[str, Any], lines: list[str], dataset: str, links: dict[str, str] | None = None
) -> None:
    """The refresh summary as a markdown artifact (what changed, what was reused, stage times, training), with
    LINKS (text -> URL, e.g. the training run's page) below it."""
    rows = "\n".join(f"* {md_text(line, 400)}" for line in lines)
    rows += "".join(f"\n* [{md_text(text)}]({url})" for text, url in (links or {}).items())
    times = "\n".join(
        f"| {stage} | {summary['stage_states'].get(stage, '')} | {seconds:.1f} |"
        for stage, seconds in summary["stage_seconds"].items()
    )
    markdown = (
        f"# {md_text(dataset)}: refresh summary\n\n{rows}\n\n| stage | state | seconds |\n|---|---|---|\n{times}\n"
    )
    create_markdown_artifact(
        key=artifact_key(dataset, "refresh"),
        markdown=markdown,
        description="rows added/removed/edited, scored/reused, cluster stability, stage times",
    )
