"""Record ADS batches for the bit-for-bit parity test of ``window="reference"``.

Run once, from the commit *before* the frontier window existed (7c1d165, "dev extra: pytest-xdist"):

    .venv/bin/python tests/ads_core/data/record_ads_reference.py

It writes ``ads_reference_batches.json`` next to itself: for each small seeded scenario, the artifact's
columns, the config, and per step the batch ``next_batch`` returned, the success values fed back, and
the state after the run. The feedback is stored, not regenerated, so the test replays exactly these inputs
and compares every batch, r, p and window with what the code of that commit produced.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np

from ads_core.config.sampler import ADSSamplerConfig
from ads_core.sampler.ads import ADSSampler

OUT = Path(__file__).with_name("ads_reference_batches.json")

# name -> (cluster sizes, config fields, steps); small enough to store, varied enough to cover every branch
# of the reference rule: small clusters (cycling), K < A, a floor, each weighting, resets, a wide band.
SCENARIOS: dict[str, tuple[list[int], dict[str, object], int]] = {
    "defaults_small_b": ([40, 25, 60, 33, 18, 50], {"mini_cluster_size": 8, "active_clusters": 3}, 40),
    "tiny_clusters_and_reset": ([5, 12, 3, 20], {"mini_cluster_size": 6, "active_clusters": 2, "reset_every": 7}, 30),
    "fewer_clusters_than_slots": ([30, 14], {"mini_cluster_size": 5, "active_clusters": 4, "alpha": 1.0}, 25),
    "floor_learnability": (
        [22, 35, 17, 41, 28],
        {"mini_cluster_size": 7, "prob_floor": 0.05, "inter_cluster_weighting": "learnability", "seed": 7},
        35,
    ),
    "inverse_narrow_band": (
        [26, 31, 19],
        {"mini_cluster_size": 4, "active_clusters": 2, "boundary_eps": 0.05, "inter_cluster_weighting": "inverse"},
        30,
    ),
}


def artifact(seed: int, sizes: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """Shuffled rows with arbitrary (non-contiguous) cluster ids and a permutation of ranks per cluster."""
    rng = np.random.default_rng(seed)
    ids = rng.choice(np.arange(-3, 200), size=len(sizes), replace=False)
    cid = np.repeat(ids, sizes)
    rank = np.concatenate([rng.permutation(s) for s in sizes])
    perm = rng.permutation(len(cid))
    return cid[perm], rank[perm]


def feedback(rng: np.random.Generator, s: ADSSampler, rows: np.ndarray, step: int) -> np.ndarray:
    """A learner-like signal on the n = 8 grid: easy positions succeed more, and the ability rises and falls
    with the step, so windows move both ways (and clamp at both ends of small clusters)."""
    frac = s.position_of_rows(rows) / np.maximum(s.sizes[np.searchsorted(s.cluster_ids, s.cluster_of_rows(rows))], 1)
    p = 1.0 / (1.0 + np.exp(-(3.0 * np.sin(step / 4.0) + 1.0 - 4.0 * frac)))
    return rng.binomial(8, p) / 8.0


def record() -> dict[str, object]:
    out: dict[str, object] = {}
    for i, (name, (sizes, fields, steps)) in enumerate(SCENARIOS.items()):
        cid, rank = artifact(100 + i, sizes)
        cfg = ADSSamplerConfig(**fields)
        s = ADSSampler(cid, rank, cfg)
        rng = np.random.default_rng([100 + i, 1])
        batches, successes = [], []
        for step in range(steps):
            rows = s.next_batch()
            success = feedback(rng, s, rows, step)
            s.update(rows, success)
            batches.append(rows.tolist())
            successes.append(success.tolist())
        state = s.state_dict()
        out[name] = {
            "cluster_ids": cid.tolist(),
            "rank_in_cluster": rank.tolist(),
            "config": fields,
            "batches": batches,
            "success": successes,
            "final": {key: state[key] for key in ("r", "p", "windows", "steps", "steps_in_epoch", "last_counts")},
        }
    return out


def main() -> None:
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    doc = {"recorded_at_commit": commit, "scenarios": record()}
    OUT.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes) from commit {commit}")


if __name__ == "__main__":
    main()
