"""The synthetic GRPO learners' settings (`ads simulate`): world, learner, run, and the samplers compared.

Sizes mirror the reference run (K=64, ~46k rows, 128 prompts per step); each learner's learning rate is set
so that uniform reaches the paper's GRPO average (~21.6 %) at step 800 (calibrated on uniform only).
`ads simulate` generates its flags from these fields; the `coupled` learner's knobs are set with --set.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from ads_core.config.base import FrozenSection, tuning
from ads_core.config.sampler import ADSSamplerConfig, DifficultyTargetedConfig, DynamicSamplingConfig

# Every sampler the simulator can run (ads_core.simulator.run.SAMPLER_FACTORIES has one factory each).
SimulatedSampler = Literal[
    "uniform",
    "dots",
    "dynamic",
    "easiest",
    "ads",
    "ads-frontier",
    "ads-learnability",
    "ads-inverse",
    "ads-noreset",
    "ads-floor",
    "ads-skip",
    "ads-frontier-skip",
]
DEFAULT_SAMPLERS: tuple[SimulatedSampler, ...] = (
    "uniform",
    "dots",
    "dynamic",
    "ads",
    "ads-frontier",
    "ads-learnability",
    "ads-inverse",
)
Learner = Literal["simple", "coupled"]


class CoupledLearnerConfig(FrozenSection):
    """The second learner's own dynamics (`learner="coupled"`), written before any frontier rule was tuned.

    Everything the simple learner lacks and real RL on LLMs plausibly has: transfer that follows a skill
    geometry (near clusters help each other, far ones do not), forgetting of what is not practised,
    diminishing returns and memorisation on repeated problems, broken problems (a wrong reference answer),
    and offline ranks that are noisier, unevenly so across clusters, with outliers.
    """

    learning_rate: float = Field(
        0.0245, gt=0, description="Ability gain per unit of mean GRPO signal (uniform reaches ~21.7 % at 800)."
    )
    skill_dims: int = Field(2, ge=1, le=16, description="Dimensions of the latent skill space clusters sit in.")
    transfer_width: float = Field(
        0.7, gt=0, description="Width of the Gaussian transfer kernel between cluster skill positions (~N(0, I))."
    )
    forget_rate: float = Field(
        0.002, ge=0, lt=1, description="Per-step decay of every ability (and memorised offset) towards its start."
    )
    repeat_scale: float = Field(
        4.0, gt=0, description="A row trained n times before generalises 1 / (1 + n / repeat_scale) as much."
    )
    memorize: float = Field(
        1.0, ge=0, description="Logit offset a training row gains per unit of its signal (that row only)."
    )
    broken_share: float = Field(
        0.05, ge=0, le=1, description="Share of training rows that are never solved (a wrong reference answer)."
    )
    rank_noise_spread: float = Field(
        0.6, ge=0, description="Log-normal sd of a per-cluster factor on rank_noise_sd (some clusters rank worse)."
    )
    rank_outliers: float = Field(
        0.1, ge=0, le=1, description="Share of rows whose offline rank is random (e.g. a truncated reference CoT)."
    )


class SimulationConfig(FrozenSection):
    """World, learner and run settings of the synthetic learner (a model, not evidence about real LLMs)."""

    n_clusters: int = Field(
        64, ge=1, description="Clusters in the synthetic world.", json_schema_extra={"flag": "--clusters"}
    )
    median_cluster_size: int = Field(
        720,
        ge=1,
        description="Median problems per cluster (sizes are log-normal).",
        json_schema_extra={"flag": "--cluster-size"},
    )
    cluster_size_sd: float = tuning(default=0.5, ge=0, description="Log-normal spread of cluster sizes.")
    min_cluster_size: int = tuning(default=8, ge=1, description="Smallest cluster (some are smaller than B).")
    cluster_difficulty_sd: float = tuning(default=1.0, ge=0, description="Spread of cluster mean difficulty (logits).")
    within_difficulty_sd: float = tuning(default=1.5, ge=0, description="Spread of difficulty inside a cluster.")
    rank_noise_sd: float = Field(
        1.0,
        ge=0,
        description="Noise sd (logits) of the offline difficulty estimate behind rank_in_cluster.",
        json_schema_extra={"flag": "--rank-noise"},
    )
    initial_ability: float = Field(-2.75, description="Policy ability (logits) at step 0; -2.75 gives ~14% accuracy.")
    test_fraction: float = tuning(default=0.1, gt=0, description="Held-out problems per cluster, per training row.")
    n_rollouts: int = Field(
        8, ge=1, description="Rollouts per prompt (GRPO group size).", json_schema_extra={"flag": "--rollouts"}
    )
    learner: Learner = Field(
        "simple", description="simple (the calibrated model) or coupled (other dynamics; see docs/sampler.md)."
    )
    learning_rate: float = Field(0.008, gt=0, description="The simple learner's ability gain per unit of mean signal.")
    transfer: float = Field(
        0.3, ge=0, le=1, description="Share of the signal that improves every cluster (0 = independent clusters)."
    )
    signal: Literal["variance", "std"] = Field(
        "variance", description="GRPO signal per group: variance rho(1-rho), or std for its square root."
    )
    steps: int = Field(800, ge=1, description="Training steps per run (the reference trains 800).")
    eval_every: int = Field(20, ge=1, description="Steps between held-out accuracy measurements.")
    seeds: tuple[int, ...] = tuning(default=(0, 1, 2, 3, 4), min_length=1, description="World seeds; one run per seed.")
    samplers: tuple[SimulatedSampler, ...] = tuning(
        default=DEFAULT_SAMPLERS, min_length=1, description="Samplers compared."
    )
    baseline: SimulatedSampler = Field("uniform", description="Every sampler is timed to this one's final accuracy.")
    coupled: CoupledLearnerConfig = Field(
        default_factory=CoupledLearnerConfig, description="The coupled learner's dynamics (used when learner=coupled)."
    )
    ads: ADSSamplerConfig = Field(default_factory=ADSSamplerConfig, description="ADS knobs (reference defaults).")
    dots: DifficultyTargetedConfig = Field(
        default_factory=DifficultyTargetedConfig, description="DOTS-style baseline knobs (its batch is ADS's)."
    )
    dynamic: DynamicSamplingConfig = Field(
        default_factory=DynamicSamplingConfig, description="DAPO-style dynamic sampling knobs (its batch is ADS's)."
    )

    @field_validator("seeds")
    @classmethod
    def _distinct(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if len(set(value)) != len(value):
            raise ValueError("seeds must be distinct")
        return value
