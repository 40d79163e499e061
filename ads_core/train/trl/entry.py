"""TRL as a registered trainer (``trainer: trl``): runs anywhere (CPU, or one node with accelerate), in this
process, with a callback after every optimizer step. Importing this module imports neither torch nor TRL."""

from __future__ import annotations

from typing import Any, ClassVar

from ads_core.config.train import NeutralTrainConfig as TrainConfig
from ads_core.sampler.kinds import EXTRA_ROLLOUTS, REFERENCE_ROLLOUTS
from ads_core.train.trainers import OnLine, OnStep, Score, TrainResult, register_trainer
from ads_core.train.trl.options import TRL_MINI_CLUSTER_SIZE, TRLConfig


@register_trainer("trl")
class TRLTrainer:
    priority: ClassVar[int] = 0  # the fallback: `auto` asks the GPU trainers first
    streams_steps: ClassVar[bool] = True
    # The reference's 4 x 32 prompts per step is GPU work: 4 x 2 = 8 on a CPU unless mini_cluster_size is set.
    ads_defaults: ClassVar[dict[str, Any]] = {"mini_cluster_size": TRL_MINI_CLUSTER_SIZE}
    options: ClassVar[type] = TRLConfig  # the `trl` section
    # dynamic sampling's extra draws (trainer.py) and DOTS's reference sets rolled out by the policy (reference.py)
    supports: ClassVar[frozenset[str]] = frozenset({EXTRA_ROLLOUTS, REFERENCE_ROLLOUTS})

    def can_run_here(self, cfg: TrainConfig) -> tuple[bool, str]:
        return True, "TRL runs on CPU and on one node"

    def check_machine(self, cfg: TrainConfig, dry_run: bool) -> None:
        from ads_core.train.trl import settings

        settings.check_machine(cfg, dry_run)  # TRL trains wherever torch runs; vLLM needs CUDA, LoRA peft

    def launch_command(self, cfg: TrainConfig, argv: list[str]) -> list[str] | None:
        """torchrun starting trl.processes copies of this command (ARGV: its arguments), or None: train here."""
        from ads_core.train.trl import settings

        return settings.torchrun_command(cfg.trl.processes, argv) if settings.needs_launch(cfg) else None

    def plan(self, plan: Any, materialize: bool) -> Any:
        from ads_core.train.trl.plan import plan_trl

        return plan_trl(plan)  # the eval sets are validated during training (ads_core.train.trl.validate)

    def execute(self, plan: Any, on_step: OnStep | None, on_line: OnLine | None, score: Score | None) -> TrainResult:
        from ads_core.train.errors import TrainOptionError
        from ads_core.train.trl import settings
        from ads_core.train.trl.run import run_trl

        if settings.needs_launch(plan.config):
            raise TrainOptionError(
                f"processes={plan.config.trl.processes} needs that many processes: start them with `ads train "
                "--processes N` or torchrun; this one is a single process",
                options=("processes",),
            )
        return run_trl(plan, plan.part, on_step=on_step, score=score)

    def read_checkpoint_state(self, run_dir: str) -> Any:
        """The sampler checkpoint of the newest complete checkpoint in RUN_DIR, or None."""
        from pathlib import Path

        from ads_core.train.trl.plan import CHECKPOINTS
        from ads_core.train.trl.run import complete_checkpoints, read_checkpoint_state

        done = complete_checkpoints(str(Path(run_dir) / CHECKPOINTS))
        return read_checkpoint_state(done[-1][1], done[-1][0]) if done else None
