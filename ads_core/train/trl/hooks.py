"""What a TRL run reports besides ``steps.jsonl``: one ``TrainerCallback`` (``RunHooks``) and the step notices; and
``FinalCheckpoint``, which saves the last step whatever ``save_steps`` says.

``RunHooks`` is placed first among the trainer's callbacks, so what it adds to a step's logs reaches every
tracker (TensorBoard, W&B, trackio, MLflow: ``trl.report_to``):

* ``learning_rate``: the rate the step's optimizer update used (HF logs the rate of the *next* step); it also
  goes into the step's ``steps.jsonl`` line;
* with a tracker, the sampler's own metrics under their own names (``ads/window_frac/<cluster>``,
  ``ads/r/<cluster>``, ``uniform/...``) and the step's feedback (``ads/success_mean``, ``ads/informative_groups``,
  ``ads/rollout_prompts``, ``ads/lag``);
* with ``trl.log_completions``, one completion per prompt of each step, with its rewards and advantage, in
  ``RUN_DIR/completions.jsonl`` (cut back to the checkpoint on resume, as ``steps.jsonl``);
* under several processes, after every step each process's sampler state and drawn rows are gathered and
  compared; a difference stops the run (the samplers would drift apart), and the step's line records the hashes.

``StepNotices`` turns the per-step records into the lines a user must see: a window of steps without one
informative group (no gradient at all), once per run, and a dynamic-sampling step that rolled out more than one
generation batch.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import deque
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from ads_core import storage
from ads_core.storage import fencing
from ads_core.train.options import TrainConfig
from ads_core.train.trl.steps import read_steps

COMPLETIONS_FILE = "completions.jsonl"
ZERO_SIGNAL_WINDOW = 5  # steps without an informative group before the run warns
NOTICE_OPTIONS = ("model", "max_completion_length", "format_reward", "num_generations", "temperature")


def state_hash(state: Any) -> str:
    """A short digest of a JSON-able state (the feed's ``state_dict``)."""
    return hashlib.sha256(json.dumps(state, sort_keys=True).encode()).hexdigest()[:16]


def _text(value: Any) -> str:
    """A prompt or completion (chat messages or text) as text: the last message's content."""
    if isinstance(value, list) and value and isinstance(value[-1], dict):
        return str(value[-1].get("content", ""))
    return str(value)


class FinalCheckpoint(TrainerCallback):
    """Always checkpoint the last step, whatever save_steps says."""

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if state.global_step >= state.max_steps:
            control.should_save = True
        return control


class RunHooks(TrainerCallback):
    """Learning rate, tracker metrics, completions and the processes' agreement, step by step (see the module)."""

    def __init__(self, cfg: TrainConfig, run_dir: str, world_size: int = 1) -> None:
        self.trackers = bool(cfg.trl.trackers)
        self.completions = Path(run_dir) / COMPLETIONS_FILE if cfg.trl.log_completions else None
        self.tensorboard_dir = Path(run_dir) / "tensorboard"
        self.world_size = world_size
        self.trainer: Any = None  # the trainer these hooks are attached to (its constructor attaches them)
        self.lr: float | None = None  # the rate of the step's optimizer update
        self.sync: dict[str, Any] = {}  # the processes' agreement at the step's end
        self._extras: dict[str, Any] = {}  # what the step's steps.jsonl line gets from here (take_extras)

    def attach(self, trainer: Any) -> None:
        """Put these hooks first among TRAINER's callbacks (before the trackers') and point TensorBoard at
        ``RUN_DIR/tensorboard`` (unless TENSORBOARD_LOGGING_DIR says otherwise). ``ADSGRPOTrainer``'s constructor
        calls this."""
        from transformers.integrations import TensorBoardCallback

        self.trainer = trainer
        trainer.callback_handler.callbacks.insert(0, self)
        for callback in trainer.callback_handler.callbacks:
            if isinstance(callback, TensorBoardCallback) and not os.environ.get("TENSORBOARD_LOGGING_DIR"):
                callback.logging_dir = str(self.tensorboard_dir)

    def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        """A resumed run drops the completions a killed run logged after its checkpoint (as steps.jsonl)."""
        if self.completions is not None and state.is_world_process_zero and self.completions.exists():
            kept = [r for r in read_steps(self.completions) if r["step"] <= int(state.global_step)]
            storage.write_bytes(str(self.completions), "".join(json.dumps(r) + "\n" for r in kept).encode())

    def on_pre_optimizer_step(self, args: Any, state: Any, control: Any, optimizer: Any = None, **kw: Any) -> None:
        if optimizer is not None and optimizer.param_groups:
            self.lr = float(optimizer.param_groups[0]["lr"])

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self.world_size > 1 and self.trainer is not None:
            self._check_processes_agree(int(state.global_step))

    def _check_processes_agree(self, step: int) -> None:
        """Gather every process's sampler-state hash and drawn rows (a collective: every process calls it at the
        same step) and stop when they differ."""
        from accelerate.utils import gather_object

        fb = self.trainer.last_feedback
        rows = [int(r) for r in fb.rows] if fb is not None else []
        mine = (state_hash(self.trainer.feed.state_dict()), state_hash(rows))
        everyone = gather_object([mine])
        states, batches = [s for s, _ in everyone], [b for _, b in everyone]
        if len(set(states)) > 1 or len(set(batches)) > 1:
            raise RuntimeError(
                f"step {step}: the {len(everyone)} processes' samplers disagree (state hashes {states}, batch "
                f"hashes {batches}); every process must feed back the same gathered rewards"
            )
        self.sync = {"processes": len(everyone), "process_state_hashes": states, "process_batch_hashes": batches}

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **kw: Any) -> None:
        trainer = self.trainer
        if logs is None or "loss" not in logs or trainer is None or not trainer.model.training:
            return
        extras: dict[str, Any] = dict(self.sync)
        if self.lr is not None:
            logs["learning_rate"] = extras["learning_rate"] = self.lr
        fb = trainer.last_feedback
        if self.trackers:
            logs.update(trainer.feed.sampler.metrics())
            if fb is not None:
                logs["ads/success_mean"] = float(fb.success.mean()) if len(fb.success) else 0.0
                logs["ads/informative_groups"] = float(fb.informative_groups)
                logs["ads/rollout_prompts"] = float(fb.rollout_prompts)
                logs["ads/lag"] = float(fb.draw.lag)
        self._extras = extras
        if self.completions is not None and state.is_world_process_zero:
            self._write_completions(int(state.global_step))

    def take_extras(self) -> dict[str, Any]:
        """What the step just logged adds to its ``steps.jsonl`` line (the learning rate, the processes'
        agreement); the trainer takes it once per line."""
        extras, self._extras = self._extras, {}
        return extras

    def _write_completions(self, step: int) -> None:
        """One completion per prompt (the first of its group) of the step's last generation batch."""
        logged = self.trainer._logs  # TRL's own per-step buffer (prompt, completion, rewards, advantages)
        group = max(1, int(self.trainer.num_generations))
        names = list(logged["rewards"])
        lines = []
        for i in range(0, len(logged["prompt"]), group):
            rewards = {n: float(logged["rewards"][n][i]) for n in names if i < len(logged["rewards"][n])}
            lines.append(
                {
                    "step": step,
                    "prompt": _text(logged["prompt"][i]),
                    "completion": _text(logged["completion"][i]),
                    "rewards": rewards,
                    "advantage": float(logged["advantages"][i]) if i < len(logged["advantages"]) else None,
                }
            )
        fencing.check_publish(str(self.completions))  # a run that lost its lock on the run folder logs nothing more
        with open(self.completions, "a", encoding="utf-8") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")
            f.flush()
            os.fsync(f.fileno())


class StepNotices:
    """The lines a run prints besides its progress: no signal for a window of steps (once), and dynamic-sampling
    steps that rolled out more than the usual batch."""

    def __init__(self, cfg: TrainConfig, prompts_per_step: int, window: int = ZERO_SIGNAL_WINDOW) -> None:
        self.cfg = cfg
        self.prompts_per_step = prompts_per_step
        self.window: deque[dict[str, Any]] = deque(maxlen=window)
        self.warned = False

    def __call__(self, record: dict[str, Any]) -> tuple[list[str], list[str]]:
        """(notes, warnings) for this step's record."""
        notes, warnings = [], []
        batches = int(record.get("rollout_batches", 1))
        if batches > 1:
            notes.append(
                f"step {record['step']}: dynamic sampling rolled out {record.get('rollout_prompts')} prompts in "
                f"{batches} generation batches (usual {self.prompts_per_step}) for "
                f"{record.get('informative_groups')} informative groups"
            )
        self.window.append(record)
        if not self.warned and len(self.window) == self.window.maxlen:
            if all(int(r.get("informative_groups", 1)) == 0 for r in self.window):
                self.warned = True
                warnings.append(self.zero_signal(list(self.window)))
        return notes, warnings

    def zero_signal(self, records: list[dict[str, Any]]) -> str:
        """Why a window of steps had no gradient, and what to try."""
        success = [float(s) for r in records for s in r.get("success", [])]
        first, last = records[0]["step"], records[-1]["step"]
        head = (
            f"no learning signal in steps {first}-{last}: every group's completions got the same reward, so GRPO's "
            "advantages and gradients are 0"
        )
        trl = self.cfg.trl
        if success and max(success) <= 0.0:
            tips = ["a stronger policy (model)", "longer completions (max_completion_length)"]
            if trl.format_reward <= 0:
                tips.append("a format reward (format_reward)")
            return f"{head}; cause: no completion was correct (no reward at all); try {', '.join(tips)} or easier data"
        if success and min(success) >= 1.0:
            return (
                f"{head}; cause: every answer was correct; try harder data, a harder ADS start (sampler.ads window "
                "knobs) or a smaller policy"
            )
        return (
            f"{head}; cause: each prompt's completions were all right or all wrong; try more completions per prompt "
            "(num_generations) or a higher temperature"
        )


def with_notices(on_step: Any, notices: StepNotices, log: Any) -> Any:
    """ON_STEP (may be None) preceded by the step's notices, put in the record for ON_STEP to show (the CLI prints
    them, the flow logs them): ``notes``, ``warnings`` and ``warning_options`` (the option names the warnings
    mention, for each interface to spell); logged when nobody shows them."""

    def call(record: dict[str, Any], trainer: Any) -> None:
        notes, warnings = notices(record)
        if notes:
            record["notes"] = notes
        if warnings:
            record["warnings"] = warnings
            record["warning_options"] = list(NOTICE_OPTIONS)
        if on_step is not None:
            on_step(record, trainer)
            return
        for line in notes:
            log.info(line)
        for line in warnings:
            log.warning(line)

    return call
