"""`ads format`: detection that fails or is ambiguous exits 2 with one helpful line; the override flags fix it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from typer.testing import CliRunner

from ads_cli.main import app
from ads_core import storage
from ads_core.common import defaults


def ads_format(*args: str) -> Any:
    result = CliRunner().invoke(app, ["format", *args])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def only_error_line(result: Any) -> str:
    assert result.exit_code == 2, result.output
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    return line


def train_of(out: Path) -> pl.DataFrame:
    train = pl.read_parquet(out / "formatted" / "train.parquet")
    gt = pl.col("reward_model").struct["ground_truth"].alias("gt")
    return train.select(pl.col("extra_info").struct.unnest(), gt, "data_source", "prompt")


# Each case: rows whose columns detection cannot settle, the flag the error must name, and the fix.
AMBIGUOUS = {
    "two_question_columns": (
        [{"question": "What is 1+1?", "problem": "Compute 1+1.", "answer": "2"}],
        "--question-col",
        ["--question-col", "problem"],
        ("Compute 1+1.", "2"),
    ),
    "two_answer_columns": (
        [{"question": "What is 1+1?", "answer": "two", "final_answer": "2"}],
        "--answer-col",
        ["--answer-col", "final_answer"],
        ("What is 1+1?", "2"),
    ),
    "no_question_column": (
        [{"blob": "What is 1+1?", "value": "2"}],
        "--question-col",
        ["--question-col", "blob", "--answer-col", "value"],
        ("What is 1+1?", "2"),
    ),
    "no_answer_column": (
        [{"question": "What is 1+1?", "value": "2"}],
        "--answer-col",
        ["--answer-col", "value"],
        ("What is 1+1?", "2"),
    ),
    "options_without_answer": (
        [{"question": "Which is 2?", "options": ["1", "2"], "pick": "B"}],
        "--answer-col",
        ["--answer-col", "pick"],
        ("Which is 2?\n\nA. 1\nB. 2", "B"),
    ),
    "override_in_other_case": (
        [{"Blob": "What is 1+1?", "Value": "2"}],
        "--question-col",
        ["--question-col", "BLOB", "--answer-col", "value"],
        ("What is 1+1?", "2"),
    ),
}


@pytest.mark.parametrize("case", list(AMBIGUOUS))
def test_undecidable_columns_exit_2_then_the_override_works(tmp_path, case):
    rows, flag, fix, expected = AMBIGUOUS[case]
    src = write_jsonl(tmp_path / f"{case}.jsonl", rows * 2)
    columns = ", ".join(rows[0])

    line = only_error_line(ads_format(str(src), "--out", str(tmp_path / "out")))
    assert str(src) in line
    assert f"columns found: {columns}" in line
    assert flag in line
    assert not (tmp_path / "out" / "formatted" / "train.parquet").exists()

    result = ads_format(str(src), "--out", str(tmp_path / "out"), *fix)
    assert result.exit_code == 0, result.output
    train = train_of(tmp_path / "out")
    assert train.select("question", "gt").row(0) == expected
    assert train.height == 1  # the second row is an exact duplicate of the first
    assert "rejected: duplicate" in result.stderr


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        ([{"text": "What is 1+1?", "result": "2"}], ("What is 1+1?", "2")),  # less common names, found by evidence
        ([{"question": "Which is 2?", "options": ["1", "2"], "correct": "B"}], ("Which is 2?\n\nA. 1\nB. 2", "B")),
        ([{"question": "What is 1+1?", "solution": "1+1=\\boxed{2}", "rationale": "add"}], ("What is 1+1?", "2")),
    ],
)
def test_columns_found_by_evidence_need_no_flag(tmp_path, rows, expected):
    src = write_jsonl(tmp_path / "rows.jsonl", rows)
    result = ads_format(str(src), "--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    assert train_of(tmp_path / "out").select("question", "gt").row(0) == expected


def test_override_naming_a_missing_column(tmp_path):
    src = write_jsonl(tmp_path / "rows.jsonl", [{"question": "What is 1+1?", "answer": "2"}])
    line = only_error_line(ads_format(str(src), "--out", str(tmp_path / "out"), "--answer-col", "nope"))
    assert "--answer-col 'nope' is not a column" in line
    assert "columns found: question, answer" in line


def test_options_override(tmp_path):
    rows = [{"question": "Which is odd?", "alternatives": ["2", "3"], "answer": 1}]
    src = write_jsonl(tmp_path / "rows.jsonl", rows)
    result = ads_format(str(src), "--out", str(tmp_path / "out"), "--options-col", "alternatives")
    assert result.exit_code == 0, result.output
    assert train_of(tmp_path / "out").select("question", "gt").row(0) == ("Which is odd?\n\nA. 2\nB. 3", "B")


def test_default_source_is_the_bundled_gsm8k_sample(tmp_path):
    result = ads_format("--out", str(tmp_path / "out"))
    assert result.exit_code == 0, result.output
    sample = [json.loads(line) for line in Path(defaults.sample_path()).read_text().splitlines() if line.strip()]
    train = train_of(tmp_path / "out")
    assert train.height == len(sample) == 300
    assert train["gt"].to_list() == [r["answer"].split("####")[-1].strip().replace(",", "") for r in sample]
    assert (train["data_source"] == "gsm8k_sample").all()
    assert (Path(defaults.sample_path()).parent / "GSM8K_LICENSE").exists()


def test_summary_names_counts_reasons_and_output(tmp_path):
    rows = [{"question": "What is 1+1?", "answer": "2"}] * 2 + [{"question": "What is 2+2?", "answer": None}]
    src = write_jsonl(tmp_path / "rows.jsonl", rows)
    result = ads_format(str(src), "--out", str(tmp_path / "out"))
    assert result.exit_code == 0
    text = " ".join(result.stderr.split())
    for needle in (
        "read │ 3 │ from rows.jsonl",  # no empty example cell (issue 53)
        "kept │ 1 │ What is 1+1?",
        "rejected: duplicate │ 1 │ rows.jsonl row 1",
        "rejected: missing_answer │ 1 │ rows.jsonl row 2",
        # in words, not "layout qa (question=question, answer=answer)" (issue 53)
        "read as question, solution and answer columns (MATH style): the question from column 'question', the "
        "answer from column 'answer'",
    ):
        assert needle in text, needle
    assert "layout qa" not in text and "question=question" not in text
    assert f"{tmp_path}/out/formatted/train.parquet" in text.replace(" ", "")


def test_a_run_that_keeps_too_little_exits_2_and_still_writes_the_rejects(tmp_path):
    rows = [{"question": f"What is {i}+1?", "answer": None} for i in range(4)] + [{"question": "1+1?", "answer": "2"}]
    src = write_jsonl(tmp_path / "rows.jsonl", rows)
    line = only_error_line(ads_format(str(src), "--out", str(tmp_path / "out")))
    assert "missing_answer" in line
    rejects = pl.read_parquet(tmp_path / "out" / "formatted" / "rejects.parquet")
    assert rejects.height == 4 and set(rejects["reason"]) == {"missing_answer"}


def test_name_split_and_templates(tmp_path):
    src = write_jsonl(tmp_path / "rows.jsonl", [{"question": "What is 1+1?", "answer": "2"}])
    out = tmp_path / "out"

    assert ads_format(str(src), "--out", str(out), "--name", "my_set", "--split", "dev").exit_code == 0
    train = train_of(out)
    assert train.select("data_source", "split").row(0) == ("my_set", "dev")

    assert ads_format(str(src), "--out", str(out), "--template", "plain").exit_code == 0
    assert train_of(out)["prompt"][0].to_list() == [{"role": "user", "content": "What is 1+1?"}]

    assert ads_format(str(src), "--out", str(out), "--template", "boxed").exit_code == 0
    assert train_of(out)["prompt"][0][0]["content"].startswith("What is 1+1?\n\nPlease reason step by step")

    assert ads_format(str(src), "--out", str(out), "--template-text", "Q: {question}\nA:").exit_code == 0
    assert train_of(out)["prompt"][0][0]["content"] == "Q: What is 1+1?\nA:"


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--template", "nope"], "--template: Input should be 'ads_think', 'boxed' or 'plain' (got 'nope')"),
        (["--template-text", "no placeholder"], "{question}"),
    ],
)
def test_bad_template_exits_2(tmp_path, args, needle):
    src = write_jsonl(tmp_path / "rows.jsonl", [{"question": "What is 1+1?", "answer": "2"}])
    assert needle in only_error_line(ads_format(str(src), "--out", str(tmp_path / "out"), *args))


def test_output_to_memory_uri(tmp_path):
    src = write_jsonl(tmp_path / "rows.jsonl", [{"question": "What is 1+1?", "answer": "2"}])
    out = "memory://ads-cli-format-test"
    assert ads_format(str(src), "--out", out).exit_code == 0
    manifest = storage.read_json(storage.join(out, "formatted", "manifest.json"))
    assert manifest["counts"]["rows_out"] == 1
    assert storage.read_parquet(storage.join(out, "formatted", "train.parquet")).num_rows == 1


def test_help_lists_every_override_flag():
    result = CliRunner().invoke(app, ["format", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    for flag in ("--out", "--name", "--question-col", "--solution-col", "--answer-col", "--options-col", "--template"):
        assert flag in result.output, flag
