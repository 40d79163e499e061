"""Evaluation settings: how answers are graded (`ads grade`, `ads eval`, the training rewards)."""

from __future__ import annotations

from pydantic import Field

from ads_core.config.base import FrozenSection, tuning


class GraderConfig(FrozenSection):
    """The grader's limits (see docs/evaluation.md#grading)."""

    timeout_s: float = Field(
        1.0, gt=0, le=600, description="Hard time limit per completion for math-verify; past it the answer is wrong."
    )
    workers: int = tuning(
        default=0, ge=0, le=256, description="Verifier processes at most (0: one per CPU core, at most 8)."
    )
    cache_size: int = tuning(default=65_536, ge=0, description="(answer, ground truth) verdicts kept in memory.")
