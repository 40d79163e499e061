"""The one grader (`ads_core.grading`): each answer form right and wrong, missing ground truths, and the hard time
limit per completion in the main thread, in a thread pool, in a subprocess and in a forked child.

The baseline of ordinary correctness (real MATH-500/AIME/AMC/GSM8K answers) is tests/ads_core/test_reward.py.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from ads_core.config.eval import GraderConfig
from ads_core.grading import REASONS, Grade, configure, grade, grade_answer, grade_many
from ads_core.grading.api import cache_info, pool_size
from ads_core.grading.pool import ZYGOTE_ENV, VerifierPool, get_pool
from ads_core.grading.precheck import too_complex
from ads_core.grading.text import extract_answer, fold_unicode

pytestmark = pytest.mark.usefixtures("grader_verifier")  # verdicts of math-verify, not of its start

LIMIT = 0.5  # seconds; the tests use a short limit to stay quick
DEADLINE = 60.0  # a bound on each call for the futures, not a timing claim
# The answers that never finished under math-verify in a thread pool (or took 5-6 s in the main thread).
EXPLODING = ["9^{9^{9^{9}}}", "2^{1000000000}", "((5!)!)!", "10^{-10^{10}}"]
SLOW = "((x+1)^{30}+1)^{30}"  # passes the pre-check; sympy needs minutes for it: cut at the limit


def box(answer: str) -> str:
    return f"Some reasoning, a first try \\boxed{{0}}, then the final answer: $\\boxed{{{answer}}}$."


@pytest.mark.parametrize(
    ("answer", "truth", "correct"),
    [
        # percentages read as their number and as their fraction, both ways round
        ("50\\%", "0.5", True),
        ("50\\%", "50", True),
        ("50%", "\\frac{1}{2}", True),
        ("0.5", "50\\%", True),
        ("12.5\\%", "\\frac{1}{8}", True),
        ("50\\%", "0.05", False),
        ("5\\%", "50", False),
        ("50", "0.5", False),  # no percent sign anywhere: a number is itself
        # Unicode digits (NFKC, then every decimal digit as its ASCII digit)
        ("５", "5", True),
        ("𝟓", "5", True),
        ("٥", "5", True),
        ("१२", "12", True),
        ("１２.５", "12.5", True),
        ("６", "5", False),
        ("٤", "5", False),
        ("10²", "100", True),  # a superscript is a power, not a digit glued on (NFKC alone reads 102)
        ("−3", "-3", True),
        # ordinary forms the fast path decides without math-verify
        ("\\frac{3}{4}", "0.75", True),
        ("3/4", "\\dfrac{3}{4}", True),
        ("1,000", "1000", True),
        ("1001", "1000", False),
        # and ones that need math-verify
        ("\\sqrt{8}", "2\\sqrt{2}", True),
        ("0.3333333", "\\frac{1}{3}", True),  # math-verify compares decimals rounded
        ("0.33", "\\frac{1}{3}", False),
        ("(1, 2)", "(2, 1)", False),
    ],
)
def test_answer_forms_right_and_wrong(answer: str, truth: str, correct: bool):
    result = grade(box(answer), truth, timeout_s=5.0)
    assert result.extracted == answer
    assert result.correct is correct, result
    assert result.reason == ("correct" if correct else "wrong")


def test_the_last_complete_box_counts_and_a_trailing_unclosed_one_is_ignored():
    assert grade("First \\boxed{7}. Hmm, so the answer is \\boxed{", "7") == Grade(True, "7", "correct")
    cut = grade("\\boxed{7} wait, no: \\boxed{\\frac{8}{", "7")
    assert (cut.correct, cut.extracted) == (True, "7")
    assert grade("\\boxed{7} and then \\boxed{8", "8").extracted == "7"
    assert extract_answer("\\boxed{1} \\boxed{2} \\fbox{3}") == "3"
    assert extract_answer("\\boxed{a{b}c}") == "a{b}c"
    assert extract_answer("＼ｂｏｘｅｄ｛５｝") == "5"  # full-width braces and backslash
    assert extract_answer("\\boxed{") is None and extract_answer("no box") is None


def test_no_answer_is_wrong_with_its_own_reason():
    assert grade("the answer is 5", "5") == Grade(False, None, "no_answer")
    assert grade("\\boxed{}", "5").reason == "no_answer"
    assert grade("\\boxed{ }", "5").correct is False


@pytest.mark.parametrize("truth", [None, "", "   ", "$$", float("nan"), [], ["", " "], np.array([], dtype=object)])
def test_a_missing_ground_truth_is_an_error_never_correct(truth):
    for completion in ("\\boxed{None}", "\\boxed{}", "\\boxed{0}", "\\boxed{nan}", "no box"):
        result = grade(completion, truth)
        assert (result.correct, result.reason) == (False, "error"), (completion, truth, result)
        assert result.detail == "no ground truth"


def test_alternatives_and_sets():
    assert grade(box("-3"), '["2", "-3"]').correct
    assert grade(box("2, -3"), '["2", "-3"]').correct  # giving every accepted answer is fine
    assert not grade(box("3"), '["2", "-3"]').correct
    assert grade(box("５0\\%"), ["0.5", "7"]).correct  # forms combine: Unicode digit, percent, a list
    assert grade(box("-3, 2"), "2, -3").correct  # a set answer in any order
    assert not grade(box("2"), "2, -3").correct  # ... but all of it
    assert grade_answer("x = 2", "2").correct and grade_answer(None, "2").reason == "no_answer"


def test_unicode_folding_keeps_meaning():
    assert fold_unicode("x² + ３") == "x^{2} + 3"
    assert fold_unicode("٣٫٥") != "35"  # the Arabic decimal separator is not dropped
    assert fold_unicode("plain ascii") == "plain ascii"


def test_the_precheck_refuses_exploding_answers_and_passes_ordinary_ones():
    for answer in EXPLODING + ["(1, 9^{9^{9^9}})", "x^{100000}", "1000000!", "{" * 13 + "}" * 13, "1+" * 300 + "1"]:
        assert too_complex(answer), answer
    ordinary = ["2^{10}", "10^{100}", "(5!)!", "e^{i\\pi}", "x^{2}+1", "\\frac{2^{3}}{3}", "(2,5]", "3 \\times 10^{8}"]
    for answer in ordinary:
        assert too_complex(answer) is None, answer


def test_adversarial_answers_in_a_thread_pool_are_cut_or_refused():
    """What verl does: many threads grading at once. Every call returns, each with a reason that counts it wrong
    (refused by the pre-check, or cut at the limit); ground truths with several alternatives too."""
    truths = ["5", '["5", "7", "9", "11"]']
    cases = [(box(a), t) for a in [*EXPLODING, SLOW] for t in truths]
    with ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(grade, c, t, timeout_s=LIMIT) for c, t in cases]
        results = [f.result(timeout=DEADLINE) for f in futures]
    assert [r.reason for r in results] == ["too_complex"] * 8 + ["timeout"] * 2
    assert not any(r.correct for r in results)
    assert all(r.reason in REASONS for r in results)
    # the worker that was killed at the limit is replaced: ordinary answers that need math-verify still grade
    assert grade(box("\\sqrt{18}"), "3\\sqrt{2}", timeout_s=5.0).reason == "correct"


def test_the_main_thread_gets_the_same_limit():
    result = grade(box(SLOW), "1", timeout_s=LIMIT)
    assert (result.correct, result.reason) == (False, "timeout")
    assert "limit" in result.detail


def test_grade_many_keeps_order_and_counts_each_completion():
    completions = [box("1"), "no box", box(SLOW), box("\\frac{1}{2}"), box("2^{1000000000}")]
    truths = ["1", "2", "3", "0.5", None]
    seen = []
    results = grade_many(completions, truths, timeout_s=LIMIT, progress=seen.append)
    assert [r.reason for r in results] == ["correct", "no_answer", "timeout", "correct", "error"]
    assert sum(seen) == 5
    with pytest.raises(ValueError, match="2 completions but 1"):
        grade_many(["a", "b"], ["1"])


def test_repeated_pairs_are_cached():
    answer = "\\frac{\\sqrt{12}}{2}"
    first = grade(box(answer), "\\sqrt{3}", timeout_s=5.0)
    before = cache_info()
    again = [grade(box(answer), "\\sqrt{3}", timeout_s=5.0) for _ in range(3)]
    after = cache_info()
    assert first.correct and all(g.correct for g in again)
    assert after["hits"] - before["hits"] == 3 and after["misses"] == before["misses"]


GRADE_IN_A_PROCESS = f"""
import sys
from concurrent.futures import ThreadPoolExecutor
from ads_core.grading import grade
def one(answer):
    return grade("\\\\boxed{{" + answer + "}}", "5", timeout_s={LIMIT}).reason
with ThreadPoolExecutor(2) as pool:
    print(*pool.map(one, ["2^{{1000000000}}", {SLOW!r}, "5"]), one({SLOW!r}))
"""


def test_a_subprocess_grades_with_the_limit():
    env = {k: v for k, v in os.environ.items() if k != ZYGOTE_ENV}  # a process of its own, sharing nothing
    out = subprocess.run(
        [sys.executable, "-c", GRADE_IN_A_PROCESS], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["too_complex", "timeout", "correct", "timeout"]


def _grade_in_child(queue) -> None:  # runs in a forked child (module level: picklable)
    queue.put([grade(box(a), "2\\sqrt{2}", timeout_s=LIMIT).reason for a in ("\\sqrt{8}", SLOW)])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="fork")
def test_a_forked_child_gets_its_own_verifiers():
    """A child forked after the parent started its verifiers must not talk to the parent's workers
    (multiprocessing); it forks its own from the parent's zygote."""
    assert grade(box("\\sqrt{2}\\cdot 2"), "2\\sqrt{2}", timeout_s=5.0).correct  # the parent's pool is running
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_grade_in_child, args=(queue,))
    child.start()
    try:
        assert queue.get(timeout=120) == ["correct", "timeout"]
    finally:
        child.join(30)
    assert grade(box("\\sqrt{2}\\cdot 2"), "2\\sqrt{2}", timeout_s=5.0).correct  # ours still answer


OWNER = """
import time
from ads_core.grading import grade
from ads_core.grading.api import pool_size, start_verifier
from ads_core.grading.pool import ZYGOTE_ENV, VerifierPool, get_pool
start_verifier()
assert grade("\\\\boxed{\\\\sqrt{8}}", "2\\\\sqrt{2}").correct
pool = get_pool(pool_size())
print(pool._zygote.proc.pid, *[w.pid for w in pool._idle], flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux")
def test_verifier_processes_die_with_their_parent():
    env = {k: v for k, v in os.environ.items() if k != ZYGOTE_ENV}  # it starts its own zygote
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER], stdout=subprocess.PIPE, text=True, start_new_session=True, env=env
    )
    try:
        pids = [int(p) for p in owner.stdout.readline().split()]
        assert len(pids) == 2 and all(alive(p) for p in pids), pids  # the zygote and one worker
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait(10)
        deadline = time.monotonic() + 15  # a bound, not a timing claim
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [p for p in pids if alive(p)], "outlived their parent"
    finally:
        try:
            os.killpg(owner.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_the_pool_is_bounded():
    assert 1 <= pool_size() <= 8
    assert get_pool(pool_size()).size == pool_size()
    assert not math.isnan(grade(box("1"), "1").elapsed_s)


def test_callers_do_not_queue_behind_other_completions_limits():
    """One regular verifier, three junk answers at once: each is cut (its CPU budget, or the deadline on a loaded
    machine), none waits for the others' limits, and the extra workers go once no one waits."""
    configure(GraderConfig(workers=1))
    pool = get_pool(1)
    try:
        with ThreadPoolExecutor(3) as threads:
            futures = [threads.submit(grade, box(SLOW), str(n), timeout_s=LIMIT) for n in range(3)]
            results = [f.result(timeout=DEADLINE) for f in futures]
        assert [r.reason for r in results] == ["timeout"] * 3
        assert grade(box("\\sqrt{50}"), "5\\sqrt{2}", timeout_s=5.0).correct
        assert len(pool._idle) <= 1
    finally:
        configure(GraderConfig())


class _Busy:
    def __init__(self, cpu_s: float | None) -> None:
        self.cpu_s = cpu_s

    def cpu_used(self) -> float | None:
        return self.cpu_s


def test_a_burst_worker_is_forked_for_junk_not_for_a_starved_check():
    """Every worker busy with an answer that used 0.2 s of CPU (junk that will use its whole budget): a waiting
    caller forks an extra worker. Busy that long by the clock with little CPU (a loaded machine): another
    worker would only compete with it for the CPU, so the caller waits its turn."""
    pool = VerifierPool(1, patience_s=0.2)
    assert pool._working(_Busy(0.25), 0.3) is True
    assert pool._working(_Busy(0.01), 5.0) is False
    assert pool._working(_Busy(None), 0.3) is True  # no /proc: the clock decides
    assert pool._working(_Busy(None), 0.1) is False


def test_extraction_stays_linear_on_hostile_text():
    """Thousands of unclosed boxes (a degenerate completion) are read in one pass, not one scan per box."""
    assert extract_answer("\\boxed{5}" + "\\boxed{" * 20_000) == "5"
    assert extract_answer("\\boxed{" * 20_000 + "x" * 100_000) is None
    assert grade("\\boxed{" + "1" * 50_000 + "}", "1").reason == "too_complex"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux")
def test_a_killed_zygote_and_its_workers_are_replaced():
    """The OOM killer (or a user) may take the verifier processes: the next completion starts new ones and is graded,
    not failed."""
    assert grade(box("\\sqrt{27}"), "3\\sqrt{3}", timeout_s=5.0).correct
    pool = get_pool(pool_size())
    zygote = pool._zygote.proc
    workers = [w.pid for w in pool._idle]
    os.kill(zygote.pid, signal.SIGKILL)
    zygote.wait(10)
    deadline = time.monotonic() + 15  # its workers follow it (a bound, not a timing claim)
    while any(alive(p) for p in workers) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in workers)
    result = grade(box("\\sqrt{12}"), "2\\sqrt{3}", timeout_s=5.0)
    assert (result.correct, result.reason) == (True, "correct"), result
    assert pool._zygote.proc.pid != zygote.pid
