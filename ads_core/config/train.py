"""Training options, for every trainer, defined once: `ads train` flags, the `ads-train` flow parameters and
the verl YAML (`data.ads_sampler.*`, checked by a test) all derive from these fields.

`TrainConfig` has the trainer-independent options at its top level (which trainer, policy, steps, run folder,
eval sets), the sampler it trains with (`sampler`: which one, plus every knob of ADS and the baselines), and
one section per trainer (`verl`, `trl`) for what only that trainer reads.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ads_core.config.base import Section, tuning
from ads_core.config.sampler import ADSSamplerConfig, DifficultyTargetedConfig, DynamicSamplingConfig, SamplerKind

Trainer = Literal["auto", "verl", "trl"]
DecontaminateMode = Literal["off", "report", "drop"]


class TrainSamplerConfig(Section):
    """Which rows each step trains on: ADS, or a baseline for comparison (with the same prompts per step)."""

    kind: SamplerKind = Field(
        "ads",
        description="ads (the ADS sampler; sampler.ads.window picks reference or frontier), uniform (shuffled "
        "epochs), dots (DOTS-style difficulty targeting) or dynamic (DAPO-style: drop all-0/all-1 groups and draw "
        "again; the trainer must support it, see ads_core.sampler.dynamic).",
        json_schema_extra={"flag": "--sampler"},
    )
    ads: ADSSamplerConfig = Field(default_factory=ADSSamplerConfig, description="ADS knobs (reference defaults).")
    dots: DifficultyTargetedConfig = Field(
        default_factory=DifficultyTargetedConfig, description="DOTS-style knobs (its batch follows the step's)."
    )
    dynamic: DynamicSamplingConfig = Field(
        default_factory=DynamicSamplingConfig, description="DAPO-style knobs (its batch follows the step's)."
    )


class VerlConfig(Section):
    """verl on Ray (CUDA GPUs): the cluster shape and what the ADS integration reads from `data.ads_sampler`."""

    n_gpus_per_node: int = Field(
        1, ge=1, description="GPUs per node (trainer.n_gpus_per_node).", json_schema_extra={"flag": "--gpus"}
    )
    nnodes: int = Field(1, ge=1, description="Number of nodes (trainer.nnodes).")
    ray_address: str | None = Field(
        None,
        description="http://head:8265 submits a Ray job; auto or ray://head:10001 joins a running cluster; "
        "none starts a local Ray.",
    )
    overrides: list[str] = tuning(
        default_factory=list, description="Extra verl Hydra overrides (key=value), applied last."
    )
    cluster_metrics_interval: int = tuning(
        default=25, ge=0, description="Log per-cluster p / r / window metrics every N steps (0 = never)."
    )
    strict_ids: bool = tuning(
        default=True, description="Fail a step whose rollout ids are not rows of the training set."
    )


class TRLConfig(Section):
    """Hugging Face TRL's GRPOTrainer (CPU or one node with accelerate). The defaults are sized for a CPU."""

    num_generations: int = Field(4, ge=2, description="Completions per prompt (the GRPO group).")
    max_completion_length: int = Field(48, ge=1, description="Tokens generated per completion at most.")
    learning_rate: float = Field(1e-5, gt=0, description="AdamW learning rate.")
    save_steps: int = Field(1, ge=1, description="Save a checkpoint (with the sampler state) every N steps.")


class TrainConfig(Section):
    """Everything one training run needs besides the artifact."""

    trainer: Trainer = Field(
        "auto", description="auto (verl where CUDA GPUs and verl are present, TRL otherwise), verl or trl."
    )
    model: str | None = Field(
        None, description="Policy to train; default: the model the difficulties were scored with (the manifest)."
    )
    steps: int = Field(800, ge=1, description="Optimizer steps (the reference trains 800).")
    run_dir: str | None = Field(None, description="Checkpoints, metrics and staged inputs (default ./ads-runs/NAME).")
    name: str | None = Field(None, description="Experiment name (default DATASET-ads); the same name resumes.")
    eval_sets: list[str] | None = Field(
        None,
        description="Validation sets: names under OUT/eval or .parquet paths; default every set in OUT/eval; "
        "[] for none.",
        json_schema_extra={"cli": False},
    )
    decontaminate: DecontaminateMode = Field(
        "report", description="off, report, or drop training rows whose question is in an eval set."
    )
    sampler: TrainSamplerConfig = Field(default_factory=TrainSamplerConfig)
    verl: VerlConfig = Field(default_factory=VerlConfig)
    trl: TRLConfig = Field(default_factory=TRLConfig)
