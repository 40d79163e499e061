"""Training from Python: `prepare` a run (neutral plan + the chosen trainer's part), `execute` it, or both at
once with `train`. `ads train` and the `ads-train` flow are thin layers over these three.

    from ads_core.config.train import TrainConfig
    from ads_core.train.run import train

    result = train("ads-out/gsm8k_sample/final/train.parquet", TrainConfig(trainer="trl", steps=4, name="x"))
    result.run_dir, result.steps_file, result.steps[-1]["sample_ids"], result.last_checkpoint

`on_step(record, trainer)` (TRL) is called after every optimizer step with its `steps.jsonl` record and the live
trainer (`trainer.model`, `trainer.processing_class`), e.g. for a held-out evaluation every N steps. `score(text,
ground_truth) -> [0, 1]` replaces the math reward's correctness (TRL), for tasks with another answer format.
The same `name` (or `run_dir`) resumes from the newest complete checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ads_core.config.train import TrainConfig
from ads_core.train import plan as tplan
from ads_core.train.choice import choose_trainer
from ads_core.train.errors import LaunchError
from ads_core.train.plan import TrainPlan

if TYPE_CHECKING:
    from ads_core.train.trl.plan import TRLPlan
    from ads_core.train.verl.plan import VerlPlan


@dataclass
class TrainResult:
    trainer: str
    run_dir: str
    steps_file: str | None  # TRL: RUN_DIR/steps.jsonl; verl: its metrics JSONL
    steps: list[dict[str, Any]]  # TRL: every logged step (this run's and the resumed ones')
    metrics: dict[str, float]  # the last step's headline numbers
    last_checkpoint: str | None = None
    resumed_from: int | None = None
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)


def check_machine(cfg: TrainConfig, dry_run: bool = False) -> str:
    """The trainer this config runs with here; raises LaunchError at once when this machine can't run it
    (verl without CUDA GPUs or its rollout engine), before any artifact or config work."""
    trainer, _ = choose_trainer(cfg.trainer, cfg.verl.ray_address, cfg.sampler.kind)
    if trainer == "verl" and not dry_run:
        from ads_core.train.verl import launch as verl_launch

        verl_launch.check_launch_environment(cfg.verl)  # no CUDA here -> fail now, not deep inside Ray
    return trainer


def prepare(artifact_uri: str, cfg: TrainConfig, dry_run: bool = False) -> TrainPlan:
    """Check everything and plan the run; a machine that can't run the chosen trainer fails first, at once."""
    check_machine(cfg, dry_run)
    plan = tplan.plan_training(artifact_uri, cfg, materialize=not dry_run)
    if plan.trainer == "verl":
        from ads_core.train.verl.plan import plan_verl

        part = plan_verl(plan, materialize=not dry_run)
        plan.warnings += part.warnings
    else:
        from ads_core.train.trl.plan import plan_trl

        part = plan_trl(plan)
        if plan.eval_uris:
            plan.warnings.append(
                f"the TRL trainer does not evaluate the eval sets ({', '.join(plan.eval_uris)}); they only serve the "
                "decontamination check (set eval_sets to [] to skip it)"
            )
    plan.part = part
    return plan


def verl_part(plan: TrainPlan) -> VerlPlan:
    """The verl part of a prepared verl plan."""
    from ads_core.train.verl.plan import VerlPlan

    if not isinstance(plan.part, VerlPlan):
        raise TypeError(f"not a prepared verl plan (trainer {plan.trainer}); call prepare() first")
    return plan.part


def trl_part(plan: TrainPlan) -> TRLPlan:
    """The TRL part of a prepared TRL plan."""
    from ads_core.train.trl.plan import TRLPlan

    if not isinstance(plan.part, TRLPlan):
        raise TypeError(f"not a prepared TRL plan (trainer {plan.trainer}); call prepare() first")
    return plan.part


def execute(
    plan: TrainPlan,
    on_step: Callable[[dict[str, Any], Any], None] | None = None,
    on_line: Callable[[str], None] | None = None,
    score: Callable[[str, str], float] | None = None,
) -> TrainResult:
    """Run a prepared plan: TRL in this process, verl as its launch command (``on_line`` gets its output)."""
    if plan.trainer == "verl":
        from ads_core.train.verl import launch as verl_launch

        part = verl_part(plan)
        code = verl_launch.launch(part, on_line=on_line)
        if code != 0:
            raise LaunchError(f"verl exited with status {code}; see its log above (run dir {plan.run_dir})")
        return TrainResult("verl", plan.run_dir, part.metrics_file, [], verl_launch.final_metrics(part))
    from ads_core.train.trl.run import run_trl

    result = run_trl(plan, trl_part(plan), on_step=on_step, score=score)
    last = result.steps[-1] if result.steps else {}
    metrics = {k: float(v) for k, v in last.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    return TrainResult(
        trainer="trl",
        run_dir=result.run_dir,
        steps_file=result.steps_file,
        steps=result.steps,
        metrics=metrics,
        last_checkpoint=result.last_checkpoint,
        resumed_from=result.resumed_from,
        seconds=result.seconds,
        notes=result.notes,
    )


def train(
    artifact_uri: str,
    cfg: TrainConfig,
    on_step: Callable[[dict[str, Any], Any], None] | None = None,
    score: Callable[[str, str], float] | None = None,
) -> TrainResult:
    """`prepare` + `execute`: train on the artifact with this config; returns the run folder and its steps."""
    return execute(prepare(artifact_uri, cfg), on_step=on_step, score=score)
