"""The TRL settings beyond the batch layout, from the `trl` section to TRL's own arguments: the learning-rate
schedule and its horizon, the GRPO loss knobs, the trackers, vLLM generation, LoRA, and several processes.

The schedule's horizon. HF builds the schedule over ``max_steps``, which is this command's ``--steps``: a run to
2 steps resumed to 3 would change its cosine half-way. The horizon is therefore ``trl.schedule_steps``, by default
the ``--steps`` of the run's first command, recorded in ``RUN_DIR/schedule.json``; every later command of the
run reads it back (``ADSGRPOTrainer.create_scheduler`` builds the schedule over it), so a resumed or extended run
continues the same schedule and its learning rate at every step is the uninterrupted run's.

vLLM and processes are checked before any work (``check_machine``): vLLM needs CUDA and the ``vllm`` package;
``processes`` above 1 is started by ``ads train`` with torchrun (``torchrun_command``).
Importing this module imports neither torch nor TRL.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from ads_core import storage
from ads_core.train.errors import LaunchError, TrainOptionError
from ads_core.train.options import TrainConfig
from ads_core.train.trl.options import TRLConfig

SCHEDULE_FILE = "schedule.json"
HF_SCHEDULER = {"constant": "constant", "linear": "linear", "cosine": "cosine"}  # + warm-up: see scheduler_type
GRPO_KNOBS = (  # TRLConfig fields passed to GRPOConfig under the same name
    "loss_type",
    "epsilon",
    "epsilon_high",
    "scale_rewards",
    "mask_truncated_completions",
    "chat_template_kwargs",
    "use_vllm",
    "vllm_mode",
    "vllm_gpu_memory_utilization",
    "vllm_server_host",
    "vllm_server_port",
)


def recorded_horizon(run_dir: str | os.PathLike[str]) -> int | None:
    """The schedule horizon the run's first command recorded, or None (a new run, or an unreadable record)."""
    path = Path(run_dir) / SCHEDULE_FILE
    try:
        value = json.loads(path.read_text(encoding="utf-8")).get("schedule_steps")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def schedule_horizon(cfg: TrainConfig, run_dir: str | os.PathLike[str]) -> int:
    """Steps the learning-rate schedule spans: trl.schedule_steps when set, else the run's recorded horizon,
    else this (first) command's steps."""
    if cfg.trl.schedule_steps is not None:
        return int(cfg.trl.schedule_steps)
    return recorded_horizon(run_dir) or int(cfg.steps)


def record_horizon(cfg: TrainConfig, run_dir: str | os.PathLike[str], horizon: int) -> None:
    """Write ``RUN_DIR/schedule.json`` (atomically) when it is missing or differs: the first command's horizon,
    or the one trl.schedule_steps set since."""
    if recorded_horizon(run_dir) == horizon:
        return
    doc = {
        "schedule_steps": horizon,
        "lr_scheduler": cfg.trl.lr_scheduler,
        "warmup_steps": cfg.trl.warmup_steps,
        "learning_rate": cfg.trl.learning_rate,
    }
    storage.write_json(str(Path(run_dir) / SCHEDULE_FILE), doc)


def scheduler_type(trl: TRLConfig) -> str:
    """HF's lr_scheduler_type: HF's constant schedule ignores warm-up, its constant_with_warmup does not."""
    if trl.lr_scheduler == "constant" and trl.warmup_steps:
        return "constant_with_warmup"
    return HF_SCHEDULER[trl.lr_scheduler]


def grpo_kwargs(cfg: TrainConfig) -> dict[str, Any]:
    """GRPOConfig arguments for the schedule, the loss knobs, vLLM and the trackers (the batch layout, the
    checkpoints and the seed are set by the caller)."""
    trl = cfg.trl
    out: dict[str, Any] = {name: getattr(trl, name) for name in GRPO_KNOBS}
    out |= {
        "lr_scheduler_type": scheduler_type(trl),
        "warmup_steps": trl.warmup_steps,
        "report_to": trl.trackers or "none",
        "log_completions": False,  # TRL's console table; trl.log_completions writes RUN_DIR/completions.jsonl
    }
    return out


def schedule_warnings(cfg: TrainConfig, horizon: int) -> list[str]:
    """A run longer than its schedule: a linear schedule is at 0 from there, a cosine one rises again."""
    if cfg.trl.lr_scheduler != "constant" and cfg.steps > horizon:
        return [
            f"steps {cfg.steps} > the {cfg.trl.lr_scheduler} schedule's {horizon} steps (schedule_steps, the run's "
            f"first command's steps unless set): the learning rate after step {horizon} is past the schedule's end; "
            "set schedule_steps to the run's total steps"
        ]
    return []


def peft_config(trl: TRLConfig) -> Any:
    """A peft LoraConfig for trl.lora_rank > 0 (GRPOTrainer wraps the policy with it), else None."""
    if trl.lora_rank <= 0:
        return None
    try:
        from peft import LoraConfig
    except ImportError:
        raise LaunchError(
            "lora_rank > 0 needs the peft package: pip install 'ads-pipeline[train]' (or pip install peft)",
            options=("lora_rank",),
        ) from None
    return LoraConfig(
        r=trl.lora_rank,
        lora_alpha=trl.lora_alpha,
        lora_dropout=trl.lora_dropout,
        target_modules=trl.lora_target_modules,
        task_type="CAUSAL_LM",
    )


def check_machine(cfg: TrainConfig, dry_run: bool = False) -> None:
    """Refuse at once, in one line, what this machine can't run: vLLM without CUDA or the vllm package, more
    processes than GPUs, LoRA without peft. A dry run only plans, so it is not refused."""
    from ads_core.train.choice import cuda_gpu_count, installed

    trl = cfg.trl
    if trl.lora_rank > 0 and not installed("peft"):
        raise LaunchError("lora_rank > 0 needs the peft package: pip install peft", options=("lora_rank",))
    if dry_run:
        return
    if trl.use_vllm:
        gpus = cuda_gpu_count()
        missing = [what for what, ok in (("a CUDA GPU", gpus > 0), ("the vllm package", installed("vllm"))) if not ok]
        if missing:
            raise LaunchError(
                f"use_vllm needs {' and '.join(missing)}, which this machine lacks; generate with transformers "
                "(use_vllm false) here, or run on a GPU machine (docs/training.md)",
                options=("use_vllm",),
            )
    world = os.environ.get("WORLD_SIZE")
    if world is not None and trl.processes > 1 and int(world) != trl.processes:
        raise TrainOptionError(
            f"processes={trl.processes}, but this process is one of {world} (WORLD_SIZE): start `ads train` once "
            "with processes, or under torchrun without it",
            options=("processes",),
        )
    gpus = cuda_gpu_count()
    if gpus and trl.processes > gpus:
        raise LaunchError(
            f"processes={trl.processes} > the {gpus} CUDA GPU(s) here: one process per GPU", options=("processes",)
        )


def needs_launch(cfg: TrainConfig) -> bool:
    """This command must start trl.processes processes itself (it is not one of them already)."""
    return cfg.trl.processes > 1 and "WORLD_SIZE" not in os.environ


def torchrun_command(processes: int, argv: list[str]) -> list[str]:
    """torchrun (torch's elastic launcher) starting PROCESSES copies of this command on this node; ARGV is the
    command line without the program (``sys.argv[1:]``). Each copy sees WORLD_SIZE and trains as one rank."""
    program = os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else "ads"
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # a rendezvous on a free local port: several runs on one node don't collide
        f"--nproc_per_node={processes}",
        program,
        *argv,
    ]


def is_rank_zero() -> bool:
    """This process prints and writes the run's logs (RANK 0, or no launcher)."""
    return os.environ.get("RANK", "0") == "0"


def describe(cfg: TrainConfig, run_dir: str | os.PathLike[str]) -> str:
    """The settings a dry run and the run's first line show besides the batch layout."""
    trl = cfg.trl
    horizon = schedule_horizon(cfg, run_dir)
    lines = [
        f"Learning rate {trl.learning_rate:g}, {trl.lr_scheduler} over {horizon} steps"
        + (f" after {trl.warmup_steps} warm-up steps" if trl.warmup_steps else "")
        + f"; loss {trl.loss_type}, epsilon {trl.epsilon:g}"
        + (f"/{trl.epsilon_high:g}" if trl.epsilon_high is not None else "")
        + f", scale_rewards {trl.scale_rewards}."
    ]
    if trl.use_vllm:
        where = (
            f"colocated on the training GPU(s), vllm_gpu_memory_utilization {trl.vllm_gpu_memory_utilization:g}"
            if trl.vllm_mode == "colocate"
            else f"from the `trl vllm-serve` server at {trl.vllm_server_host}:{trl.vllm_server_port}"
        )
        lines.append(f"Generation: vLLM ({trl.vllm_mode}), {where}.")
    else:
        lines.append("Generation: transformers generate (use_vllm false).")
    if trl.lora_rank:
        lines.append(
            f"LoRA: rank {trl.lora_rank}, alpha {trl.lora_alpha:g}, dropout {trl.lora_dropout:g}, modules "
            f"{trl.lora_target_modules}; RUN_DIR/final gets the merged policy."
        )
    if trl.trackers:
        lines.append(f"Trackers: {', '.join(trl.trackers)} (with the sampler's metrics).")
    return " ".join(lines)
