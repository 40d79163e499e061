"""Per-step cost of the ADS sampler (next_batch + update) at |D| = 1M rows, K = 64 clusters, for each window,
with pre-rollout skipping off and on.

Run: ``.venv/bin/python bench/sampler.py [--rows N] [--clusters K] [--steps S] [--window reference,frontier]
[--skip off,on] [--smoke]``. The last line per run is the ratio to the 1 ms per step target (below 1 is within
target; the wall time, which a loaded machine inflates; the CPU time is printed beside it); with skipping on,
also the ratio to the same window with it off. Successes are drawn before timing, on
the n = 8 grid, uniformly: about two thirds of the reference window's rows then ask to move, the slow path of
its ``update``; the frontier window picks its band's least-trained rows each step (a partition over the band:
20 % of a 15.6k-row cluster at the defaults). Two of the nine grid values agree (0 and 1), so with skipping on
about a fifth of the rows carry a streak and every drawn cluster flips coins. ``--smoke`` runs tiny sizes
(seconds) to check the bench still works.
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
    parser.add_argument("--skip", default="off,on", help="comma-separated skipping settings to time (off, on)")
    parser.add_argument("--smoke", action="store_true", help="seconds: 20k rows, 200 steps (checks it runs)")
    args = parser.parse_args()
    if args.smoke:  # the test suite may run this, so a refactor that breaks the bench fails CI
        args.rows, args.steps = 20_000, 200
    for window in args.window.split(","):
        off_us = None
        for skip in args.skip.split(","):
            per_step = run(args, window.strip(), skip.strip() == "on")
            if skip.strip() == "off":
                off_us = per_step
            elif off_us is not None:
                print(f"ratio to the same window with skipping off: {per_step / off_us:.3f}")


def run(args: argparse.Namespace, window: str, skip: bool) -> float:

    rng = np.random.default_rng(args.seed)
    cluster_ids = rng.integers(0, args.clusters, args.rows)
    ranks = rng.permutation(args.rows)  # any order; only the order inside a cluster matters
    cfg = ADSSamplerConfig(window=window, skip=skip)

    start = time.perf_counter()
    sampler = ADSSampler(cluster_ids, ranks, cfg)
    build_s = time.perf_counter() - start

    feedback = rng.integers(0, 9, size=(args.steps, cfg.batch_size)) / 8.0
    for i in range(50):  # warm-up
        sampler.update(sampler.next_batch(), feedback[i])

    draw = update = 0.0
    cpu = time.process_time()
    for i in range(args.steps):
        t0 = time.perf_counter()
        batch = sampler.next_batch()
        t1 = time.perf_counter()
        sampler.update(batch, feedback[i])
        t2 = time.perf_counter()
        draw += t1 - t0
        update += t2 - t1

    per_step_us = (draw + update) / args.steps * 1e6
    cpu_us = (time.process_time() - cpu) / args.steps * 1e6  # what the sampler itself used, whatever the load
    moved = sampler.metrics()
    print(
        f"window={window} skip={'on' if skip else 'off'} rows={args.rows:,} clusters={args.clusters} "
        f"batch={cfg.batch_size} steps={args.steps}"
    )
    print(f"construction: {build_s * 1e3:.0f} ms (sort by (cluster, rank), once)")
    print(f"next_batch: {draw / args.steps * 1e6:.1f} us/step")
    print(f"update:     {update / args.steps * 1e6:.1f} us/step (last step: {moved['ads/frac_keep']:.2f} kept)")
    print(f"next_batch+update: {per_step_us:.1f} us/step (CPU time: {cpu_us:.1f} us/step)")
    if skip:
        print(f"skipped: {moved['ads/skipped_total'] / (args.steps + 50):.1f} rows/step before rollout")
    print(f"ratio to the 1 ms target: {per_step_us / TARGET_US:.3f}")
    return per_step_us


if __name__ == "__main__":
    main()
