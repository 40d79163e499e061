"""TRL's options (`ads train --trainer trl`, the `trl:` YAML section, the flow's `trl` parameter): declared here,
by the trainer that reads them, and registered with it (`TRLTrainer.options`); the config tree takes them from
the trainer registry (`ads_core.train.options`). Field names are TRL's own (GRPOConfig's) where one exists."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator

from ads_core.config.base import Section, tuning
from ads_core.train.trl.replay.options import RolloutReplayConfig

LRScheduler = Literal["constant", "linear", "cosine"]
LossType = Literal["grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "vespo"]
ScaleRewards = Literal["group", "batch", "none"]
Tracker = Literal["none", "tensorboard", "wandb", "trackio", "mlflow"]

# sampler.ads.mini_cluster_size under TRL when it is not set: 4 clusters x 2 rows = 8 prompts per step on a CPU.
TRL_MINI_CLUSTER_SIZE = 2


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
    replay: bool = Field(
        False,
        description="Rollout replay (DOTS+RR): each step rolls out trl.rollout_replay.fresh_fraction of its prompts "
        "and fills the rest with earlier mixed-reward groups, trained with the importance-corrected clipped loss.",
    )
    rollout_replay: RolloutReplayConfig = Field(
        default_factory=RolloutReplayConfig, description="Rollout replay's knobs (used with replay)."
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
