"""Cluster stage: L2-normalise → PCA (`ads_core.pca`) → K-Means (`ads_core.kmeans`), with I/O.

`cluster_embeddings` is the whole computation on an in-memory matrix; `cluster_stage` reads the merged
scores and writes OUT/clusters/. Cluster ids are canonical: numbered by their first member's row, so
they do not depend on the backend's order. The default path keeps memory near the size of the embeddings
(scikit-learn's full KMeans peaked at ~3.7x the data at 1M x 1536, with its own k-means++; here it only
runs Lloyd from our init).
"""

from __future__ import annotations

import logging
import sys
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ads_core import kmeans, pca, storage
from ads_core import manifest as mf
from ads_core.config import ClusterConfig
from ads_core.kmeans import KMEANS_BACKENDS, assign, available_backends, best_init, get_backend, run_backend
from ads_core.pca import fit_pca, l2_normalize, row_scales

__all__ = ["KMEANS_BACKENDS", "ClusterConfig", "Clustering", "available_backends", "cluster_embeddings",
           "cluster_stage", "effective_k", "fit_pca", "get_backend", "row_scales", "silhouette"]

log = logging.getLogger("ads.cluster")

STAGE = "cluster"


def effective_k(n: int, cfg: ClusterConfig) -> int:
    if n < 2:
        raise ValueError(f"cannot cluster {n} rows; need at least 2")
    limit = max(1, n // max(1, cfg.min_cluster_rows))
    if cfg.num_clusters < 1:
        raise ValueError("num_clusters must be >= 1")
    if cfg.num_clusters > limit:
        log.warning("%d clusters is too many for %d rows; using %d (at least %d rows per cluster on average)",
                    cfg.num_clusters, n, limit, cfg.min_cluster_rows)
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


def cluster_embeddings(embeddings: np.ndarray, cfg: ClusterConfig) -> Clustering:
    """The whole cluster computation on an in-memory matrix (the stage wraps it with I/O)."""
    clock = _Clock()
    x = np.ascontiguousarray(embeddings, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"embeddings must be a 2-D matrix, got shape {x.shape}")
    shape = x.shape
    scales = row_scales(x, cfg.normalize)  # raises on NaN / inf
    k = effective_k(x.shape[0], cfg)
    clock.lap("check+norms")
    variance = None
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
    return Clustering(labels, np.sqrt(d2), centroids, x, result.inertia, result.iterations, result.backend, k,
                      variance)


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


def cluster_stage(scores_uri: str, out_uri: str, cfg: ClusterConfig) -> mf.Manifest:
    """Read merged scores, cluster their embeddings, write assignments, centroids and stats."""
    from ads_core.score import embeddings_matrix

    table = storage.read_parquet(scores_uri, columns=["sample_id", "embedding"])
    result = cluster_embeddings(embeddings_matrix(table), cfg)
    sizes = np.bincount(result.labels, minlength=result.k)
    directory = storage.join(out_uri, "clusters")
    assignments_uri = storage.join(directory, "assignments.parquet")
    centroids_uri = storage.join(directory, "centroids.npy")
    stats_uri = storage.join(directory, "stats.json")
    feats = result.features
    storage.write_parquet(assignments_uri, pa.table({
        "sample_id": table.column("sample_id"),
        "cluster_id": pa.array(result.labels, pa.int32()),
        "distance_to_centroid": pa.array(result.distances, pa.float32()),
        "pc1": pa.array(feats[:, 0], pa.float32()),
        "pc2": pa.array(feats[:, 1] if feats.shape[1] > 1 else np.zeros(len(feats)), pa.float32()),
    }))
    with storage.atomic_local_file(centroids_uri, ".npy") as tmp:
        np.save(tmp, result.centroids, allow_pickle=False)
    stats = {
        "n": int(len(result.labels)), "k_requested": cfg.num_clusters, "k": result.k,
        "feature_dim": int(feats.shape[1]), "pca_explained_variance": result.pca_variance,
        "inertia": result.inertia, "iterations": result.iterations, "backend": result.backend,
        "silhouette_sample": silhouette(feats, result.labels, cfg.silhouette_sample, cfg.seed),
        "sizes": {str(i): int(s) for i, s in enumerate(sizes)},
        "size_min": int(sizes.min()), "size_max": int(sizes.max()), "size_mean": float(sizes.mean()),
    }
    storage.write_json(stats_uri, stats)
    manifest = mf.Manifest(
        stage=STAGE,
        inputs={"scores": mf.input_entry(scores_uri)},
        outputs={"assignments": mf.output_entry(assignments_uri, len(result.labels)),
                 "centroids": mf.output_entry(centroids_uri), "stats": mf.output_entry(stats_uri)},
        config=mf.config_dict(cfg),
        code_version=mf.code_version(sys.modules[__name__], pca, kmeans),
        counts={"rows": int(len(result.labels)), "clusters": result.k},
        extra={k: stats[k] for k in ("inertia", "silhouette_sample", "backend", "size_min", "size_max")},
    )
    mf.write(directory, manifest)
    return manifest
