"""GPU checks run by bench/gpu_validate.sh; each prints one summary line `<check>: ok|FAIL ...`.

    python bench/gpu_checks.py fused --model DIR [--rows 500]   # fused scorer bf16 tokens/s, padded vs packed
    python bench/gpu_checks.py kmeans [--n 100000]              # cuML vs scikit-learn K-Means agreement
    python bench/gpu_checks.py --smoke                           # CPU only: arguments, imports, data (CI)

fused: the transformers scorer in bf16 on cuda over MATH-500 + GSM8K rows, once with padded batches and once
packed (flash-attention varlen when flash-attn is installed, which `TransformersScorer.load` then selects; else
SDPA with the block-diagonal mask), with the agreement of the two (cosine, max |dNLL|, Spearman).
kmeans: `cluster_embeddings` with backend sklearn and cuml on the same synthetic blobs (bench/kmeans.py):
adjusted Rand index between the labelings and the ratio of their K-Means objectives.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def fused(model: str, n: int) -> bool:
    import torch
    from embed_nll import agreement, load_rows

    from ads_core.config.build import ScoreConfig
    from ads_core.stages.score.scorer import tokenize_row
    from ads_core.stages.score.transformers_scorer import TransformersScorer

    with tempfile.TemporaryDirectory(prefix="ads-gpu-") as tmp:
        raw = load_rows(n, Path(tmp))
    results = {}
    for packing in ("off", "on"):
        cfg = ScoreConfig(model=model, device="cuda", dtype="bfloat16", packing=packing, max_length=2048)
        scorer, tok = TransformersScorer.load(cfg)
        rows = [tokenize_row(tok, r["question"], r["solution"], r["answer"], cfg) for r in raw]
        scorer.score(rows[:64])  # warm-up
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        res = scorer.score(rows)
        torch.cuda.synchronize()
        results[packing] = (res, time.perf_counter() - t0, scorer.model.config._attn_implementation, scorer.packing)
        del scorer
        torch.cuda.empty_cache()
    (pad, t_pad, attn_pad, _), (pk, t_pk, attn_pk, packed) = results["off"], results["on"]
    tokens = int(pad.n_tokens.sum())
    cos, dnll, rho = agreement(pk, pad)
    ok = cos >= 0.999 and dnll <= 0.02 and rho >= 0.999 and packed
    print(
        f"fused-bf16: {'ok' if ok else 'FAIL'} rows={len(pad.n_tokens)} tokens={tokens} "
        f"padded_tok_s={tokens / t_pad:.0f} (pad {pad.stats['padding_fraction']:.1%}, {attn_pad}) "
        f"packed_tok_s={tokens / t_pk:.0f} (pad {pk.stats['padding_fraction']:.1%}, {attn_pk}) "
        f"speedup={t_pad / t_pk:.2f}x cos_min={cos:.6f} max_dnll={dnll:.2e} spearman={rho:.5f}"
    )
    return ok


def kmeans(n: int, k: int = 32, dim: int = 512) -> bool:
    from kmeans import make_blobs, partition_inertia
    from sklearn.metrics import adjusted_rand_score

    from ads_core.config.build import ClusterConfig
    from ads_core.stages.cluster.fit import cluster_embeddings

    x, truth = make_blobs(n, dim, k, seed=0)
    out = {}
    for backend in ("sklearn", "cuml"):
        t0 = time.perf_counter()
        res = cluster_embeddings(x, ClusterConfig(num_clusters=k, backend=backend))
        out[backend] = (res.labels, time.perf_counter() - t0)
    (sk, t_sk), (cu, t_cu) = out["sklearn"], out["cuml"]
    ari = adjusted_rand_score(sk, cu)
    ratio = partition_inertia(x, cu, k) / partition_inertia(x, sk, k)
    ok = ari >= 0.95 and abs(ratio - 1) <= 0.01
    print(
        f"kmeans-cuml-sklearn: {'ok' if ok else 'FAIL'} ARI={ari:.4f} inertia_cuml/sklearn={ratio:.5f} "
        f"ARI_vs_truth sklearn={adjusted_rand_score(truth, sk):.4f} cuml={adjusted_rand_score(truth, cu):.4f} "
        f"seconds sklearn={t_sk:.1f} cuml={t_cu:.1f}"
    )
    return ok


def smoke() -> int:
    """What the checks need besides a GPU: every name they import, the rows `fused` reads, the blobs `kmeans` makes
    and the sklearn side of its comparison, at tiny sizes; so a refactor that breaks them fails CI, not the GPU run."""
    from embed_nll import agreement, load_rows  # noqa: F401
    from kmeans import make_blobs, partition_inertia

    from ads_core.config.build import ClusterConfig, ScoreConfig  # noqa: F401
    from ads_core.stages.cluster.fit import cluster_embeddings
    from ads_core.stages.score.scorer import tokenize_row  # noqa: F401
    from ads_core.stages.score.transformers_scorer import TransformersScorer  # noqa: F401

    with tempfile.TemporaryDirectory(prefix="ads-gpu-smoke-") as tmp:
        rows = load_rows(1, Path(tmp))
    x, _ = make_blobs(400, 16, 4, seed=0)
    res = cluster_embeddings(x, ClusterConfig(num_clusters=4, backend="sklearn"))
    print(
        f"smoke: {len(rows)} rows read, sklearn K-Means on 400 x 16: inertia {partition_inertia(x, res.labels, 4):.1f}"
    )
    print("smoke: skipped the GPU part (fused needs cuda, kmeans needs cuML): run on a GPU node without --smoke")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("check", nargs="?", choices=["fused", "kmeans"])
    ap.add_argument("--model", default=None)
    ap.add_argument("--rows", type=int, default=500, help="fused: rows from each of MATH-500 and GSM8K")
    ap.add_argument("--n", type=int, default=100_000, help="kmeans: rows")
    ap.add_argument("--smoke", action="store_true", help="CPU only: imports, data and the sklearn side (CI)")
    args = ap.parse_args()
    if args.smoke:
        return smoke()
    if args.check is None:
        ap.error("name a check: fused or kmeans (or --smoke)")
    if args.check == "fused":
        if not args.model:
            ap.error("fused needs --model")
        return 0 if fused(args.model, args.rows) else 1
    return 0 if kmeans(args.n) else 1


if __name__ == "__main__":
    raise SystemExit(main())
