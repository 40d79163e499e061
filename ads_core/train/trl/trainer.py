"""``ADSGRPOTrainer``: TRL's ``GRPOTrainer`` with the run's sampler in the loop.

What it knows of its run is given to its constructor and does not change: the prompt feed and the training rows,
the step writer and ``on_step``, the run's settings (``RunSettings``: identity, LR horizon, checkpoints kept, the
checkpoint resumed from, the all-wrong drop), the run's callbacks (``RunHooks``, put first among TRL's) and the
reference rollouts a sampler kind may need (bound here). What changes, per step, is documented where it is kept:
the step's feedback (``last_feedback``), its additions to the step line (``step_extras``), the extra draw being
rolled out (dynamic sampling) and the step clock (``StepClock``); on resume, the checkpoint's RNG state once.

TRL methods overridden, each for one reason:

* ``_get_train_sampler``: returns the ``FeedbackSampler`` (TRL's own hook for a custom prompt sampler);
* ``_calculate_rewards``: after TRL has computed and gathered every completion's rewards (all processes, in
  the global order the groups are normalised in), the rows are gathered the same way and each prompt's mean
  correctness goes to ``update``; identical on every process, so every process's sampler stays the same;
* ``log``: TRL logs every step (``logging_steps=1``); the step's line goes to ``steps.jsonl`` with TRL's loss
  and lengths and the step's time split (``time_split``: fresh rollouts, reference rollouts, checkpoint writes,
  the update; the clock starts when the trainer is made, just before ``train``), before any checkpoint of that
  step is written;
* ``get_batch_samples``: on resume, re-applies the checkpoint's RNG state after the first fetch (below);
* ``_generate_and_score_completions``: times the fresh rollouts; with a ``GroupFilter`` sampler (kind
  ``dynamic``), drops the groups whose rewards all agree and rolls out more generation batches in the same step
  (``ads_core.train.trl.dynamic``); every other kind goes straight to TRL's; with ``drop_all_wrong`` (the ADS
  reference trainer's filter, ``ads_core.train.groups``), the step's all-wrong groups then leave the gradient
  batch (its ``dropped_groups`` in ``steps.jsonl``);
* ``create_scheduler``: builds the learning-rate schedule over the run's horizon (``schedule_steps``, recorded by
  the run's first command; ``ads_core.train.trl.settings``) rather than this command's ``max_steps``;
* ``_save_checkpoint``: refuses non-finite weights (naming the step), writes ``ads_sampler.json`` (the feed's whole
  state, in the one sampler checkpoint format of ``ads_core.sampler.checkpoint``) into ``checkpoint-N`` first,
  lets TRL save, then writes the checkpoint's manifest (``ads_core.storage.manifest.write_checkpoint``: a checkpoint is
  complete once it has one) and rotates; a full or read-only disk is one line (``resume.saving``);
* ``_load_optimizer_and_scheduler``: a learning rate changed on purpose (``allow_change``) takes effect;
* ``_issue_warnings_after_load``: a tied output embedding, saved once, is re-tied rather than reported missing;
* ``_load_from_checkpoint``: a policy that does not fit the checkpoint is one line naming both.

Nothing of TRL is copied; ``tests/integrations/test_trl_contract.py`` pins the hooks and signatures used.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from accelerate.utils import gather_object
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from transformers.trainer_utils import PREFIX_CHECKPOINT_DIR
from trl import GRPOTrainer

from ads_core.sampler.checkpoint import write_checkpoint
from ads_core.storage import fencing
from ads_core.storage import manifest as mf
from ads_core.train.errors import RunStateError
from ads_core.train.groups import groups_to_keep
from ads_core.train.resume import checkpoints, saving
from ads_core.train.trl.dynamic import fill_generation_batch, merge_groups
from ads_core.train.trl.feed import Draw, Feedback, FeedbackSampler, TrainRows
from ads_core.train.trl.hooks import RunHooks
from ads_core.train.trl.reference import ReferenceRollouts
from ads_core.train.trl.steps import StepWriter, window_position

TRL_LOG_KEYS = {  # TRL's per-step log key -> our name
    "loss": "loss",
    "completions/mean_length": "completion_length",
    "step_time": "seconds",
    "entropy": "entropy",
    "grad_norm": "grad_norm",
}

OnStep = Callable[[dict[str, Any], Any], None]  # (the step's record, the trainer: .model, .processing_class)


@dataclass(frozen=True)
class RunSettings:
    """What the trainer knows of its run before it is made; none of it changes while it trains."""

    run_id: str  # the run's identity (ads_core.train.resume), repeated in every checkpoint manifest
    schedule_steps: int  # the LR schedule's horizon (ads_core.train.trl.settings.schedule_horizon)
    keep_checkpoints: int = 2  # checkpoints with a manifest that rotation keeps
    resume_from: str | None = None  # the checkpoint this command resumes from; None: from step 0
    drop_all_wrong: bool = False  # the reference trainer's all-wrong drop (ads_core.train.groups)


class StepClock:
    """The step line's time split: wall and CPU time since the last line (or since the trainer was made), and the
    seconds spent writing checkpoints since (booked to the next step: HF saves after the step's line)."""

    def __init__(self) -> None:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        self.checkpoint_seconds = 0.0

    def split(self, fresh: float, reference: float) -> dict[str, float]:
        """The step's seconds, FRESH and REFERENCE rollouts among them; restarts the clock."""
        now, cpu = time.perf_counter(), time.process_time()
        wall, cpu_spent = now - self._wall, cpu - self._cpu
        saving, self.checkpoint_seconds = self.checkpoint_seconds, 0.0
        self._wall, self._cpu = now, cpu
        return {
            "step_seconds": round(wall, 4),
            "cpu_seconds": round(cpu_spent, 4),  # this process's CPU time: what load on the machine doesn't inflate
            "fresh_rollout_seconds": round(fresh, 4),
            "reference_rollout_seconds": round(reference, 4),
            "checkpoint_seconds": round(saving, 4),
            "update_seconds": round(max(0.0, wall - fresh - reference - saving), 4),
        }


class ADSGRPOTrainer(GRPOTrainer):
    """``GRPOTrainer`` whose prompts come from a ``FeedbackSampler`` fed back every generation batch."""

    def __init__(
        self,
        *args: Any,
        feed: FeedbackSampler,
        rows: TrainRows,
        writer: StepWriter,
        run: RunSettings,
        hooks: RunHooks,
        on_step: OnStep | None = None,
        reference: ReferenceRollouts | None = None,
        **kwargs: Any,
    ) -> None:
        self.feed, self.rows, self.writer, self.on_step = feed, rows, writer, on_step
        self.run, self.hooks, self.reference = run, hooks, reference
        # per step: the step's feedback (set by _calculate_rewards, written by log), its own additions to the step
        # line (time split, dropped groups, replay), the extra batch being rolled out (dynamic sampling)
        self.last_feedback: Feedback | None = None
        self.step_extras: dict[str, Any] = {}
        self._extra_draw: Draw | None = None
        self._rng_to_restore = run.resume_from  # once, after the first fetch (get_batch_samples)
        super().__init__(*args, **kwargs)
        hooks.attach(self)  # first among the callbacks, before the trackers'
        for noisy in (PrinterCallback, ProgressCallback):
            self.remove_callback(noisy)
        if reference is not None:
            reference.bind(self)  # the need reference_rollouts (kind dots): rolled out through this trainer
        self._clock = StepClock()  # last: the first step's time starts here, just before train()

    def _get_train_sampler(self, dataset: Any = None) -> FeedbackSampler:
        return self.feed

    def get_batch_samples(self, epoch_iterator: Any, num_batches: int, device: Any) -> Any:
        """On resume, restore the RNG state again once the first batches are fetched: HF restores it before
        creating the dataloader iterator, which draws a seed from it, so the resumed run's sampling would
        differ from the uninterrupted run's (HF does the same after skipping batches)."""
        batches = super().get_batch_samples(epoch_iterator, num_batches, device)
        if self._rng_to_restore is not None:
            self._load_rng_state(self._rng_to_restore)
            self._rng_to_restore = None
        return batches

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        rewards_per_func = super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        if not self.model.training:  # evaluation: no feedback
            return rewards_per_func
        rows = gather_object([int(x["row"]) for x in inputs])
        values = rewards_per_func.detach().float().cpu().numpy()
        weights = self.reward_weights.detach().float().cpu().numpy()
        total = np.nansum(values * weights[None, :], axis=1)
        if self._extra_draw is not None:
            self.last_feedback = self.feed.feedback_extra(self._extra_draw, rows, values[:, 0], total)
        else:
            self.last_feedback = self.feed.feedback(rows, values[:, 0], total)  # column 0: correctness
        return rewards_per_func

    def _generate_and_score_completions(self, inputs: Any) -> Any:
        started = time.perf_counter()
        try:
            out = self._generate_fresh(inputs)
        finally:
            if self.model.training:
                self.step_extras["fresh_rollout_seconds"] = round(time.perf_counter() - started, 4)
        if self.model.training:
            self.step_extras["dropped_groups"] = 0
            if self.run.drop_all_wrong:
                out = self._without_all_wrong(out)
        return out

    def _without_all_wrong(self, out: dict[str, Any]) -> dict[str, Any]:
        """The generation batch without its all-wrong groups (none dropped when every group is all wrong); the
        sampler already had every group's success. One process (the plan refuses more)."""
        assert self.last_feedback is not None  # set by _calculate_rewards
        keep = groups_to_keep(self.last_feedback.trained_group_success)
        self.step_extras["dropped_groups"] = int((~keep).sum())
        if keep.all():
            return out
        picks = [(0, int(g)) for g in np.flatnonzero(keep)]
        return merge_groups([out], picks, self.num_generations, self._tokenizer.pad_token_id)

    def _generate_fresh(self, inputs: Any) -> Any:
        if not self.model.training or not self.feed.filters_groups:
            return super()._generate_and_score_completions(inputs)
        if self.scale_rewards not in ("group", "none") or self.multi_objective_aggregation != "sum_then_normalize":
            raise RuntimeError(
                "dynamic sampling under TRL needs per-group advantages (scale_rewards 'group' or 'none', "
                "multi_objective_aggregation 'sum_then_normalize')"
            )

        def rollout(batch: list[dict[str, Any]], extra: Draw | None) -> tuple[Any, Feedback]:
            self._extra_draw = extra
            try:
                out = super(ADSGRPOTrainer, self)._generate_and_score_completions(batch)
            finally:
                self._extra_draw = None
            assert self.last_feedback is not None  # set by _calculate_rewards
            return out, self.last_feedback

        def inputs_for(rows: list[int]) -> list[dict[str, Any]]:
            picked = self.rows.dataset.select(rows).to_list()
            return [dict(x) for x in picked for _ in range(self.num_generations)]

        out, self.last_feedback = fill_generation_batch(
            inputs,
            rollout,
            self.feed.draw_extra,
            inputs_for,
            self.feed.sampler.keep,
            need=self.feed.batch_size,
            max_draws=self.feed.sampler.max_draws,
            num_generations=self.num_generations,
            pad_token_id=self._tokenizer.pad_token_id,
        )
        return out

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        bad = saving.nonfinite_logs(logs) if self.model.training else None
        if bad:  # logged before the step's save: nothing of this step is saved
            raise RunStateError(
                f"step {self.state.global_step}: {bad}; the run stopped before saving it (its last checkpoint is "
                "intact): lower learning_rate, or resume with allow_change learning_rate",
                options=("learning_rate", "allow_change"),
            )
        super().log(logs, start_time)
        fb = self.last_feedback
        if fb is None or fb.draw.index != self.state.global_step or "loss" not in logs:
            return
        self.last_feedback = None
        if not self.is_world_process_zero():  # every process fed back the same; one writes
            return
        record = step_record(fb, self.rows, self.feed.sampler.metrics(), logs) | self.hooks.take_extras()
        record |= self.time_split() | self.step_extras
        self.step_extras = {}
        self.writer.write(record)
        if self.on_step is not None:
            self.on_step(record, self)

    def time_split(self) -> dict[str, float]:
        """The step's wall seconds (since the last step's line), split into fresh rollouts, reference rollouts
        (kind dots; booked to the step during which they ran: the dataloader draws one step ahead), checkpoint
        writes (booked to the next step: HF saves after the step's line) and the rest, the update (forward,
        backward, optimizer; replay's bookkeeping too); and this process's CPU seconds (``StepClock``)."""
        fresh = float(self.step_extras.get("fresh_rollout_seconds", 0.0))
        reference = self.reference.take_seconds() if self.reference is not None else 0.0
        return self._clock.split(fresh, reference)

    def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
        """The LR schedule over the run's horizon, not this command's steps: a resumed run continues it."""
        return super().create_scheduler(self.run.schedule_steps or num_training_steps, optimizer)

    def _save_checkpoint(self, model: Any, trial: Any) -> None:
        started = time.perf_counter()
        try:
            self._save_checked(model, trial)
        finally:
            self._clock.checkpoint_seconds += time.perf_counter() - started

    def _save_checked(self, model: Any, trial: Any) -> None:
        step = int(self.state.global_step)
        folder = os.path.join(self._get_output_dir(trial=trial), f"{PREFIX_CHECKPOINT_DIR}-{step}")
        bad = saving.nonfinite_weights(self.model)
        if bad:
            raise RunStateError(
                f"step {step}: {bad}; the run stopped before saving it (its last checkpoint is intact): lower "
                "learning_rate, or resume with allow_change learning_rate",
                options=("learning_rate", "allow_change"),
            )
        if self.args.should_save:
            fencing.check_publish(folder)  # a run that lost its lock on the run folder saves nothing more
        started_here = not os.path.exists(folder)  # only a save this process began may be removed if it fails
        try:
            if self.args.should_save:
                os.makedirs(folder, exist_ok=True)
                write_checkpoint(folder, self.feed.checkpoint(step))  # atomic, fsynced
            super()._save_checkpoint(model, trial)
            if self.args.world_size > 1:  # every process's files (rng_state_<rank>.pth) are in before the manifest
                self.accelerator.wait_for_everyone()
            if self.args.should_save:
                mf.write_checkpoint(folder, step, self.run.run_id)  # last: the checkpoint is complete
                checkpoints.rotate(os.path.dirname(folder), self.run.keep_checkpoints)
        except Exception as exc:
            why = saving.save_failure(exc, folder)
            if why is None:
                raise
            if started_here:
                saving.remove_partial(folder)
            found = checkpoints.checkpoint_folders(os.path.dirname(folder))
            done = [f for _, f in found if mf.has_checkpoint_manifest(f)]
            start = f"from {done[-1].name}" if done else "from step 0"
            raise RunStateError(
                f"could not save checkpoint {folder}: {why}; free space (or make the folder writable) and rerun the "
                f"same command: it resumes exactly {start}"
            ) from None

    def _load_optimizer_and_scheduler(self, checkpoint: str | None) -> None:
        """A learning rate changed on purpose (``allow_change``; any other change is refused before this) takes
        effect: the saved optimizer and schedule would keep the old peak rate."""
        super()._load_optimizer_and_scheduler(checkpoint)
        schedule, rate = self.lr_scheduler, float(self.args.learning_rate)
        if checkpoint is None or not getattr(schedule, "base_lrs", None) or schedule.base_lrs[0] == rate:
            return
        schedule.base_lrs = [rate for _ in schedule.base_lrs]
        for group, factor in zip(self.optimizer.param_groups, getattr(schedule, "lr_lambdas", []), strict=False):
            group["initial_lr"] = rate
            group["lr"] = rate * factor(schedule.last_epoch)

    def _issue_warnings_after_load(self, load_result: Any) -> None:
        """A policy with tied input and output embeddings is saved with the shared tensor once, so a resume reads
        ``lm_head.weight`` as missing (HF's own check only knows ``_keys_to_ignore_on_save``, None for most
        models): those keys are re-tied instead of reported; anything else missing or unexpected is still warned."""
        tied = tied_missing_keys(self.model, list(load_result.missing_keys))
        if tied:
            self.model.tie_weights()
            load_result = load_result._replace(missing_keys=[k for k in load_result.missing_keys if k not in tied])
        super()._issue_warnings_after_load(load_result)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: Any = None) -> None:
        try:
            super()._load_from_checkpoint(resume_from_checkpoint, model)
        except RuntimeError as exc:
            why = saving.mismatch_line(exc)
            if why is None:
                raise
            raise RunStateError(
                f"the policy (model) does not fit checkpoint {resume_from_checkpoint}: {why}; resume with the run's "
                "model, or train under a new name",
                options=("model", "name"),
            ) from None


def tied_missing_keys(model: Any, missing: list[str]) -> set[str]:
    """The MISSING keys that are the output embedding's weight while the model ties it to the input embedding
    (the same tensor): nothing of the checkpoint is lost."""
    unwrapped = getattr(model, "module", model)
    if not getattr(getattr(unwrapped, "config", None), "tie_word_embeddings", False):
        return set()
    output, inputs = unwrapped.get_output_embeddings(), unwrapped.get_input_embeddings()
    if output is None or inputs is None or output.weight is not inputs.weight:
        return set()
    names = {name for name, param in unwrapped.named_parameters(remove_duplicate=False) if param is output.weight}
    if names <= set(missing):  # no name of the shared tensor was loaded: it is really missing
        return set()
    return {k for k in missing if k in names}


def step_record(fb: Feedback, rows: TrainRows, metrics: dict[str, float], logs: dict[str, Any]) -> dict[str, Any]:
    """One ``steps.jsonl`` line (see ``ads_core.train.trl.steps`` for the fields)."""
    clusters = rows.cluster_ids[fb.rows]
    record: dict[str, Any] = {
        "step": fb.draw.index,
        "sample_ids": rows.sample_ids[fb.rows].tolist(),
        "rows": fb.rows.tolist(),
        "rewards": [round(float(v), 6) for v in fb.rewards],
        "success": [round(float(v), 6) for v in fb.success],
        "clusters": clusters.tolist(),
        "lag": fb.draw.lag,
        "drawn_after_updates": fb.draw.after_updates,
        "completions": fb.completions,
        "rollout_batches": fb.rollout_batches,
        "rollout_prompts": fb.rollout_prompts,
        "informative_groups": fb.informative_groups,
        "reward_mean": float(fb.rewards.mean()) if len(fb.rewards) else 0.0,
        "success_mean": float(fb.success.mean()) if len(fb.success) else 0.0,
        "active_clusters": int(len(np.unique(clusters))),
        "window_position": window_position(metrics),
    }
    for key, name in TRL_LOG_KEYS.items():
        value = logs.get(key)
        if isinstance(value, int | float) and np.isfinite(value):
            record[name] = float(value)
    record["metrics"] = {k: float(v) for k, v in metrics.items() if np.isfinite(v)}
    record["time"] = time.time()
    return record
