"""Row checks, L2 normalisation and PCA for the cluster stage, in row chunks.

PCA: the mean is taken over all rows; the covariance (d x d) is accumulated in row chunks from a seeded
sample of `pca_sample` rows (all rows when there are fewer), each chunk centred before an fp32 GEMM and
summed in float64; then the top components come from a partial symmetric eigendecomposition. That is
exact on small data and, for d <= a few thousand, cheaper than randomized SVD over all rows.
Normalisation is folded into the chunked passes (one scale per row), so no N x d temporaries are made
besides the N x pca_dim features, and memory stays near the size of the embeddings.

A fitted model is saved as two plain .npy arrays (`save_pca` / `load_pca`: mean [d], components [k, d];
no pickle), so a later build can project new embeddings into the same space.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ads_core import storage

_CHUNK_BYTES = 32 << 20  # float32 bytes per row chunk in the streaming passes


def chunk_rows(d: int) -> int:
    """Rows per chunk so that one chunk of `d` float32 columns is about 32 MiB."""
    return max(1024, _CHUNK_BYTES // (4 * max(int(d), 1)))


def row_scales(x: np.ndarray, normalize: bool = True) -> np.ndarray | None:
    """Check that every value is finite (chunked); return 1 / max(||x_i||, 1e-12) per row when normalising.

    Raises ValueError naming the first bad row when any value is NaN or infinite.
    """
    n, d = x.shape
    step = chunk_rows(d)
    scales = np.empty(n, dtype=np.float32) if normalize else None
    for s in range(0, n, step):
        block = x[s : s + step]
        sq = np.einsum("ij,ij->i", block, block)
        bad = ~np.isfinite(sq)
        if bad.any():  # NaN/inf somewhere, or a finite row whose fp32 squared norm overflowed
            rows = np.flatnonzero(bad)
            finite = np.isfinite(block[rows]).all(axis=1)
            if not finite.all():
                first = s + int(rows[np.argmin(finite)])
                raise ValueError(
                    f"embeddings contain NaN or inf (first at row {first}); cannot cluster them. "
                    "Check the scoring stage's output."
                )
            sq = sq.astype(np.float64)
            sq[rows] = np.einsum("ij,ij->i", block[rows].astype(np.float64), block[rows].astype(np.float64))
        if scales is not None:
            scales[s : s + step] = 1.0 / np.maximum(np.sqrt(sq), 1e-12)
    return scales


def l2_normalize(x: np.ndarray, scales: np.ndarray | None = None) -> np.ndarray:
    """Row-wise L2-normalised float32 copy (norms clamped to >= 1e-12), written in chunks."""
    scales = row_scales(x) if scales is None else scales
    out = np.empty(x.shape, dtype=np.float32)
    step = chunk_rows(x.shape[1])
    for s in range(0, x.shape[0], step):
        np.multiply(x[s : s + step], scales[s : s + step, None], out=out[s : s + step])
    return out


def _centred_chunk(x: np.ndarray, rows: slice | np.ndarray, scales: np.ndarray | None, mean: np.ndarray) -> np.ndarray:
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
        step = chunk_rows(x.shape[1])
        for s in range(0, x.shape[0], step):
            y = out[s : s + step]
            np.matmul(np.asarray(x[s : s + step], dtype=np.float32), comps_t, out=y)
            if row_scale is not None:
                y *= row_scale[s : s + step, None]
            y -= shift
        return out


def fit_pca(
    x: np.ndarray, dim: int, *, sample: int | None = None, seed: int = 0, row_scale: np.ndarray | None = None
) -> PCAModel:
    """PCA from the chunked covariance; components have a deterministic sign (largest |loading| positive,
    as scikit-learn's). The mean uses all rows; the covariance uses a seeded sample of `sample` rows when
    there are more (None = all rows, then the result is exact). `row_scale` multiplies row i first."""
    n, d = x.shape
    dim = min(dim, d)
    step = chunk_rows(d)
    mean64 = np.zeros(d, dtype=np.float64)
    for s in range(0, n, step):
        block = x[s : s + step]
        mean64 += (row_scale[s : s + step] @ block) if row_scale is not None else block.sum(axis=0, dtype=np.float64)
    mean64 /= max(n, 1)
    mean = mean64.astype(np.float32)
    rows = None
    if sample and n > sample:
        rows = np.sort(np.random.default_rng(seed).choice(n, sample, replace=False))
    m = n if rows is None else len(rows)
    cov = np.zeros((d, d), dtype=np.float64)
    for s in range(0, m, step):
        block = _centred_chunk(x, slice(s, s + step) if rows is None else rows[s : s + step], row_scale, mean)
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


def save_npy(uri: str, array: np.ndarray) -> None:
    """np.save to any storage URI, atomically, never pickling."""
    with storage.atomic_local_file(uri, ".npy") as tmp:
        np.save(tmp, array, allow_pickle=False)


def load_npy(uri: str) -> np.ndarray:
    """np.load from any storage URI; object arrays (which would need pickle) are refused."""
    import io

    try:
        return np.load(io.BytesIO(storage.read_bytes(uri)), allow_pickle=False)
    except ValueError as exc:
        raise ValueError(f"{uri}: not a plain numeric .npy array ({exc})") from exc


def save_pca(mean_uri: str, components_uri: str, pca: PCAModel) -> None:
    save_npy(mean_uri, np.asarray(pca.mean, dtype=np.float32))
    save_npy(components_uri, np.asarray(pca.components, dtype=np.float32))


def load_pca(mean_uri: str, components_uri: str) -> PCAModel:
    """A saved projection (mean, components); the variance figures are not kept, only what transform needs."""
    mean, comps = load_npy(mean_uri), load_npy(components_uri)
    if mean.ndim != 1 or comps.ndim != 2 or comps.shape[1] != mean.shape[0]:
        raise ValueError(
            f"{components_uri}: PCA components of shape {comps.shape} do not fit the mean of shape "
            f"{mean.shape} in {mean_uri}"
        )
    return PCAModel(mean.astype(np.float32), comps.astype(np.float32), np.full(len(comps), np.nan))
