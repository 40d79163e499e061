"""Publishing: UI artifacts for each stage, the report plot in storage, links, and the ads-train hand-off.

The report tasks are uncached (they only read manifests and small columns), so every run, including
a fully cached rerun, shows its tables, markdown and links. The PNG plot is a cached stage of its
own (OUT/report/build_report.png + manifest), keyed on the final artifact's content.
"""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import polars as pl
from prefect import get_run_logger
from prefect.artifacts import create_link_artifact, create_markdown_artifact, create_table_artifact

from ads_core import manifest as mf
from ads_core import storage
from tasks.base import StageOutput, artifact_key, fault_point, report_task, stage_dir_of, stage_output, stage_task

REPORT_DIR = "report"
PLOT_NAME = "build_report.png"
EXAMPLES_PER_CLUSTER = 3
MAX_EXAMPLE_CLUSTERS = 32
QUANTILES = (0.0, 0.1, 0.25, 0.5, 0.75, 0.9, 1.0)


def browsable(uri: str) -> str:
    """A link the UI can show: file:// for local paths, the URI itself for object stores."""
    if "://" in uri and not uri.startswith("file://"):
        return uri
    return Path(storage.local_path(uri)).resolve().as_uri()


def _md(text: str | None, limit: int = 220) -> str:
    """One line of user text, safe inside markdown."""
    flat = " ".join(str(text or "").split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    for ch in "\\`*_[]<>|#":
        flat = flat.replace(ch, "\\" + ch)
    return flat


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
    rows: list[dict[str, Any]] = [{"what": "read", "rows": counts["rows_in"], "example": ""},
                                  {"what": "kept", "rows": counts["rows_out"], "example": ""}]
    rows += [{"what": f"rejected: {reason}", "rows": n, "example": examples.get(reason, "")}
             for reason, n in counts["rejects_by_reason"].items()]
    create_table_artifact(key=artifact_key(dataset, "format-counts"), table=rows,
                          description=f"format: rows read, kept and rejected by reason ({rejects_uri})")


@report_task("report-clusters", task_run_name="report-clusters")
def report_clusters(assignments_uri: str, dataset: str) -> None:
    """Table artifact: cluster sizes (and the clustering's summary in the description)."""
    directory = stage_dir_of(assignments_uri)
    stats = storage.read_json(storage.join(directory, "stats.json"))
    total = max(int(stats["n"]), 1)
    rows = [{"cluster_id": int(c), "size": int(n), "share_pct": round(100 * int(n) / total, 2)}
            for c, n in sorted(stats["sizes"].items(), key=lambda kv: int(kv[0]))]
    silhouette = stats.get("silhouette_sample")
    description = (f"K-Means on {stats['n']} rows: k={stats['k']} (asked {stats['k_requested']}), "
                   f"backend {stats['backend']}, {stats['iterations']} iterations, "
                   f"silhouette {'n/a' if silhouette is None else f'{silhouette:.3f}'}")
    create_table_artifact(key=artifact_key(dataset, "cluster-sizes"), table=rows, description=description)


# ---------------------------------------------------------------------------------------------
# plot (a cached stage: rendering costs ~1 s, so a warm rerun reuses it)


def render_plot(final: pl.DataFrame, assignments: pl.DataFrame, title: str) -> bytes:
    """PNG: difficulty histogram, cluster sizes, and the 2-D PCA projection coloured by cluster."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6), dpi=100)
    try:
        axes[0].hist(final["difficulty"].to_numpy(), bins=min(40, max(5, final.height // 10)), color="#3b6ea8")
        axes[0].set(title="difficulty (token-mean NLL)", xlabel="difficulty", ylabel="rows")
        sizes = final.group_by("cluster_id").len().sort("cluster_id")
        axes[1].bar(sizes["cluster_id"].to_numpy(), sizes["len"].to_numpy(), color="#d08c3a")
        axes[1].set(title=f"cluster sizes (k={sizes.height})", xlabel="cluster_id", ylabel="rows")
        axes[1].xaxis.set_major_locator(MaxNLocator(integer=True))
        axes[2].scatter(assignments["pc1"].to_numpy(), assignments["pc2"].to_numpy(),
                        c=assignments["cluster_id"].to_numpy(), cmap="tab20", s=6, alpha=0.8)
        axes[2].set(title="embeddings: first two PCA components", xlabel="pc1", ylabel="pc2")
        fig.suptitle(title)
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        return buf.getvalue()
    finally:
        plt.close(fig)


@stage_task("plot_report", wraps=(sys.modules[__name__],), task_run_name="plot-report")
def plot_report(final_uri: str, assignments_uri: str, out: str, dataset: str) -> StageOutput:
    """Write OUT/report/build_report.png (+ manifest) from the final artifact and cluster assignments."""
    fault_point("plot")
    final = pl.from_arrow(storage.read_parquet(final_uri, columns=["cluster_id", "difficulty"]))
    assignments = pl.from_arrow(storage.read_parquet(assignments_uri, columns=["cluster_id", "pc1", "pc2"]))
    directory = storage.join(out, REPORT_DIR)
    uri = storage.join(directory, PLOT_NAME)
    storage.write_bytes(uri, render_plot(final, assignments, f"ads-build {dataset}: {final.height} rows"))
    manifest = mf.Manifest(
        stage="report",
        inputs={"final": mf.input_entry(final_uri), "assignments": mf.input_entry(assignments_uri)},
        outputs={"plot": mf.output_entry(uri)},
        config={},
        code_version=mf.code_version(sys.modules[__name__]),
        counts={"rows": final.height},
    )
    mf.write(directory, manifest)
    return stage_output(manifest, "plot")


# ---------------------------------------------------------------------------------------------
# final report


def difficulty_quantiles(final: pl.DataFrame) -> list[dict[str, Any]]:
    aggs = [pl.len().alias("size"), pl.col("difficulty").mean().alias("mean")]
    aggs += [pl.col("difficulty").quantile(q).alias(f"q{int(q * 100):02d}") for q in QUANTILES]
    table = final.group_by("cluster_id").agg(aggs).sort("cluster_id")
    return [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in row.items()}
            for row in table.iter_rows(named=True)]


def examples_markdown(final: pl.DataFrame, dataset: str) -> str:
    """A few example problems per cluster: the easiest, the median and the hardest."""
    lines = [f"# {_md(dataset)}: example problems per cluster", "",
             "Easiest, median and hardest problem of each cluster (difficulty = token-mean NLL of the "
             "reference solution under the policy model).", ""]
    clusters = final["cluster_id"].unique().sort().to_list()
    for cid in clusters[:MAX_EXAMPLE_CLUSTERS]:
        rows = final.filter(pl.col("cluster_id") == cid).sort("rank_in_cluster")
        picks: dict[int, str] = {}
        for label, idx in (("easiest", 0), ("median", rows.height // 2), ("hardest", rows.height - 1)):
            picks.setdefault(idx, label)
        lines.append(f"## cluster {cid} ({rows.height} rows)")
        for idx, label in list(picks.items())[:EXAMPLES_PER_CLUSTER]:
            row = rows.row(idx, named=True)
            lines.append(f"- **{label}** (difficulty {row['difficulty']:.3f}): {_md(row['question'])}")
        lines.append("")
    if len(clusters) > MAX_EXAMPLE_CLUSTERS:
        lines.append(f"_{len(clusters) - MAX_EXAMPLE_CLUSTERS} more clusters not shown._")
    return "\n".join(lines)


@report_task("publish", task_run_name="publish")
def publish(final_uri: str, plot_uri: str, dataset: str, stages: dict[str, str]) -> None:
    """Difficulty quantiles per cluster, example problems, the plot link and the final Parquet link."""
    final = pl.from_arrow(storage.read_parquet(final_uri, columns=["cluster_id", "rank_in_cluster", "difficulty",
                                                                   "extra_info"]))
    final = final.with_columns(pl.col("extra_info").struct.field("question").alias("question")).drop("extra_info")
    create_table_artifact(key=artifact_key(dataset, "difficulty-quantiles"), table=difficulty_quantiles(final),
                          description="difficulty quantiles per cluster (token-mean NLL)")
    create_markdown_artifact(key=artifact_key(dataset, "cluster-examples"), markdown=examples_markdown(final, dataset),
                             description="example problems per cluster")
    create_link_artifact(key=artifact_key(dataset, "report-plot"), link=browsable(plot_uri),
                         link_text=f"{dataset}: difficulty histogram, cluster sizes, 2-D projection (PNG)",
                         description=f"report plot in storage: {plot_uri}")
    create_link_artifact(key=artifact_key(dataset, "final"), link=browsable(final_uri),
                         link_text=f"{dataset}: final training Parquet ({final.height} rows)",
                         description=f"final artifact: {final_uri}")
    summary = [f"# ads-build {_md(dataset)}", "",
               f"* rows: **{final.height}** in **{final['cluster_id'].n_unique()}** clusters",
               f"* final artifact: [{_md(final_uri, 300)}]({browsable(final_uri)})",
               f"* report plot: [{_md(plot_uri, 300)}]({browsable(plot_uri)})", "",
               "| stage | state |", "|---|---|"]
    summary += [f"| {stage} | {state} |" for stage, state in stages.items()]
    create_markdown_artifact(key=artifact_key(dataset, "summary"), markdown="\n".join(summary),
                             description="build summary")
    get_run_logger().info("published artifacts for %s", final_uri)


# ---------------------------------------------------------------------------------------------
# hand-off to training


class TrainingTriggerError(RuntimeError):
    """The ads-train deployment could not be started (missing deployment, bad parameters)."""


@report_task("start-training", task_run_name="start-training")
def start_training(deployment: str, artifact_uri: str, model: str | None, idempotency_key: str) -> str:
    """Create an ads-train flow run for the final artifact and return at once (`timeout=0`)."""
    from prefect.deployments import run_deployment
    from prefect.exceptions import ObjectNotFound

    try:
        run = run_deployment(name=deployment, parameters={"artifact_uri": artifact_uri, "model": model},
                             timeout=0, idempotency_key=idempotency_key)
    except ObjectNotFound as exc:
        raise TrainingTriggerError(
            f"deployment {deployment!r} not found: deploy it (prefect deploy --prefect-file deployments/prefect.yaml "
            "--all) or run ads-build with trigger_training=false") from exc
    get_run_logger().info("started %s: flow run %s (%s) for %s", deployment, run.name, run.id, artifact_uri)
    return str(run.id)
