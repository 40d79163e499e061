"""Rollout replay's options: a section of the ``trl`` trainer's config (``trl.replay``)."""

from __future__ import annotations

from pydantic import Field

from ads_core.config.base import FrozenSection


class RolloutReplayConfig(FrozenSection):
    """DOTS+RR's rollout replay: each step rolls out delta*B fresh prompts and fills the rest of its B groups from a
    FIFO buffer of earlier groups whose rewards differ, trained with the importance-corrected clipped loss."""

    enabled: bool = Field(False, strict=True, description="Replay rollouts (`ads train --replay`).")
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
