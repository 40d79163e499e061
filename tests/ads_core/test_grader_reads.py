"""The grader reads what people write (issue 51): Unicode superscripts and subscripts as powers and indices, `√`
as a square root, vulgar fractions as fractions, `−`/`×`/`·` as operators; the pre-check never raises; a
failure inside the checker is `wrong` with a detail; a ground truth that is an object is refused, never read as
its keys; and a fresh process's first grade keeps the limit while its verifier starts.

Each verdict below was `error` (or another wrong verdict) before this round, except `test_forms_that_already_held`.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ads_core.common.errors import InputError
from ads_core.grading import grade, grade_answer
from ads_core.grading.pool import ZYGOTE_ENV, VerifierPool
from ads_core.grading.precheck import too_complex

pytestmark = pytest.mark.usefixtures("grader_verifier")  # verdicts of math-verify, not of its start

LIMIT = 0.5
MARGIN = 0.5  # for a loaded test machine; the contract itself is LIMIT + 0.5 s


def box(answer: str) -> str:
    return f"A first try \\boxed{{0}}, then: $\\boxed{{{answer}}}$."


@pytest.mark.parametrize(
    ("answer", "truth", "reason"),
    [
        # the cases: a superscript was read as a digit and ended in `error`
        ("3²", "9", "correct"),
        ("x²", "x^2", "correct"),
        ("2x²+1", "2x^2+1", "correct"),
        ("(x+1)²", "(x+1)^2", "correct"),
        ("\\pi r²", "\\pi r^2", "correct"),
        ("x⁻¹", "1/x", "correct"),
        ("3²", "6", "wrong"),
        ("x²", "x^3", "wrong"),
        ("2x²+1", "2x^2-1", "wrong"),
        ("(x+1)²", "x^2+1", "wrong"),
        ("x⁻¹", "x", "wrong"),
        # more of the same family: powers and indices inside expressions, both ways round
        ("2³", "8", "correct"),
        ("2³", "9", "wrong"),
        ("3²", "3^2", "correct"),
        ("e^{x²}", "e^{x^2}", "correct"),
        ("4πr²", "4\\pi r^2", "correct"),
        ("a² + b² = c²", "a^2+b^2=c^2", "correct"),
        ("x²y", "x^2y", "correct"),
        ("(x²)³", "x^6", "correct"),
        ("2ⁿ⁺¹", "2^{n+1}", "correct"),
        ("−x⁻²", "-\\frac{1}{x^2}", "correct"),
        ("aₙ", "a_n", "correct"),
        ("x₁ + x₂", "x_1+x_2", "correct"),
        ("x₁", "x_2", "wrong"),
        # square roots, mixed numbers, symbols NFKC leaves alone
        ("√2", "\\sqrt{2}", "correct"),
        ("2√3", "2\\sqrt{3}", "correct"),
        ("3√2", "\\sqrt{18}", "correct"),
        ("√(x+1)", "\\sqrt{x+1}", "correct"),
        ("√16", "4", "correct"),
        ("∛8", "2", "correct"),
        ("2½", "\\frac{5}{2}", "correct"),
        ("1½", "1.5", "correct"),
        ("-2½", "-2.5", "correct"),
        ("½x", "\\frac{x}{2}", "correct"),
        ("(2, ∞)", "(2, \\infty)", "correct"),
        ("A ∪ B", "A\\cup B", "correct"),
    ],
)
def test_unicode_math_reads_as_people_mean_it(answer: str, truth: str, reason: str):
    result = grade(box(answer), truth, timeout_s=5.0)
    assert (result.correct, result.extracted, result.reason) == (reason == "correct", answer, reason), result


@pytest.mark.parametrize(
    ("answer", "truth", "reason"),
    [
        ("½", "0.5", "correct"),
        ("¾", "\\frac{3}{4}", "correct"),
        ("⅓", "0.33", "wrong"),
        ("1½", "\\frac{1}{2}", "wrong"),  # a mixed number: 3/2 (NFKC alone reads 11/2)
        ("5 − 2", "3", "correct"),
        ("2 × 3", "6", "correct"),
        ("2·3", "6", "correct"),
        ("2⋅3", "6", "correct"),
        ("3 × 10⁸", "3e8", "correct"),
        ("10⁻³", "0.001", "correct"),
        ("2π", "2\\pi", "correct"),
        ("√2", "\\sqrt{3}", "wrong"),
        ("2ⁿ", "2^{n-1}", "wrong"),
    ],
)
def test_forms_that_already_held(answer: str, truth: str, reason: str):
    """Guards: these verdicts were right before this round and must stay so."""
    result = grade(box(answer), truth, timeout_s=5.0)
    assert (result.correct, result.reason) == (reason == "correct", reason), result


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("3²", None),
        ("x₁ + ٣", None),
        ("√(x+1)²", None),
        ("x⁹⁹⁹⁹⁹⁹⁹", "exponent too large"),  # what sympy would see: x^{9999999}
        ("9⁹⁹⁹⁹⁹⁹⁹⁹⁹", "power too large"),
        ("2¹⁰⁰⁰⁰⁰⁰⁰⁰⁰", "power too large"),
    ],
)
def test_the_precheck_reads_superscripts_and_never_raises(answer: str, reason: str | None):
    result = grade(box(answer), "1", timeout_s=5.0)
    if reason is None:
        assert result.reason == "wrong", result
    else:
        assert (result.reason, result.detail) == ("too_complex", reason)
    assert too_complex(answer) is None  # as written it holds nothing too big to read, and no exception


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789x+-^_{}()\\frac√²³¹⁰⁴⁻⁺₁₂ⁿ½·×−!.,=/ ٣５", max_size=40))
def test_the_precheck_never_raises(text: str):
    assert too_complex(text) is None or isinstance(too_complex(text), str)


def test_an_answer_the_fast_path_cannot_read_goes_on_to_the_checker(monkeypatch: pytest.MonkeyPatch):
    import ads_core.grading.api as api

    def unreadable(text: str) -> Any:
        raise ValueError(f"cannot read {text!r}")

    asked: list[Any] = []
    monkeypatch.setattr(api, "readings", unreadable)
    monkeypatch.setattr(
        VerifierPool, "ask", lambda self, request, cpu_s, deadline: asked.append(request) or ({"match": True}, "")
    )
    result = grade(box("y^{7}+1"), "1+y^7")
    assert (result.correct, result.reason) == (True, "correct")
    assert asked == [{"pairs": [["y^{7}+1", "1+y^7"]]}]


@pytest.mark.parametrize(
    ("reply", "detail", "cached"),
    [
        (
            {"match": False, "error": "ValueError: no parse"},
            "math-verify could not compare it: ValueError: no parse",
            1,
        ),
        (
            {"match": False, "error": "verifier process failed: EOF"},
            "the verifier failed on this answer: verifier process failed: EOF",
            0,
        ),
    ],
)
def test_a_failure_inside_the_checker_is_wrong_with_a_detail(
    monkeypatch: pytest.MonkeyPatch, reply: dict[str, Any], detail: str, cached: int
):
    """A readable answer is never `error`: the checker failed on it, so it is wrong, and the detail says why. A
    dead verifier process may not fail next time: that verdict is not cached."""
    from ads_core.grading.api import cache_info

    asked: list[Any] = []
    monkeypatch.setattr(VerifierPool, "ask", lambda self, request, cpu_s, deadline: asked.append(1) or (reply, ""))
    answer = f"z^{{{len(detail)}}}+z"  # one of its own: nothing cached for it
    first = grade(box(answer), "2z")
    before = cache_info()["size"]
    again = grade(box(answer), "2z")
    assert (first.correct, first.reason, first.detail) == (False, "wrong", detail)
    assert again == first
    assert len(asked) == 2 - cached
    assert cache_info()["size"] == before


@pytest.mark.parametrize(
    ("truth", "detail"),
    [
        ({"a": 1}, "ground truth is a dict ({'a': 1}), not a string, a number or a list of them"),
        ({"a": 1, "b": 2}, "ground truth is a dict ({'a': 1, 'b': 2}), not a string, a number or a list of them"),
        (
            {"choice": "Z", "options": ["a"]},
            "ground truth is a dict ({'choice': 'Z', 'options': ['a']}), not a string, a number or a list of them",
        ),
        ([["a"], ["b"]], "ground truth is a list holding a list, not a flat list of strings or numbers"),
        ([{"a": 1}], "ground truth is a list holding a dict, not a flat list of strings or numbers"),
        ({"a", "b"}, None),
        (True, "ground truth is a bool (True), not a string, a number or a list of them"),
        (b"a", "ground truth is a bytes (b'a'), not a string, a number or a list of them"),
    ],
)
def test_a_ground_truth_that_is_an_object_is_refused_never_correct(truth: Any, detail: str | None):
    """A dict's keys used to be read as accepted answers: `\\boxed{a}` against {"a": 1} was correct."""
    for answer in ("a", "b", "True", "1"):
        result = grade(box(answer), truth)
        assert (result.correct, result.reason) == (False, "error"), (answer, result)
        if detail is not None:
            assert result.detail == detail
        else:
            assert result.detail.startswith("ground truth is a set (")
        assert grade_answer(answer, truth).reason == "error"


def test_what_a_ground_truth_may_be_still_grades():
    assert grade(box("4"), np.array(["3", "4"], dtype=object)).correct  # a list-typed Parquet cell
    assert grade(box("4"), np.int64(4)).correct and grade(box("0.5"), np.float32(0.5)).correct
    assert grade(box("4"), ["3", None, 4]).correct
    assert grade(box("C"), {"choice": "C", "options": ["1", "2", "3"]}).correct  # a multiple-choice dict


def test_an_eval_set_with_an_object_ground_truth_is_refused_with_its_row(tmp_path: Path):
    from ads_core.evaluation.sets.problems import _read

    table = pa.table(
        {
            "prompt": [[{"role": "user", "content": "1+1?"}], [{"role": "user", "content": "2+2?"}]],
            "reward_model": [{"ground_truth": {"a": 2}}, {"ground_truth": {"a": 4}}],
        }
    )
    pq.write_table(table, tmp_path / "set.parquet")
    with pytest.raises(InputError) as info:
        _read("demo", str(tmp_path / "set.parquet"), None)
    assert str(info.value) == (
        f"{tmp_path / 'set.parquet'}: row 0: ground truth is a dict ({{'a': 2}}), not a string, a number or a list "
        "of them (reward_model.ground_truth); fix or drop it"
    )
    listed = pa.table({"prompt": table.column("prompt"), "reward_model": [{"ground_truth": ["2", "3"]}] * 2})
    pq.write_table(listed, tmp_path / "listed.parquet")
    problems = _read("listed", str(tmp_path / "listed.parquet"), None)
    assert [p.ground_truth for p, _ in problems] == ['["2", "3"]'] * 2  # alternatives, not Python's repr of a list


def test_the_format_stage_rejects_an_object_ground_truth_with_its_row(tmp_path: Path):
    from ads_core.ingest.convert import format_dataset

    plain = [
        '{"question": "What is 1+1?", "answer": "2"}',
        '{"question": "What is 2+2?", "answer": {"a": 4}}',
        '{"question": "What is 3+3?", "answer": [["6"]]}',
    ]
    verl = [
        '{"prompt": [{"role": "user", "content": "4+4?"}], "reward_model": {"ground_truth": "8"}}',
        '{"prompt": [{"role": "user", "content": "5+5?"}], "reward_model": {"ground_truth": {"a": 10}}}',
    ]
    (tmp_path / "a.jsonl").write_text("\n".join(plain) + "\n")
    (tmp_path / "v.jsonl").write_text("\n".join(verl) + "\n")
    nested = "answer column 'answer' holds a nested list, expected text or a list of text"
    for name, want in (
        ("a", [(1, "row 1: answer column 'answer' holds a dict, expected text"), (2, f"row 2: {nested}")]),
        ("v", [(1, "row 1: answer column 'reward_model.ground_truth' holds a dict, expected text")]),
    ):
        out = tmp_path / f"out-{name}"
        try:
            format_dataset(str(tmp_path / f"{name}.jsonl"), str(out))
        except InputError:
            pass  # too few rows kept: the rejects are written all the same
        rejects = pq.read_table(out / "formatted" / "rejects.parquet").to_pylist()
        assert [(r["source_row"], r["reason"], r["message"]) for r in rejects] == [(n, "bad_type", m) for n, m in want]


FRESH = """
import time
from ads_core.grading import grade, grade_many
def timed(answer, truth):
    start = time.perf_counter()
    result = grade("\\\\boxed{" + answer + "}", truth, timeout_s=LIMIT)
    return result.reason, result.detail, time.perf_counter() - start
first = timed("\\\\frac{1}{\\\\frac{1}{2}}", "2")
second = timed("x⁻¹", "\\\\frac{1}{x}")
pairs = [("\\\\boxed{\\\\sqrt{50}}", "5\\\\sqrt{2}"), ("\\\\boxed{y^{-1}}", "1/y")]
batch = [g.reason for g in grade_many(*zip(*pairs), timeout_s=5.0)]
print(repr((first, second, batch)))
""".replace("LIMIT", repr(LIMIT))


def test_a_fresh_processs_first_grades_keep_the_limit_while_its_verifier_starts():
    """No verifier to join (nothing shared): the first answer is decided here (a nested fraction, exactly), the
    first one that needs math-verify waits for the verifier's start no longer than the deadline (a `timeout`
    saying so, when it has not started by then), and `grade_many` grades such answers again once it runs."""
    env = {k: v for k, v in os.environ.items() if k != ZYGOTE_ENV}
    out = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, timeout=180, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    first, second, batch = ast.literal_eval(out.stdout.strip().splitlines()[-1])
    assert first[:2] == ("correct", "") and first[2] <= LIMIT + 0.5 + MARGIN
    assert second[0] in ("correct", "timeout") and second[2] <= LIMIT + 0.5 + MARGIN
    if second[0] == "timeout":
        assert "the verifier was still starting" in second[1]
    assert batch == ["correct", "correct"]
