"""Training options, for every trainer, defined once: `ads train` flags, the `ads-train` flow parameters and
the verl YAML (`data.ads_sampler.*`, checked by a test) all derive from these fields.

`TrainConfig` has the trainer-independent options at its top level (which trainer, policy, steps, run folder,
eval sets), the sampler it trains with (`sampler`: which one, plus every knob of ADS and the baselines), and
one section per trainer (`verl`, `trl`) for what only that trainer reads.

The batch: one optimizer step trains on one sampler batch, `active_clusters x mini_cluster_size` prompts (the
baselines draw the same number), under both trainers. verl takes it as `data.train_batch_size`; TRL as one
generation batch of `prompts x trl.num_generations` completions. The reference's 4 x 32 = 128 prompts with 8
completions each is GPU work, so under TRL `sampler.ads.mini_cluster_size` defaults to `TRL_MINI_CLUSTER_SIZE`
(2: 8 prompts per step) unless it is set, and the `trl` section's own defaults are CPU-sized too.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ads_core.config.base import Section, tuning
from ads_core.config.sampler import (
    ADSSamplerConfig,
    DifficultyTargetedConfig,
    DynamicSamplingConfig,
    SamplerKind,
    UniformSamplerConfig,
)

DecontaminateMode = Literal["off", "report", "drop"]
LRScheduler = Literal["constant", "linear", "cosine"]
LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "vespo"]
ScaleRewards = Literal["group", "batch", "none"]
Tracker = Literal["none", "tensorboard", "wandb", "trackio", "mlflow"]

# sampler.ads.mini_cluster_size under TRL when it is not set: 4 clusters x 2 rows = 8 prompts per step on a CPU.
TRL_MINI_CLUSTER_SIZE = 2


class TrainSamplerConfig(Section):
    """Which rows each step trains on: ADS, or a baseline for comparison (with the same prompts per step)."""

    kind: SamplerKind = Field(
        "ads",
        description="ads (the ADS sampler; sampler.ads.window picks reference or frontier), uniform (shuffled "
        "epochs), dots (DOTS-style difficulty targeting) or dynamic (DAPO-style: drop all-0/all-1 groups and roll "
        "out more in the same step; TRL, one process).",
        json_schema_extra={"flag": "--sampler"},
    )
    ads: ADSSamplerConfig = Field(
        default_factory=ADSSamplerConfig,
        description=f"ADS knobs (reference defaults; under TRL mini_cluster_size is {TRL_MINI_CLUSTER_SIZE} unless "
        "set). active_clusters x mini_cluster_size is every sampler's prompts per step.",
    )
    uniform: UniformSamplerConfig = Field(
        default_factory=UniformSamplerConfig, description="Uniform knobs (its batch follows the step's)."
    )
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


# VerlConfig fields that verl's YAML declares under data.ads_sampler, next to the ADS knobs.
INTEGRATION_KEYS = ("cluster_metrics_interval", "strict_ids")


class TRLConfig(Section):
    """Hugging Face TRL's GRPOTrainer (CPU, or one node with accelerate). The defaults are sized for a CPU;
    on a GPU raise num_generations, max_completion_length and sampler.ads.mini_cluster_size (see the README)."""

    num_generations: int = Field(4, ge=2, description="Completions per prompt (the GRPO group; verl's default is 8).")
    max_completion_length: int = Field(48, ge=1, description="Tokens generated per completion at most.")
    learning_rate: float = Field(1e-5, gt=0, description="AdamW peak learning rate (see lr_scheduler).")
    temperature: float = tuning(default=1.0, gt=0, description="Sampling temperature of the completions.")
    beta: float = tuning(default=0.0, ge=0, description="KL coefficient against the initial policy (0: no reference).")
    gradient_accumulation_steps: int = tuning(
        default=1,
        ge=1,
        description="Micro-batches per step: each holds prompts x num_generations / (processes x this) completions.",
    )
    format_reward: float = tuning(
        default=0.0, ge=0, description="Weight of a reward for giving a \\boxed{} answer at all; 0 = off."
    )
    seed: int = tuning(default=42, ge=0, description="Seed of the policy's sampling (transformers' set_seed).")
    save_steps: int = Field(
        50,
        ge=1,
        description="Save a checkpoint (with the sampler state) every N steps; the last step is always saved. A "
        "checkpoint holds the policy and its AdamW state (about 3x the policy: ~18 GB for a 1.5B policy), so every "
        "step would spend more time writing than training on a GPU; a resume repeats at most N-1 steps.",
    )
    keep_checkpoints: int = tuning(
        default=2, ge=1, description="Checkpoints kept (older ones are deleted); 2 leaves one if a save is killed."
    )
    # -- schedule and GRPO loss (TRL's GRPOConfig names) ---------------------------------------------------------
    lr_scheduler: LRScheduler = tuning(
        default="constant", description="Learning-rate schedule over schedule_steps (TRL's lr_scheduler_type)."
    )
    warmup_steps: int = tuning(default=0, ge=0, description="Linear warm-up steps at the start of the schedule.")
    schedule_steps: int | None = tuning(
        default=None,
        ge=1,
        description="The schedule's horizon in steps; default: the steps of the run's first command (recorded in "
        "RUN_DIR/schedule.json), so a resumed or extended run continues the same schedule.",
    )
    loss_type: LossType = tuning(default="dapo", description="GRPO loss aggregation (TRL's loss_type).")
    epsilon: float = tuning(default=0.2, gt=0, description="Lower clipping bound of the importance ratio.")
    epsilon_high: float | None = tuning(
        default=None, gt=0, description="Upper clipping bound (DAPO's clip-higher); default: epsilon."
    )
    scale_rewards: ScaleRewards = tuning(
        default="group", description="Advantage scaling: by the group's std (group), the batch's (batch), or none."
    )
    mask_truncated_completions: bool = tuning(
        default=False, description="Leave completions cut at max_completion_length out of the loss."
    )
    chat_template_kwargs: dict[str, Any] | None = tuning(
        default=None, description="Extra arguments of the chat template, e.g. {enable_thinking: false}."
    )
    log_completions: bool = tuning(
        default=False,
        description="Write each step's completions (one per prompt) with their rewards to RUN_DIR/completions.jsonl.",
    )
    report_to: list[Tracker] = tuning(
        default_factory=lambda: ["none"],
        description="Experiment trackers (TRL's report_to): none, tensorboard, wandb, trackio, mlflow; a name or a "
        "list. The sampler's metrics go along under their own names (ads/...).",
    )
    # -- LoRA (peft) -----------------------------------------------------------------------------------------------
    lora_rank: int = tuning(default=0, ge=0, description="LoRA rank; 0 trains every weight (no LoRA).")
    lora_alpha: float = tuning(default=32.0, gt=0, description="LoRA scaling alpha.")
    lora_dropout: float = tuning(default=0.05, ge=0, lt=1, description="Dropout on the LoRA layers.")
    lora_target_modules: list[str] | str = tuning(
        default="all-linear", description="Modules that get LoRA layers: all-linear or a list of module names."
    )
    # -- generation with vLLM (CUDA) -------------------------------------------------------------------------------
    use_vllm: bool = tuning(default=False, description="Generate the completions with vLLM (needs CUDA and vllm).")
    vllm_mode: Literal["colocate", "server"] = tuning(
        default="colocate",
        description="colocate: vLLM in the training process, sharing its GPU; server: a `trl vllm-serve` process.",
    )
    vllm_gpu_memory_utilization: float = tuning(
        default=0.3, gt=0, le=1, description="Share of the GPU's memory vLLM takes (colocate)."
    )
    vllm_server_host: str = tuning(default="0.0.0.0", description="Host of the `trl vllm-serve` server (server).")
    vllm_server_port: int = tuning(default=8000, ge=1, le=65535, description="Port of that server (server).")
    # -- processes -------------------------------------------------------------------------------------------------
    processes: int = Field(
        1,
        ge=1,
        description="Training processes on this node, started by `ads train` with torchrun (one per GPU; gloo on CPU).",
        json_schema_extra={"flag": "--processes"},
    )

    @field_validator("report_to", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        """`report_to=tensorboard` or `report_to=[tensorboard, wandb]`, as TRL takes it."""
        return [value] if isinstance(value, str) else value

    @field_validator("report_to")
    @classmethod
    def _none_alone(cls, value: list[str]) -> list[str]:
        if "none" in value and len(value) > 1:
            raise ValueError("none can't be combined with a tracker")
        return value or ["none"]

    @property
    def trackers(self) -> list[str]:
        """The trackers to report to (report_to without none)."""
        return [t for t in self.report_to if t != "none"]


class ValidationConfig(Section):
    """Validation during training: the policy measured on the eval sets (`eval_sets`) as it trains, k samples per
    problem graded as `ads eval` grades them (TRL: `ads eval`'s code; verl: its validation with val_kwargs.n = k),
    one record per step and set in RUN_DIR/eval.jsonl. The defaults are sized for where it runs."""

    steps: int = Field(
        25,
        ge=0,
        description="Validate every N optimizer steps and after the last (0: only after the last); verl's "
        "trainer.test_freq.",
        json_schema_extra={"flag": "--eval-steps"},
    )
    limit: int | None = Field(
        None,
        ge=0,
        description="Problems per eval set (the first N; 0: all). Default 8 on a CPU, all on a GPU.",
        json_schema_extra={"flag": "--eval-limit"},
    )
    k: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Samples per problem (mean@k). Default 2 on a CPU, the paper's 16 on a GPU (verl's val_kwargs.n).",
        json_schema_extra={"flag": "--eval-k"},
    )
    before_train: bool = tuning(
        default=True, description="Validate the initial policy too, as step 0 (verl's trainer.val_before_train)."
    )


class TrainConfig(Section):
    """Everything one training run needs besides the artifact."""

    trainer: str = Field(
        "auto",
        min_length=1,
        description="auto (verl where CUDA GPUs, verl and its rollout engine are present, or with a Ray "
        "address; TRL otherwise), verl, trl, or any registered trainer (ads_core.train.trainers).",
    )
    model: str | None = Field(
        None, description="Policy to train; default: the model the difficulties were scored with (the manifest)."
    )
    steps: int = Field(800, ge=1, description="Optimizer steps (the reference trains 800).")
    run_dir: str | None = Field(None, description="Checkpoints, metrics and staged inputs (default ./ads-runs/NAME).")
    name: str | None = Field(None, description="Experiment name (default DATASET-ads); the same name resumes.")
    eval_sets: list[str] | None = Field(
        None,
        description="Validation sets: names under OUT/eval, named sets (math500, aime24, aime25, amc23, minerva), "
        ".parquet paths, raw files or NAME=PATH (as ads eval --set); default every set in OUT/eval; [] for none "
        "(ads train --no-eval).",
        json_schema_extra={"cli": False},
    )
    allow_change: list[str] = Field(
        default_factory=list,
        description="Options a resume may change on purpose (a field that fixes the run's trajectory, e.g. "
        "learning_rate or trl.learning_rate; RUN_DIR/run.json records the change); any other difference from the "
        "run's options refuses the resume.",
        json_schema_extra={"cli": False},
    )
    decontaminate: DecontaminateMode = Field(
        "report", description="off, report, or drop training rows whose question is in an eval set."
    )
    sampler: TrainSamplerConfig = Field(default_factory=TrainSamplerConfig)
    verl: VerlConfig = Field(default_factory=VerlConfig)
    trl: TRLConfig = Field(default_factory=TRLConfig)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)

    @classmethod
    def sections(cls) -> tuple[str, ...]:
        """The names of the nested sections (the sampler and one per trainer), in declaration order."""
        return tuple(
            n
            for n, f in cls.model_fields.items()
            if isinstance(f.annotation, type) and issubclass(f.annotation, Section)
        )

    @classmethod
    def section_of(cls, name: str) -> str | None:
        """The section declaring field NAME (the first, in declaration order), or None."""
        for section in cls.sections():
            if name in cls.model_fields[section].annotation.model_fields:  # type: ignore[union-attr]
                return section
        return None
