"""Cluster stage: L2-normalise → PCA (`ads_core.pca`) → K-Means (`ads_core.kmeans`), with I/O and stable ids.

`cluster_embeddings` is the whole computation on an in-memory matrix; `cluster_stage` reads the merged
scores and writes OUT/clusters/. Memory stays near the size of the embeddings (scikit-learn's full KMeans
peaked at ~3.7x the data at 1M x 1536, with its own k-means++; here it only runs Lloyd from our init).

Cluster ids. A fresh build numbers clusters by their first member's row (canonical: independent of the
backend). A refresh given the previous build's state (`previous_dir`, or `PreviousClustering` in memory)
keeps ids stable instead, on one of three paths, recorded in the manifest's `extra.refresh.path`:
- "warm_start": the new embeddings are projected with the previous PCA and Lloyd starts from the previous
  centroids, so new rows join and cluster i stays cluster i. Taken when nothing below asks for a refit.
- "refit": a full fresh fit (new PCA, new init), whose clusters are then matched to the previous ids by
  Hungarian assignment on centroid distance, in the previous feature space (`kmeans.match_ids`); new
  clusters left over get fresh ids. Taken when `cfg.refit`, when more than `refit_new_share` of the rows are
  new, when the rows' mean squared distance to the previous centroids moved by more than
  `refit_inertia_change` (relative), or when K or the feature space (normalize, pca_dim) changed.
- "fresh": no usable previous state (none, incomplete, written before stable ids, other embedding width).
`extra.refresh` also holds the thresholds, the share of new rows, the inertia change and `kept_id_share`:
of the rows present before and after, the share that kept its cluster_id.

OUT/clusters/ (everything a later refresh reads; plain files, no pickle):
    assignments.parquet   sample_id, cluster_id (int32, 0..k-1), distance_to_centroid, pc1, pc2
    centroids.npy         float32 [k, p]: row i is cluster i, in the space K-Means ran in
    pca_mean.npy          float32 [d]     } the projection of the embeddings into that space; written only
    pca_components.npy    float32 [p, d]  } when PCA ran (stats.json "pca"); x -> (s x - mean) @ comps.T
    stats.json            n, k, embedding_dim, feature_dim, normalize, pca, inertia, sizes, refresh, ...
    manifest.json         written last; the hashes in it tell a later refresh the state is whole
    previous/             an in-place refresh (previous_dir is this directory) first copies the state it reads
                          here, so a rerun after a crash mid-write starts from the same state
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ads_core import kmeans, pca, storage
from ads_core import manifest as mf
from ads_core.config import ClusterConfig
from ads_core.kmeans import KMEANS_BACKENDS, assign, available_backends, best_init, get_backend, run_backend
from ads_core.pca import PCAModel, fit_pca, l2_normalize, row_scales

__all__ = [
    "KMEANS_BACKENDS",
    "ClusterConfig",
    "Clustering",
    "PreviousClustering",
    "available_backends",
    "cluster_embeddings",
    "cluster_stage",
    "effective_k",
    "fit_pca",
    "get_backend",
    "load_previous",
    "row_scales",
    "silhouette",
]

log = logging.getLogger("ads.cluster")

STAGE = "cluster"
VERSION = "2"  # bump by hand when the clustering changes for the same input (it is in the cache key)
_FILES = {
    "assignments": "assignments.parquet",
    "centroids": "centroids.npy",
    "pca_mean": "pca_mean.npy",
    "pca_components": "pca_components.npy",
    "stats": "stats.json",
}
_SNAPSHOT = "previous"  # OUT/clusters/previous/: the input state of an in-place refresh, kept until the next one


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


@dataclass
class PreviousClustering:
    """A previous build's state, aligned to this build's rows (see `load_previous`)."""

    centroids: np.ndarray  # float32 [k, p]; row i is cluster id i, in the previous feature space
    pca: PCAModel | None  # the previous projection (None: K-Means ran on the normalised embeddings)
    normalize: bool
    mean_sq_distance: float  # the previous inertia per row
    labels: np.ndarray  # int32 [n]: the previous cluster id of each current row, -1 for rows new in this build
    embedding_dim: int
    rows: int  # rows in the previous build
    pca_variance: float | None = None

    def project(self, x: np.ndarray, scales: np.ndarray | None = None) -> np.ndarray:
        """Rows in the previous feature space (`scales`: this build's row scales, if normalising like it)."""
        scales = row_scales(x, self.normalize) if scales is None and self.normalize else scales
        if self.pca is not None:
            return self.pca.transform(x, row_scale=scales)
        return l2_normalize(x, scales) if scales is not None else x.copy()


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


def load_previous(directory: str, sample_ids: pa.Array | pa.ChunkedArray) -> tuple[PreviousClustering | None, str]:
    """A previous build's OUT/clusters state aligned to `sample_ids`, read fully into memory (so `directory` may
    be the one about to be overwritten); or None and why not, when there is no whole state to start from.
    Files that are whole but wrong (shapes, ids out of range, duplicate sample ids) raise ValueError."""
    backup = storage.join(directory, _SNAPSHOT)
    if not storage.exists(storage.join(directory, _FILES["centroids"])):
        return None, "no previous build"
    stats = _verified_state(directory)
    if isinstance(stats, str) and storage.exists(storage.join(backup, _FILES["centroids"])):
        fallback = _verified_state(backup)  # an in-place refresh that died mid-write left its input here
        if not isinstance(fallback, str):
            log.warning("%s; using the copy in %s", stats, backup)
            directory, stats = backup, fallback
    if isinstance(stats, str):
        log.warning("cluster ids start afresh: %s", stats)
        return None, stats
    uri = {name: storage.join(directory, file) for name, file in _FILES.items()}
    k, p, d = int(stats["k"]), int(stats["feature_dim"]), int(stats["embedding_dim"])
    centroids = pca.load_npy(uri["centroids"])
    if centroids.shape != (k, p) or not np.isfinite(centroids).all():
        raise ValueError(
            f"{uri['centroids']}: expected finite centroids of shape {(k, p)} (stats.json), got {centroids.shape}"
        )
    model = pca.load_pca(uri["pca_mean"], uri["pca_components"]) if stats["pca"] else None
    if (model.components.shape != (p, d)) if model is not None else p != d:
        raise ValueError(
            f"{uri['pca_components' if model else 'stats']}: the projection does not map {d} -> {p} "
            "dims (embedding_dim -> feature_dim in stats.json)"
        )
    table = storage.read_parquet(uri["assignments"], columns=["sample_id", "cluster_id"])
    ids = table.column("cluster_id").to_numpy().astype(np.int64)
    if len(ids) != int(stats["n"]) or (len(ids) and (ids.min() < 0 or ids.max() >= k)):
        raise ValueError(f"{uri['assignments']}: expected {stats['n']} rows with cluster_id in [0, {k})")
    prev_ids = table.column("sample_id")
    if pc.count_distinct(prev_ids).as_py() != len(prev_ids):
        raise ValueError(f"{uri['assignments']}: sample_id values are not unique")
    try:
        where = pc.index_in(sample_ids, value_set=prev_ids.combine_chunks())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
        raise ValueError(
            f"{uri['assignments']}: its sample_id ({prev_ids.type}) cannot be matched to this "
            f"build's ({sample_ids.type}): {exc}"
        ) from exc
    where = pc.fill_null(where, -1).to_numpy()
    found = where >= 0
    labels = np.full(len(where), -1, dtype=np.int32)
    labels[found] = ids[where[found]]
    rows = max(int(stats["n"]), 1)
    return PreviousClustering(
        centroids.astype(np.float32),
        model,
        bool(stats["normalize"]),
        float(stats["inertia"]) / rows,
        labels,
        d,
        int(stats["n"]),
        stats.get("pca_explained_variance"),
    ), directory


def _verified_state(directory: str) -> dict[str, Any] | str:
    """The previous stats.json when the manifest is there and every state file matches its hash (compared by
    name, so a copied state directory verifies too), else why not."""
    uri = {name: storage.join(directory, file) for name, file in _FILES.items()}
    try:
        manifest = mf.read(directory)
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return f"the previous build in {directory} is incomplete (no readable {mf.MANIFEST_NAME})"
    listed = [name for name in _FILES if name in manifest.outputs]
    if not {"assignments", "centroids", "stats"} <= set(listed):
        return f"the previous build in {directory} is incomplete (its manifest lists {listed})"
    for name in listed:
        try:
            whole = storage.content_hash(uri[name]) == manifest.output_hash(name)
        except (OSError, KeyError, TypeError):
            whole = False
        if not whole:
            return f"the previous build in {directory} is incomplete or was changed ({_FILES[name]})"
    stats = storage.read_json(uri["stats"])
    if not {"embedding_dim", "normalize", "pca"} <= set(stats):
        return f"the previous build in {directory} predates stable cluster ids (no saved projection)"
    if stats["pca"] and not {"pca_mean", "pca_components"} <= set(listed):
        return f"the previous build in {directory} is incomplete (no PCA model in its manifest)"
    return stats


def _snapshot(directory: str) -> None:
    """Copy the verified state in `directory` to its `previous/` before an in-place refresh overwrites it, so a
    rerun after a crash mid-write starts from the same state (manifest last: the copy is whole or ignored)."""
    backup = storage.join(directory, _SNAPSHOT)
    for file in [_FILES[name] for name in mf.read(directory).outputs if name in _FILES] + [mf.MANIFEST_NAME]:
        storage.write_bytes(storage.join(backup, file), storage.read_bytes(storage.join(directory, file)))


def _same_dir(a: str, b: str) -> bool:
    if storage.is_local(a) and storage.is_local(b):
        return storage.local_path(a).resolve() == storage.local_path(b).resolve()
    return a.rstrip("/") == b.rstrip("/")


def cluster_stage(scores_uri: str, out_uri: str, cfg: ClusterConfig, previous_dir: str | None = None) -> mf.Manifest:
    """Read merged scores, cluster their embeddings, write OUT/clusters/ (module docstring).

    `previous_dir`: a previous build's clusters directory (may be this build's own OUT/clusters, which is read
    in full before anything is written); ids then carry over from it."""
    from ads_core.score import embeddings_matrix

    table = storage.read_parquet(scores_uri, columns=["sample_id", "embedding"])
    previous, source = load_previous(previous_dir, table.column("sample_id")) if previous_dir else (None, "")
    directory = storage.join(out_uri, "clusters")
    if previous is not None and _same_dir(source, directory):
        _snapshot(directory)
    inputs = {"scores": mf.input_entry(scores_uri)}
    if previous is not None:
        prev_centroids = storage.join(previous_dir, _FILES["centroids"])
        inputs["previous_centroids"] = mf.input_entry(prev_centroids, storage.content_hash(prev_centroids))
    embeddings = embeddings_matrix(table)
    result = cluster_embeddings(embeddings, cfg, previous)
    if previous is None and previous_dir:
        result.refresh["reason"] = source
    sizes = np.bincount(result.labels, minlength=result.k)
    uri = {name: storage.join(directory, file) for name, file in _FILES.items()}
    feats = result.features
    storage.write_parquet(
        uri["assignments"],
        pa.table(
            {
                "sample_id": table.column("sample_id"),
                "cluster_id": pa.array(result.labels, pa.int32()),
                "distance_to_centroid": pa.array(result.distances, pa.float32()),
                "pc1": pa.array(feats[:, 0], pa.float32()),
                "pc2": pa.array(feats[:, 1] if feats.shape[1] > 1 else np.zeros(len(feats)), pa.float32()),
            }
        ),
    )
    pca.save_npy(uri["centroids"], result.centroids)
    written = ["assignments", "centroids"]
    if result.pca is not None:
        pca.save_pca(uri["pca_mean"], uri["pca_components"], result.pca)
        written += ["pca_mean", "pca_components"]
    else:
        _remove_stale(uri["pca_mean"], uri["pca_components"])
    stats = {
        "n": int(len(result.labels)),
        "k_requested": cfg.num_clusters,
        "k": result.k,
        "embedding_dim": int(embeddings.shape[1]),
        "feature_dim": int(feats.shape[1]),
        "normalize": cfg.normalize,
        "pca": result.pca is not None,
        "pca_explained_variance": result.pca_variance,
        "inertia": result.inertia,
        "iterations": result.iterations,
        "backend": result.backend,
        "silhouette_sample": silhouette(feats, result.labels, cfg.silhouette_sample, cfg.seed),
        "sizes": {str(i): int(s) for i, s in enumerate(sizes)},
        "size_min": int(sizes.min()),
        "size_max": int(sizes.max()),
        "size_mean": float(sizes.mean()),
        "refresh": result.refresh,
    }
    storage.write_json(uri["stats"], stats)
    written.append("stats")
    outputs = {name: mf.output_entry(uri[name]) for name in written}
    outputs["assignments"] = mf.output_entry(uri["assignments"], len(result.labels))
    manifest = mf.Manifest(
        stage=STAGE,
        inputs=inputs,
        outputs=outputs,
        config=mf.config_dict(cfg),
        code_version=mf.version_of(STAGE, VERSION),
        counts={"rows": int(len(result.labels)), "clusters": result.k},
        extra={
            **{k: stats[k] for k in ("inertia", "silhouette_sample", "backend", "size_min", "size_max")},
            "refresh": result.refresh,
        },
    )
    mf.write(directory, manifest)
    return manifest


def _remove_stale(*uris: str) -> None:
    """A PCA model left from an earlier build in this directory would not describe this one."""
    for uri in uris:
        if storage.exists(uri):
            fs, path = storage.get_fs(uri)
            fs.rm(path)
