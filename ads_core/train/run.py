"""Training from Python: `prepare` a run (neutral plan + the chosen trainer's part), `execute` it, or both at
once with `train`. `ads train` and the `ads-train` flow are thin layers over these three, and every trainer is
driven the same way (`ads_core.train.trainers`).

    from ads_core.train.options import TrainConfig
    from ads_core.train.run import train

    result = train("ads-out/gsm8k_sample/final/train.parquet", TrainConfig(steps=4, name="x"))
    result.run_dir, result.steps_file, result.steps[-1]["sample_ids"], result.last_checkpoint

`on_step(record, trainer)` is called after every optimizer step by trainers that stream their steps
(`streams_steps`, e.g. TRL) with its `steps.jsonl` record and the live trainer (`trainer.model`,
`trainer.processing_class`), e.g. for a held-out evaluation every N steps; `on_line(line)` gets the output of
trainers that run as a subprocess (verl). `score(text, ground_truth) -> [0, 1]` replaces the math reward's
correctness (TRL), for tasks with another answer format. The same `name` (or `run_dir`) resumes from the
newest verified checkpoint (its manifest checked; a resume whose options differ from the run's is refused unless
`allow_change` names them), and one run at a time holds a run folder.
"""

from __future__ import annotations

from ads_core.train import plan as tplan
from ads_core.train.applicable import refuse_foreign_options
from ads_core.train.options import TrainConfig
from ads_core.train.plan import TrainPlan
from ads_core.train.resume import identity
from ads_core.train.trainers import OnLine, OnStep, Score, Trainer, TrainResult, choose_trainer, get_trainer

__all__ = ["TrainResult", "check_machine", "execute", "launch_command", "prepare", "train", "trainer_of"]


def check_machine(cfg: TrainConfig, dry_run: bool = False) -> str:
    """The trainer this config runs with here; raises LaunchError at once when this machine can't run it
    (verl without CUDA GPUs or its rollout engine), and TrainOptionError when an option of another trainer is set
    (`ads_core.train.applicable`), before any artifact or config work."""
    trainer, reason = choose_trainer(cfg)
    refuse_foreign_options(cfg, trainer.name, reason)  # another trainer's option would be silently ignored
    trainer.check_machine(cfg, dry_run)
    return trainer.name


def launch_command(cfg: TrainConfig, argv: list[str]) -> list[str] | None:
    """The command that runs this training as several processes, for a trainer that starts them itself
    (``launch_command``: TRL's `processes` under torchrun); ARGV is this command's arguments. None: train here."""
    trainer, _ = choose_trainer(cfg)
    launch = getattr(trainer, "launch_command", None)
    return launch(cfg, argv) if callable(launch) else None


def trainer_of(plan: TrainPlan) -> Trainer:
    """The trainer a plan was made for."""
    return get_trainer(plan.trainer)


def prepare(artifact_uri: str, cfg: TrainConfig, dry_run: bool = False) -> TrainPlan:
    """Check everything and plan the run; a machine that can't run the chosen trainer fails first, at once."""
    check_machine(cfg, dry_run)
    plan = tplan.plan_training(artifact_uri, cfg, materialize=not dry_run)
    identity.check_before_loading(plan)  # a resume with other options: refused now, before any model is loaded
    plan.part = trainer_of(plan).plan(plan, not dry_run)
    if not dry_run:
        from ads_core.train.resume.lock import refuse_if_held

        refuse_if_held(plan.run_dir)  # another run trains in this folder: one line now, before any output
    return plan


def execute(
    plan: TrainPlan,
    on_step: OnStep | None = None,
    on_line: OnLine | None = None,
    score: Score | None = None,
) -> TrainResult:
    """Run a prepared plan with its trainer, holding the run folder (one run per folder: a second is refused in
    one line naming the holder; `ads_core.train.resume.lock`)."""
    from ads_core.train.resume.lock import holding_run

    if plan.part is None:
        raise TypeError(f"not a prepared plan (trainer {plan.trainer}); call prepare() first")
    with holding_run(plan.run_dir):
        return trainer_of(plan).execute(plan, on_step, on_line, score)


def train(
    artifact_uri: str,
    cfg: TrainConfig,
    on_step: OnStep | None = None,
    score: Score | None = None,
) -> TrainResult:
    """`prepare` + `execute`: train on the artifact with this config; returns the run folder and its steps."""
    return execute(prepare(artifact_uri, cfg), on_step=on_step, score=score)
