"""The math reward on real answer formats from ../shared/data: known-correct and known-wrong responses."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from ads_core.common.answers import encode_alternatives, encode_answer_set, ground_truth_answers, strip_math_delimiters
from ads_core.evaluation.sets.catalog import packaged_data_dir
from ads_core.train.reward import (
    compute_score,
    extract_answer,
    is_equivalent,
    normalize_answer,
)

pytestmark = pytest.mark.usefixtures("grader_verifier")  # verdicts of math-verify, not of its start


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def respond(answer: str) -> str:
    return f"<think>Let me work it out... maybe \\boxed{{0}}? No.</think> The final answer is $\\boxed{{{answer}}}$."


def math500_answers(shared_data: Path) -> dict[str, str]:
    """One real MATH-500 answer of each format family."""
    answers = [r["answer"] for r in read_jsonl(shared_data / "math500" / "test.jsonl")]
    families = {
        "integer": lambda a: re.fullmatch(r"-?\d+", a),
        "fraction": lambda a: a.startswith("\\frac") or a.startswith("\\dfrac"),
        "decimal": lambda a: re.fullmatch(r"-?\d+\.\d+", a),
        "interval": lambda a: "\\infty" in a and a[0] in "([",
        "union": lambda a: "\\cup" in a,
        "tuple": lambda a: re.fullmatch(r"\(-?\d+,\s*-?\d+(,\s*-?\d+)*\)", a),
        "list": lambda a: re.fullmatch(r"-?\d+(,\s*-?\d+)+", a),
        "sqrt": lambda a: "\\sqrt" in a and "(" not in a,
        "pi": lambda a: "\\pi" in a and "(" not in a and "[" not in a,
        "matrix": lambda a: "pmatrix" in a,
        "text": lambda a: a.startswith("\\text{") and a.endswith("}"),
        "degrees": lambda a: "^\\circ" in a,
        "complex": lambda a: re.fullmatch(r"-?\d+\s*[+-]\s*\d*i", a),
    }
    picked = {}
    for name, match in families.items():
        picked[name] = next(a for a in answers if match(a))
    return picked


def test_every_math500_reference_solution_scores_one(shared_data: Path):
    rows = read_jsonl(shared_data / "math500" / "test.jsonl")
    wrong = [
        (r["answer"], extract_answer(r["solution"]))
        for r in rows
        if compute_score("math500", r["solution"], r["answer"])["acc"] != 1.0
    ]
    assert wrong == []


def test_each_answer_format_accepts_its_own_answer_and_rejects_another(shared_data: Path):
    picked = math500_answers(shared_data)
    assert len(picked) == 13
    names = list(picked)
    for i, name in enumerate(names):
        gt = picked[name]
        assert compute_score("math500", respond(gt), gt) == {"score": 1.0, "acc": 1.0, "has_boxed": 1.0}, name
        other = picked[names[(i + 1) % len(names)]]
        assert compute_score("math500", respond(other), gt)["acc"] == 0.0, (name, other)


@pytest.mark.parametrize(
    ("truth", "equivalent", "wrong"),
    [
        ("\\frac{3}{2}", "1.5", "\\frac{2}{3}"),
        ("\\dfrac{17}{50}", "0.34", "17/5"),
        ("10,\\!080", "10080", "10008"),
        ("(2,\\infty)", "(2, \\infty)", "[2,\\infty)"),
        ("x \\in [-2,7]", "[-2,7]", "(-2,7)"),
        ("(0,9) \\cup (9,36)", "(0,9)\\cup(9,36)", "(0,36)"),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\pi/2)", "(3, \\pi)"),
        ("(6,31,-1)", "(6, 31, -1)", "(6,-1,31)"),
        ("3, 5, 7", "3,5,7", "3,5"),
        ("1+274i", "274i+1", "1-274i"),
        ("76^\\circ", "76", "104"),
        ("\\frac{270}7\\text{ degrees}", "\\frac{270}{7}", "\\frac{7}{270}"),
        (
            "\\begin{pmatrix} -1/3 \\\\ 2/3 \\\\ 5/3 \\end{pmatrix}",
            "\\begin{pmatrix}-\\frac{1}{3}\\\\\\frac{2}{3}\\\\\\frac{5}{3}\\end{pmatrix}",
            "\\begin{pmatrix}1/3\\\\2/3\\\\5/3\\end{pmatrix}",
        ),
        ("\\text{(C)}", "C", "B"),
        ("\\text{Evelyn}", "Evelyn", "Navin"),
        ("2\\sqrt{2}", "\\sqrt{8}", "2.8284"),
        ("\\frac{\\sqrt{3}}{2}", "\\frac{1}{2}\\sqrt{3}", "\\frac{\\sqrt{2}}{2}"),
        ("5.4 \\text{ cents}", "5.4", "54"),
    ],
)
def test_equivalent_forms_and_near_misses(truth: str, equivalent: str, wrong: str):
    assert is_equivalent(equivalent, truth)
    assert not is_equivalent(wrong, truth)


def test_aime_and_amc_integer_answers(shared_data: Path):
    for name in ("aime24", "amc23"):
        for row in read_jsonl(shared_data / name / "test.jsonl")[:10]:
            raw = row["answer"]
            gt = str(int(raw)) if isinstance(raw, float) and raw.is_integer() else str(raw)
            assert compute_score(name, respond(gt), gt)["acc"] == 1.0
            assert compute_score(name, respond(str(int(float(gt)) + 1)), gt)["acc"] == 0.0
    assert compute_score("amc23", respond("27"), "27.0")["acc"] == 1.0  # AMC23 stores 27.0


def test_gsm8k_marker_answers(shared_data: Path):
    rows = read_jsonl(shared_data / "gsm8k" / "test.jsonl")[:20]
    for row in rows:
        gt = row["answer"].split("####")[-1].strip().replace(",", "")
        assert compute_score("gsm8k", respond(gt), gt)["acc"] == 1.0
        assert compute_score("gsm8k", respond(gt + "1"), gt)["acc"] == 0.0


def test_the_last_box_counts_and_missing_boxes_score_zero():
    assert compute_score("x", "\\boxed{3} then \\boxed{4}", "4")["acc"] == 1.0
    assert compute_score("x", "\\boxed{4} then \\boxed{3}", "4")["acc"] == 0.0
    assert compute_score("x", "the answer is 4", "4") == {"score": 0.0, "acc": 0.0, "has_boxed": 0.0}
    assert compute_score("x", "\\boxed{4", "4")["has_boxed"] == 0.0  # unbalanced
    assert compute_score("x", "\\fbox{\\frac{1}{2}}", "0.5")["acc"] == 1.0
    assert compute_score("x", "\\boxed{}", "0")["acc"] == 0.0
    assert compute_score("x", "\\boxed{" + "1+" * 500 + "1}", "501")["acc"] == 0.0  # too long: strings only


def test_results_are_plain_numbers_verl_can_average():
    result = compute_score("x", "\\boxed{2}", "2", extra_info={"sample_id": 1}, reward_router_address=None)
    assert all(type(v) is float for v in result.values())


def test_works_off_the_main_thread():
    """verl's reward manager calls compute_score in executor threads, where signal timeouts can't be used."""
    cases = [("\\frac12", "0.5", 1.0), ("[2,\\infty)", "(2,\\infty)", 0.0), ("\\sqrt{8}", "2\\sqrt{2}", 1.0)]
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda c: compute_score("x", f"\\boxed{{{c[0]}}}", c[1])["acc"], cases))
    assert got == [c[2] for c in cases]


def test_normalize_answer_is_conservative():
    assert normalize_answer("$\\dfrac{1}{2}$") == "\\frac{1}{2}"
    assert normalize_answer("x = 5") == "5"
    assert normalize_answer("1,000,000") == "1000000"
    assert normalize_answer("(1,2)") == "(1,2)"  # tuples keep their commas


# ---------------------------------------------------------------------------------------------
# multi-answer ground truths and math delimiters (real MATH-500 answers from the packaged copy)


def packaged_math500() -> list[dict]:
    return read_jsonl(packaged_data_dir() / "math500" / "test.jsonl")


def test_dollar_wrapped_ground_truths_verify_against_boxed_answers():
    picked = math500_answers(packaged_data_dir())  # same layout as ../shared/data
    names = list(picked)
    for i, name in enumerate(names):
        gt, other = picked[name], picked[names[(i + 1) % len(names)]]
        for wrapped in (f"${gt}$", f"$$ {gt} $$", f"\\({gt}\\)", f"\\[{gt}\\]"):
            assert compute_score("math500", respond(gt), wrapped)["acc"] == 1.0, (name, wrapped)
            assert compute_score("math500", respond(other), wrapped)["acc"] == 0.0, (name, wrapped, other)
    assert compute_score("x", respond("1/2"), "$\\frac{1}{2}$")["acc"] == 1.0
    assert compute_score("x", respond("\\frac{1}{3}"), "$\\frac{1}{2}$")["acc"] == 0.0
    assert strip_math_delimiters("$2$ or $3$") == "$2$ or $3$"  # two formulas, not one wrapped answer


def test_a_json_list_ground_truth_accepts_any_listed_answer():
    answers = [r["answer"] for r in packaged_math500()]
    first, second, third = answers[0], answers[1], answers[2]  # three different real answers
    truth = encode_alternatives([f"${first}$", second])
    assert json.loads(truth) == [first, second]  # delimiters dropped, a JSON list of strings
    assert compute_score("math500", respond(first), truth)["acc"] == 1.0
    assert compute_score("math500", respond(second), truth)["acc"] == 1.0
    assert compute_score("math500", respond(third), truth)["acc"] == 0.0
    assert compute_score("x", respond("-3"), '["2", "-3"]')["acc"] == 1.0
    assert compute_score("x", respond("2, -3"), '["2", "-3"]')["acc"] == 1.0  # giving all of them is fine
    assert compute_score("x", respond("3"), '["2", "-3"]')["acc"] == 0.0
    assert compute_score("x", respond("\\frac{1}{2}"), ["0.5", "7"])["acc"] == 1.0  # an actual list too
    assert encode_alternatives(["$5$"]) == "5"  # one answer stays a plain string


def test_a_numpy_list_ground_truth_from_parquet_is_alternatives():
    import numpy as np

    assert compute_score("x", respond("4"), np.array(["3", "4"], dtype=object))["acc"] == 1.0
    assert compute_score("x", respond("5"), np.array(["3", "4"], dtype=object))["acc"] == 0.0


@pytest.mark.parametrize("truth", ["1,-2", "-2,1", "3, 5, 7"])  # real MATH-500 "enter all solutions" answers
def test_a_comma_separated_ground_truth_is_a_set_answer(truth: str):
    assert truth in {r["answer"] for r in packaged_math500()}
    parts = [p.strip() for p in truth.split(",")]
    assert compute_score("math500", respond(", ".join(reversed(parts))), truth)["acc"] == 1.0  # any order
    assert compute_score("math500", respond(", ".join(parts[1:])), truth)["acc"] == 0.0  # one missing
    assert compute_score("math500", respond(parts[0]), truth)["acc"] == 0.0
    assert encode_answer_set([f"${p}$" for p in parts]) == ", ".join(parts)
    # the same answers as alternatives: one of them is enough
    assert compute_score("math500", respond(parts[0]), encode_alternatives(parts))["acc"] == 1.0


def test_strings_that_only_look_like_lists_stay_one_answer():
    assert ground_truth_answers("[2, 5)") == ["[2, 5)"]  # an interval, not JSON
    assert ground_truth_answers("[1, 2]") == ["[1, 2]"]  # JSON, but numbers: a closed interval
    assert compute_score("x", respond("[1,2]"), "[1, 2]")["acc"] == 1.0
    assert compute_score("x", respond("1"), "[1, 2]")["acc"] == 0.0
    assert ground_truth_answers('["a", ""]') == ["a"] and ground_truth_answers("[]") == ["[]"]
    with pytest.raises(ValueError, match="no answers"):
        encode_alternatives(["", " "])
