"""Stable cluster ids across refreshes: warm start from the previous centroids, refit + Hungarian matching,
the thresholds that choose between them, and the previous state on disk (OUT/clusters/)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from ads_core import storage
from ads_core.config.build import ClusterConfig
from ads_core.stages.cluster import kmeans, pca
from ads_core.stages.cluster.fit import cluster_embeddings
from ads_core.stages.cluster.previous import PreviousClustering
from ads_core.stages.cluster.stage import cluster_stage

K, D = 8, 32


def _data(n: int, seed: int, scale: float = 0.5) -> tuple[np.ndarray, np.ndarray]:
    """K overlapping Gaussian blobs (centres `scale` noise sd apart per dim) on a common offset; rows and centres."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((K, D)) * scale + 3
    return (centres[rng.integers(0, K, n)] + rng.standard_normal((n, D))).astype(np.float32), centres


def _refresh(
    x: np.ndarray,
    ids: np.ndarray,
    centres: np.ndarray,
    seed: int,
    new: float = 0.05,
    deleted: float = 0.01,
    perturbed: float = 0.01,
) -> tuple[np.ndarray, np.ndarray]:
    """The dataset after a refresh: rows deleted, some rows' embeddings nudged, new rows appended, order shuffled."""
    rng = np.random.default_rng(seed + 100)
    keep = rng.random(len(x)) >= deleted
    x2, ids2 = x[keep].copy(), ids[keep]
    nudge = rng.random(len(x2)) < perturbed
    x2[nudge] += rng.standard_normal((int(nudge.sum()), D)).astype(np.float32) * 0.5
    m = int(round(new * len(x)))
    fresh = centres[rng.integers(0, len(centres), m)] + rng.standard_normal((m, D))
    x2 = np.concatenate([x2, fresh.astype(np.float32)])
    ids2 = np.concatenate([ids2, ids.max() + 1 + np.arange(m)])
    order = rng.permutation(len(x2))
    return x2[order], ids2[order]


def _scores(path: Path, ids: np.ndarray, x: np.ndarray) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table(
            {
                "sample_id": pa.array(ids, pa.int64()),
                "embedding": pa.FixedSizeListArray.from_arrays(pa.array(x.reshape(-1), pa.float32()), D),
            }
        ),
        path,
    )
    return str(path)


def _ids(clusters_dir: Path) -> dict[int, int]:
    t = pq.read_table(clusters_dir / "assignments.parquet")
    return dict(zip(t.column("sample_id").to_pylist(), t.column("cluster_id").to_pylist(), strict=True))


def _kept(before: dict[int, int], after: dict[int, int]) -> float:
    common = before.keys() & after.keys()
    return sum(before[i] == after[i] for i in common) / len(common)


def _previous(x: np.ndarray, cfg: ClusterConfig, rows_now: np.ndarray) -> PreviousClustering:
    """In-memory previous state of clustering `x`; `rows_now[i]` is the old row of current row i, or -1."""
    res = cluster_embeddings(x, cfg)
    labels = np.where(rows_now >= 0, res.labels[np.maximum(rows_now, 0)], -1).astype(np.int32)
    return PreviousClustering(res.centroids, res.pca, cfg.normalize, res.inertia / len(x), labels, x.shape[1], len(x))


CFG = ClusterConfig(num_clusters=K, pca_dim=16, seed=1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_warm_start_keeps_ids_of_surviving_rows_in_place(tmp_path, seed):
    x, centres = _data(3000, seed)
    ids = np.arange(3000)
    cluster_stage(_scores(tmp_path / "s1.parquet", ids, x), str(tmp_path / "out" / "clusters"), CFG)
    before = _ids(tmp_path / "out" / "clusters")
    mean_before = np.load(tmp_path / "out" / "clusters" / "pca_mean.npy")
    x2, ids2 = _refresh(x, ids, centres, seed)
    scores2 = _scores(tmp_path / "s2.parquet", ids2, x2)

    manifest = cluster_stage(
        scores2, str(tmp_path / "out" / "clusters"), CFG, previous_dir=str(tmp_path / "out" / "clusters")
    )
    after = _ids(tmp_path / "out" / "clusters")
    info = manifest.extra["refresh"]
    assert info["path"] == "warm_start"
    assert _kept(before, after) >= 0.95
    assert info["kept_id_share"] == pytest.approx(_kept(before, after))
    assert info["rows_new"] == 150 and info["rows_common"] + info["rows_removed"] == 3000
    assert (info["refit_new_share"], info["refit_inertia_change"]) == (0.3, 0.2)
    assert json.loads((tmp_path / "out" / "clusters" / "stats.json").read_text())["refresh"] == info
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "clusters" / "pca_mean.npy"), mean_before)
    assert "previous_centroids" in manifest.inputs

    cluster_stage(scores2, str(tmp_path / "cold" / "clusters"), CFG)  # without the previous state the ids are not kept
    assert _kept(before, _ids(tmp_path / "cold" / "clusters")) < 0.5


def test_refit_matches_persisting_clusters_to_their_old_ids(tmp_path):
    x, centres = _data(2000, 3, scale=1.5)  # separated: a refit finds the same clusters, in another order
    ids = np.arange(2000)
    cluster_stage(_scores(tmp_path / "s1.parquet", ids, x), str(tmp_path / "a" / "clusters"), CFG)
    before = _ids(tmp_path / "a" / "clusters")
    order = np.random.default_rng(0).permutation(len(x))
    scores2 = _scores(tmp_path / "s2.parquet", ids[order], x[order])
    cluster_stage(scores2, str(tmp_path / "cold" / "clusters"), CFG)
    assert _kept(before, _ids(tmp_path / "cold" / "clusters")) < 0.5  # canonical ids follow the row order

    manifest = cluster_stage(
        scores2,
        str(tmp_path / "b" / "clusters"),
        CFG.model_copy(update={"refit": True}),
        previous_dir=str(tmp_path / "a" / "clusters"),
    )
    assert manifest.extra["refresh"]["path"] == "refit"
    assert manifest.extra["refresh"]["reason"] == "refit requested"
    assert _kept(before, _ids(tmp_path / "b" / "clusters")) == 1.0
    cold_c = np.load(tmp_path / "cold" / "clusters" / "centroids.npy")
    got_c = np.load(tmp_path / "b" / "clusters" / "centroids.npy")
    assert not np.array_equal(cold_c, got_c) and {tuple(r) for r in cold_c} == {tuple(r) for r in got_c}


def test_match_ids_inverts_a_permutation_and_gives_fresh_ids_to_new_clusters():
    rng = np.random.default_rng(0)
    old = rng.standard_normal((6, 5)) * 10
    perm = rng.permutation(6)
    new = old[perm] + rng.standard_normal((6, 5)) * 0.1
    np.testing.assert_array_equal(kmeans.match_ids(new, old), perm)  # new cluster i was old cluster perm[i]
    grown = np.concatenate([new[:3], [np.full(5, 100.0)], new[3:]])
    assert kmeans.match_ids(grown, old).tolist() == [*perm[:3], 6, *perm[3:]]
    shrunk = old[[5, 0, 2, 4]]  # ids 1 and 3 vanish; ids stay 0..3, so 5 and 4 move into the free 1 and 3
    assert kmeans.match_ids(shrunk, old).tolist() == [3, 0, 2, 1]
    with_empty = np.concatenate([new[:5], np.full((1, 5), np.nan)])
    assert kmeans.match_ids(with_empty, old).tolist() == perm.tolist()


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"new": 0.45}, "of the rows are new"),
        ({"cfg": {"refit_new_share": 0.01}}, "of the rows are new"),
        ({"noise": 1.0}, "mean squared distance"),
        ({"cfg": {"refit_inertia_change": 0.0001}, "noise": 0.05}, "mean squared distance"),
        ({"cfg": {"refit": True}}, "refit requested"),
        ({"cfg": {"num_clusters": K + 2}}, "K changed"),
        ({"cfg": {"pca_dim": 12}}, "feature space changed"),
        ({"cfg": {"normalize": False}}, "feature space changed"),
    ],
)
def test_thresholds_and_changes_trigger_a_refit(change, reason):
    x, centres = _data(3000, 4)
    x2, ids2 = _refresh(x, np.arange(3000), centres, 4, new=change.get("new", 0.05))
    x2 = x2 + np.random.default_rng(9).standard_normal(x2.shape).astype(np.float32) * change.get("noise", 0.0)
    rows_now = np.where(ids2 < 3000, ids2, -1)
    res = cluster_embeddings(x2, CFG.model_copy(update=change.get("cfg", {})), _previous(x, CFG, rows_now))
    assert res.refresh["path"] == "refit", res.refresh
    assert reason in res.refresh["reason"]
    assert res.k == len(res.centroids) and set(np.unique(res.labels)) == set(range(res.k))


def test_small_changes_stay_below_the_default_thresholds():
    x, centres = _data(3000, 4)
    x2, ids2 = _refresh(x, np.arange(3000), centres, 4, new=0.25)
    res = cluster_embeddings(x2, CFG, _previous(x, CFG, np.where(ids2 < 3000, ids2, -1)))
    assert res.refresh["path"] == "warm_start"
    assert 0.19 < res.refresh["new_share"] < 0.3 and res.refresh["inertia_change"] < 0.2


@pytest.mark.parametrize("refit", [False, True])
def test_refreshes_are_deterministic(refit):
    x, centres = _data(2000, 5)
    x2, ids2 = _refresh(x, np.arange(2000), centres, 5)
    cfg = CFG.model_copy(update={"refit": refit})
    prev = _previous(x, CFG, np.where(ids2 < 2000, ids2, -1))
    a, b = cluster_embeddings(x2, cfg, prev), cluster_embeddings(x2, cfg, prev)
    assert a.refresh == b.refresh and a.refresh["path"] == ("refit" if refit else "warm_start")
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.centroids, b.centroids)


def test_saved_projection_reproduces_the_features(tmp_path):
    x, _ = _data(1000, 6)
    cluster_stage(_scores(tmp_path / "s.parquet", np.arange(1000), x), str(tmp_path / "clusters"), CFG)
    d = tmp_path / "clusters"
    model = pca.load_pca(str(d / "pca_mean.npy"), str(d / "pca_components.npy"))
    feats = model.transform(x, row_scale=pca.row_scales(x))
    t = pq.read_table(d / "assignments.parquet")
    np.testing.assert_allclose(t.column("pc1").to_numpy(), feats[:, 0], atol=1e-6)
    np.testing.assert_allclose(t.column("pc2").to_numpy(), feats[:, 1], atol=1e-6)
    centroids = np.load(d / "centroids.npy")
    labels = t.column("cluster_id").to_numpy()
    means = np.stack([feats[labels == i].mean(axis=0) for i in range(K)])  # converged Lloyd: centre = mean
    np.testing.assert_allclose(centroids, means, atol=2e-3 * float(np.abs(feats).max()))
    np.testing.assert_allclose(
        np.linalg.norm(feats - centroids[labels], axis=1),
        t.column("distance_to_centroid").to_numpy(),
        rtol=1e-4,
        atol=1e-5,
    )


def test_unusable_previous_states_start_fresh_with_the_reason(tmp_path):
    x, _ = _data(1000, 7)
    scores = _scores(tmp_path / "s.parquet", np.arange(1000), x)
    m = cluster_stage(scores, str(tmp_path / "a" / "clusters"), CFG, previous_dir=str(tmp_path / "nowhere"))
    assert m.extra["refresh"] == {"path": "fresh", "reason": "no previous build"}  # no path: OUT-independent
    prev = tmp_path / "a" / "clusters"
    (prev / "pca_mean.npy").write_bytes((prev / "pca_mean.npy").read_bytes()[:-4] + b"\0\0\0\0")
    m = cluster_stage(scores, str(tmp_path / "b" / "clusters"), CFG, previous_dir=str(prev))
    assert m.extra["refresh"]["path"] == "fresh" and "was changed (pca_mean.npy)" in m.extra["refresh"]["reason"]
    stats = json.loads((tmp_path / "b" / "clusters" / "stats.json").read_text())
    for key in ("embedding_dim", "normalize", "pca"):  # as a build written before stable ids
        del stats[key]
    (tmp_path / "b" / "clusters" / "stats.json").write_text(json.dumps(stats))
    _rehash(tmp_path / "b" / "clusters", "stats", drop=("pca_mean", "pca_components"))
    m = cluster_stage(scores, str(tmp_path / "c" / "clusters"), CFG, previous_dir=str(tmp_path / "b" / "clusters"))
    assert "predates stable cluster ids" in m.extra["refresh"]["reason"]
    wider = np.concatenate([x, x[:, :4]], axis=1)
    prev_state = _previous(x, CFG, np.arange(1000))
    assert "embedding width changed (32 -> 36)" in cluster_embeddings(wider, CFG, prev_state).refresh["reason"]


def _rehash(d: Path, name: str, drop: tuple[str, ...] = ()) -> None:
    """Make the manifest agree with an edited file (and forget `drop`), as if the build had written them so."""
    manifest = json.loads((d / "manifest.json").read_text())
    manifest["outputs"][name]["sha256"] = storage.content_hash(manifest["outputs"][name]["uri"])
    for other in drop:
        del manifest["outputs"][other]
    (d / "manifest.json").write_text(json.dumps(manifest))


def test_a_whole_but_wrong_previous_state_fails_naming_the_file(tmp_path):
    x, _ = _data(1000, 8)
    scores = _scores(tmp_path / "s.parquet", np.arange(1000), x)
    cluster_stage(scores, str(tmp_path / "clusters"), CFG)
    d = tmp_path / "clusters"
    np.save(d / "centroids.npy", np.zeros((K - 1, 16), np.float32))
    _rehash(d, "centroids")
    with pytest.raises(ValueError, match=r"centroids\.npy: expected finite centroids of shape \(8, 16\)"):
        cluster_stage(scores, str(tmp_path / "clusters"), CFG, previous_dir=str(d))


def test_without_pca_the_state_is_the_centroids_and_stale_pca_files_go(tmp_path):
    x, centres = _data(2000, 9)
    ids = np.arange(2000)
    cluster_stage(_scores(tmp_path / "s1.parquet", ids, x), str(tmp_path / "clusters"), CFG)
    d = tmp_path / "clusters"
    no_pca = CFG.model_copy(update={"pca_dim": None})
    x2, ids2 = _refresh(x, ids, centres, 9)
    scores2 = _scores(tmp_path / "s2.parquet", ids2, x2)
    m = cluster_stage(scores2, str(tmp_path / "clusters"), no_pca, previous_dir=str(d))
    assert m.extra["refresh"]["path"] == "refit" and "feature space" in m.extra["refresh"]["reason"]
    assert not (d / "pca_mean.npy").exists() and not (d / "pca_components.npy").exists()
    assert set(m.outputs) == {"assignments", "centroids", "stats"}
    before = _ids(d)
    x3, ids3 = _refresh(x2, ids2, centres, 10)
    m = cluster_stage(
        _scores(tmp_path / "s3.parquet", ids3, x3), str(tmp_path / "clusters"), no_pca, previous_dir=str(d)
    )
    assert m.extra["refresh"]["path"] == "warm_start" and _kept(before, _ids(d)) >= 0.95


def test_an_in_place_refresh_that_died_mid_write_reruns_from_the_same_state(tmp_path, monkeypatch):
    x, centres = _data(2000, 11)
    ids = np.arange(2000)
    d = tmp_path / "clusters"
    cluster_stage(_scores(tmp_path / "s1.parquet", ids, x), str(tmp_path / "clusters"), CFG)
    x2, ids2 = _refresh(x, ids, centres, 11, new=0.1)
    scores2 = _scores(tmp_path / "s2.parquet", ids2, x2)
    clean = tmp_path / "clean"
    clean.mkdir()
    for f in d.iterdir():
        (clean / f.name).write_bytes(f.read_bytes())
    expected = cluster_stage(scores2, str(tmp_path / "ref" / "clusters"), CFG, previous_dir=str(clean))

    def die(*_: object) -> None:
        raise KeyboardInterrupt("killed")  # after assignments and centroids were overwritten

    monkeypatch.setattr(pca, "save_pca", die)
    with pytest.raises(KeyboardInterrupt):
        cluster_stage(scores2, str(tmp_path / "clusters"), CFG, previous_dir=str(d))
    monkeypatch.undo()
    assert (d / "previous" / "manifest.json").exists()
    rerun = cluster_stage(scores2, str(tmp_path / "clusters"), CFG, previous_dir=str(d))
    assert rerun.extra["refresh"]["path"] == expected.extra["refresh"]["path"] == "warm_start"
    assert _ids(d) == _ids(tmp_path / "ref" / "clusters")
    ref_centroids = np.load(tmp_path / "ref" / "clusters" / "centroids.npy")
    np.testing.assert_array_equal(np.load(d / "centroids.npy"), ref_centroids)
