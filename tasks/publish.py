"""Publishing: UI artifacts for each stage's outputs, and the ads-train hand-off.

The report tasks are uncached (they only read manifests and small files), so every run, including
a fully cached rerun, shows its tables and pictures. What they show is computed by the stages
(the report stage writes OUT/report/); nothing here renders or computes build results.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import polars as pl
from prefect import get_run_logger
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from ads_core import manifest as mf
from ads_core import storage
from ads_core.manifest import stage_dir_of
from ads_core.report import md_text as _md
from tasks.base import artifact_key, report_task

# ---------------------------------------------------------------------------------------------
# per-stage tables


@report_task("report-format", task_run_name="report-format")
def report_format(formatted_uri: str, dataset: str) -> None:
    """Table artifact: rows read/kept and rejects by reason, with one example message per reason."""
    manifest = mf.read(stage_dir_of(formatted_uri))
    counts = manifest.counts
    examples: dict[str, str] = {}
    rejects_uri = manifest.output_uri("rejects")
    if counts.get("rows_rejected"):
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
    create_table_artifact(
        key=artifact_key(dataset, "format-counts"),
        table=rows,
        description=f"format: rows read, kept and rejected by reason ({rejects_uri})",
    )


@report_task("report-clusters", task_run_name="report-clusters")
def report_clusters(assignments_uri: str, dataset: str) -> None:
    """Table artifact: cluster sizes (and the clustering's summary in the description)."""
    directory = stage_dir_of(assignments_uri)
    stats = storage.read_json(storage.join(directory, "stats.json"))
    total = max(int(stats["n"]), 1)
    rows = [
        {"cluster_id": int(c), "size": int(n), "share_pct": round(100 * int(n) / total, 2)}
        for c, n in sorted(stats["sizes"].items(), key=lambda kv: int(kv[0]))
    ]
    silhouette = stats.get("silhouette_sample")
    description = (
        f"K-Means on {stats['n']} rows: k={stats['k']} (asked {stats['k_requested']}), "
        f"backend {stats['backend']}, {stats['iterations']} iterations, "
        f"silhouette {'n/a' if silhouette is None else f'{silhouette:.3f}'}"
    )
    create_table_artifact(key=artifact_key(dataset, "cluster-sizes"), table=rows, description=description)


# ---------------------------------------------------------------------------------------------
# the report stage's outputs, shown in the UI


def location(uri: str) -> str:
    """How an artifact is named in the UI: a local path as a path, an object-store URI as itself.

    A browser refuses file:// links from a web page, and they mean nothing on another machine.
    """
    if "://" in uri and not uri.startswith("file://"):
        return uri
    return str(Path(storage.local_path(uri)).resolve())


def image_markdown(png: bytes, alt: str) -> str:
    """An inline PNG: the Prefect UI renders data: images in markdown artifacts."""
    return f"![{_md(alt)}](data:image/png;base64,{base64.b64encode(png).decode()})"


def cluster_terms_rows(terms: dict[str, list[dict[str, Any]]], quantiles: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One table row per cluster: its size, top terms (best first) and median difficulty."""
    by_id = {int(q["cluster_id"]): q for q in quantiles}
    return [
        {
            "cluster_id": cid,
            "size": int(by_id.get(cid, {}).get("size", 0)),
            "top_terms": ", ".join(t["term"] for t in terms[key]),
            "median_difficulty": by_id.get(cid, {}).get("q50"),
        }
        for cid, key in sorted((int(k), k) for k in terms)
    ]


def publish_cluster_terms(manifest: mf.Manifest, quantiles: list[dict[str, Any]], dataset: str) -> None:
    """What each cluster is about: a table beside the sizes and quantiles, and the top-terms grid inline."""
    terms = storage.read_json(manifest.output_uri("terms"))
    create_table_artifact(
        key=artifact_key(dataset, "cluster-terms"),
        table=cluster_terms_rows(terms, quantiles),
        description="top terms per cluster by class-based TF-IDF over the question text "
        "(math and LaTeX stop words removed), with size and median difficulty",
    )
    grid = storage.read_bytes(manifest.output_uri("terms_plot"))
    create_markdown_artifact(
        key=artifact_key(dataset, "cluster-terms-image"),
        markdown=f"# {_md(dataset)}: top terms per cluster\n\n{image_markdown(grid, 'top terms per cluster')}\n\n"
        f"PNG in storage: `{location(manifest.output_uri('terms_plot'))}`",
        description="top c-TF-IDF terms per cluster, one cell per cluster",
    )


@report_task("publish", task_run_name="publish")
def publish(report_uri: str, final_uri: str, dataset: str, stages: dict[str, str]) -> None:
    """Quantiles per cluster, example problems, cluster terms, the report pictures inline, and where the final
    artifact is."""
    manifest = mf.read(stage_dir_of(report_uri))
    quantiles = storage.read_json(manifest.output_uri("quantiles"))
    examples = storage.read_bytes(manifest.output_uri("examples")).decode()
    png = storage.read_bytes(manifest.output_uri("plot"))
    rows = manifest.counts.get("rows", 0)
    create_table_artifact(
        key=artifact_key(dataset, "difficulty-quantiles"),
        table=quantiles,
        description="difficulty quantiles per cluster (token-mean NLL)",
    )
    create_markdown_artifact(
        key=artifact_key(dataset, "cluster-examples"), markdown=examples, description="example problems per cluster"
    )
    create_markdown_artifact(
        key=artifact_key(dataset, "report-plot"),
        markdown=f"# {_md(dataset)}: build report\n\n{image_markdown(png, 'build report')}\n\n"
        f"PNG in storage: `{location(manifest.output_uri('plot'))}`",
        description="difficulty histogram, cluster sizes, 2-D t-SNE map by cluster and by difficulty",
    )
    publish_cluster_terms(manifest, quantiles, dataset)
    summary = [
        f"# ads-build {_md(dataset)}",
        "",
        f"* rows: **{rows}** in **{manifest.counts.get('clusters', 0)}** clusters",
        f"* final artifact: `{location(final_uri)}`",
        f"* report: `{location(manifest.output_uri('plot'))}`",
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


# ---------------------------------------------------------------------------------------------
# hand-off to training


class TrainingTriggerError(RuntimeError):
    """The ads-train deployment could not be started (missing deployment, bad parameters)."""


@report_task("start-training", task_run_name="start-training")
def start_training(deployment: str, artifact_uri: str, model: str | None, idempotency_key: str) -> dict[str, Any]:
    """Create an ads-train flow run for the final artifact and return at once (`timeout=0`).

    The idempotency key decides what counts as the same training run: a second call with the same key
    returns the existing run instead of starting another (`new` is then False).
    """
    import datetime as dt

    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    called = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=5)
    try:
        run = run_deployment(
            name=deployment,
            parameters={"artifact_uri": artifact_uri, "model": model},
            timeout=0,
            idempotency_key=idempotency_key,
        )
    except ObjectNotFound as exc:
        raise TrainingTriggerError(
            f"deployment {deployment!r} not found: deploy it (prefect deploy --prefect-file deployments/prefect.yaml "
            "--all) or run ads-build with run.trigger_training=never"
        ) from exc
    new = run.created is None or run.created >= called
    get_run_logger().info(
        "%s %s: flow run %s (%s) for %s",
        "started" if new else "already started",
        deployment,
        run.name,
        run.id,
        artifact_uri,
    )
    return {"id": str(run.id), "name": str(run.name), "new": bool(new)}


@report_task("publish-refresh", task_run_name="publish-refresh")
def publish_refresh(summary: dict[str, Any], lines: list[str], dataset: str) -> None:
    """The refresh summary as a markdown artifact (what changed, what was reused, stage times, training)."""
    rows = "\n".join(f"* {_md(line, 400)}" for line in lines)
    times = "\n".join(
        f"| {stage} | {summary['stage_states'].get(stage, '')} | {seconds:.1f} |"
        for stage, seconds in summary["stage_seconds"].items()
    )
    markdown = f"# {_md(dataset)}: refresh summary\n\n{rows}\n\n| stage | state | seconds |\n|---|---|---|\n{times}\n"
    create_markdown_artifact(
        key=artifact_key(dataset, "refresh"),
        markdown=markdown,
        description="rows added/removed/edited, scored/reused, cluster stability, stage times",
    )
