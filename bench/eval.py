"""`ads eval`'s transformers backend against a plain per-problem `generate` loop, same model, same problems.

    .venv/bin/python bench/eval.py [--model bench] [--problems 32] [-k 4] [--max-tokens 64] [--batch-size 64]
                                   [--threads 2] [--smoke]

Problems: the first `--problems` of the packaged MATH-500, formatted with the `ads_think` template and rendered
with the model's chat template (`ads_core.evaluation.hf.render`), so both paths see the same prompt ids.
Model: the locally built `bench` preset (~47M params, Qwen2 style, random init, built once under the ADS cache
dir; nothing is downloaded) unless `--model` is given; fp32 on CPU, `torch.set_num_threads(--threads)`.

(a) loop, the baseline: for each problem, one `model.generate(prompt, do_sample=True, temperature, top_p,
    num_return_sequences=k, max_new_tokens)`, the way a hand-written evaluation script does it;
(b) batched: `TransformersBackend.generate` over chunks of `--batch-size` sequences (`batch_size // k` problems,
    shortest prompts first, as `ads eval` runs them): each prompt encoded once for its k rows, left padding,
    KV cache, grouped-KV decoding attention, seeded per (problem, sample).
Back to back, (a) first, after one untimed warm-up call of each. The bench model never says end-of-sequence,
so both generate exactly k x max_tokens tokens per problem (printed, so the work is seen to be equal).
The last line is the speed-up: batched problems/s / loop problems/s. `--smoke`: the tiny model, 4 problems, k 2,
8 tokens, seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="bench", help="Model folder or built-in preset (default: bench).")
    p.add_argument("--problems", type=int, default=32)
    p.add_argument("-k", type=int, default=4)
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--smoke", action="store_true", help="Tiny model and sizes: seconds (what the tests run).")
    args = p.parse_args(argv)
    if args.smoke:
        args.problems, args.k, args.max_tokens = 4, 2, 8
        args.model = "tiny" if args.model == "bench" else args.model
    return args


def loop(model, tok, prompts: list[list[int]], k: int, max_tokens: int, temperature: float, top_p: float) -> int:
    """The baseline: one sampled `generate` per problem; returns the tokens generated."""
    import torch

    tokens = 0
    for ids in prompts:
        x = torch.tensor([ids])
        out = model.generate(
            input_ids=x,
            attention_mask=torch.ones_like(x),
            do_sample=True,
            temperature=temperature,
            top_p=top_p,
            num_return_sequences=k,
            max_new_tokens=max_tokens,
            pad_token_id=tok.pad_token_id,
        )
        tokens += int((out[:, x.shape[1] :] != tok.pad_token_id).sum())
    return tokens


def batched(backend, problems, cfg) -> int:
    """`ads eval`'s path: chunks of batch_size // k problems, shortest prompts first."""
    order = sorted(problems, key=lambda p: len(backend.prompt_ids(p)))
    per_chunk = max(1, cfg.batch_size // cfg.k)
    tokens = 0
    for start in range(0, len(order), per_chunk):
        for samples in backend.generate(order[start : start + per_chunk], cfg):
            tokens += sum(s.tokens for s in samples)
    return tokens


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    import torch

    from ads_core import models
    from ads_core.config.eval import EvalConfig
    from ads_core.evaluation.hf import TransformersBackend
    from ads_core.evaluation.sets.problems import load_problems, resolve_sets

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    loaded = models.load_causal_lm(args.model, device="cpu", dtype="float32")
    model, tok = loaded.model, loaded.tokenizer
    cfg = EvalConfig(k=args.k, max_tokens=args.max_tokens, batch_size=args.batch_size)
    problems = load_problems(resolve_sets(["math500"]), limit=args.problems)["math500"]
    backend = TransformersBackend(model, tok)
    prompts = [backend.prompt_ids(p) for p in problems]
    lengths = sorted(len(p) for p in prompts)
    print(
        f"model {loaded.name} ({sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params), "
        f"{len(problems)} MATH-500 problems (prompt tokens {lengths[0]}-{lengths[-1]}), k={args.k}, "
        f"max_tokens={args.max_tokens}, batch_size={args.batch_size}, threads={args.threads}"
    )
    with torch.inference_mode():
        loop(model, tok, prompts[:1], args.k, 2, cfg.temperature, cfg.top_p)  # warm-up, untimed
        backend.generate(problems[:1], cfg.replaced(max_tokens=2))
        t0 = time.perf_counter()
        loop_tokens = loop(model, tok, prompts, args.k, args.max_tokens, cfg.temperature, cfg.top_p)
        loop_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        ours_tokens = batched(backend, problems, cfg)
        ours_s = time.perf_counter() - t0
    n = len(problems)
    print(f"(a) per-problem generate loop: {loop_s:.2f} s, {n / loop_s:.2f} problems/s, {loop_tokens} tokens")
    print(f"(b) batched backend:           {ours_s:.2f} s, {n / ours_s:.2f} problems/s, {ours_tokens} tokens")
    print(f"speed-up (batched / loop problems/s): {loop_s / ours_s:.2f}x (target >= 3x on 2 CPU cores)")


if __name__ == "__main__":
    main()
