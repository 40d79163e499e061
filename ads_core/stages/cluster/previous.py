"""A previous build's cluster state: read, checked and aligned to this build's rows, so ids stay stable.

The state is plain files in the previous build's OUT/clusters/ (`STATE_FILES`, no pickle), trusted only
when its manifest lists them with matching hashes. An in-place refresh first copies the state it reads to
`previous/`, so a rerun after a crash mid-write starts from the same state.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ads_core import storage
from ads_core.stages.cluster import pca
from ads_core.stages.cluster.pca import PCAModel, l2_normalize, row_scales
from ads_core.storage import manifest as mf

log = logging.getLogger("ads.cluster")

# artifact name -> file in the cluster stage's folder (the stage declares these as its outputs)
STATE_FILES = {
    "assignments": "assignments.parquet",
    "centroids": "centroids.npy",
    "pca_mean": "pca_mean.npy",
    "pca_components": "pca_components.npy",
    "stats": "stats.json",
}
SNAPSHOT = "previous"  # <clusters>/previous/: the input state of an in-place refresh, kept until the next one


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


def load_previous(directory: str, sample_ids: pa.Array | pa.ChunkedArray) -> tuple[PreviousClustering | None, str]:
    """A previous build's OUT/clusters state aligned to `sample_ids`, read fully into memory (so `directory` may
    be the one about to be overwritten); or None and why not, when there is no whole state to start from.
    Files that are whole but wrong (shapes, ids out of range, duplicate sample ids) raise ValueError."""
    backup = storage.join(directory, SNAPSHOT)
    if not storage.exists(storage.join(directory, STATE_FILES["centroids"])):
        return None, "no previous build"
    stats = _verified_state(directory)
    if isinstance(stats, str) and storage.exists(storage.join(backup, STATE_FILES["centroids"])):
        fallback = _verified_state(backup)  # an in-place refresh that died mid-write left its input here
        if not isinstance(fallback, str):
            log.warning("%s; using the copy in %s", stats, backup)
            directory, stats = backup, fallback
    if isinstance(stats, str):
        log.warning("cluster ids start afresh: %s", stats)
        return None, stats
    uri = {name: storage.join(directory, file) for name, file in STATE_FILES.items()}
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
    uri = {name: storage.join(directory, file) for name, file in STATE_FILES.items()}
    try:
        manifest = mf.read(directory)
    except (FileNotFoundError, ValueError, KeyError, TypeError):
        return f"the previous build in {directory} is incomplete (no readable {mf.MANIFEST_NAME})"
    listed = [name for name in STATE_FILES if name in manifest.outputs]
    if not {"assignments", "centroids", "stats"} <= set(listed):
        return f"the previous build in {directory} is incomplete (its manifest lists {listed})"
    for name in listed:
        try:
            whole = storage.content_hash(uri[name]) == manifest.output_hash(name)
        except (OSError, KeyError, TypeError):
            whole = False
        if not whole:
            return f"the previous build in {directory} is incomplete or was changed ({STATE_FILES[name]})"
    stats = storage.read_json(uri["stats"])
    if not {"embedding_dim", "normalize", "pca"} <= set(stats):
        return f"the previous build in {directory} predates stable cluster ids (no saved projection)"
    if stats["pca"] and not {"pca_mean", "pca_components"} <= set(listed):
        return f"the previous build in {directory} is incomplete (no PCA model in its manifest)"
    return stats


def snapshot(directory: str) -> None:
    """Copy the verified state in `directory` to its `previous/` before an in-place refresh overwrites it, so a
    rerun after a crash mid-write starts from the same state (manifest last: the copy is whole or ignored)."""
    backup = storage.join(directory, SNAPSHOT)
    for file in [STATE_FILES[name] for name in mf.read(directory).outputs if name in STATE_FILES] + [mf.MANIFEST_NAME]:
        storage.write_bytes(storage.join(backup, file), storage.read_bytes(storage.join(directory, file)))


def same_dir(a: str, b: str) -> bool:
    if storage.is_local(a) and storage.is_local(b):
        return storage.local_path(a).resolve() == storage.local_path(b).resolve()
    return a.rstrip("/") == b.rstrip("/")
