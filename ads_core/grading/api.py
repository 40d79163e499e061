"""`grade` and `grade_many`: the one grader behind the training rewards, `ads eval` and `ads grade`.

A completion's answer is the content of its last complete ``\\boxed{}``. It is compared with each accepted
answer of the ground truth, first hit wins:

1. the normalised strings are equal (after NFKC and Unicode digits, superscripts as powers, ``√`` as a root,
   spacing, ``\\left``/``\\right``, ``\\dfrac``, ``\\text{}``, degrees, thousands separators, a leading ``x =``);
2. both are plain numbers (integers, decimals, ``a/b``, ``\\frac{a}{b}``) or small arithmetic of them (``3^{2}``,
   `arith`): exact comparison here, except that unequal decimals go on to math-verify, which compares them rounded;
3. the pre-check refuses an answer whose evaluation would explode (reason ``too_complex``);
4. math-verify in a verifier process (reason ``timeout`` when it is cut).

The promise: every call returns within the limit + 0.5 s, in the main thread, in thread pools and in child
processes, and a check that finishes within the limit on a quiet machine gets the same verdict under load.
So each math-verify check gets the limit as a budget of its worker's CPU time (other work on the machine does
not eat into it), and every call has a wall-clock deadline of limit + `GRACE_S` for everything (waiting for a
worker, starting the verifier, the check): past it the verdict is ``timeout`` with a detail saying the machine
was too busy, and that verdict is not cached. A check that used its CPU budget is cached as a timeout.
Starting the verifier (seconds) is no answer's time: entry points call `start_verifier()` first, and child
processes share their parent's verifier (`pool`), so that their first grade is as fast as any other. A process
that has none starts it with its first answer that needs it, and waits for it no longer than that answer's
deadline (a `timeout` saying so, not cached); `grade_many` grades such answers again once it runs.
Answers sympy would need long for are refused first, the same way everywhere (`precheck`); an answer the fast
path cannot read goes on to the checker, and a checker that fails on a read answer makes it ``wrong`` (detail).

A percentage reads as its number and as its fraction (``50\\%`` equals ``50`` and ``0.5``). Ground truths with
several answers follow `ads_core.common.answers` (a JSON list: any one of them; a comma-separated string: the
set of them); a ground truth that is not a string, a number or a flat list of them (a dict, a nested list, a
bool) is refused with reason ``error``, never read as text. A missing ground truth (None, NaN, empty, or a
missing value written as text: ``nan``, ``None``, ``null``, ``N/A``, see
`ads_core.common.answers.is_missing_answer`) is never graded correct (reason ``error``); the format stage and
the eval-set reader refuse such rows when a set or artifact is checked. Verdicts are cached per (answer, ground
truth).
"""

from __future__ import annotations

import atexit
import math
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from ads_core.common.answers import (
    ground_truth_answers,
    ground_truth_problem,
    is_missing_answer,
    strip_math_delimiters,
)
from ads_core.config.eval import GraderConfig
from ads_core.grading.choice import grade_choice, parse_truth
from ads_core.grading.pool import ZYGOTE_ENV, Late, WorkerUnavailable, cpu_cores, get_pool, shutdown
from ads_core.grading.precheck import too_complex
from ads_core.grading.text import Reading, as_number, extract_answer, for_math_verify, is_decimal, readings

MAX_NORMALIZED_CHARS = 2_000  # longer answers are only compared as they are (the pre-check refuses them anyway)
MAX_CACHED_CHARS = 2_000  # the cache holds short (answer, ground truth) pairs only: its memory stays bounded
REASONS = ("correct", "wrong", "no_answer", "timeout", "too_complex", "error")
HUGE_BITS = 200  # exact numbers past 2^200 (60 digits) are compared here only, never sent to math-verify
GRACE_S = 0.3  # the deadline past the limit: limit + 0.5 s is promised, the rest is for stopping and returning
STARTING = "the verifier was still starting (this process started none before; entry points call start_verifier())"


@dataclass(frozen=True)
class Grade:
    """One completion's verdict. `reason` is one of REASONS; `detail` says more for errors and refusals."""

    correct: bool
    extracted: str | None
    reason: str
    detail: str = ""
    elapsed_s: float = field(default=0.0, compare=False)  # this call's measured time (queueing included)


_settings = GraderConfig()
_cache: OrderedDict[tuple[str, tuple[str, ...]], tuple[bool, str, str, float]] = OrderedDict()
_cache_lock = threading.Lock()
_counts = {"hits": 0, "misses": 0}


def configure(config: GraderConfig) -> None:
    """Set the process-wide defaults (time limit, verifier processes, cache size)."""
    global _settings
    _settings = config
    with _cache_lock:
        while len(_cache) > config.cache_size:
            _cache.popitem(last=False)


def settings() -> GraderConfig:
    return _settings


_exit_hook = {"registered": False}


def start_verifier(*, share_with_children: bool = True) -> None:
    """Start the verifier processes now (seconds) rather than with the first answer that needs math-verify.

    Call it once from an entry point that grades (a CLI command, a trainer's start). It registers the pool's
    shutdown at exit, and with `share_with_children` exports the zygote's address ($ADS_GRADER_ZYGOTE) so that
    child processes, forked or spawned later, fork their workers from it: their first grade is then as fast as
    any other. Nothing of this happens at import."""
    try:
        pool = get_pool(pool_size())
        pool.start()
    except WorkerUnavailable:
        return  # each completion that needs math-verify will say so (reason error)
    if not _exit_hook["registered"]:
        atexit.register(shutdown)
        _exit_hook["registered"] = True
    if share_with_children and pool.address:
        os.environ[ZYGOTE_ENV] = pool.address


def cache_info() -> dict[str, int]:
    """Cache hits and misses so far, and the verdicts it holds."""
    with _cache_lock:
        return {**_counts, "size": len(_cache)}


def pool_size(config: GraderConfig | None = None) -> int:
    """Regular verifier processes: the configured number, or one per CPU core."""
    return (config or _settings).workers or cpu_cores()


def grade(completion: str, ground_truth: Any, *, timeout_s: float | None = None) -> Grade:
    """Grade one completion against its ground truth; never raises, returns within the limit + 0.5 s."""
    start = time.monotonic()
    extracted = None
    mc = parse_truth(ground_truth)  # multiple choice: the chosen letter, compared exactly (grading.choice)
    if mc is not None:
        return Grade(*grade_choice(completion, mc), elapsed_s=time.monotonic() - start)
    try:
        extracted = extract_answer(completion if isinstance(completion, str) else "")
        verdict = _grade_answer(extracted, ground_truth, timeout_s, start)
    except Exception as exc:  # noqa: BLE001 - a reward must never crash a training step
        verdict = (False, "error", f"{type(exc).__name__}: {exc}"[:200])
    return Grade(verdict[0], extracted, verdict[1], verdict[2], time.monotonic() - start)


def grade_answer(answer: str | None, ground_truth: Any, *, timeout_s: float | None = None) -> Grade:
    """Grade an already extracted answer (None: there was none)."""
    start = time.monotonic()
    try:
        verdict = _grade_answer(answer, ground_truth, timeout_s, start)
    except Exception as exc:  # noqa: BLE001
        verdict = (False, "error", f"{type(exc).__name__}: {exc}"[:200])
    return Grade(verdict[0], answer, verdict[1], verdict[2], time.monotonic() - start)


def grade_many(
    completions: Sequence[str],
    ground_truths: Sequence[Any],
    *,
    timeout_s: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> list[Grade]:
    """`grade` for each pair, in order, several at once (one thread per verifier process, at least two).

    A batch's verdicts do not depend on when its process started: an answer cut because this process's verifier
    was still starting is graded again once it runs (its `elapsed_s` is that second call's)."""
    if len(completions) != len(ground_truths):
        raise ValueError(f"{len(completions)} completions but {len(ground_truths)} ground truths")

    def one(pair: tuple[str, Any]) -> Grade:
        result = grade(pair[0], pair[1], timeout_s=timeout_s)
        if result.reason == "timeout" and STARTING in result.detail:
            try:
                get_pool(pool_size()).start()  # waits for the start under way (seconds), once per process
            except WorkerUnavailable:
                pass  # the second try says so (reason error)
            result = grade(pair[0], pair[1], timeout_s=timeout_s)
        if progress is not None:
            progress(1)
        return result

    pairs = list(zip(completions, ground_truths, strict=True))
    threads = min(len(pairs), max(2, pool_size()))
    if threads <= 1:
        return [one(p) for p in pairs]
    with ThreadPoolExecutor(threads, thread_name_prefix="ads-grade") as executor:
        return list(executor.map(one, pairs))


class BadTruth(ValueError):
    """A ground truth that is not a string, a number or a flat list of them (the message says what it is)."""


def gold_answers(ground_truth: Any) -> tuple[str, ...] | None:
    """The accepted answers (several answers also together, as one set), or None when there is none. Raises
    BadTruth for a dict, a nested list, a bool and the like: never read as text."""
    problem = ground_truth_problem(ground_truth)
    if problem is not None:
        raise BadTruth(problem)
    if ground_truth is None or (isinstance(ground_truth, float) and math.isnan(ground_truth)):
        return None
    if hasattr(ground_truth, "tolist") and not isinstance(ground_truth, str):
        ground_truth = ground_truth.tolist()
    if isinstance(ground_truth, list | tuple) and not any(x is not None and str(x).strip() for x in ground_truth):
        return None
    answers = [a for a in ground_truth_answers(ground_truth) if not is_missing_answer(a)]
    if not answers:
        return None
    if len(answers) > 1:
        answers.append(", ".join(strip_math_delimiters(a) for a in answers))  # listing all of them is never wrong
    return tuple(answers)


def _grade_answer(
    answer: str | None, ground_truth: Any, timeout_s: float | None, start: float
) -> tuple[bool, str, str]:
    try:
        golds = gold_answers(ground_truth)
    except BadTruth as exc:
        return False, "error", str(exc)
    if golds is None:
        return False, "error", "no ground truth"
    if answer is None or not answer.strip():
        return False, "no_answer", ""
    limit = float(timeout_s if timeout_s is not None else _settings.timeout_s)
    key = (answer, golds)
    with _cache_lock:
        hit = _cache.get(key)
        if hit is not None and (hit[1] != "timeout" or hit[3] >= limit):
            _cache.move_to_end(key)
            _counts["hits"] += 1
            return hit[0], hit[1], hit[2]
        _counts["misses"] += 1
    verdict, lasting = _judge(answer, golds, limit, start + limit + GRACE_S)
    small = len(answer) + sum(map(len, golds)) <= MAX_CACHED_CHARS  # junk is refused in microseconds anyway
    if lasting and _settings.cache_size > 0 and small:
        with _cache_lock:
            _cache[key] = (*verdict, limit)
            if len(_cache) > _settings.cache_size:
                _cache.popitem(last=False)
    return verdict


def _huge(value: Any) -> bool:
    return value is not None and max(abs(value.numerator), value.denominator).bit_length() > HUGE_BITS


def _judge(answer: str, golds: tuple[str, ...], limit: float, deadline: float) -> tuple[tuple[bool, str, str], bool]:
    """(verdict, whether it would be the same on another try: errors and a busy machine's timeouts are not)."""
    if len(answer) > MAX_NORMALIZED_CHARS:  # not even normalised: some of its regexes are quadratic on junk
        if answer.strip() in {g.strip() for g in golds}:
            return (True, "correct", ""), True
        return (False, "too_complex", f"answer longer than {MAX_NORMALIZED_CHARS} characters"), True
    preds = _readings(answer)
    if not any(p.norm for p in preds):
        return (False, "no_answer", ""), True
    truths = [r for g in golds for r in (_readings(g) if len(g) <= MAX_NORMALIZED_CHARS else [Reading(g, g)])]
    undecided: dict[tuple[str, str], None] = {}
    for p in preds:
        for g in truths:
            if p.norm and p.norm == g.norm:
                return (True, "correct", ""), True
            pv, gv = _number(p.norm), _number(g.norm)
            if pv is not None and gv is not None:
                if pv == gv:
                    return (True, "correct", ""), True
                if not (is_decimal(p.norm) or is_decimal(g.norm)):
                    continue  # two exact numbers that differ: decided
            if _huge(pv) or _huge(gv):
                continue  # a number of 60+ digits (999!!) against an expression: no answer is that, decided here
            if p.text and g.text:
                undecided[(_for_verifier(p.text), _for_verifier(g.text))] = None
    if not undecided:
        return (False, "wrong", ""), True
    refused = too_complex(answer) or next(filter(None, map(too_complex, {p: None for p, _ in undecided})), None)
    if refused is not None:  # what sympy would see (x⁹⁹⁹⁹⁹⁹⁹ is x^{9999999}), and the answer as written
        return (False, "too_complex", refused), True
    pool = get_pool(pool_size())
    starting = not pool.started  # neither started nor joined: it starts now, and no answer waits past its deadline
    try:
        reply, why = pool.ask({"pairs": [list(pair) for pair in undecided]}, limit, deadline)
    except WorkerUnavailable as exc:
        return (False, "error", str(exc)), False
    except Late as exc:
        late = STARTING if starting else f"{exc} (a busy machine)"
        return (False, "timeout", f"no verdict within limit + {GRACE_S:g} s: {late}"), False
    if why == "cpu":
        return (False, "timeout", f"math-verify used its {limit:g} s of CPU time (the limit)"), True
    if why:
        busy = f"no verdict within limit + {GRACE_S:g} s: the machine was too busy to give math-verify its time"
        return (False, "timeout", busy), False
    if reply.get("match"):
        return (True, "correct", ""), True
    if reply.get("error"):  # the answer was read; the checker failed on it: wrong, saying why
        if "verifier process" in reply["error"]:
            return (False, "wrong", f"the verifier failed on this answer: {reply['error']}"[:200]), False
        return (False, "wrong", f"math-verify could not compare it: {reply['error']}"[:200]), True
    return (False, "wrong", ""), True


def _readings(text: str) -> list[Reading]:
    """`readings`, or the text as written when it cannot be read here (it goes on to the checker as it is)."""
    try:
        return readings(text)
    except Exception:  # noqa: BLE001 - an answer the fast path cannot read is the checker's to judge
        return [Reading(text.strip(), text.strip())]


def _number(norm: str) -> Fraction | None:
    try:
        return as_number(norm)
    except Exception:  # noqa: BLE001 - not a number this module reads: the checker judges it
        return None


def _for_verifier(text: str) -> str:
    try:
        return for_math_verify(text)
    except Exception:  # noqa: BLE001
        return text
