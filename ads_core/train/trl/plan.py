"""TRL's part of a plan: how one optimizer step maps onto TRL's batches, and where the run writes.

One optimizer step = one generation batch = one sampler batch of P prompts (`TrainPlan.prompts_per_step`, the
ADS batch `active_clusters x mini_cluster_size`), each with G = `trl.num_generations` completions. TRL cuts the
P x G completions into `gradient_accumulation_steps` micro-batches per process (`steps_per_generation` is the
same number and `num_iterations` is 1), so every optimizer step draws exactly one batch from the sampler and
feeds it back once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ads_core.train.errors import TrainOptionError
from ads_core.train.groups import drops_all_wrong
from ads_core.train.plan import TrainPlan

CHECKPOINTS = "checkpoints"
STEPS_FILE = "steps.jsonl"


@dataclass
class TRLPlan:
    prompts_per_step: int  # rolled out fresh each step (the sampler's batch)
    num_generations: int
    completions_per_step: int
    processes: int
    per_device_batch: int  # completions per micro-batch and process
    gradient_accumulation_steps: int
    device: str  # cpu or cuda
    checkpoints_dir: str
    steps_file: str
    replay_groups: int = 0  # groups replayed per step at most (trl.replay), on top of the fresh ones
    config_yaml: str = ""  # the resolved TrainConfig (the ADS knobs this trainer uses), what a dry run prints
    settings: str = ""  # schedule, loss, generation (vLLM), LoRA, trackers (ads_core.train.trl.settings)
    drop_all_wrong: bool = False  # all-wrong groups leave the gradient batch (ads_core.train.groups)

    def dry_run_text(self) -> str:
        return self.config_yaml + "# " + self.describe()

    def launch_line(self) -> str:
        return self.describe().strip()

    def outputs(self, dry_run: bool) -> dict[str, Any]:
        return {"config_yaml": self.config_yaml} if dry_run else {}

    def summary(self) -> dict[str, Any]:
        return {
            "generations_per_prompt": self.num_generations,
            "completions_per_step": self.completions_per_step,
            "micro_batch": f"{self.per_device_batch} completions x {self.gradient_accumulation_steps} per process",
            "device": self.device,
            "steps_file": self.steps_file,
        }

    def describe(self) -> str:
        return (
            f"TRL GRPO on {self.device}: {self.prompts_per_step} prompts x {self.num_generations} completions = "
            f"{self.completions_per_step} per optimizer step (one sampler batch, one generation batch"
            f"{f'; up to {self.replay_groups} replayed groups more' if self.replay_groups else ''}"
            f"{'; all-wrong groups dropped from the gradient batch' if self.drop_all_wrong else ''}), in "
            f"{self.gradient_accumulation_steps} micro-batch(es) of {self.per_device_batch} on {self.processes} "
            f"process(es). {self.settings + ' ' if self.settings else ''}Checkpoints: `{self.checkpoints_dir}`; "
            f"per-step log: `{self.steps_file}`.\n"
        )


def step_batches(sampler: dict[str, Any], prompts: int) -> dict[str, Any]:
    """The sampler section as the run uses it: every kind draws the step's prompts (``build_sampler`` gives it
    that batch), so a dry run shows ``uniform.batch_size: 8``, not the section's unused default of 128."""
    return {
        key: {**value, "batch_size": prompts} if isinstance(value, dict) and "batch_size" in value else value
        for key, value in sampler.items()
    }


def plan_trl(plan: TrainPlan) -> TRLPlan:
    """The batch layout of a TRL run; a layout that does not divide evenly is an error naming the option."""
    from ads_core.train.choice import cuda_gpu_count

    trl = plan.config.trl
    prompts = plan.prompts_per_step
    replay_groups = 0
    if trl.replay:
        from ads_core.train.trl.replay.options import check_replay

        check_replay(plan.config, plan.sampler.kind)
        prompts = trl.rollout_replay.fresh_prompts(plan.prompts_per_step)  # delta * B fresh
        replay_groups = plan.prompts_per_step - prompts
    completions = prompts * trl.num_generations
    from ads_core.train.trl import settings

    # under a launcher, its WORLD_SIZE; else the processes `ads train` will start (trl.processes)
    processes = max(1, int(os.environ.get("WORLD_SIZE", trl.processes)))
    per_step = processes * trl.gradient_accumulation_steps
    if completions % per_step:
        raise TrainOptionError(
            f"{prompts} prompts x {trl.num_generations} generations = {completions} completions per step do not "
            f"split into {processes} process(es) x gradient_accumulation_steps={trl.gradient_accumulation_steps} "
            "equal micro-batches; change gradient_accumulation_steps or num_generations",
            options=("gradient_accumulation_steps", "num_generations"),
        )
    if plan.sampler.kind == "dynamic" and processes > 1:
        raise TrainOptionError(
            f"dynamic sampling under TRL runs in one process (processes {processes}): the groups a step keeps "
            "come from several generation batches; run one process, or set another kind with sampler",
            options=("sampler",),
        )
    drop = drops_all_wrong(plan.config) and _drop_fits(plan, processes)
    run_dir = Path(plan.run_dir)
    plan.warnings += settings.schedule_warnings(plan.config, settings.schedule_horizon(plan.config, run_dir))
    resolved = plan.config.model_copy(update={"sampler": plan.sampler}).model_dump(mode="json")
    resolved["sampler"] = step_batches(resolved["sampler"], prompts)
    return TRLPlan(
        prompts_per_step=prompts,
        num_generations=trl.num_generations,
        completions_per_step=completions,
        processes=processes,
        per_device_batch=completions // per_step,
        replay_groups=replay_groups,
        gradient_accumulation_steps=trl.gradient_accumulation_steps,
        device="cuda" if cuda_gpu_count() else "cpu",
        checkpoints_dir=str(run_dir / CHECKPOINTS),
        steps_file=str(run_dir / STEPS_FILE),
        config_yaml=yaml.safe_dump(resolved, sort_keys=False),
        settings=settings.describe(plan.config, run_dir),
        drop_all_wrong=drop,
    )


def _drop_fits(plan: TrainPlan, processes: int) -> bool:
    """The all-wrong drop makes a step's gradient batch shorter than its generation batch: TRL must not split it
    (into processes or micro-batches), and replay's fixed-size step is not that. Where it does not fit, `on` is
    refused in one line and `auto` (ADS as published) trains without the drop, saying so in the plan's warnings."""
    trl, why = plan.config.trl, None
    if processes > 1:
        why = f"runs in one process (processes {processes}): the groups it keeps differ between processes"
    elif trl.gradient_accumulation_steps > 1:
        why = (
            f"needs gradient_accumulation_steps 1 (got {trl.gradient_accumulation_steps}): TRL cuts a generation "
            "batch into equal micro-batches and would lose the rows a shorter batch does not fill"
        )
    elif trl.replay:
        why = "does not combine with replay, whose steps are filled to a fixed number of groups"
    if why is None:
        return True
    if plan.config.drop_all_wrong == "on":
        raise TrainOptionError(
            f"drop_all_wrong on {why}; set drop_all_wrong off, or change that", options=("drop_all_wrong",)
        )
    plan.warnings.append(
        f"the {plan.config.sampler.kind} sampler as published drops all-wrong groups from the gradient batch, but the "
        f"drop {why}: this run trains without it (drop_all_wrong auto)"
    )
    return False
