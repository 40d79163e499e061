"""The cluster computation on an in-memory matrix: L2 -> PCA -> K-Means, with stable ids on a refresh.

`cluster_embeddings` fits fresh, warm-starts from a previous build's centroids, or refits and matches the
new clusters to the previous ids (the paths are described in `ads_core.stages.cluster.stage`). Memory
stays near the size of the embeddings.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ads_core.config.build import ClusterConfig
from ads_core.stages.cluster import kmeans
from ads_core.stages.cluster.kmeans import assign, best_init, get_backend, run_backend
from ads_core.stages.cluster.pca import PCAModel, fit_pca, l2_normalize, row_scales
from ads_core.stages.cluster.previous import PreviousClustering

log = logging.getLogger("ads.cluster")


def effective_k(n: int, cfg: ClusterConfig) -> int:
    if n < 2:
        raise ValueError(f"cannot cluster {n} rows; need at least 2")
    limit = max(1, n // max(1, cfg.min_cluster_rows))
    if cfg.num_clusters < 1:
        raise ValueError("num_clusters must be >= 1")
    if cfg.num_clusters > limit:
        log.warning(
            "%d clusters is too many for %d rows; using %d (at least %d rows per cluster on average)",
            cfg.num_clusters,
            n,
            limit,
            cfg.min_cluster_rows,
        )
        return limit
    return cfg.num_clusters


@dataclass
class Clustering:
    labels: np.ndarray
    distances: np.ndarray  # euclidean distance to own centre
    centroids: np.ndarray
    features: np.ndarray  # the space K-Means ran in
    inertia: float
    iterations: int
    backend: str
    k: int
    pca_variance: float | None
    pca: PCAModel | None = None  # the projection into `features` (None: the normalised embeddings themselves)
    refresh: dict[str, Any] = field(default_factory=dict)  # which id path was taken, and why (module docstring)


def cluster_embeddings(
    embeddings: np.ndarray, cfg: ClusterConfig, previous: PreviousClustering | None = None
) -> Clustering:
    """The whole cluster computation on an in-memory matrix (the stage wraps it with I/O); with `previous`,
    ids carry over from it (warm start or refit + matching, module docstring)."""
    x = np.ascontiguousarray(embeddings, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D matrix, got shape {x.shape}")
    scales = row_scales(x, cfg.normalize)  # raises on NaN / inf
    k = effective_k(x.shape[0], cfg)
    if previous is None:
        return _fit(x, scales, k, cfg, {"path": "fresh", "reason": "no previous build"})
    if len(previous.labels) != len(x):
        raise ValueError(f"previous labels cover {len(previous.labels)} rows, the embeddings {len(x)}")
    info = _refresh_info(previous, cfg)
    if previous.embedding_dim != x.shape[1]:
        info.update(path="fresh", reason=f"embedding width changed ({previous.embedding_dim} -> {x.shape[1]})")
        return _with_kept_share(_fit(x, scales, k, cfg, info), previous)
    prev_feats = previous.project(x, scales if previous.normalize == cfg.normalize else None)
    _, d2 = assign(prev_feats, previous.centroids)
    mean_sq = float(d2.mean(dtype=np.float64))
    base = previous.mean_sq_distance
    info["inertia_change"] = abs(mean_sq / base - 1) if base > 0 else (0.0 if mean_sq == 0 else float("inf"))
    reason = _refit_reason(previous, cfg, k, x.shape, info)
    if reason is None:
        return _with_kept_share(_warm_start(prev_feats, previous, cfg, {**info, "path": "warm_start"}), previous)
    result = _fit(x, scales, k, cfg, {**info, "path": "refit", "reason": reason})
    ids = kmeans.match_ids(kmeans.cluster_means(prev_feats, result.labels, k), previous.centroids)
    centroids = np.empty_like(result.centroids)
    centroids[ids] = result.centroids
    result.labels, result.centroids = ids[result.labels], centroids
    result.refresh["clusters_matched"] = int(min(k, len(previous.centroids)))
    result.refresh["clusters_new"] = int(max(0, k - len(previous.centroids)))
    return _with_kept_share(result, previous)


def _refresh_info(previous: PreviousClustering, cfg: ClusterConfig) -> dict[str, Any]:
    common = int((previous.labels >= 0).sum())
    n = len(previous.labels)
    return {
        "rows_new": n - common,
        "rows_common": common,
        "rows_removed": previous.rows - common,
        "new_share": (n - common) / n,
        "refit_requested": cfg.refit,
        "refit_new_share": cfg.refit_new_share,
        "refit_inertia_change": cfg.refit_inertia_change,
    }


def _refit_reason(
    previous: PreviousClustering, cfg: ClusterConfig, k: int, shape: tuple[int, int], info: dict[str, Any]
) -> str | None:
    """Why the previous centroids cannot simply be continued from, or None when they can."""
    n, d = shape
    uses_pca = bool(cfg.pca_dim and cfg.pca_dim < d)
    dim = min(d, max(2, min(cfg.pca_dim, n - 1))) if uses_pca else d
    if cfg.refit:
        return "refit requested"
    if (
        cfg.normalize != previous.normalize
        or uses_pca != (previous.pca is not None)
        or dim != previous.centroids.shape[1]
    ):
        return "the feature space changed (normalize or pca_dim)"
    if k != len(previous.centroids):
        return f"K changed ({len(previous.centroids)} -> {k})"
    if info["new_share"] > cfg.refit_new_share:
        return f"{info['new_share']:.1%} of the rows are new (refit_new_share {cfg.refit_new_share:g})"
    if info["inertia_change"] > cfg.refit_inertia_change:
        return (
            f"the mean squared distance to the centroids changed by {info['inertia_change']:.1%} "
            f"(refit_inertia_change {cfg.refit_inertia_change:g})"
        )
    return None


def _with_kept_share(result: Clustering, previous: PreviousClustering) -> Clustering:
    both = previous.labels >= 0
    kept = float((result.labels[both] == previous.labels[both]).mean()) if both.any() else None
    result.refresh["kept_id_share"] = kept
    log.info(
        "cluster ids: %s (%s); %s of the rows present before and after kept their id",
        result.refresh["path"],
        result.refresh.get("reason", "data moved little"),
        "n/a" if kept is None else f"{kept:.1%}",
    )
    return result


def _fit(x: np.ndarray, scales: np.ndarray | None, k: int, cfg: ClusterConfig, info: dict[str, Any]) -> Clustering:
    """A fresh fit: PCA, the shared init, Lloyd, canonical ids."""
    clock = _Clock()
    shape = x.shape
    variance, model = None, None
    if cfg.pca_dim and cfg.pca_dim < x.shape[1]:
        dim = min(x.shape[1], max(2, min(cfg.pca_dim, x.shape[0] - 1)))
        model = fit_pca(x, dim, sample=cfg.pca_sample, seed=cfg.seed, row_scale=scales)
        clock.lap("pca fit")
        x = model.transform(x, row_scale=scales)
        clock.lap("pca transform")
        variance = float(model.explained_variance_ratio.sum())
    elif scales is not None:
        x = l2_normalize(x, scales)
    backend = get_backend(cfg.backend, dim=x.shape[1])
    init = best_init(x, k, cfg)
    clock.lap("init")
    result = run_backend(backend, x, init, cfg.max_iter, cfg.tol)
    clock.lap(f"lloyd ({result.iterations} it, {result.backend})")
    labels, relabel = _canonical_labels(result.labels, k)
    centroids = result.centroids[relabel]
    _, d2 = assign(x, centroids)
    clock.lap("labels")
    log.debug("cluster_embeddings %d x %d, K=%d: %s", shape[0], shape[1], k, clock)
    return Clustering(
        labels, np.sqrt(d2), centroids, x, result.inertia, result.iterations, result.backend, k, variance, model, info
    )


def _warm_start(
    feats: np.ndarray, previous: PreviousClustering, cfg: ClusterConfig, info: dict[str, Any]
) -> Clustering:
    """Lloyd from the previous centroids in the previous space: cluster i stays cluster i."""
    backend = get_backend(cfg.backend, dim=feats.shape[1])
    result = run_backend(backend, feats, previous.centroids, cfg.max_iter, cfg.tol)
    _, d2 = assign(feats, result.centroids)
    return Clustering(
        result.labels,
        np.sqrt(d2),
        result.centroids,
        feats,
        result.inertia,
        result.iterations,
        result.backend,
        len(result.centroids),
        previous.pca_variance,
        previous.pca,
        info,
    )


class _Clock:
    def __init__(self) -> None:
        import time

        self._now = time.perf_counter
        self._t = self._now()
        self.laps: list[tuple[str, float]] = []

    def lap(self, name: str) -> None:
        t = self._now()
        self.laps.append((name, t - self._t))
        self._t = t

    def __str__(self) -> str:
        return ", ".join(f"{name} {secs:.2f}s" for name, secs in self.laps)


def _canonical_labels(labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Renumber clusters by their first member's row, so ids do not depend on the backend's order."""
    first = np.full(k, np.iinfo(np.int64).max)
    np.minimum.at(first, labels, np.arange(len(labels)))
    order = np.argsort(first, kind="stable")  # new id i <- old id order[i]
    mapping = np.empty(k, dtype=np.int32)
    mapping[order] = np.arange(k, dtype=np.int32)
    return mapping[labels], order


def silhouette(features: np.ndarray, labels: np.ndarray, sample: int, seed: int) -> float | None:
    from sklearn.metrics import silhouette_score

    if len(np.unique(labels)) < 2 or len(labels) < 3:
        return None
    n = min(sample, len(labels))
    rng = np.random.default_rng(seed)
    idx = rng.choice(len(labels), n, replace=False) if n < len(labels) else np.arange(len(labels))
    if len(np.unique(labels[idx])) < 2:
        return None
    return float(silhouette_score(features[idx], labels[idx]))
