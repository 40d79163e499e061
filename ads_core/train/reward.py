"""Rule-based math reward for GRPO: the project's one grader (`ads_core.grading`) as verl's reward function.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)`` once per rollout
(``reward.custom_reward_function.path=pkg://ads_core.train.reward``), from a thread pool. The result is a dict:
``score`` is the reward, ``acc`` the 0/1 correctness that the ADS sampler reads from the batch, ``has_boxed``
whether a final answer was found. Only numbers are returned, because verl averages every key for its metrics.

What counts as correct (the last complete ``\\boxed{}``, math-verify, percentages, Unicode digits, alternatives
and set answers, the hard time limit per completion) is documented in `ads_core.grading.api` and
docs/evaluation.md#grading. The helpers below keep the names older callers use.
"""

from __future__ import annotations

from typing import Any

from ads_core.grading import grade, grade_answer
from ads_core.grading.text import extract_answer as _extract
from ads_core.grading.text import normalize_answer

__all__ = ["compute_score", "extract_answer", "is_correct", "is_equivalent", "normalize_answer"]


def is_equivalent(prediction: str, ground_truth: str) -> bool:
    """True when the prediction means the same answer as the ground truth (one answer, not a list)."""
    return grade_answer(prediction, [ground_truth]).correct


def is_correct(prediction: str, ground_truth: Any) -> bool:
    """The prediction against every accepted answer of the ground truth (alternatives, sets)."""
    return grade_answer(prediction, ground_truth).correct


def extract_answer(solution_str: str) -> str | None:
    """Content of the response's last complete ``\\boxed{}`` (or ``\\fbox{}``), or None."""
    return _extract(solution_str or "")


def compute_score(
    data_source: str | None,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl reward function: ``{"score": 0|1, "acc": 0|1, "has_boxed": 0|1}``."""
    result = grade(solution_str, ground_truth)
    correct = 1.0 if result.correct else 0.0
    return {"score": correct, "acc": correct, "has_boxed": 0.0 if result.extracted is None else 1.0}
