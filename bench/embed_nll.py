"""Fused embed+NLL scorer vs the reference's two separate passes, on the same model and the same real rows.

    .venv/bin/python bench/embed_nll.py [--model DIR] [--rows 64] [--threads 2] [--token-budget N] [--smoke]

Rows: the first `--rows` problems of each of MATH-500 and GSM8K (test) from ../shared/data (without that folder:
the packaged MATH-500 and the bundled GSM8K sample), formatted with `ads_core.ingest.convert.format_dataset`
into a temp dir and tokenised once with `ads_core.stages.score.scorer.tokenize_row`, so both paths see exactly the
same token ids. Model: the locally built "bench" preset (~47M params, Qwen2 style, cached under the ADS cache dir;
nothing is downloaded) unless `--model` is given. fp32, CPU. `--smoke` (what the test suite runs): the tiny model,
2 rows per set, seconds.

(a) fused: `TransformersScorer.score` (one forward per row: mean-pooled embedding + solution-token NLL,
    LM head at solution positions only, length-sorted token-budget batches).
(b) reference (ads_spec phases 1 and 4): `AutoModel`, rows in their given order in right-padded batches
    of 16, mask-mean of `last_hidden_state` in the model dtype; then `AutoModelForCausalLM` one row per
    forward with full-vocabulary logits, token-mean cross-entropy over the solution tokens.
Both run under `torch.inference_mode()` with `torch.set_num_threads(--threads)`, back to back.

tokens/s counts real (non-pad) tokens of the rows, once per row, divided by the wall time of the path
(for the reference: both passes). FLOP formula (forward, multiply-add = 2 FLOPs, pads not counted):
    useful = sum over rows of [2 * P_ne * L + 2 * n_layer * d_attn * L^2] + 2 * V * d * T
where P_ne = weights of the decoder layers' linear maps (q, k, v, o, gate, up, down; no embeddings, norms,
or LM head), L = row length, d_attn = heads * head_dim (QK^T and AV, causal half), V = vocab, d = hidden,
T = scored solution tokens. This is the work the outputs need; it is the same for both paths, so its
rate is what is compared with the measured fp32 `torch.matmul` peak (best of large square matrices).
The reference actually executes more (a second backbone pass and the LM head at every position); that
figure is printed too.

The box is shared: "other CPU" is the CPU time other processes used during a phase, in cores, from
/proc/stat minus this process's own time. With 2 cores, any neighbour load slows both paths a lot.
Then the dtype and the packing: the fused scorer in the dtype `dtype=auto` resolves to on this machine (bf16 with
AMX; fp32 without native bf16; else bf16 only where a timed matmul at the model's shape says it is > 10% faster,
`ads_core.models.dtype`), and why; its tokens/s against fp32 in `--dtype-rounds` interleaved rounds (the best of
each counts, so a neighbour's load hits both alike), and its agreement with fp32 (min embedding cosine, max
|dNLL|, Spearman of the difficulties; targets 0.9999 / 0.01 / 0.999, and auto not slower than fp32); and the same
dtype with `packing=on` (rows end to end, block-diagonal mask) against padded batches.
The last line is the speed-up (reference time / fused time).
"""

from __future__ import annotations

import argparse
import itertools
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402
from cpu_load import busy_cpu as _busy_cpu  # noqa: E402
from cpu_load import own_cpu as _own_cpu  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DATASETS = ("math500", "gsm8k")
REF_EMBED_BATCH = 16


class CpuMeter:
    """Wall time, this process's CPU time and the other processes' CPU time over a phase."""

    def __enter__(self) -> CpuMeter:
        self.t0, self.own0, self.busy0 = time.perf_counter(), _own_cpu(), _busy_cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.t0
        own, busy = _own_cpu() - self.own0, _busy_cpu() - self.busy0
        self.other_cores = max(0.0, busy - own) / self.seconds if self.seconds > 0 else 0.0


def source_file(name: str) -> Path:
    """The real test set in ../shared/data, else the copy that ships with the package (MATH-500) or the bundled
    GSM8K sample, so the bench runs on a clean checkout with no folder beside it."""
    if (DATA / name / "test.jsonl").is_file():
        return DATA / name / "test.jsonl"
    from ads_core.common import defaults
    from ads_core.evaluation.sets.catalog import packaged_data_dir

    return Path(defaults.sample_path()) if name == "gsm8k" else packaged_data_dir() / name / "test.jsonl"


def load_rows(rows_per_set: int, workdir: Path) -> list[dict]:
    from ads_core import storage
    from ads_core.config.build import FormatConfig
    from ads_core.ingest.convert import format_dataset

    out: list[dict] = []
    for name in DATASETS:
        src = workdir / f"{name}.jsonl"
        with open(source_file(name), encoding="utf-8") as fh, open(src, "w", encoding="utf-8") as dst:
            dst.writelines(itertools.islice(fh, rows_per_set))
        manifest = format_dataset(str(src), str(workdir / name), FormatConfig(name=name))
        out.extend(storage.read_parquet(manifest.output_uri("train"), ["extra_info"]).column(0).to_pylist())
    return out


def matmul_flops(threads: int, sizes: tuple[int, ...] = (2048, 3072, 4096), reps: int = 3) -> tuple[float, int]:
    """Best fp32 torch.matmul rate over large square matrices (FLOP/s, size)."""
    import torch

    best, best_n = 0.0, 0
    for n in sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        torch.matmul(a, b)  # warm-up
        for _ in range(reps):
            t0 = time.perf_counter()
            torch.matmul(a, b)
            rate = 2 * n**3 / (time.perf_counter() - t0)
            if rate > best:
                best, best_n = rate, n
    return best, best_n


def model_shape(model) -> dict[str, int]:
    cfg = model.config
    layers = model.base_model.layers
    p_ne = sum(p.numel() for p in layers.parameters() if p.dim() == 2)
    head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    return {
        "p_ne": p_ne,
        "p_total": sum(p.numel() for p in model.parameters()),
        "n_layer": cfg.num_hidden_layers,
        "d_attn": cfg.num_attention_heads * head_dim,
        "hidden": cfg.hidden_size,
        "vocab": model.get_output_embeddings().weight.shape[0],
    }


def forward_flops(shape: dict[str, int], lengths: np.ndarray, lm_positions: int) -> float:
    lengths = lengths.astype(np.float64)
    backbone = 2 * shape["p_ne"] * lengths.sum() + 2 * shape["n_layer"] * shape["d_attn"] * (lengths**2).sum()
    return float(backbone + 2 * shape["vocab"] * shape["hidden"] * lm_positions)


def reference_embed(base_model, rows, pad_id: int) -> np.ndarray:
    """Phase 1 of the reference: right-padded batches of 16 in row order, mask-mean in the model dtype."""
    import torch

    out = []
    for s in range(0, len(rows), REF_EMBED_BATCH):
        batch = rows[s : s + REF_EMBED_BATCH]
        width = max(len(r.input_ids) for r in batch)
        ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for j, r in enumerate(batch):
            ids[j, : len(r.input_ids)] = torch.tensor(r.input_ids)
            mask[j, : len(r.input_ids)] = 1
        states = base_model(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state
        m = mask.unsqueeze(-1).to(states.dtype)
        emb = (states * m).sum(1) / m.sum(1).clamp(min=1e-6)
        out.append(emb.float().numpy())
    return np.concatenate(out)


def reference_nll(causal_lm, rows) -> np.ndarray:
    """Phase 4 of the reference: one row per forward, full-vocabulary logits, token-mean CE on the solution."""
    import torch

    out = np.empty(len(rows), dtype=np.float64)
    for i, r in enumerate(rows):
        ids = torch.tensor([r.input_ids])
        logits = causal_lm(input_ids=ids, use_cache=False).logits[0]
        p, n = r.prompt_len, len(r.input_ids)
        out[i] = torch.nn.functional.cross_entropy(logits[p - 1 : n - 1], ids[0, p:n]).item()
    return out


def agreement(a_res, b_res) -> tuple[float, float, float]:
    """(min embedding cosine, max |dNLL|, Spearman of the difficulties) between two scorer results."""
    from scipy.stats import spearmanr

    a, b = a_res.embeddings.astype(np.float64), b_res.embeddings.astype(np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    dnll = np.abs(a_res.difficulty - b_res.difficulty)
    return float(cos.min()), float(dnll.max()), float(spearmanr(a_res.difficulty, b_res.difficulty).statistic)


def auto_reason(model_dir: str) -> str:
    """Why `auto` is what it is on this CPU (ads_core.models.dtype): AMX, no native bf16, or the cached timing."""
    from ads_core import models
    from ads_core.models import dtype

    flags = models.cpu_flags()
    native = sorted(f for f in flags if f in (*dtype.AMX_FLAGS, *dtype.MEASURED_FLAGS))
    hidden = dtype.hidden_size(model_dir) or dtype.DEFAULT_HIDDEN
    if any(f in flags for f in dtype.AMX_FLAGS):
        m = dtype.measure(hidden)  # not used by auto (AMX is bf16): printed so the rule can be checked here
        return f"AMX ({', '.join(native)}); for reference, {timing(m)}"
    if not native:
        return "no native bf16"
    return f"{timing(dtype.measured_choice(hidden))}; cached in {dtype.cache_file()}"


def timing(m: dict) -> str:
    from ads_core.models import dtype

    return (
        f"linear 256 x {m['hidden']} x {4 * m['hidden']}: fp32 {m['float32_s'] * 1e3:.2f} ms, bf16 "
        f"{m['bfloat16_s'] * 1e3:.2f} ms (best rounds) = bf16 {m['bf16_speedup']:.2f}x fp32, bf16 won "
        f"{m['bf16_rounds_won']} rounds (bf16 needs > {dtype.MARGIN:.2f}x and {dtype.MIN_WINS:.0%} of the rounds)"
    )


def dtype_and_packing(model_dir: str, cfg, rows, fp32, real: int, rounds: int) -> None:
    """The fused scorer in the auto dtype vs fp32 (interleaved rounds: a neighbour's load hits both alike; each
    dtype's best round counts), then packed vs padded in that dtype."""
    import torch

    from ads_core import models
    from ads_core.stages.score.transformers_scorer import TransformersScorer

    name = models.dtype_name("cpu", "auto", model_dir)
    reason = auto_reason(model_dir)
    scorers = {}
    for label, dtype, packing in (("fp32", "float32", "off"), ("auto", "auto", "off"), ("packed", "auto", "on")):
        loaded = models.load_causal_lm(model_dir, "cpu", dtype)
        scorers[label] = TransformersScorer(loaded.model, cfg.model_copy(update={"dtype": dtype, "packing": packing}))
        with torch.inference_mode():
            scorers[label].score(rows[:4])  # warm-up
    best: dict[str, tuple[float, object, CpuMeter]] = {}
    for _ in range(rounds):
        for label in ("fp32", "auto"):
            with CpuMeter() as meter:
                res = scorers[label].score(rows)
            if label not in best or meter.seconds < best[label][0]:
                best[label] = (meter.seconds, res, meter)
    with CpuMeter() as m_packed:
        packed = scorers["packed"].score(rows)
    (t_fp32, _, m_fp32), (t_auto, auto, m_auto) = best["fp32"], best["auto"]
    cos, dnll, rho = agreement(auto, fp32)
    ratio = t_fp32 / t_auto
    print(f"dtype auto -> {name} ({reason})")
    print(
        f"auto vs fp32 (best of {rounds} interleaved rounds): auto {t_auto:.2f} s {real / t_auto:.0f} tok/s, fp32 "
        f"{t_fp32:.2f} s {real / t_fp32:.0f} tok/s = {ratio:.2f}x; other CPU {m_auto.other_cores:.2f} / "
        f"{m_fp32.other_cores:.2f} cores"
    )
    print(f"auto vs fp32: min embedding cosine {cos:.6f}, max |dNLL| {dnll:.2e}, Spearman {rho:.5f}")
    checks = {
        "cosine >= 0.9999": cos >= 0.9999,
        "|dNLL| <= 0.01": dnll <= 0.01,
        "Spearman >= 0.999": rho >= 0.999,
        "auto not slower than fp32 (>= 0.95x)": ratio >= 0.95,
    }
    print("dtype     : " + ", ".join(f"{k}: {'ok' if v else 'MISSED'}" for k, v in checks.items()))
    pcos, pdnll, _ = agreement(packed, auto)
    print(
        f"packing ({name}): packed {m_packed.seconds:.2f} s {real / m_packed.seconds:.0f} tok/s, padding "
        f"{packed.stats['padding_fraction']:.1%}; padded {t_auto:.2f} s {real / t_auto:.0f} tok/s, "
        f"padding {auto.stats['padding_fraction']:.1%}; packed/padded speed {t_auto / m_packed.seconds:.2f}x;"
        f" agreement cosine {pcos:.6f}, max |dNLL| {pdnll:.2e}"
    )
    print(f"auto / fp32 speed: {ratio:.2f}x")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="model dir or hub id (default: the local 'bench' preset)")
    ap.add_argument("--rows", type=int, default=64, help="rows taken from each of MATH-500 and GSM8K")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--max-length", type=int, default=2048)
    ap.add_argument("--token-budget", type=int, default=None, help="override ScoreConfig.token_budget")
    ap.add_argument("--no-dtype", action="store_true", help="skip the auto-dtype and packing comparisons")
    ap.add_argument("--dtype-rounds", type=int, default=3, help="interleaved auto/fp32 rounds (the best counts)")
    ap.add_argument("--smoke", action="store_true", help="seconds: the tiny model, 2 rows per set (checks it runs)")
    args = ap.parse_args()
    if args.smoke:  # the test suite runs this, so a refactor that breaks the bench fails CI
        args.model, args.rows, args.max_length = args.model or "default", 2, 256

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    from ads_core import models
    from ads_core.config.build import ScoreConfig
    from ads_core.stages.score.scorer import tokenize_row
    from ads_core.stages.score.transformers_scorer import TransformersScorer

    torch.set_num_threads(args.threads)
    model_dir = models.resolve_model(args.model or "bench")
    cfg = ScoreConfig(model=model_dir, max_length=args.max_length, device="cpu", dtype="float32")
    if args.token_budget:
        cfg.token_budget = args.token_budget
    print(
        f"load (uptime): {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f}; "
        f"threads {torch.get_num_threads()}; cpu {torch.backends.cpu.get_cpu_capability()}"
    )

    with tempfile.TemporaryDirectory(prefix="ads-bench-") as tmp:
        raw = load_rows(args.rows, Path(tmp))
    loaded = models.load_causal_lm(model_dir, "cpu", "float32")
    tokenizer = loaded.tokenizer
    rows = [tokenize_row(tokenizer, r["question"], r["solution"], r["answer"], cfg) for r in raw]
    lengths = np.array([len(r.input_ids) for r in rows])
    targets = np.array([len(r.input_ids) - r.prompt_len for r in rows])
    shape = model_shape(loaded.model)
    print(
        f"model {model_dir}: {shape['p_total'] / 1e6:.1f}M params, {shape['p_ne'] / 1e6:.1f}M non-embedding, "
        f"{shape['n_layer']} layers, hidden {shape['hidden']}, vocab {shape['vocab']}"
    )
    print(
        f"rows {len(rows)} ({', '.join(DATASETS)}: {args.rows} each), tokens {lengths.sum()} "
        f"(mean {lengths.mean():.0f}, max {lengths.max()}), solution tokens {targets.sum()}, "
        f"truncated {sum(r.truncated for r in rows)}"
    )

    ref_base = AutoModel.from_pretrained(model_dir, dtype=torch.float32).eval()
    ref_lm = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    scorer = TransformersScorer(loaded.model, cfg)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id

    with torch.inference_mode():  # warm-up both paths (oneDNN/SDPA first-call costs)
        scorer.score(rows[:4])
        reference_embed(ref_base, rows[:4], pad_id)
        reference_nll(ref_lm, rows[:2])

    with CpuMeter() as m_fused:
        fused = scorer.score(rows)
    with torch.inference_mode():
        with CpuMeter() as m_emb:
            ref_emb = reference_embed(ref_base, rows, pad_id)
        with CpuMeter() as m_nll:
            ref_nll = reference_nll(ref_lm, rows)
    with CpuMeter() as m_mm:
        peak, peak_n = matmul_flops(args.threads, (256,) if args.smoke else (2048, 3072, 4096))

    real = int(lengths.sum())
    t_fused, t_ref = m_fused.seconds, m_emb.seconds + m_nll.seconds
    useful = forward_flops(shape, lengths, int(targets.sum()))
    ref_exec = forward_flops(shape, lengths, real) + forward_flops(shape, lengths, 0)
    a = fused.embeddings.astype(np.float64)
    b = ref_emb.astype(np.float64)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    dnll = np.abs(fused.difficulty - ref_nll)
    speedup = t_ref / t_fused
    frac = useful / t_fused / peak

    print(
        f"fp32 matmul peak: {peak / 1e9:.1f} GFLOP/s (torch.matmul {peak_n}x{peak_n}, best of 3; "
        f"other CPU {m_mm.other_cores:.2f} cores)"
    )
    print(
        f"fused     : {t_fused:7.2f} s  {real / t_fused:8.0f} tok/s  padding {fused.stats['padding_fraction']:.1%}  "
        f"other CPU {m_fused.other_cores:.2f} cores"
    )
    print(
        f"reference : {t_ref:7.2f} s  {real / t_ref:8.0f} tok/s  (embed bs16 {m_emb.seconds:.2f} s = "
        f"{real / m_emb.seconds:.0f} tok/s, other CPU {m_emb.other_cores:.2f}; NLL bs1 full logits "
        f"{m_nll.seconds:.2f} s = {real / m_nll.seconds:.0f} tok/s, other CPU {m_nll.other_cores:.2f})"
    )
    print(
        "FLOPs = sum over rows of (2*P_ne*L + 2*n_layer*d_attn*L^2) + 2*V*hidden*(scored solution tokens); "
        f"P_ne={shape['p_ne']}, n_layer={shape['n_layer']}, d_attn={shape['d_attn']}, V={shape['vocab']}"
    )
    print(
        f"useful forward FLOPs {useful / 1e12:.3f} TFLOP: fused {useful / t_fused / 1e9:.1f} GFLOP/s = "
        f"{frac:.1%} of matmul peak; reference {useful / t_ref / 1e9:.1f} GFLOP/s useful, "
        f"{ref_exec / t_ref / 1e9:.1f} GFLOP/s executed ({ref_exec / 1e12:.3f} TFLOP)"
    )
    print(
        f"equality  : min embedding cosine {cos.min():.7f}, max |dNLL| {dnll.max():.2e} (mean NLL {ref_nll.mean():.4f})"
    )
    checks = {
        "speed-up >= 2": speedup >= 2,
        "FLOP/s >= 50% of matmul": frac >= 0.5,
        "cosine >= 0.999": cos.min() >= 0.999,
        "|dNLL| <= 1e-3": dnll.max() <= 1e-3,
    }
    print("targets   : " + ", ".join(f"{k}: {'ok' if v else 'MISSED'}" for k, v in checks.items()))
    if not args.no_dtype:
        dtype_and_packing(model_dir, cfg, rows, fused, real, 1 if args.smoke else args.dtype_rounds)
    print(f"speed-up (reference / fused): {speedup:.2f}x")
    print(f"{speedup:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
