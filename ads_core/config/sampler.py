"""The samplers' knobs: ADS and the baselines it is compared with, each defined once.

Each class is registered with its kind (`ads_core.sampler.kinds`: `register_kind("ads",
options=ADSSamplerConfig)`), which makes it the section `sampler.<kind>` of the training config tree; training
(verl and TRL; verl's task reads them back from the run's sampler.json), the `ads-train` flow and `ads simulate`
all take their sampler settings from these classes. The ADS defaults are the reference's.
Instances are frozen: a sampler keeps its config for the whole run, and a saved state records it.
"""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, field_validator, model_validator

from ads_core.config.base import FrozenSection

Weighting = Literal["success", "learnability", "inverse", "frontier"]
Window = Literal["reference", "frontier"]
# What an unset inter_cluster_weighting means for each window.
DEFAULT_WEIGHTING: dict[str, Weighting] = {"reference": "success", "frontier": "frontier"}


class ADSSamplerConfig(FrozenSection):
    """ADS: clusters drawn by smoothed success, a window of difficulty-sorted rows inside each."""

    active_clusters: int = Field(4, ge=1, strict=True, description="Clusters drawn per step.")
    mini_cluster_size: int = Field(32, ge=1, strict=True, description="B: rows emitted per drawn cluster.")
    boundary_eps: float = Field(0.17, ge=0, le=0.5, description="Keep band [0.5 - eps, 0.5 + eps] of row success.")
    alpha: float = Field(0.3, ge=0, le=1, description="EMA weight of the new cluster distribution.")
    r_init: float = Field(0.5, ge=0, le=1, description="Success rate of every cluster at start and after a reset.")
    seed: int = Field(42, ge=0, strict=True, description="Seed of the cluster draws (numpy PCG64).")
    reset_every: int | None = Field(
        None, strict=True, description="Reset the schedule every N steps; null: |D| // batch_size; <= 0: never."
    )
    prob_floor: float = Field(
        0.0, ge=0, le=1, description="Draw from (1 - K*floor) p + floor; 0 = the reference (clusters may starve)."
    )
    window: Window = Field(
        "reference",
        description="Intra-cluster rule: reference (one slot per update, the paper's) or frontier (a band that "
        "jumps towards frontier_target success).",
    )
    inter_cluster_weighting: Weighting | None = Field(
        None,
        description="Cluster weights: success r (the reference), learnability r(1-r), inverse 1-r, or frontier "
        "size * (u(1-u) + frontier_weight_floor) (frontier window only); null: success for the reference "
        "window, frontier for the frontier window.",
    )
    frontier_target: float = Field(0.5, gt=0, lt=1, description="Frontier window: the band success it steers towards.")
    frontier_gain: float = Field(
        0.5,
        gt=0,
        le=2,
        description="Frontier window: move of the band centre, as a share of the cluster, per unit of "
        "(band success - frontier_target).",
    )
    frontier_band: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Frontier window: band width as a share of the cluster (at least mini_cluster_size rows); "
        "each visit takes the band's least-trained rows, nearest the centre first.",
    )
    frontier_weight_floor: float = Field(
        0.003,
        ge=0,
        le=1,
        description="frontier weighting: added to u(1-u), so clusters at either end of their range are still drawn.",
    )
    skip: bool = Field(
        False,
        strict=True,
        description="Pre-rollout skipping (GRESO-style), either window: a row whose last groups all agreed (all "
        "solved or all failed) is left out of a batch, before rollout, with probability min(skip_max, rate * streak); "
        "the batch keeps its size with other rows of the same drawn cluster.",
    )
    skip_solved_rate: float = Field(
        1.0,
        ge=0,
        le=1,
        description="Skipping: skip probability per consecutive all-solved group of a row.",
    )
    skip_failed_rate: float = Field(
        0.5,
        ge=0,
        le=1,
        description="Skipping: skip probability per consecutive all-failed group of a row.",
    )
    skip_max: float = Field(
        0.9,
        ge=0,
        lt=1,
        description="Skipping: the most a row's skip probability reaches (below 1: every row is offered again "
        "with probability at least 1 - skip_max, so a row the policy has since learned or forgotten is found).",
    )

    @field_validator(
        "boundary_eps",
        "alpha",
        "r_init",
        "prob_floor",
        "frontier_target",
        "frontier_gain",
        "frontier_band",
        "frontier_weight_floor",
        "skip_solved_rate",
        "skip_failed_rate",
        "skip_max",
        mode="before",
    )
    @classmethod
    def _real_not_bool(cls, value: object) -> object:
        if isinstance(value, bool):
            raise ValueError("expected a number, not a boolean")
        return value

    @model_validator(mode="after")
    def _weighting_fits_the_window(self) -> Self:
        if self.inter_cluster_weighting == "frontier" and self.window != "frontier":
            raise ValueError("inter_cluster_weighting='frontier' needs window='frontier' (it reads the band centres)")
        return self

    @property
    def cluster_weighting(self) -> Weighting:
        """The weighting in effect: ``inter_cluster_weighting``, or the window's default when it is unset."""
        return self.inter_cluster_weighting or DEFAULT_WEIGHTING[self.window]

    @property
    def batch_size(self) -> int:
        return self.active_clusters * self.mini_cluster_size


class UniformSamplerConfig(FrozenSection):
    """GRPO's default: a fresh shuffle of all rows every epoch."""

    batch_size: int = Field(128, ge=1, strict=True, description="Prompts per step.")
    seed: int = Field(42, ge=0, strict=True, description="Seed of every epoch's permutation.")


class EasiestShareConfig(FrozenSection):
    """Uniform sampling over the easiest share of each cluster (by rank): a static data selection, no feedback."""

    batch_size: int = Field(128, ge=1, strict=True, description="Prompts per step.")
    seed: int = Field(42, ge=0, strict=True, description="Seed of every epoch's permutation.")
    share: float = Field(
        0.25, gt=0, le=1, description="Share of each cluster's easiest rows (ceil, at least one) drawn from."
    )


class DifficultyTargetedConfig(FrozenSection):
    """dots-lite: DOTS's selection rule alone (no trained predictor, no reference rollouts): train on the candidates
    whose success, predicted by a kernel over recently observed rows, is nearest the target."""

    batch_size: int = Field(128, ge=1, strict=True, description="Prompts per step.")
    seed: int = Field(42, ge=0, strict=True, description="Seed of the candidate draws.")
    target: float = Field(0.5, ge=0, le=1, description="Success rate to aim for.")
    memory_size: int = Field(512, ge=1, strict=True, description="Recent (row, success) observations kept (FIFO).")
    candidate_pool: int = Field(1024, ge=1, strict=True, description="Random rows scored per step.")
    rank_bandwidth: float = Field(0.05, gt=0, description="Kernel width over within-cluster rank fraction.")
    cross_cluster_weight: float = Field(0.0, ge=0, le=1, description="Kernel factor for other clusters' rows.")
    prior_strength: float = Field(1.0, gt=0, description="Pseudo-observations at the memory's mean success.")
    temperature: float = Field(0.1, gt=0, description="Attention temperature when embeddings are given.")


class DynamicSamplingConfig(FrozenSection):
    """DAPO-style dynamic sampling (verl's ``algorithm.filter_groups``): prompts come from shuffled epochs in
    generation batches of ``batch_size`` (verl's default gen_batch_size); a group whose rollouts all agree (all
    wrong or all right) is dropped and another generation batch is drawn, until the step has ``batch_size``
    informative groups or ``max_draws`` generation batches were rolled out."""

    batch_size: int = Field(128, ge=1, strict=True, description="Groups per optimizer step.")
    seed: int = Field(42, ge=0, strict=True, description="Seed of every epoch's permutation.")
    max_draws: int = Field(
        10,
        ge=1,
        strict=True,
        description="Generation batches per step at most (verl's max_num_gen_batches); a step still short then "
        "trains on what it has, topped up with dropped groups (verl raises instead).",
    )
