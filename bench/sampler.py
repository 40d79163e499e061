"""Per-step cost of the ADS sampler (next_batch + update) at |D| = 1M rows, K = 64 clusters, for each window.

Run: ``.venv/bin/python bench/sampler.py [--rows N] [--clusters K] [--steps S] [--window reference,frontier]``.
The last line per window is the ratio to the 1 ms per step target (below 1 is within target). Successes are
drawn before timing, on the n = 8 grid, uniformly: about two thirds of the reference window's rows then ask
to move, the slow path of its ``update``; the frontier window picks its band's least-trained rows each step
(a partition over the band: 20 % of a 15.6k-row cluster at the defaults).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler.ads import ADSSampler

TARGET_US = 1000.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--clusters", type=int, default=64)
    parser.add_argument("--steps", type=int, default=5000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--window", default="reference,frontier", help="comma-separated windows to time")
    args = parser.parse_args()
    for window in args.window.split(","):
        run(args, window.strip())


def run(args: argparse.Namespace, window: str) -> None:

    rng = np.random.default_rng(args.seed)
    cluster_ids = rng.integers(0, args.clusters, args.rows)
    ranks = rng.permutation(args.rows)  # any order; only the order inside a cluster matters
    cfg = ADSSamplerConfig(window=window)

    start = time.perf_counter()
    sampler = ADSSampler(cluster_ids, ranks, cfg)
    build_s = time.perf_counter() - start

    feedback = rng.integers(0, 9, size=(args.steps, cfg.batch_size)) / 8.0
    for i in range(50):  # warm-up
        sampler.update(sampler.next_batch(), feedback[i])

    draw = update = 0.0
    for i in range(args.steps):
        t0 = time.perf_counter()
        batch = sampler.next_batch()
        t1 = time.perf_counter()
        sampler.update(batch, feedback[i])
        t2 = time.perf_counter()
        draw += t1 - t0
        update += t2 - t1

    per_step_us = (draw + update) / args.steps * 1e6
    moved = sampler.metrics()
    print(f"window={window} rows={args.rows:,} clusters={args.clusters} batch={cfg.batch_size} steps={args.steps}")
    print(f"construction: {build_s * 1e3:.0f} ms (sort by (cluster, rank), once)")
    print(f"next_batch: {draw / args.steps * 1e6:.1f} us/step")
    print(f"update:     {update / args.steps * 1e6:.1f} us/step (last step: {moved['ads/frac_keep']:.2f} kept)")
    print(f"next_batch+update: {per_step_us:.1f} us/step")
    print(f"ratio to the 1 ms target: {per_step_us / TARGET_US:.3f}")


if __name__ == "__main__":
    main()
