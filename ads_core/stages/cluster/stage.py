"""Cluster stage: L2-normalise → PCA (`ads_core.stages.cluster.pca`) → K-Means (`ads_core.stages.cluster.kmeans`),
with I/O and stable ids.

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

from typing import Any

import numpy as np
import pyarrow as pa

from ads_core import storage
from ads_core.config.build import ClusterConfig
from ads_core.stages.base import Resources, Stage, StageContext, UIItem
from ads_core.stages.cluster import pca
from ads_core.stages.cluster.fit import cluster_embeddings, silhouette
from ads_core.stages.cluster.previous import STATE_FILES, load_previous, same_dir, snapshot
from ads_core.storage import manifest as mf

VERSION = "2"  # bump by hand when the clustering changes for the same input (it is in the cache key)
STAGE_DIR = "clusters"


def cluster_stage(scores_uri: str, directory: str, cfg: ClusterConfig, previous_dir: str | None = None) -> mf.Manifest:
    """Read merged scores, cluster their embeddings, write the state files into DIRECTORY (module docstring).

    `previous_dir`: a previous build's clusters directory (may be this build's own OUT/clusters, which is read
    in full before anything is written); ids then carry over from it."""
    from ads_core.stages.score.stage import embeddings_matrix

    table = storage.read_parquet(scores_uri, columns=["sample_id", "embedding"])
    previous, source = load_previous(previous_dir, table.column("sample_id")) if previous_dir else (None, "")
    if previous is not None and same_dir(source, directory):
        snapshot(directory)
    inputs = {"scores": mf.input_entry(scores_uri)}
    if previous is not None:
        prev_centroids = storage.join(previous_dir, STATE_FILES["centroids"])
        inputs["previous_centroids"] = mf.input_entry(prev_centroids, storage.content_hash(prev_centroids))
    embeddings = embeddings_matrix(table)
    result = cluster_embeddings(embeddings, cfg, previous)
    if previous is None and previous_dir:
        result.refresh["reason"] = source
    sizes = np.bincount(result.labels, minlength=result.k)
    uri = {name: storage.join(directory, file) for name, file in STATE_FILES.items()}
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
        stage="cluster",
        inputs=inputs,
        outputs=outputs,
        config=mf.config_dict(cfg),
        code_version=mf.version_of("cluster", VERSION),
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


# ---------------------------------------------------------------------------------------------
# the declaration


def previous_clusters(ctx: StageContext) -> str:
    """Where the previous build's cluster state is: `cluster.previous`, else this OUT's own clusters folder."""
    previous = ctx.config.cluster.previous
    if not previous:
        return ctx.stage_dir("assignments")
    previous = previous.rstrip("/")
    return previous if previous.endswith("/" + STAGE_DIR) else storage.join(previous, STAGE_DIR)


def run(ctx: StageContext, _: int | None) -> mf.Manifest:
    with ctx.progress("cluster", None):
        return cluster_stage(
            ctx.uri("scores"), ctx.stage_dir("assignments"), ctx.config.cluster, previous_dir=previous_clusters(ctx)
        )


def previous_key(ctx: StageContext) -> dict[str, Any]:
    """An explicit previous build is an input (its centroids by content). This OUT's own previous state is
    not: keying on it would make every rerun a miss, and a changed OUT fails the intact check anyway."""
    if not ctx.config.cluster.previous:
        return {}
    centroids = storage.join(previous_clusters(ctx), STATE_FILES["centroids"])
    return {"previous": mf.artifact_hash(centroids) if storage.exists(centroids) else None}


def ui(ctx: StageContext, manifest: mf.Manifest) -> list[UIItem]:
    """Cluster sizes, with the clustering's summary in the description."""
    stats = storage.read_json(manifest.output_uri("stats"))
    total = max(int(stats["n"]), 1)
    rows = [
        {"cluster_id": int(c), "size": int(n), "share_pct": round(100 * int(n) / total, 2)}
        for c, n in sorted(stats["sizes"].items(), key=lambda kv: int(kv[0]))
    ]
    sil = stats.get("silhouette_sample")
    description = (
        f"K-Means on {stats['n']} rows: k={stats['k']} (asked {stats['k_requested']}), "
        f"backend {stats['backend']}, {stats['iterations']} iterations, "
        f"silhouette {'n/a' if sil is None else f'{sil:.3f}'}"
    )
    return [UIItem("table", "cluster-sizes", rows, description)]


STAGE = Stage(
    name="cluster",
    section="cluster",
    inputs=("scores",),
    outputs={name: f"{STAGE_DIR}/{file}" for name, file in STATE_FILES.items()},
    version=VERSION,
    run=run,
    resources=Resources(accelerator="optional"),
    ui=ui,
    key_extra=previous_key,
)
