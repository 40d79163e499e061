"""Cluster stage: backends agree, PCA equals scikit-learn's, K is clamped, bad input fails clearly, artifacts."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.decomposition import PCA
from sklearn.metrics import adjusted_rand_score

from ads_core.config.build import ClusterConfig
from ads_core.stages.cluster import kmeans
from ads_core.stages.cluster.fit import cluster_embeddings
from ads_core.stages.cluster.pca import fit_pca, row_scales
from ads_core.stages.cluster.stage import cluster_stage

K = 8
BACKENDS = sorted(kmeans.KMEANS_BACKENDS.names())


def _blobs(k: int = K, d: int = 48, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """k well-separated Gaussian blobs of unequal sizes (20..70 rows), rows shuffled, plus a shared offset."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(20, 71, k)
    centres = rng.standard_normal((k, d)) * 4.0 + rng.standard_normal(d) * 3.0
    truth = rng.permutation(np.repeat(np.arange(k), sizes))
    x = centres[truth] + rng.standard_normal((len(truth), d)) * 0.3
    return x.astype(np.float32), truth


@pytest.fixture(scope="module")
def blobs() -> tuple[np.ndarray, np.ndarray]:
    return _blobs()


def _require(name: str) -> None:
    if name not in kmeans.available_backends():
        reason = {
            "cuml": "cuML is not installed or no CUDA GPU is visible (GPU extra)",
            "faiss": "faiss is not installed",
        }.get(name, f"{name} is not available")
        pytest.skip(reason)


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("pca_dim", [16, None])
def test_every_backend_finds_the_blobs_with_identical_canonical_labels(blobs, name, pca_dim):
    _require(name)
    x, truth = blobs
    reference = cluster_embeddings(x, ClusterConfig(num_clusters=K, pca_dim=pca_dim, backend="sklearn"))
    got = cluster_embeddings(x, ClusterConfig(num_clusters=K, pca_dim=pca_dim, backend=name))
    assert got.backend == name
    assert adjusted_rand_score(truth, got.labels) == 1.0
    np.testing.assert_array_equal(got.labels, reference.labels)  # canonical ids do not depend on the backend
    np.testing.assert_allclose(got.centroids, reference.centroids, rtol=1e-4, atol=1e-5)
    assert got.inertia == pytest.approx(reference.inertia, rel=1e-4)


@pytest.mark.parametrize("name", BACKENDS)
def test_backends_run_the_same_lloyd_from_the_same_raw_init(blobs, name):
    """Not only from the shared refined start: from one raw k-means++ seeding, every backend converges alike."""
    _require(name)
    x, truth = blobs
    feats = fit_pca(x, 16).transform(x)
    init = kmeans.kmeans_plusplus_init(feats, K, seed=3, sample=10**6)
    ref = kmeans.SklearnKMeans().fit(feats, init, max_iter=100, tol=1e-4)
    got = kmeans.get_backend(name).fit(feats, init, max_iter=100, tol=1e-4)
    assert adjusted_rand_score(ref.labels, got.labels) == 1.0
    assert got.inertia == pytest.approx(ref.inertia, rel=1e-4)
    assert got.labels.dtype == np.int32 and got.centroids.shape == (K, 16)


def test_canonical_labels_number_clusters_by_first_member(blobs):
    x, _ = blobs
    labels = cluster_embeddings(x, ClusterConfig(num_clusters=K)).labels
    first_seen = list(dict.fromkeys(labels.tolist()))
    assert first_seen == list(range(K))  # row 0 is in cluster 0, the next new cluster is 1, ...


def test_same_seed_same_result_and_seed_is_used():
    """On structureless data with one seeding, the seed picks the local optimum: another seed must land elsewhere."""
    x = np.random.default_rng(0).standard_normal((400, 32)).astype(np.float32)
    cfg = ClusterConfig(num_clusters=K, seed=5, n_init=1, pca_dim=None)
    a = cluster_embeddings(x, cfg)
    b = cluster_embeddings(x, cfg.model_copy())
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.centroids, b.centroids)
    other = cluster_embeddings(x, cfg.model_copy(update={"seed": 6}))
    assert not np.array_equal(other.labels, a.labels)
    assert adjusted_rand_score(a.labels, other.labels) < 0.99
    assert other.inertia != a.inertia


def test_distances_and_features_are_consistent(blobs):
    x, _ = blobs
    res = cluster_embeddings(x, ClusterConfig(num_clusters=K, pca_dim=16))
    assert res.features.shape == (len(x), 16) and res.features.dtype == np.float32
    own = res.features - res.centroids[res.labels]
    np.testing.assert_allclose(res.distances, np.linalg.norm(own, axis=1), rtol=1e-3, atol=1e-4)
    assert res.inertia == pytest.approx(float((res.distances.astype(np.float64) ** 2).sum()), rel=1e-4)
    assert 0 < res.pca_variance <= 1


# --- PCA ------------------------------------------------------------------------------------------


def _correlated(n: int = 400, d: int = 30, seed: int = 1, scales: np.ndarray | None = None) -> np.ndarray:
    rng = np.random.default_rng(seed)
    scales = np.linspace(3.0, 0.1, d) if scales is None else scales  # distinct eigenvalues: well-defined components
    basis, _ = np.linalg.qr(rng.standard_normal((d, d)))
    return ((rng.standard_normal((n, d)) * scales) @ basis.T + 2.0).astype(np.float32)


def _assert_same_up_to_sign(ours: np.ndarray, theirs: np.ndarray, atol: float) -> None:
    signs = np.sign((ours * theirs).sum(axis=-1 if ours.ndim == 1 else 0))
    np.testing.assert_allclose(ours * signs, theirs, atol=atol)


def test_pca_matches_sklearn_up_to_sign():
    x = _correlated()
    ours = fit_pca(x, 8)
    ref = PCA(n_components=8, svd_solver="full").fit(x)
    np.testing.assert_allclose(ours.explained_variance_ratio, ref.explained_variance_ratio_, atol=1e-4)
    np.testing.assert_allclose(ours.explained_variance, ref.explained_variance_, rtol=1e-4)
    np.testing.assert_allclose(ours.mean, ref.mean_, atol=1e-5)
    for a, b in zip(ours.components, ref.components_, strict=True):
        assert abs(float(a @ b)) == pytest.approx(1.0, abs=1e-5)
    _assert_same_up_to_sign(ours.transform(x), ref.transform(x), atol=1e-3)


def test_pca_with_row_scale_equals_pca_of_normalised_rows():
    x = _correlated(seed=2)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    scale = row_scales(x)
    np.testing.assert_allclose(scale, 1 / norms[:, 0], rtol=1e-5)
    ours = fit_pca(x, 6, row_scale=scale)
    ref = PCA(n_components=6, svd_solver="full").fit(x / norms)
    np.testing.assert_allclose(ours.explained_variance_ratio, ref.explained_variance_ratio_, atol=1e-4)
    _assert_same_up_to_sign(ours.transform(x, row_scale=scale), ref.transform(x / norms), atol=1e-4)


def test_pca_from_a_row_sample_keeps_the_dominant_subspace():
    x = _correlated(n=3000, d=20, seed=3, scales=np.array([6.0, 4.0, 2.5] + [0.3] * 17))
    full = fit_pca(x, 3)
    sampled = fit_pca(x, 3, sample=1000, seed=0)
    np.testing.assert_allclose(sampled.mean, full.mean, atol=1e-5)  # the mean always uses every row
    cosines = np.linalg.svd(sampled.components @ full.components.T, compute_uv=False)  # of the principal angles
    assert cosines.min() > 0.99


# --- K, bad input ---------------------------------------------------------------------------------


def test_too_many_clusters_warn_and_clamp(caplog):
    x, _ = _blobs(k=4, d=16, seed=4)
    n = len(x)
    with caplog.at_level(logging.WARNING, logger="ads.cluster"):
        res = cluster_embeddings(x, ClusterConfig(num_clusters=n, min_cluster_rows=8, pca_dim=None))
    assert res.k == n // 8
    assert "too many" in caplog.text
    assert set(np.unique(res.labels)) == set(range(res.k))  # every clamped cluster is used
    assert res.centroids.shape == (res.k, 16)


def test_invalid_k_and_too_few_rows_fail_clearly():
    with pytest.raises(ValueError, match="num_clusters"):
        cluster_embeddings(np.ones((20, 4), np.float32), ClusterConfig(num_clusters=0))
    with pytest.raises(ValueError, match="at least 2"):
        cluster_embeddings(np.ones((1, 4), np.float32), ClusterConfig(num_clusters=1))


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_embeddings_raise_a_clear_error(blobs, bad):
    x = blobs[0].copy()
    x[37, 5] = bad
    with pytest.raises(ValueError, match=r"NaN or inf \(first at row 37\)"):
        cluster_embeddings(x, ClusterConfig(num_clusters=K))


def test_huge_but_finite_rows_are_normalised_not_rejected():
    x, truth = _blobs(k=3, d=8, seed=5)
    x[0] *= 1e30  # its fp32 squared norm overflows; the row is still finite
    scale = row_scales(x)
    assert np.isfinite(scale).all()
    assert float(np.linalg.norm(x[0].astype(np.float64) * scale[0])) == pytest.approx(1.0, rel=1e-5)


# --- stage artifacts ------------------------------------------------------------------------------


def _write_scores(path: Path, emb: np.ndarray) -> str:
    n, d = emb.shape
    table = pa.table(
        {
            "sample_id": pa.array(np.arange(1000, 1000 + n), pa.int64()),
            "embedding": pa.FixedSizeListArray.from_arrays(pa.array(emb.reshape(-1), pa.float32()), d),
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return str(path)


def test_cluster_stage_writes_assignments_centroids_stats_and_manifest(blobs, tmp_path):
    x, truth = blobs
    scores = _write_scores(tmp_path / "scores" / "scores.parquet", x)
    out = tmp_path / "out"
    manifest = cluster_stage(scores, str(out / "clusters"), ClusterConfig(num_clusters=K, pca_dim=16))
    d = out / "clusters"

    table = pq.read_table(d / "assignments.parquet")
    assert table.num_rows == len(x)
    assert table.column("sample_id").to_pylist() == list(range(1000, 1000 + len(x)))
    assert table.schema.field("cluster_id").type == pa.int32()
    labels = table.column("cluster_id").to_numpy()
    assert adjusted_rand_score(truth, labels) == 1.0
    assert np.isfinite(table.column("distance_to_centroid").to_numpy()).all()

    centroids = np.load(d / "centroids.npy", allow_pickle=False)
    assert centroids.shape == (K, 16) and centroids.dtype == np.float32

    stats = json.loads((d / "stats.json").read_text())
    assert stats["n"] == len(x) and stats["k"] == K and stats["feature_dim"] == 16
    assert sum(stats["sizes"].values()) == len(x) and len(stats["sizes"]) == K
    assert stats["sizes"] == {str(i): int(c) for i, c in enumerate(np.bincount(labels, minlength=K))}
    assert stats["size_min"] >= 20 and stats["silhouette_sample"] > 0.5

    on_disk = json.loads((d / "manifest.json").read_text())
    assert on_disk["stage"] == "cluster" == manifest.stage
    assert manifest.counts == {"rows": len(x), "clusters": K}
    assert set(manifest.outputs) == {"assignments", "centroids", "stats", "pca_mean", "pca_components"}
    assert np.load(d / "pca_components.npy").shape == (16, x.shape[1]) and stats["pca"] and stats["normalize"]
    assert stats["embedding_dim"] == x.shape[1]
    assert manifest.extra["refresh"] == {"path": "fresh", "reason": "no previous build"}
    assert manifest.outputs["assignments"]["rows"] == len(x)
    assert manifest.config["num_clusters"] == K
