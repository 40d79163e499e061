"""Cluster task: `ads_core.cluster.cluster_stage` (L2 -> PCA -> K-Means) as a cached Prefect task."""

from __future__ import annotations

from typing import Any

from prefect import get_run_logger

from ads_core import cluster as cluster_module
from ads_core.cluster import ClusterConfig, cluster_stage
from tasks.base import StageOutput, fault_point, progress, stage_output, stage_task


@stage_task("cluster", wraps=(cluster_module,), task_run_name="cluster")
def cluster_task(scores_uri: str, out: str, config: dict[str, Any]) -> StageOutput:
    """Cluster the merged embeddings; writes OUT/clusters/ (assignments, centroids, stats)."""
    fault_point("cluster")
    with progress("cluster", None):
        manifest = cluster_stage(scores_uri, out, ClusterConfig(**config))
    extra = manifest.extra
    get_run_logger().info("%d clusters on %s (sizes %s..%s, silhouette %s)", manifest.counts["clusters"],
                          extra.get("backend"), extra.get("size_min"), extra.get("size_max"),
                          extra.get("silhouette_sample"))
    return stage_output(manifest, "assignments")
