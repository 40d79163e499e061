"""Rollout replay's knobs: ``trl.rollout_replay`` (``trl.replay``, the flag ``--replay``, turns it on)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from ads_core.config.base import FrozenSection

AGGREGATIONS = ("grpo", "bnpo", "dr_grpo", "dapo")  # TRL loss_types the replayed loss reduces like


class RolloutReplayConfig(FrozenSection):
    """DOTS+RR's rollout replay: each step rolls out delta*B fresh prompts and fills the rest of its B groups from a
    FIFO buffer of earlier groups whose rewards differ, trained with the importance-corrected clipped loss."""

    buffer_size: int = Field(
        64, ge=1, strict=True, description="C: groups the buffer holds at most (oldest evicted first)."
    )
    fresh_fraction: float = Field(0.5, gt=0, le=1, description="delta: share of each step's prompts rolled out fresh.")
    warmup_steps: int = Field(
        2, ge=0, strict=True, description="Steps trained on fresh groups only (the code's first round, mu steps)."
    )
    seed: int = Field(42, ge=0, strict=True, description="Seed of the replayed groups' draws.")

    def fresh_prompts(self, prompts_per_step: int) -> int:
        """delta * B, at least 1."""
        return max(1, int(round(self.fresh_fraction * prompts_per_step)))


def check_replay(cfg: Any, kind: str) -> None:
    """Refuse, in one line, what replay can't train with (a TrainConfig and the sampler kind)."""
    from ads_core.train.errors import TrainOptionError

    trl = cfg.trl
    problems = []
    if trl.processes > 1:
        problems.append(f"processes {trl.processes} (replay runs in one process)")
    if trl.beta != 0:
        problems.append(f"beta {trl.beta} (replayed groups carry no reference log-probs; DOTS+RR uses beta 0)")
    if trl.loss_type not in AGGREGATIONS:
        problems.append(f"loss_type {trl.loss_type} (replay reduces the loss as {', '.join(AGGREGATIONS)})")
    from ads_core.sampler.kinds import has_extra_rollouts

    if has_extra_rollouts(kind):
        problems.append(f"sampler {kind} (its steps already mix generation batches)")
    if problems:
        raise TrainOptionError(
            f"rollout replay (replay) can't train with {'; '.join(problems)}", options=("replay", "sampler")
        )
