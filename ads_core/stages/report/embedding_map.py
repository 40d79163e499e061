"""The 2-D map of the embeddings in the build report: t-SNE on a PCA-reduced, seeded sample.

As the ADS reference's visual script: L2-normalise, PCA to 50 dimensions (randomized, seeded), then t-SNE
(2-D, cosine metric, PCA init, automatic learning rate, seeded). Everything runs on one thread, because
Barnes-Hut's sums are reduced across threads in no fixed order and the report must be byte-identical
for the same input. Only the sampled rows' embeddings are kept while the scores file is read.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ads_core import storage

PCA_DIMS = 50
_READ_BATCH = 16_384


def sample_ids(ids: np.ndarray, size: int, seed: int) -> np.ndarray:
    """A seeded sample of `size` sample_ids (all when there are fewer), sorted; independent of row order."""
    ordered = np.sort(np.asarray(ids))
    if len(ordered) <= size:
        return ordered
    return np.sort(np.random.default_rng(seed).choice(ordered, size=size, replace=False))


def read_embeddings(scores_uri: str, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(sample_ids, [n, hidden] float32) of the rows of `ids` in the scores file, in sample_id order."""
    wanted = pa.array(ids)
    keep_ids: list[np.ndarray] = []
    keep_emb: list[np.ndarray] = []
    fs, path = storage.get_fs(scores_uri)
    with fs.open(path, "rb") as fh:
        parquet = pq.ParquetFile(fh)
        names = set(parquet.schema_arrow.names)
        if not {"sample_id", "embedding"} <= names:
            raise ValueError(f"{scores_uri}: a scores file needs sample_id and embedding columns, has {sorted(names)}")
        for batch in parquet.iter_batches(batch_size=_READ_BATCH, columns=["sample_id", "embedding"]):
            picked = batch.filter(pc.is_in(batch.column("sample_id"), value_set=wanted))
            if picked.num_rows:
                emb = picked.column("embedding")
                width = emb.type.list_size
                keep_ids.append(picked.column("sample_id").to_numpy())
                keep_emb.append(emb.values.to_numpy(zero_copy_only=False).reshape(-1, width))
    if not keep_ids:
        return np.asarray(ids[:0]), np.zeros((0, 2), np.float32)
    found, emb = np.concatenate(keep_ids), np.concatenate(keep_emb).astype(np.float32, copy=False)
    order = np.argsort(found, kind="stable")
    return found[order], emb[order]


def tsne_map(embeddings: np.ndarray, perplexity: float, iterations: int, seed: int) -> tuple[np.ndarray, str]:
    """[n, 2] map coordinates and how they were made ("t-SNE" or, below 5 rows, "PCA")."""
    from sklearn.decomposition import PCA
    from sklearn.manifold import TSNE
    from threadpoolctl import threadpool_limits

    x = np.asarray(embeddings, np.float64)
    n = len(x)
    if n < 2:
        return np.zeros((n, 2)), "PCA"
    x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-12)
    with threadpool_limits(limits=1):
        dims = min(PCA_DIMS, x.shape[1], n - 1)
        features = PCA(n_components=dims, svd_solver="randomized", random_state=seed).fit_transform(x)
        if n < 5 or dims < 2:
            return _pad2(features), "PCA"
        metric = "cosine" if np.all(np.linalg.norm(features, axis=1) > 1e-9) else "euclidean"
        tsne = TSNE(
            n_components=2,
            perplexity=min(perplexity, (n - 1) / 3),
            max_iter=iterations,
            metric=metric,
            init="pca",
            learning_rate="auto",
            random_state=seed,
        )
        return tsne.fit_transform(features.astype(np.float32)), "t-SNE"


def _pad2(features: np.ndarray) -> np.ndarray:
    out = np.zeros((len(features), 2))
    out[:, : min(2, features.shape[1])] = features[:, :2]
    return out


def palette(cluster_ids: list[int]) -> dict[int, Any]:
    """A colour per cluster, shared by every picture: tab20, tab20b, tab20c, then evenly spaced hues."""
    import matplotlib

    colors = [c for name in ("tab20", "tab20b", "tab20c") for c in matplotlib.colormaps[name].colors]
    ids = sorted(cluster_ids)
    if len(ids) > len(colors):
        hsv = matplotlib.colormaps["hsv"]
        colors += [hsv(i / (len(ids) - len(colors))) for i in range(len(ids) - len(colors))]
    return {int(c): tuple(float(v) for v in colors[i]) for i, c in enumerate(ids)}
