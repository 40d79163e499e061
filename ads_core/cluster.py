"""Cluster stage: L2-normalise → PCA → K-Means, with interchangeable faiss / scikit-learn / cuML backends.

Every backend runs the same algorithm from the same start. The start is shared and backend-independent:
the best of `n_init` greedy k-means++ seedings (scikit-learn's seeding, the reference's choice), each
refined by 10 Lloyd iterations on a seeded subsample of `init_sample` points and ranked by its subsample
inertia. Then the chosen backend runs Lloyd on *all* points until the centres move less than `tol`
(scikit-learn's rule: the summed squared centre shift against `tol` times the mean feature variance) or
labels stop changing. So backends agree on well-separated data; the quality of K-Means is decided by its
init, and 16 seedings on an 8k subsample cost a fraction of one k-means++ pass over all points (200k x 128,
K=64: ~1.2 s vs ~20 s CPU for scikit-learn's, whose float32 path upcasts in small blocks) and land lower.
`auto` picks cuML on GPU; on CPU scikit-learn's fused Lloyd for <= 256-dim features (after PCA) and
faiss for wider ones.

PCA: the mean is taken over all rows; the covariance (d x d) is accumulated in row chunks from a seeded
sample of `pca_sample` rows (all rows when there are fewer), each chunk centred before an fp32 GEMM and
summed in float64; then the top components come from a partial symmetric eigendecomposition. That is
exact on small data and, for d <= a few thousand, cheaper than randomized SVD over all rows.
Normalisation is folded into the chunked passes (one scale per row), so no N x d temporaries are made
besides the N x pca_dim features, and memory stays near the size of the embeddings (scikit-learn's full
KMeans peaked at ~3.7x the data at 1M x 1536, with its own k-means++; here it only runs Lloyd from our init).
"""

from __future__ import annotations

import importlib.util
import logging
import sys
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import pyarrow as pa

from ads_core import manifest as mf
from ads_core.config import ClusterConfig
from ads_core import storage

log = logging.getLogger("ads.cluster")

STAGE = "cluster"
_CHUNK_BYTES = 32 << 20  # float32 bytes per row chunk in the streaming passes
_INIT_LLOYD_ITER = 10  # Lloyd iterations per candidate seeding on the init sample
_SKLEARN_MAX_DIM = 256  # on CPU, scikit-learn's fused Lloyd beats faiss search + update up to this many dims


def _chunk_rows(d: int) -> int:
    return max(1024, _CHUNK_BYTES // (4 * max(int(d), 1)))


@dataclass
class KMeansResult:
    centroids: np.ndarray  # float32 [k, d]
    labels: np.ndarray  # int32 [n]
    inertia: float  # sum of squared distances to the assigned centre
    iterations: int
    backend: str


class KMeansBackend(Protocol):
    name: str

    def fit(self, x: np.ndarray, init: np.ndarray, max_iter: int, tol: float) -> KMeansResult: ...


def row_scales(x: np.ndarray, normalize: bool = True) -> np.ndarray | None:
    """Check that every value is finite (chunked); return 1 / max(||x_i||, 1e-12) per row when normalising.

    Raises ValueError naming the first bad row when any value is NaN or infinite.
    """
    n, d = x.shape
    step = _chunk_rows(d)
    scales = np.empty(n, dtype=np.float32) if normalize else None
    for s in range(0, n, step):
        block = x[s:s + step]
        sq = np.einsum("ij,ij->i", block, block)
        bad = ~np.isfinite(sq)
        if bad.any():  # NaN/inf somewhere, or a finite row whose fp32 squared norm overflowed
            rows = np.flatnonzero(bad)
            finite = np.isfinite(block[rows]).all(axis=1)
            if not finite.all():
                first = s + int(rows[np.argmin(finite)])
                raise ValueError(f"embeddings contain NaN or inf (first at row {first}); cannot cluster them. "
                                 "Check the scoring stage's output.")
            sq = sq.astype(np.float64)
            sq[rows] = np.einsum("ij,ij->i", block[rows].astype(np.float64), block[rows].astype(np.float64))
        if scales is not None:
            scales[s:s + step] = 1.0 / np.maximum(np.sqrt(sq), 1e-12)
    return scales


def l2_normalize(x: np.ndarray, scales: np.ndarray | None = None) -> np.ndarray:
    """Row-wise L2-normalised float32 copy (norms clamped to >= 1e-12), written in chunks."""
    scales = row_scales(x) if scales is None else scales
    out = np.empty(x.shape, dtype=np.float32)
    step = _chunk_rows(x.shape[1])
    for s in range(0, x.shape[0], step):
        np.multiply(x[s:s + step], scales[s:s + step, None], out=out[s:s + step])
    return out


def _centred_chunk(x: np.ndarray, rows: slice | np.ndarray, scales: np.ndarray | None,
                   mean: np.ndarray) -> np.ndarray:
    block = x[rows] * scales[rows, None] if scales is not None else x[rows] - mean
    if scales is not None:
        block -= mean
    return block


@dataclass
class PCAModel:
    mean: np.ndarray  # [d]
    components: np.ndarray  # [k, d]
    explained_variance_ratio: np.ndarray  # [k]
    explained_variance: np.ndarray | None = None  # [k], eigenvalues of the covariance (ddof=1)

    def transform(self, x: np.ndarray, row_scale: np.ndarray | None = None) -> np.ndarray:
        """Project rows (each first multiplied by `row_scale[i]` when given), in chunks.

        Uses (s_i x_i - mean) C^T = s_i (x_i C^T) - mean C^T, so the data is read once and no centred copy
        is made; the fp32 error of that (~1e-6 for unit rows) is far below the spread of any kept component
        that K-Means could use."""
        out = np.empty((x.shape[0], self.components.shape[0]), dtype=np.float32)
        comps_t = np.ascontiguousarray(self.components.T, dtype=np.float32)
        shift = (self.mean.astype(np.float64) @ self.components.T.astype(np.float64)).astype(np.float32)
        step = _chunk_rows(x.shape[1])
        for s in range(0, x.shape[0], step):
            y = out[s:s + step]
            np.matmul(np.asarray(x[s:s + step], dtype=np.float32), comps_t, out=y)
            if row_scale is not None:
                y *= row_scale[s:s + step, None]
            y -= shift
        return out


def fit_pca(x: np.ndarray, dim: int, *, sample: int | None = None, seed: int = 0,
            row_scale: np.ndarray | None = None) -> PCAModel:
    """PCA from the chunked covariance; components have a deterministic sign (largest |loading| positive,
    as scikit-learn's). The mean uses all rows; the covariance uses a seeded sample of `sample` rows when
    there are more (None = all rows, then the result is exact). `row_scale` multiplies row i first."""
    n, d = x.shape
    dim = min(dim, d)
    step = _chunk_rows(d)
    mean64 = np.zeros(d, dtype=np.float64)
    for s in range(0, n, step):
        block = x[s:s + step]
        mean64 += (row_scale[s:s + step] @ block) if row_scale is not None else block.sum(axis=0, dtype=np.float64)
    mean64 /= max(n, 1)
    mean = mean64.astype(np.float32)
    rows = None
    if sample and n > sample:
        rows = np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    m = n if rows is None else len(rows)
    cov = np.zeros((d, d), dtype=np.float64)
    for s in range(0, m, step):
        block = _centred_chunk(x, slice(s, s + step) if rows is None else rows[s:s + step], row_scale, mean)
        cov += block.T @ block
    cov /= max(m - 1, 1)
    from scipy.linalg import eigh

    if dim < d:
        values, vectors = eigh(cov, subset_by_index=[d - dim, d - 1], driver="evr")
    else:
        values, vectors = eigh(cov)
    values, comps = values[::-1].clip(min=0), vectors[:, ::-1].T.copy()
    signs = np.sign(comps[np.arange(len(comps)), np.abs(comps).argmax(axis=1)])
    comps *= np.where(signs == 0, 1, signs)[:, None]
    total = float(np.trace(cov))
    ratio = values / total if total > 0 else np.zeros(len(values))
    return PCAModel(mean, comps.astype(np.float32), ratio, values)


def kmeans_plusplus_init(x: np.ndarray, k: int, seed: int, sample: int) -> np.ndarray:
    """Greedy k-means++ seeding (scikit-learn's algorithm) on a seeded subsample.

    D^2 sampling with 2 + floor(ln k) candidates per step, keeping the candidate that lowers the potential
    most. Written out with fp32 GEMMs because scikit-learn's own `kmeans_plusplus` upcasts float32 input to
    float64 in small blocks, which made it ~50x slower here (1-4 s for 32k x 128, K=64)."""
    rng = np.random.default_rng(seed)
    n = x.shape[0]
    pts = x if n <= sample else x[np.sort(rng.choice(n, sample, replace=False))]
    pts = np.ascontiguousarray(pts, dtype=np.float32)
    n = pts.shape[0]
    if k > n:
        raise ValueError(f"cannot seed {k} centres from {n} points")
    trials = 2 + int(np.log(k))
    sq = np.einsum("ij,ij->i", pts, pts)
    centers = np.empty((k, pts.shape[1]), dtype=np.float32)
    first = int(rng.integers(n))
    centers[0] = pts[first]
    closest = _sq_dist(pts, sq, pts[first:first + 1])[:, 0]
    potential = float(closest.sum(dtype=np.float64))
    for c in range(1, k):
        if potential > 0:
            cum = np.cumsum(closest, dtype=np.float64)
            cand = np.minimum(np.searchsorted(cum, rng.random(trials) * cum[-1]), n - 1)
        else:  # every point coincides with a centre already
            cand = rng.integers(n, size=trials)
        dist = _sq_dist(pts, sq, pts[cand])
        np.minimum(dist, closest[:, None], out=dist)
        pots = dist.sum(axis=0, dtype=np.float64)
        best = int(np.argmin(pots))
        closest, potential = np.ascontiguousarray(dist[:, best]), float(pots[best])
        centers[c] = pts[cand[best]]
    return centers


def _sq_dist(pts: np.ndarray, pts_sq: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Squared distances [len(pts), len(centres)], clipped at 0 (tall-skinny GEMM: points on the left)."""
    d = pts @ centres.T
    d *= -2
    d += pts_sq[:, None]
    d += np.einsum("ij,ij->i", centres, centres)
    return np.maximum(d, 0, out=d)


def best_init(x: np.ndarray, k: int, cfg: ClusterConfig) -> np.ndarray:
    """The shared start for every backend: best of `cfg.n_init` k-means++ seedings (seeds seed, seed+1, ...),
    each refined by at most 10 Lloyd iterations on one seeded subsample of max(`cfg.init_sample`, 128 K) rows, ranked
    by its subsample inertia. (Inertia is flat after ~10 iterations; what remains is boundary creep, which
    the full run on all points does anyway.) Runs with one BLAS thread: on these small GEMMs a second
    thread gains little and, on a busy 2-core machine, spin-waiting made it 5-10x slower."""
    from threadpoolctl import threadpool_limits

    n = x.shape[0]
    sample = max(cfg.init_sample, 128 * k)
    if n > sample:
        pts = x[np.sort(np.random.default_rng(cfg.seed).choice(n, sample, replace=False))]
    else:
        pts = x
    pts = np.ascontiguousarray(pts, dtype=np.float32)
    best, best_inertia = None, np.inf
    with threadpool_limits(limits=1, user_api="blas"):
        threshold = _tol_scale(pts, cfg.tol)
        for r in range(max(1, cfg.n_init)):
            centres = kmeans_plusplus_init(pts, k, cfg.seed + r, len(pts))
            for _ in range(min(cfg.max_iter, _INIT_LLOYD_ITER)):
                labels, _ = assign(pts, centres)
                new = _update_centroids(pts, labels, centres)
                shift = float(((new - centres) ** 2).sum())
                centres = new
                if shift <= threshold:
                    break
            inertia = float(assign(pts, centres)[1].sum(dtype=np.float64))
            if inertia < best_inertia:
                best, best_inertia = centres, inertia
    return np.ascontiguousarray(best, dtype=np.float32)


def assign(x: np.ndarray, centroids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nearest centre and squared distance per point, in chunks."""
    labels = np.empty(x.shape[0], dtype=np.int32)
    dist = np.empty(x.shape[0], dtype=np.float32)
    centroids = centroids.astype(np.float32)
    c_sq = np.einsum("ij,ij->i", centroids, centroids)
    step = _chunk_rows(max(x.shape[1], centroids.shape[0]))
    for s in range(0, x.shape[0], step):
        block = x[s:s + step]
        d2 = block @ centroids.T
        d2 *= -2
        d2 += c_sq
        d2 += np.einsum("ij,ij->i", block, block)[:, None]
        lab = d2.argmin(1)
        labels[s:s + step] = lab
        dist[s:s + step] = np.maximum(d2[np.arange(len(block)), lab], 0)
    return labels, dist


def _tol_scale(x: np.ndarray, tol: float) -> float:
    """scikit-learn's stopping threshold: tol * mean over features of the variance (chunked, float64)."""
    n, d = x.shape
    total = np.zeros(d, dtype=np.float64)
    total_sq = np.zeros(d, dtype=np.float64)
    for s in range(0, n, _chunk_rows(d)):
        block = x[s:s + _chunk_rows(d)].astype(np.float64)
        total += block.sum(axis=0)
        total_sq += np.einsum("ij,ij->j", block, block)
    mean = total / max(n, 1)
    var = np.maximum(total_sq / max(n, 1) - mean**2, 0)
    return float(var.mean() * tol)


class FaissKMeans:
    """faiss nearest-centre search (AVX2/AVX-512 BLAS) with Lloyd updates on all points."""

    name = "faiss"

    def fit(self, x: np.ndarray, init: np.ndarray, max_iter: int, tol: float) -> KMeansResult:
        import faiss

        x = np.ascontiguousarray(x, dtype=np.float32)
        k, d = init.shape
        index = faiss.IndexFlatL2(d)
        centroids = np.ascontiguousarray(init, dtype=np.float32)
        threshold = _tol_scale(x, tol)
        labels = None
        iterations = 0
        for iterations in range(1, max_iter + 1):  # noqa: B007 - the count is reported
            index.reset()
            index.add(centroids)
            _, lab = index.search(x, 1)
            new_labels = lab[:, 0].astype(np.int32)
            if labels is not None and np.array_equal(new_labels, labels):
                break  # strict convergence: the centres would not move
            labels = new_labels
            new = _update_centroids(x, labels, centroids)
            shift = float(((new - centroids) ** 2).sum())
            centroids = new
            if shift <= threshold:
                break
        index.reset()
        index.add(centroids)
        dist, lab = index.search(x, 1)
        return KMeansResult(centroids, lab[:, 0].astype(np.int32), float(dist.sum(dtype=np.float64)), iterations,
                            self.name)


class SklearnKMeans:
    """scikit-learn Lloyd from the shared init (the CPU fallback when faiss is missing)."""

    name = "sklearn"

    def fit(self, x: np.ndarray, init: np.ndarray, max_iter: int, tol: float) -> KMeansResult:
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=init.shape[0], init=init, n_init=1, max_iter=max_iter, tol=tol,
                    algorithm="lloyd", copy_x=False).fit(x)
        return KMeansResult(km.cluster_centers_.astype(np.float32), km.labels_.astype(np.int32),
                            float(km.inertia_), int(km.n_iter_), self.name)


class CumlKMeans:
    """cuML on GPU (GPU extra), from the same init."""

    name = "cuml"

    def fit(self, x: np.ndarray, init: np.ndarray, max_iter: int, tol: float) -> KMeansResult:  # pragma: no cover
        from cuml.cluster import KMeans

        km = KMeans(n_clusters=init.shape[0], init=init, n_init=1, max_iter=max_iter, tol=tol, output_type="numpy")
        km.fit(x)
        labels, dist = assign(x, np.asarray(km.cluster_centers_, dtype=np.float32))
        return KMeansResult(np.asarray(km.cluster_centers_, dtype=np.float32), labels, float(dist.sum()),
                            int(getattr(km, "n_iter_", max_iter)), self.name)


def _update_centroids(x: np.ndarray, labels: np.ndarray, old: np.ndarray) -> np.ndarray:
    """Mean of each cluster's points; an empty cluster takes the point farthest from its centre."""
    k, d = old.shape
    sums = np.zeros((k, d), dtype=np.float64)
    _chunked_sum(sums, x, labels)
    counts = np.bincount(labels, minlength=k)
    new = old.astype(np.float64).copy()
    filled = counts > 0
    new[filled] = sums[filled] / counts[filled, None]
    empty = np.flatnonzero(~filled)
    if len(empty):
        _, dist = assign(x, new.astype(np.float32))
        far = np.argsort(dist)[::-1][: len(empty)]
        new[empty] = x[far]
    return new.astype(np.float32)


def _chunked_sum(sums: np.ndarray, x: np.ndarray, labels: np.ndarray) -> None:
    """Per-cluster sums via a sparse one-hot matmul (much faster than np.add.at)."""
    from scipy.sparse import csr_matrix

    k = sums.shape[0]
    step = _chunk_rows(x.shape[1])
    for s in range(0, x.shape[0], step):
        lab = labels[s:s + step]
        onehot = csr_matrix((np.ones(len(lab), dtype=np.float32), (lab, np.arange(len(lab)))), shape=(k, len(lab)))
        sums += onehot @ x[s:s + step]


BACKENDS: dict[str, type] = {"faiss": FaissKMeans, "sklearn": SklearnKMeans, "cuml": CumlKMeans}


def available_backends() -> list[str]:
    names = []
    if importlib.util.find_spec("faiss") is not None:
        names.append("faiss")
    names.append("sklearn")
    if importlib.util.find_spec("cuml") is not None and _cuda():
        names.append("cuml")
    return names


def _cuda() -> bool:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return False
    return torch.cuda.is_available()


def pick_backend(name: str = "auto", dim: int | None = None) -> KMeansBackend:
    """cuML on a GPU node; on CPU faiss, or scikit-learn when the features have <= 256 dims (`dim`, e.g.
    after PCA), where its fused chunked Lloyd measured ~2x faster per iteration than faiss's search plus
    our update (200k x 128, K=64, 2 cores); scikit-learn is also the fallback. Or the one asked for."""
    have = available_backends()
    if name == "auto":
        if "cuml" in have:
            name = "cuml"
        elif "faiss" in have and not (dim is not None and dim <= _SKLEARN_MAX_DIM):
            name = "faiss"
        else:
            name = "sklearn"
    if name not in BACKENDS:
        raise ValueError(f"unknown K-Means backend {name!r}; choose auto, {', '.join(BACKENDS)}")
    if name not in have:
        raise ValueError(f"K-Means backend {name!r} is not available here (available: {', '.join(have)})")
    return BACKENDS[name]()


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
        pca = fit_pca(x, dim, sample=cfg.pca_sample, seed=cfg.seed, row_scale=scales)
        clock.lap("pca fit")
        x = pca.transform(x, row_scale=scales)
        clock.lap("pca transform")
        variance = float(pca.explained_variance_ratio.sum())
    elif scales is not None:
        x = l2_normalize(x, scales)
    backend = pick_backend(cfg.backend, dim=x.shape[1])
    init = best_init(x, k, cfg)
    clock.lap("init")
    result = backend.fit(x, init, cfg.max_iter, cfg.tol)
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
        code_version=mf.code_version(sys.modules[__name__]),
        counts={"rows": int(len(result.labels)), "clusters": result.k},
        extra={k: stats[k] for k in ("inertia", "silhouette_sample", "backend", "size_min", "size_max")},
    )
    mf.write(directory, manifest)
    return manifest
