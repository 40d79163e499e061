"""Run a planned TRL training: rows, sampler, policy, rewards, ``GRPOConfig``; resume from the newest complete
checkpoint; train; return where everything went.

Resume. A checkpoint folder counts when it holds its manifest (``ads_manifest.json``, written last;
``ads_core.storage.manifest``); the newest one that verifies (every file's size and sha256) is resumed from,
once the run's recorded options match this command's (``ads_core.train.resume.identity``) and its sampler
checkpoint passed every check (a bad one stops the run with a ``CheckpointStateError`` naming the file and the
field, before anything is trained). Newer checkpoints that fail or lack a manifest (a killed save) are moved aside
(``rejected-checkpoint-N``), never deleted, and ``steps.jsonl`` is cut back to the resumed step (each step once).
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ads_core.common import progress
from ads_core.common.text import last_boxed
from ads_core.models.loading import load_for_training
from ads_core.sampler.checkpoint import SamplerCheckpoint, has_checkpoint, read_checkpoint
from ads_core.sampler.kinds import REFERENCE_ROLLOUTS, build_sampler
from ads_core.storage.manifest import has_checkpoint_manifest
from ads_core.train.plan import TrainPlan
from ads_core.train.resume.point import find_resume
from ads_core.train.reward import compute_score
from ads_core.train.trainers import TrainResult
from ads_core.train.trl import final, settings
from ads_core.train.trl.feed import FeedbackSampler, TrainRows, load_rows
from ads_core.train.trl.plan import TRLPlan
from ads_core.train.trl.reference import ReferenceRollouts
from ads_core.train.trl.steps import StepWriter, keep_steps_up_to, read_steps
from ads_core.train.trl.validate import start_validation

log = logging.getLogger("ads.train")

Score = Callable[[str, str], float]  # (completion text, ground truth) -> correctness in [0, 1]
_CHECKPOINT = re.compile(r"checkpoint-(\d+)")
HEADLINE = ("step", "reward_mean", "success_mean", "active_clusters", "window_position", "lag", "loss", "seconds")


def math_score(text: str, ground_truth: str) -> float:
    """The project's math reward: the last ``\\boxed{}`` against the ground truth (math-verify)."""
    return compute_score(None, text, ground_truth)["acc"]


def completion_text(completion: Any) -> str:
    """A TRL completion (a list of chat messages, or plain text) as text."""
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


def reward_functions(score: Score, format_weight: float) -> tuple[list[Callable[..., list[float]]], list[float] | None]:
    """TRL reward functions: correctness first (the sampler reads column 0), a format reward when weighted."""

    def correctness(completions: list[Any], ground_truth: list[str], **_: Any) -> list[float]:
        return [float(score(completion_text(c), g)) for c, g in zip(completions, ground_truth, strict=True)]

    def boxed_format(completions: list[Any], **_: Any) -> list[float]:
        return [1.0 if last_boxed(completion_text(c)) is not None else 0.0 for c in completions]

    if format_weight > 0:
        return [correctness, boxed_format], [1.0, float(format_weight)]
    return [correctness], None


def complete_checkpoints(folder: str) -> list[tuple[int, Path]]:
    """(step, folder) of every complete checkpoint, oldest first."""
    root = Path(folder)
    found = []
    for child in root.iterdir() if root.is_dir() else ():
        m = _CHECKPOINT.fullmatch(child.name)
        if m and has_checkpoint_manifest(child) and (child / "trainer_state.json").is_file() and has_checkpoint(child):
            found.append((int(m.group(1)), child))
    return sorted(found)


def read_checkpoint_state(folder: Path, step: int) -> SamplerCheckpoint:
    """The sampler checkpoint in ``folder/ads_sampler.json``, saved at ``step`` with a feed state of that step."""
    return read_checkpoint(folder, step, check=FeedbackSampler.state_of)[0]


def resume_point(
    plan: TrainPlan, part: TRLPlan, feed: FeedbackSampler, make_sampler: Callable[[], Any]
) -> tuple[tuple[int, str] | None, str, list[str]]:
    """Restore the feed from the newest verified checkpoint; tidy what a killed run left after it. Returns the
    resume point (None: step 0), the run's id and the lines to report."""
    found = find_resume(plan, part.checkpoints_dir, settings.schedule_horizon(plan.config, plan.run_dir))
    if found.point is None:
        found.accept()
        if read_steps(part.steps_file):
            log.warning("%s has steps but no complete checkpoint: starting again from step 0", part.steps_file)
            keep_steps_up_to(part.steps_file, 0)
        return None, found.run_id, found.notes
    step, folder = found.point

    def fits(checkpoint: SamplerCheckpoint) -> tuple[dict[str, Any], Any]:
        state, fresh = FeedbackSampler.state_of(checkpoint), make_sampler()
        feed.check_state(state, fresh)  # every field, the nested sampler state too; changes nothing
        return state, fresh

    fix = f"resume with the options it was saved with, or delete {folder} (or start under a new name)"
    _, (state, fresh) = read_checkpoint(folder, step, check=fits, fix=fix)  # CheckpointStateError, one line
    feed.load_state_dict(state, fresh)
    found.accept()
    problem = keep_steps_up_to(part.steps_file, step)
    if problem:
        log.warning("%s", problem)
    return (step, str(folder)), found.run_id, found.notes


def grpo_config(plan: TrainPlan, part: TRLPlan, reward_weights: list[float] | None) -> Any:
    from trl import GRPOConfig

    trl = plan.config.trl
    return GRPOConfig(
        output_dir=part.checkpoints_dir,
        max_steps=plan.config.steps,
        per_device_train_batch_size=part.per_device_batch,
        gradient_accumulation_steps=part.gradient_accumulation_steps,  # = steps_per_generation: one draw per step
        num_generations=trl.num_generations,
        num_iterations=1,
        max_completion_length=trl.max_completion_length,
        temperature=trl.temperature,
        beta=trl.beta,
        learning_rate=trl.learning_rate,
        seed=trl.seed,
        reward_weights=reward_weights,
        logging_steps=1,
        save_strategy="steps",
        save_steps=trl.save_steps,
        save_total_limit=None,  # rotation is ours, after a checkpoint's manifest (ads_core.train.resume.checkpoints)
        ignore_data_skip=True,  # the sampler resumes itself; skipping batches would draw and discard them
        dataloader_num_workers=0,  # workers would prefetch batches drawn before the last update
        remove_unused_columns=False,
        shuffle_dataset=False,
        use_cpu=part.device == "cpu",
        bf16=part.device == "cuda",
        disable_tqdm=True,
        **settings.grpo_kwargs(plan.config),  # schedule, loss knobs, vLLM, trackers
    )


def run_trl(
    plan: TrainPlan,
    part: TRLPlan,
    on_step: Callable[[dict[str, Any], Any], None] | None = None,
    score: Score | None = None,
) -> TrainResult:
    """Train ``plan.config.steps`` optimizer steps (resuming when the run folder has a checkpoint). Everything the
    trainer needs is made here, in order, and handed to its constructor: nothing is set on it afterwards."""
    from ads_core.train.trl import hooks
    from ads_core.train.trl.trainer import ADSGRPOTrainer, RunSettings

    started = time.perf_counter()
    Path(part.checkpoints_dir).mkdir(parents=True, exist_ok=True)
    rows: TrainRows = load_rows(plan.train_uri)
    reference = ReferenceRollouts(rows.dataset)  # the need reference_rollouts (kind dots), met by the trainer below

    def make_sampler() -> Any:
        kind, batch = plan.sampler.kind, part.prompts_per_step
        provided = {REFERENCE_ROLLOUTS: reference}  # a kind gets what it declares it needs (ads_core.sampler.kinds)
        return build_sampler(kind, rows.cluster_ids, rows.rank_in_cluster, plan.sampler, batch, provided)

    feed = FeedbackSampler(
        make_sampler(),
        plan.sampler.kind,
        part.num_generations,
        part.gradient_accumulation_steps,
        rows.n_rows,
        plan.config.steps,
    )
    resumed, run_id, notes = resume_point(plan, part, feed, make_sampler)
    if resumed is not None:
        notes.append(f"resumed from {resumed[1]} (step {resumed[0]})")
        if resumed[0] >= plan.config.steps:
            notes += final.finish(plan, part, complete_checkpoints(part.checkpoints_dir))  # if a kill left none
            notes.append(f"already trained {resumed[0]} steps >= steps {plan.config.steps}: nothing to do")
            return _result(plan, part, resumed, started, notes)
    validator = start_validation(plan, part.device, resumed[0] if resumed else 0, read_steps(part.steps_file))
    funcs, weights = reward_functions(score or math_score, plan.config.trl.format_reward)
    if score is None:
        from ads_core.grading.api import start_verifier

        start_verifier()  # the math reward's verifier started now, not inside the first step's rewards
    progress.phase(f"training: loading the policy {plan.model}")
    model, tokenizer = load_for_training(plan.model, part.device)  # ads_core.models.loading, as every policy load
    if validator is not None:  # eval.jsonl: step 0 now, then every validation.steps steps and the last
        if not resumed:
            progress.phase("training: validating the policy before the first step")
        validator.before_train(model, tokenizer)
        on_step = validator.chain(on_step)
    run = RunSettings(
        run_id=run_id,
        schedule_steps=settings.schedule_horizon(plan.config, plan.run_dir),  # see settings: the horizon
        keep_checkpoints=plan.config.trl.keep_checkpoints,
        resume_from=resumed[1] if resumed else None,
        drop_all_wrong=part.drop_all_wrong,  # the plan resolved it (auto without it where TRL cannot drop)
    )
    trainer_class, extension = ADSGRPOTrainer, {}
    if plan.config.trl.replay:  # it restores its buffer from run.resume_from
        from ads_core.train.trl.replay.trainer import ReplayGRPOTrainer

        trainer_class = ReplayGRPOTrainer
        extension = {"replay": plan.config.trl.rollout_replay, "replay_groups": part.replay_groups}
    trainer = trainer_class(
        model=model,
        reward_funcs=funcs,
        args=grpo_config(plan, part, weights),
        train_dataset=rows.dataset,
        processing_class=tokenizer,
        callbacks=[hooks.FinalCheckpoint()],
        feed=feed,
        rows=rows,
        writer=StepWriter(part.steps_file),
        run=run,
        hooks=hooks.RunHooks(plan.config, plan.run_dir, part.processes),
        on_step=hooks.with_notices(on_step, hooks.StepNotices(plan.config, part.prompts_per_step), log),
        reference=reference,
        peft_config=settings.peft_config(plan.config.trl),
        **extension,
    )
    if settings.is_rank_zero():
        settings.record_horizon(plan.config, plan.run_dir, run.schedule_steps)  # once the trainer could be made
    progress.phase(f"training: step {(resumed[0] if resumed else 0) + 1} (generating, scoring, updating)")
    trainer.train(resume_from_checkpoint=run.resume_from)
    del trainer, model
    notes += final.finish(plan, part, complete_checkpoints(part.checkpoints_dir))
    return _result(plan, part, resumed, started, notes)


def _result(
    plan: TrainPlan, part: TRLPlan, resumed: tuple[int, str] | None, started: float, notes: list[str]
) -> TrainResult:
    done = complete_checkpoints(part.checkpoints_dir)
    steps = read_steps(part.steps_file)
    last = steps[-1] if steps else {}
    metrics = {k: float(v) for k, v in last.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    return TrainResult(
        trainer="trl",
        run_dir=plan.run_dir,
        steps_file=part.steps_file,
        steps=steps,
        metrics=metrics,
        headline={k: metrics[k] for k in HEADLINE if k in metrics},
        resumed_from=resumed[0] if resumed else None,
        last_checkpoint=str(done[-1][1]) if done else None,
        seconds=time.perf_counter() - started,
        notes=notes,
    )
