"""The one grader: training rewards, `ads eval` and `ads grade` all judge answers with it.

`grade(completion, ground_truth)` -> `Grade(correct, extracted, reason, ...)`; `grade_many` for lists. Safe in
the main thread, in thread pools and in subprocesses, with a hard time limit per completion (see `api`).
"""

from ads_core.grading.api import REASONS, Grade, configure, grade, grade_answer, grade_many, settings

__all__ = ["REASONS", "Grade", "configure", "grade", "grade_answer", "grade_many", "settings"]
