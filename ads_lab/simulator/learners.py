"""The synthetic worlds and learners behind `ads simulate`: models, not evidence about real LLMs.

Both learners share the world (clusters, latent difficulties d, a held-out set) and the rollout model: a
prompt of cluster k succeeds with probability sigmoid(theta_k - d_i), and each gets ``n_rollouts`` Bernoulli
rollouts. GRPO's signal is the reward variance within a group, g = rho (1 - rho), so all-correct and all-wrong
groups teach nothing. Samplers see only ``cluster_of`` and ``rank_in_cluster`` (a noisy offline estimate).

* ``simple`` (calibrated against uniform only): a ``transfer`` share of the batch's mean signal lifts every
  cluster, the rest lifts the prompt's own cluster, scaled by K so that an even spread lifts all equally.
* ``coupled`` (the second learner, written before any frontier rule was tuned; calibrated against uniform
  only): the non-shared signal spreads over clusters by a Gaussian kernel on latent skill positions;
  abilities and memorised offsets decay towards their start every step (forgetting); a row trained n times
  before generalises only 1 / (1 + n / repeat_scale) as much, and raises its own success (memorisation, which
  the held-out set does not see); some rows are broken (never solved); offline ranks are noisier, unevenly
  across clusters, with a share of random outliers.

A learner rolls out (``rollout``) and learns (``learn``) in two calls, so that a trainer can roll out several
batches before one update (DAPO-style dynamic sampling).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ads_lab.config.simulate import SimulationConfig


@dataclass
class World:
    """One seed's synthetic dataset: the artifact's columns plus the hidden truth."""

    cluster_of: np.ndarray  # (N,) cluster index of each training row
    difficulty: np.ndarray  # (N,) latent difficulty
    rank_in_cluster: np.ndarray  # (N,) 0 = easiest by the noisy estimate
    test_cluster: np.ndarray
    test_difficulty: np.ndarray
    n_clusters: int
    initial_ability: float
    skill_pos: np.ndarray | None = None  # (K, dims) coupled learner: latent skill position of each cluster
    broken: np.ndarray | None = None  # (N,) coupled learner: rows that are never solved

    def accuracy(self, theta: np.ndarray) -> float:
        """Expected held-out accuracy of a policy with per-cluster abilities ``theta``."""
        return float(sigmoid(theta[self.test_cluster] - self.test_difficulty).mean())


def make_world(cfg: SimulationConfig, seed: int) -> World:
    """Draw clusters, difficulties, the noisy offline ranking and a held-out test set for one seed.

    The coupled learner's extras come from a separate generator, so both learners share sizes,
    difficulties and test set for a seed; only the ranks (noisier) and the hidden extras differ.
    """
    rng = np.random.default_rng([seed, 0])
    k = cfg.num_clusters
    sizes = np.maximum(
        cfg.min_cluster_size, np.round(cfg.median_cluster_size * rng.lognormal(0.0, cfg.cluster_size_sd, k))
    ).astype(np.int64)
    means = rng.normal(0.0, cfg.cluster_difficulty_sd, k)
    cluster_of = np.repeat(np.arange(k), sizes)
    n = len(cluster_of)
    difficulty = means[cluster_of] + rng.normal(0.0, cfg.within_difficulty_sd, n)
    estimate = difficulty + rng.normal(0.0, cfg.rank_noise_sd, n)
    skill_pos = broken = None
    if cfg.learner == "coupled":
        c, extra = cfg.coupled, np.random.default_rng([seed, 2])
        noise = estimate - difficulty
        estimate = difficulty + noise * extra.lognormal(0.0, c.rank_noise_spread, k)[cluster_of]
        outlier = extra.random(n) < c.rank_outliers  # ranked at random inside its cluster
        estimate = np.where(
            outlier, means[cluster_of] + extra.normal(0.0, 10.0 * cfg.within_difficulty_sd, n), estimate
        )
        skill_pos = extra.normal(0.0, 1.0, (k, c.skill_dims))
        broken = extra.random(n) < c.broken_share
    order = np.lexsort((estimate, cluster_of))
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - starts[cluster_of[order]]
    # Shuffle rows so nothing depends on the artifact's row order.
    perm = rng.permutation(n)
    test_sizes = np.maximum(1, np.round(sizes * cfg.test_fraction)).astype(np.int64)
    test_cluster = np.repeat(np.arange(k), test_sizes)
    test_difficulty = means[test_cluster] + rng.normal(0.0, cfg.within_difficulty_sd, len(test_cluster))
    return World(
        cluster_of=cluster_of[perm],
        difficulty=difficulty[perm],
        rank_in_cluster=rank[perm],
        test_cluster=test_cluster,
        test_difficulty=test_difficulty,
        n_clusters=k,
        initial_ability=cfg.initial_ability,
        skill_pos=skill_pos,
        broken=None if broken is None else broken[perm],
    )


class Learner(Protocol):
    """A policy in a world: roll out rows (success rates on the n-rollout grid), then learn from them."""

    def rollout(self, rows: np.ndarray) -> np.ndarray: ...

    def learn(self, rows: np.ndarray, rho: np.ndarray) -> None: ...

    def accuracy(self) -> float: ...


class SimpleLearner:
    """One ability per cluster; a ``transfer`` share of the signal is shared, the rest stays in its cluster."""

    def __init__(self, world: World, cfg: SimulationConfig, seed: int) -> None:
        self.world, self.cfg = world, cfg
        self.rng = np.random.default_rng([seed, 1])
        self.theta = np.full(world.n_clusters, world.initial_ability)

    def rollout(self, rows: np.ndarray) -> np.ndarray:
        p = sigmoid(self.theta[self.world.cluster_of[rows]] - self.world.difficulty[rows])
        return self.rng.binomial(self.cfg.n_rollouts, p) / self.cfg.n_rollouts

    def learn(self, rows: np.ndarray, rho: np.ndarray) -> None:
        ks = self.world.cluster_of[rows]
        self.theta += ability_gain(ks, group_signal(rho, self.cfg.signal), self.world.n_clusters, self.cfg)

    def accuracy(self) -> float:
        return self.world.accuracy(self.theta)


class CoupledLearner:
    """Skill-geometry transfer, forgetting, diminishing returns and memorisation on repeats, broken rows."""

    def __init__(self, world: World, cfg: SimulationConfig, seed: int) -> None:
        if world.skill_pos is None or world.broken is None:
            raise ValueError("the coupled learner needs a world made with learner='coupled'")
        self.world, self.cfg, self.c = world, cfg, cfg.coupled
        self.rng = np.random.default_rng([seed, 1])
        k, n = world.n_clusters, len(world.cluster_of)
        self.theta = np.full(k, world.initial_ability)
        self.offset = np.zeros(n)  # memorised logit bonus of each training row
        self.seen = np.zeros(n)  # times each row was trained on
        diff = world.skill_pos[:, None, :] - world.skill_pos[None, :, :]
        kernel = np.exp(-0.5 * (diff**2).sum(axis=-1) / self.c.transfer_width**2)
        self.spread = kernel / kernel.sum(axis=0, keepdims=True)  # column k: where cluster k's signal goes

    def rollout(self, rows: np.ndarray) -> np.ndarray:
        w = self.world
        p = sigmoid(self.theta[w.cluster_of[rows]] + self.offset[rows] - w.difficulty[rows])
        p = np.where(w.broken[rows], 0.0, p)
        return self.rng.binomial(self.cfg.n_rollouts, p) / self.cfg.n_rollouts

    def learn(self, rows: np.ndarray, rho: np.ndarray) -> None:
        cfg, c, k = self.cfg, self.c, self.world.n_clusters
        g = group_signal(rho, cfg.signal)
        general = g / (1.0 + self.seen[rows] / c.repeat_scale)
        own = np.bincount(self.world.cluster_of[rows], weights=general, minlength=k)
        shared = (1.0 - cfg.transfer) * k * (self.spread @ own) + cfg.transfer * general.sum()
        start = self.world.initial_ability
        self.theta = start + (self.theta + c.learning_rate * shared / len(rows) - start) * (1.0 - c.forget_rate)
        self.offset *= 1.0 - c.forget_rate
        np.add.at(self.offset, rows, c.memorize * g)
        np.add.at(self.seen, rows, 1.0)

    def accuracy(self) -> float:
        return self.world.accuracy(self.theta)


def make_learner(world: World, cfg: SimulationConfig, seed: int) -> Learner:
    """The learner ``cfg.learner`` names, at the world's initial ability."""
    return CoupledLearner(world, cfg, seed) if cfg.learner == "coupled" else SimpleLearner(world, cfg, seed)


def group_signal(rho: np.ndarray, kind: str = "variance") -> np.ndarray:
    """GRPO's learning signal per prompt: the within-group reward variance (or its square root)."""
    var = rho * (1.0 - rho)
    return np.sqrt(var) if kind == "std" else var


def ability_gain(ks: np.ndarray, signal: np.ndarray, n_clusters: int, cfg: SimulationConfig) -> np.ndarray:
    """Per-cluster ability change from one batch: a ``transfer`` share of the mean signal lifts every
    cluster, the rest lifts the prompt's own cluster (scaled by K so an even spread lifts all equally)."""
    own = np.bincount(ks, weights=signal, minlength=n_clusters)
    shared = (1.0 - cfg.transfer) * n_clusters * own + cfg.transfer * signal.sum()
    return cfg.learning_rate * shared / len(ks)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))
