"""Rule-based math reward for GRPO: last ``\\boxed{}`` of the response vs the ground truth, via math-verify.

verl calls ``compute_score(data_source, solution_str, ground_truth, extra_info, **kwargs)`` once per rollout
(``reward.custom_reward_function.path=pkg://ads_core.train.reward``). The result is a dict: ``score`` is the
reward, ``acc`` the 0/1 correctness that the ADS sampler reads from the batch, ``has_boxed`` whether a
final answer was found. Only numbers are returned, because verl averages every key for its metrics.

Comparison, first hit wins:
1. the normalised strings are equal (spacing, ``\\left``/``\\right``, ``\\dfrac``, ``\\text{}``, degrees,
   thousands separators, a leading ``x =``);
2. math-verify parses both (LaTeX first, then plain expressions) and finds them equal symbolically or
   numerically (intervals, tuples, sets, matrices, fractions and decimals included).

Math delimiters around an answer (``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]``) are removed first, so a ground
truth such as ``$\\frac{1}{2}$`` checks against ``\\boxed{1/2}``.

Ground truths with more than one answer, two encodings (``encode_alternatives`` and ``encode_answer_set``
build them, so producers need not hand-write either):
- **alternatives**, a JSON list of strings, e.g. ``'["2", "-3"]'``: the response is correct if its final
  answer matches ANY listed answer (or all of them given together, as ``2, -3``: listing every accepted
  answer is never wrong). This is what a dataset's list-valued answer field becomes.
- **a set answer** ("find all solutions"), one string with the elements comma-separated, e.g. ``'2, -3'``
  (MATH's own convention): the response must give every element, in any order; math-verify compares the
  two as sets, so ``-3, 2`` or ``x=2, x=-3`` are correct and ``2`` alone is not.
A string that starts with ``[`` but is not a JSON list of strings (an interval ``[2, 5)``, or ``[1, 2]``)
stays a single answer.
"""

from __future__ import annotations

import logging
import re
import threading
from functools import lru_cache
from typing import Any

from ads_core.common.answers import ground_truth_answers, strip_math_delimiters
from ads_core.common.text import last_boxed

log = logging.getLogger("ads.reward")

MAX_ANSWER_CHARS = 400  # longer predictions are compared as strings only (sympy can be slow on junk)
TIMEOUT_SECONDS = 5  # math-verify's signal-based timeouts; they only work in the main thread

_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mbox)\{([^{}]*)\}")
_SPACES = re.compile(r"\s+|\\[,;:! ]|~")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_LEADING_VAR = re.compile(r"^[a-zA-Z]\s*(?:=|\\in)\s*(?=\S)")
_DEGREES = re.compile(r"\^\s*\{?\\circ\}?|°")


def normalize_answer(text: str) -> str:
    """A conservative canonical string for an answer (never changes its mathematical meaning)."""
    s = strip_math_delimiters(text)
    s = s.strip("$").strip()
    s = re.sub(r"\\+(?=[a-zA-Z{}(),\[\]])", r"\\", s)  # collapse doubled backslashes from JSON escaping
    s = s.replace("\\left", "").replace("\\right", "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _DEGREES.sub("", s)
    s = _TEXT.sub(r"\1", s)
    s = _SPACES.sub("", s)
    s = _THOUSANDS.sub("", s)
    s = _LEADING_VAR.sub("", s)
    s = s.rstrip(".")
    return s


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@lru_cache(maxsize=4096)
def _parse(text: str, with_timeout: bool) -> tuple:
    from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse

    timeout = TIMEOUT_SECONDS if with_timeout else None
    cfg = [LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig()]
    return tuple(parse(f"\\boxed{{{text}}}", extraction_config=cfg, parsing_timeout=timeout))


def is_equivalent(prediction: str, ground_truth: str) -> bool:
    """True when the prediction means the same answer as the ground truth."""
    pred_norm, gt_norm = normalize_answer(prediction), normalize_answer(ground_truth)
    if not pred_norm:
        return False
    if pred_norm == gt_norm:
        return True
    if len(prediction) > MAX_ANSWER_CHARS:
        return False
    from math_verify import verify

    main = _in_main_thread()
    try:
        gold = list(_parse(strip_math_delimiters(ground_truth), main))
        pred = list(_parse(strip_math_delimiters(prediction), main))
        if not gold or not pred:
            return False
        return bool(verify(gold, pred, timeout_seconds=TIMEOUT_SECONDS if main else None))
    except Exception as exc:  # noqa: BLE001 - a reward must never crash a training step
        log.debug("math-verify failed on %r vs %r: %s", prediction, ground_truth, exc)
        return False


def is_correct(prediction: str, ground_truth: Any) -> bool:
    """``is_equivalent`` against each accepted answer (see the module docstring for multi-answer truths)."""
    answers = ground_truth_answers(ground_truth)
    if len(answers) > 1:
        answers.append(", ".join(strip_math_delimiters(a) for a in answers))  # all of them together
    return any(is_equivalent(prediction, a) for a in answers)


def extract_answer(solution_str: str) -> str | None:
    """Content of the response's last ``\\boxed{}`` (or ``\\fbox{}``), or None."""
    return last_boxed(solution_str or "")


def compute_score(
    data_source: str | None,
    solution_str: str,
    ground_truth: Any,
    extra_info: dict | None = None,
    **kwargs: Any,
) -> dict[str, float]:
    """verl reward function: ``{"score": 0|1, "acc": 0|1, "has_boxed": 0|1}``."""
    answer = extract_answer(solution_str)
    if answer is None:
        return {"score": 0.0, "acc": 0.0, "has_boxed": 0.0}
    correct = 1.0 if is_correct(answer, ground_truth) else 0.0
    return {"score": correct, "acc": correct, "has_boxed": 1.0}
